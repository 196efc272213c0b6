package docker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"
)

// lateEndpointEngine refuses NetworkRemove for "active endpoints" the first
// busy times, as Docker 20.10 does just after a network's last container
// was removed.
type lateEndpointEngine struct {
	*joinEngine
	mu    sync.Mutex
	busy  int
	calls int
}

func (e *lateEndpointEngine) NetworkRemove(ctx context.Context, name string, o client.NetworkRemoveOptions) (client.NetworkRemoveResult, error) {
	e.mu.Lock()
	e.calls++
	busy := e.calls <= e.busy
	e.mu.Unlock()
	if busy {
		return client.NetworkRemoveResult{}, fmt.Errorf("error while removing network: network %s id x has active endpoints: %w", name, cerrdefs.ErrPermissionDenied)
	}
	return e.joinEngine.NetworkRemove(ctx, name, o)
}

// TestRemoveNetworkAfterLateEndpoint: a network Docker refuses for a moment
// for "active endpoints" is removed once it lets go; one it keeps refusing
// keeps its error, after about 1.5 s, and any other error is not tried again.
func TestRemoveNetworkAfterLateEndpoint(t *testing.T) {
	for _, tc := range []struct {
		busy      int
		wantErr   bool
		wantCalls int
	}{
		{busy: 0, wantCalls: 1},
		{busy: 2, wantCalls: 3},
		{busy: len(transientWaits), wantCalls: len(transientWaits) + 1},
		{busy: 100, wantErr: true, wantCalls: len(transientWaits) + 1},
	} {
		e := &lateEndpointEngine{joinEngine: newJoinEngine(), busy: tc.busy}
		e.networks["mce-i-ep"] = map[string]string{LabelInstance: "i"}
		rt := &Runtime{engine: e, log: zerolog.Nop()}
		err := rt.removeNetwork(context.Background(), "mce-i-ep")
		if (err != nil) != tc.wantErr || e.calls != tc.wantCalls {
			t.Errorf("refused %d times: err %v after %d calls; want error %v after %d", tc.busy, err, e.calls, tc.wantErr, tc.wantCalls)
		}
		if _, left := e.networks["mce-i-ep"]; left == (err == nil) {
			t.Errorf("refused %d times: the network is left %v with error %v", tc.busy, left, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "has active endpoints") || !strings.Contains(err.Error(), "restarting the Docker daemon")) {
			t.Errorf("refused %d times: %v; want Docker's refusal and what clears it", tc.busy, err)
		}
	}
	// Gone is not tried again either: it is the caller's success.
	e := &lateEndpointEngine{joinEngine: newJoinEngine()}
	rt := &Runtime{engine: e, log: zerolog.Nop()}
	if err := rt.removeNetwork(context.Background(), "mce-i-none"); !gone(err) || e.calls != 1 {
		t.Errorf("a missing network: %v after %d calls; want not found after 1", err, e.calls)
	}
	// A cancelled context ends the waits.
	e = &lateEndpointEngine{joinEngine: newJoinEngine(), busy: 100}
	rt = &Runtime{engine: e, log: zerolog.Nop()}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := rt.removeNetwork(ctx, "mce-i-ep"); err == nil || !strings.Contains(err.Error(), "active endpoints") || e.calls != 1 {
		t.Errorf("cancelled: %v after %d calls; want the refusal after 1", err, e.calls)
	}
}

// deadFolderEngine fails ContainerRemove the first busy times as Docker
// 20.10 does when it cannot delete a removed container's folder.
type deadFolderEngine struct {
	*joinEngine
	mu            sync.Mutex
	busy, removes int
}

func (e *deadFolderEngine) ContainerStop(context.Context, string, client.ContainerStopOptions) (client.ContainerStopResult, error) {
	return client.ContainerStopResult{}, nil
}

func (e *deadFolderEngine) ContainerRemove(ctx context.Context, id string, o client.ContainerRemoveOptions) (client.ContainerRemoveResult, error) {
	e.mu.Lock()
	e.removes++
	busy := e.removes <= e.busy
	e.mu.Unlock()
	if busy {
		return client.ContainerRemoveResult{}, fmt.Errorf("unable to remove filesystem for %s: unlinkat /var/lib/docker/containers/%s: directory not empty", id, id)
	}
	return e.joinEngine.ContainerRemove(ctx, id, o)
}

// TestRemoveContainerAfterDeadFolder: a container whose folder Docker could
// not delete at first is removed by the next try; one it never can keeps
// the error.
func TestRemoveContainerAfterDeadFolder(t *testing.T) {
	for _, tc := range []struct {
		busy, wantRemoves int
		wantErr           bool
	}{
		{busy: 1, wantRemoves: 2},
		{busy: 100, wantRemoves: len(transientWaits) + 1, wantErr: true},
	} {
		e := &deadFolderEngine{joinEngine: newJoinEngine(), busy: tc.busy}
		e.addContainer(selfID, "mce-i-ep-c", "c", true, "bridge")
		rt := &Runtime{engine: e, log: zerolog.Nop(), byID: map[string]*Container{}}
		c := &Container{rt: rt, name: "mce-i-ep-c"}
		id := selfID
		c.id.Store(&id)
		c.ctx, c.cancel = context.WithCancel(context.Background())
		err := c.remove(context.Background(), 0)
		if (err != nil) != tc.wantErr || e.removes != tc.wantRemoves {
			t.Errorf("refused %d times: %v after %d removals; want error %v after %d", tc.busy, err, e.removes, tc.wantErr, tc.wantRemoves)
		}
		if _, left := e.containers[selfID]; left == (err == nil) {
			t.Errorf("refused %d times: the container is left %v with error %v", tc.busy, left, err)
		}
	}
}
