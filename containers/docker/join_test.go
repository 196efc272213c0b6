package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"
)

// joinEngine is a fake engine with just what network-mode selection, joining,
// leaving and Reconcile use; any other call panics (nil embedded Engine).
type joinEngine struct {
	Client
	os string // Info's OperatingSystem

	mu         sync.Mutex
	containers map[string]*container.InspectResponse // by ID
	networks   map[string]map[string]string          // name → labels
	connects   int
	nextID     int
	racyJoin   bool // NetworkConnect attaches, then fails as a concurrent call would
}

func newJoinEngine() *joinEngine {
	return &joinEngine{os: "Debian GNU/Linux 12 (bookworm)", containers: map[string]*container.InspectResponse{}, networks: map[string]map[string]string{}}
}

const selfID = "5e1f0c0ffee0123456789abcdef0123456789abcdef0123456789abcdef01234"

func (e *joinEngine) addContainer(id, name, hostname string, running bool, mode container.NetworkMode) {
	e.containers[id] = &container.InspectResponse{
		ID: id, Name: "/" + name,
		State:           &container.State{Running: running},
		Config:          &container.Config{Hostname: hostname},
		HostConfig:      &container.HostConfig{NetworkMode: mode},
		NetworkSettings: &container.NetworkSettings{Networks: map[string]*network.EndpointSettings{}},
	}
}

func (e *joinEngine) find(ref string) *container.InspectResponse {
	for id, c := range e.containers {
		if id == ref || strings.TrimPrefix(c.Name, "/") == ref || (len(ref) >= 4 && strings.HasPrefix(id, ref)) {
			return c
		}
	}
	return nil
}

func (e *joinEngine) attached(name string) []string {
	var out []string
	for id, c := range e.containers {
		if _, ok := c.NetworkSettings.Networks[name]; ok {
			out = append(out, id)
		}
	}
	return out
}

func (e *joinEngine) Info(context.Context, client.InfoOptions) (client.SystemInfoResult, error) {
	return client.SystemInfoResult{Info: system.Info{OperatingSystem: e.os}}, nil
}

func (e *joinEngine) ContainerInspect(_ context.Context, ref string, _ client.ContainerInspectOptions) (client.ContainerInspectResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.find(ref)
	if c == nil {
		return client.ContainerInspectResult{}, fmt.Errorf("No such container: %s: %w", ref, cerrdefs.ErrNotFound)
	}
	cp := *c
	cp.NetworkSettings = &container.NetworkSettings{Networks: map[string]*network.EndpointSettings{}}
	for k, v := range c.NetworkSettings.Networks {
		cp.NetworkSettings.Networks[k] = v
	}
	return client.ContainerInspectResult{Container: cp}, nil
}

func (e *joinEngine) NetworkConnect(_ context.Context, name string, o client.NetworkConnectOptions) (client.NetworkConnectResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.connects++
	c := e.find(o.Container)
	if c == nil {
		return client.NetworkConnectResult{}, fmt.Errorf("No such container: %s: %w", o.Container, cerrdefs.ErrNotFound)
	}
	if e.networks[name] == nil {
		return client.NetworkConnectResult{}, fmt.Errorf("network %s not found: %w", name, cerrdefs.ErrNotFound)
	}
	if _, ok := c.NetworkSettings.Networks[name]; ok {
		return client.NetworkConnectResult{}, fmt.Errorf("endpoint with name %s already exists in network %s: %w", c.Name, name, cerrdefs.ErrPermissionDenied)
	}
	c.NetworkSettings.Networks[name] = &network.EndpointSettings{NetworkID: "id-" + name}
	if e.racyJoin {
		e.racyJoin = false
		return client.NetworkConnectResult{}, fmt.Errorf("endpoint with name %s already exists in network %s: %w", c.Name, name, cerrdefs.ErrPermissionDenied)
	}
	return client.NetworkConnectResult{}, nil
}

func (e *joinEngine) NetworkDisconnect(_ context.Context, name string, o client.NetworkDisconnectOptions) (client.NetworkDisconnectResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.find(o.Container)
	if c == nil {
		return client.NetworkDisconnectResult{}, fmt.Errorf("No such container: %s: %w", o.Container, cerrdefs.ErrNotFound)
	}
	name = strings.TrimPrefix(name, "id-")
	if _, ok := c.NetworkSettings.Networks[name]; !ok {
		return client.NetworkDisconnectResult{}, fmt.Errorf("container %s is not connected to network %s: %w", o.Container, name, cerrdefs.ErrPermissionDenied)
	}
	delete(c.NetworkSettings.Networks, name)
	return client.NetworkDisconnectResult{}, nil
}

func (e *joinEngine) NetworkRemove(_ context.Context, name string, _ client.NetworkRemoveOptions) (client.NetworkRemoveResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	name = strings.TrimPrefix(name, "id-")
	if e.networks[name] == nil {
		return client.NetworkRemoveResult{}, fmt.Errorf("network %s not found: %w", name, cerrdefs.ErrNotFound)
	}
	if a := e.attached(name); len(a) > 0 {
		return client.NetworkRemoveResult{}, fmt.Errorf("error while removing network: network %s id %s has active endpoints: %w", name, "id-"+name, cerrdefs.ErrPermissionDenied)
	}
	delete(e.networks, name)
	return client.NetworkRemoveResult{}, nil
}

func (e *joinEngine) NetworkList(_ context.Context, o client.NetworkListOptions) (client.NetworkListResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var res client.NetworkListResult
	for name, labels := range e.networks {
		if labels[LabelInstance] == "" {
			continue // the fake's filter: mce's networks only
		}
		res.Items = append(res.Items, network.Summary{Network: network.Network{Name: name, ID: "id-" + name, Labels: labels}})
	}
	return res, nil
}

func (e *joinEngine) ContainerList(context.Context, client.ContainerListOptions) (client.ContainerListResult, error) {
	return client.ContainerListResult{}, nil
}

func (e *joinEngine) Events(context.Context, client.EventsListOptions) client.EventsResult {
	return client.EventsResult{} // nil channels: nothing ever arrives
}

// inContainer is the signs of a fake /.dockerenv, hostname and mountinfo,
// for Options.InContainer; empty strings mean absent.
func inContainer(t *testing.T, dockerenv bool, hostname, mountinfo string) InContainerSigns {
	dir := t.TempDir()
	s := InContainerSigns{DockerEnv: filepath.Join(dir, ".dockerenv"), MountInfo: filepath.Join(dir, "mountinfo"),
		Hostname: func() (string, error) { return hostname, nil }}
	if dockerenv {
		os.WriteFile(s.DockerEnv, nil, 0o644)
	}
	if mountinfo != "" {
		os.WriteFile(s.MountInfo, []byte(mountinfo), 0o644)
	}
	return s
}

func hostnameMount(id string) string {
	return "1 2 0:1 / / rw - overlay overlay rw\n" +
		"642 630 254:1 /var/lib/docker/containers/" + id + "/hostname /etc/hostname rw,relatime - ext4 /dev/vda1 rw\n"
}

func TestPickNetworkMode(t *testing.T) {
	const other = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		name      string
		configure NetworkMode
		dockerenv bool
		hostname  string
		mountinfo string
		os        string
		setup     func(e *joinEngine)
		want      NetworkMode
		wantSelf  string
		wantErr   string
		wantWhy   string
	}{
		{name: "on the host", hostname: "vm", want: NetworkAddress},
		{name: "dockerenv but unknown to the engine", dockerenv: true, hostname: "vm", want: NetworkAddress},
		{name: "hostname is the ID prefix", dockerenv: true, hostname: selfID[:12],
			setup: func(e *joinEngine) { e.addContainer(selfID, "proj_mce_1", selfID[:12], true, "proj_default") },
			want:  NetworkJoin, wantSelf: selfID, wantWhy: "proj_mce_1"},
		{name: "hostname set; ID from mountinfo", dockerenv: true, hostname: "mce", mountinfo: hostnameMount(selfID),
			setup: func(e *joinEngine) { e.addContainer(selfID, "proj_mce_1", "mce", true, "proj_default") },
			want:  NetworkJoin, wantSelf: selfID},
		{name: "a container named like the hostname is someone else", dockerenv: true, hostname: "mce",
			setup: func(e *joinEngine) { e.addContainer(other, "mce", "web", true, "bridge") },
			want:  NetworkAddress},
		{name: "a container with our hostname by name", dockerenv: true, hostname: "mce",
			setup: func(e *joinEngine) { e.addContainer(selfID, "mce", "mce", true, "bridge") },
			want:  NetworkJoin, wantSelf: selfID},
		{name: "stopped container is not us", dockerenv: true, hostname: selfID[:12],
			setup: func(e *joinEngine) { e.addContainer(selfID, "old", selfID[:12], false, "bridge") },
			want:  NetworkAddress},
		{name: "no dockerenv: not in a container", hostname: selfID[:12],
			setup: func(e *joinEngine) { e.addContainer(selfID, "x", selfID[:12], true, "bridge") },
			want:  NetworkAddress},
		{name: "host network reaches addresses", dockerenv: true, hostname: "vm", mountinfo: hostnameMount(selfID),
			setup: func(e *joinEngine) { e.addContainer(selfID, "mce", "vm", true, "host") },
			want:  NetworkAddress, wantWhy: "host's network"},
		{name: "sharing another container's network joins that one", dockerenv: true, hostname: selfID[:12],
			setup: func(e *joinEngine) {
				e.addContainer(selfID, "mce", selfID[:12], true, container.NetworkMode("container:"+other))
			},
			want: NetworkJoin, wantSelf: other},
		{name: "network none", dockerenv: true, hostname: selfID[:12],
			setup:   func(e *joinEngine) { e.addContainer(selfID, "mce", selfID[:12], true, "none") },
			wantErr: "network mode none"},
		{name: "in a container on Docker Desktop", dockerenv: true, hostname: selfID[:12], os: "Docker Desktop",
			setup: func(e *joinEngine) { e.addContainer(selfID, "mce", selfID[:12], true, "bridge") },
			want:  NetworkJoin, wantSelf: selfID},
		{name: "Docker Desktop from the host", os: "Docker Desktop", want: NetworkPublished},
		{name: "address as configured, even in a container", configure: NetworkAddress, dockerenv: true, hostname: selfID[:12],
			setup: func(e *joinEngine) { e.addContainer(selfID, "mce", selfID[:12], true, "bridge") },
			want:  NetworkAddress},
		{name: "join as configured", configure: NetworkJoin, dockerenv: true, hostname: selfID[:12],
			setup: func(e *joinEngine) { e.addContainer(selfID, "mce", selfID[:12], true, "bridge") },
			want:  NetworkJoin, wantSelf: selfID},
		{name: "join as configured, on the host", configure: NetworkJoin, hostname: "vm", wantErr: "does not run in a container"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("DOCKER_HOST", "")
			signs := inContainer(t, tt.dockerenv, tt.hostname, tt.mountinfo)
			e := newJoinEngine()
			if tt.os != "" {
				e.os = tt.os
			}
			if tt.setup != nil {
				tt.setup(e)
			}
			cfg := tt.configure
			if cfg == "" {
				cfg = NetworkAuto
			}
			rt := &Runtime{engine: e, opts: Options{Network: cfg, InContainer: signs}, log: zerolog.Nop()}
			mode, why, err := rt.pickNetworkMode(context.Background())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if mode != tt.want || rt.self != tt.wantSelf {
				t.Errorf("mode %q self %q, want %q self %q (%s)", mode, rt.self, tt.want, tt.wantSelf, why)
			}
			if !strings.Contains(why, tt.wantWhy) {
				t.Errorf("why = %q, want it to mention %q", why, tt.wantWhy)
			}
		})
	}
}

// TestJoinAndLeave runs a join-mode runtime on the fake engine: it rejoins an
// earlier run's network on start (Adopt), joins idempotently, survives a
// concurrent join, and leaves each network before removing it, in teardown
// and in Reconcile alike.
func TestJoinAndLeave(t *testing.T) {
	t.Setenv("DOCKER_HOST", "")
	signs := inContainer(t, true, selfID[:12], "")
	e := newJoinEngine()
	e.addContainer(selfID, "proj_mce_1", selfID[:12], true, "proj_default")
	e.containers[selfID].NetworkSettings.Networks["proj_default"] = &network.EndpointSettings{}
	e.networks["proj_default"] = map[string]string{}
	mine := map[string]string{LabelManaged: "true", LabelInstance: "t"}
	e.networks["mce-t-old"] = mine
	e.networks["mce-t-ep"] = mine
	ctx := context.Background()
	rt, err := New(ctx, Options{Client: e, Instance: "t", StateDir: t.TempDir(), Adopt: true, Logger: zerolog.Nop(), InContainer: signs})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if rt.NetworkMode() != NetworkJoin {
		t.Fatalf("network mode %q, want join", rt.NetworkMode())
	}
	nets := func() []string {
		e.mu.Lock()
		defer e.mu.Unlock()
		var out []string
		for n := range e.containers[selfID].NetworkSettings.Networks {
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}
	if got := nets(); !slices.Equal(got, []string{"mce-t-ep", "mce-t-old", "proj_default"}) {
		t.Fatalf("after start, attached to %v; want the earlier run's networks rejoined", got)
	}

	// Idempotent: joining again makes no call to connect.
	connects := e.connects
	if err := rt.joinNetwork(ctx, "mce-t-ep"); err != nil {
		t.Fatal(err)
	}
	if e.connects != connects {
		t.Errorf("joining a network mce is on called NetworkConnect")
	}
	// A concurrent join that wins the race: the engine's error is no error.
	e.networks["mce-t-new"] = mine
	e.racyJoin = true
	if err := rt.joinNetwork(ctx, "mce-t-new"); err != nil {
		t.Errorf("join that lost a race: %v", err)
	}
	// A missing network is an error.
	if err := rt.joinNetwork(ctx, "mce-t-missing"); err == nil {
		t.Error("joined a network that does not exist")
	}

	// Teardown's removal leaves first.
	if err := rt.removeNetworkIfUnused(ctx, "new", deploymentKey{}); err != nil {
		t.Fatalf("remove a joined network: %v", err)
	}
	// Leaving a network mce is not on, or one that is gone, is fine.
	e.networks["mce-t-other"] = mine
	if err := rt.leaveNetwork(ctx, "mce-t-other"); err != nil {
		t.Errorf("leave a network mce is not on: %v", err)
	}
	if err := rt.leaveNetwork(ctx, "mce-t-gone"); err != nil {
		t.Errorf("leave a network that is gone: %v", err)
	}
	// Reconcile removes the earlier run's networks, which mce is attached to.
	if err := rt.Reconcile(ctx); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if got := nets(); !slices.Equal(got, []string{"proj_default"}) {
		t.Errorf("after Reconcile, attached to %v; want only proj_default", got)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.networks) != 1 {
		t.Errorf("networks left: %v", e.networks)
	}
}

// TestJoinOffOutsideJoinMode: joining and leaving are no-ops in the other
// modes, so the deploy hook costs nothing there.
func TestJoinOffOutsideJoinMode(t *testing.T) {
	rt := &Runtime{engine: newJoinEngine(), network: NetworkAddress, log: zerolog.Nop()}
	if err := rt.joinNetwork(context.Background(), "anything"); err != nil {
		t.Error(err)
	}
	if err := rt.leaveNetwork(context.Background(), "anything"); err != nil {
		t.Error(err)
	}
}

// The calls the instance lease (lease.go) makes.

func (e *joinEngine) ImageInspect(context.Context, string, ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	return client.ImageInspectResult{}, nil
}

func (e *joinEngine) ContainerCreate(_ context.Context, o client.ContainerCreateOptions) (client.ContainerCreateResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.find(o.Name) != nil {
		return client.ContainerCreateResult{}, fmt.Errorf("the container name %q is already in use: %w", o.Name, cerrdefs.ErrConflict)
	}
	e.nextID++
	id := fmt.Sprintf("%064x", e.nextID)
	e.addContainer(id, o.Name, "", false, "none")
	e.containers[id].Config.Labels = o.Config.Labels
	return client.ContainerCreateResult{ID: id}, nil
}

func (e *joinEngine) ContainerRemove(_ context.Context, id string, _ client.ContainerRemoveOptions) (client.ContainerRemoveResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.find(id)
	if c == nil {
		return client.ContainerRemoveResult{}, fmt.Errorf("No such container: %s: %w", id, cerrdefs.ErrNotFound)
	}
	delete(e.containers, c.ID)
	return client.ContainerRemoveResult{}, nil
}
