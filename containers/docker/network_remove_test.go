package docker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/client"
	"github.com/rs/zerolog"
)

// refusingEngine refuses NetworkRemove and ContainerRemove with refusal
// the first busy times, as Docker 20.10 does in the cases below.
type refusingEngine struct {
	*joinEngine
	refusal string

	mu          sync.Mutex
	busy, calls int
}

func (e *refusingEngine) refuse() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	if e.calls <= e.busy {
		return errors.New(e.refusal)
	}
	return nil
}

func (e *refusingEngine) NetworkRemove(ctx context.Context, name string, o client.NetworkRemoveOptions) (client.NetworkRemoveResult, error) {
	if err := e.refuse(); err != nil {
		return client.NetworkRemoveResult{}, err
	}
	return e.joinEngine.NetworkRemove(ctx, name, o)
}

func (e *refusingEngine) ContainerStop(context.Context, string, client.ContainerStopOptions) (client.ContainerStopResult, error) {
	return client.ContainerStopResult{}, nil
}

func (e *refusingEngine) ContainerRemove(ctx context.Context, id string, o client.ContainerRemoveOptions) (client.ContainerRemoveResult, error) {
	if err := e.refuse(); err != nil {
		return client.ContainerRemoveResult{}, err
	}
	return e.joinEngine.ContainerRemove(ctx, id, o)
}

// TestRemoveNetworkWithPhantomEndpoint: a network Docker refuses for
// "active endpoints" that no container holds is asked once (trying again
// cannot help), and the error says what clears it; a missing network is
// the caller's success.
func TestRemoveNetworkWithPhantomEndpoint(t *testing.T) {
	e := &refusingEngine{joinEngine: newJoinEngine(), busy: 100,
		refusal: "error while removing network: network mce-i-ep id x has active endpoints"}
	e.networks["mce-i-ep"] = map[string]string{LabelInstance: "i"}
	rt := &Runtime{engine: e, log: zerolog.Nop()}
	err := rt.removeNetwork(context.Background(), "mce-i-ep")
	if err == nil || !strings.Contains(err.Error(), "has active endpoints") || !strings.Contains(err.Error(), "restarting the Docker daemon") || e.calls != 1 {
		t.Errorf("refused: %v after %d calls; want Docker's refusal and what clears it, after 1", err, e.calls)
	}
	e = &refusingEngine{joinEngine: newJoinEngine()}
	rt = &Runtime{engine: e, log: zerolog.Nop()}
	if err := rt.removeNetwork(context.Background(), "mce-i-none"); !gone(err) || e.calls != 1 {
		t.Errorf("a missing network: %v after %d calls; want not found after 1", err, e.calls)
	}
}

// TestRemoveContainerAfterDeadFolder: a container whose folder Docker could
// not delete at first ("unable to remove filesystem … directory not
// empty") is removed by a later try; one it never can keeps the error
// after every wait, and a cancelled context ends the waits.
func TestRemoveContainerAfterDeadFolder(t *testing.T) {
	for _, tc := range []struct {
		busy, wantCalls int
		cancelled       bool
		wantErr         bool
	}{
		{busy: 0, wantCalls: 1},
		{busy: 1, wantCalls: 2},
		{busy: len(transientWaits), wantCalls: len(transientWaits) + 1},
		{busy: 100, wantCalls: len(transientWaits) + 1, wantErr: true},
		{busy: 100, cancelled: true, wantCalls: 1, wantErr: true},
	} {
		e := &refusingEngine{joinEngine: newJoinEngine(), busy: tc.busy,
			refusal: "unable to remove filesystem for " + selfID + ": unlinkat /var/lib/docker/containers/" + selfID + ": directory not empty"}
		e.addContainer(selfID, "mce-i-ep-c", "c", true, "bridge")
		rt := &Runtime{engine: e, log: zerolog.Nop(), byID: map[string]*Container{}}
		c := &Container{rt: rt, name: "mce-i-ep-c"}
		id := selfID
		c.id.Store(&id)
		c.ctx, c.cancel = context.WithCancel(context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		if tc.cancelled {
			cancel()
		}
		err := c.remove(ctx, 0)
		cancel()
		if (err != nil) != tc.wantErr || e.calls != tc.wantCalls {
			t.Errorf("refused %d times (cancelled %v): %v after %d removals; want error %v after %d", tc.busy, tc.cancelled, err, e.calls, tc.wantErr, tc.wantCalls)
		}
		if _, left := e.containers[selfID]; left == (err == nil) {
			t.Errorf("refused %d times: the container is left %v with error %v", tc.busy, left, err)
		}
	}
}
