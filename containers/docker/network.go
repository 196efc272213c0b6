package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// resourceName is the Docker name of the endpoint's network and the prefix of
// its containers' names.
func (rt *Runtime) resourceName(endpoint string) string {
	return "mce-" + rt.opts.Instance + "-" + endpoint
}

// isolatedSuffix names an endpoint's internal network, for the variants
// whose model has EnableNetworkIsolation. Endpoint names hold no underscore,
// so it cannot clash with another endpoint's network.
const isolatedSuffix = "_isolated"

// networkName is the Docker name of the endpoint's bridge network, or of its
// internal network (no route out) for isolated variants.
func (rt *Runtime) networkName(endpoint string, isolated bool) string {
	if isolated {
		return rt.resourceName(endpoint) + isolatedSuffix
	}
	return rt.resourceName(endpoint)
}

// networkFor is the network a variant's containers join.
func (d *Deployment) networkFor(v VariantSpec) string {
	return d.rt.networkName(d.endpoint, v.NetworkIsolation)
}

// ensureNetwork finds the endpoint's network or creates it. Generations of
// one endpoint share it. The isolated network is Internal: Docker gives it
// no gateway out of the machine and drops traffic forwarded between it and
// any other network, so its containers reach only each other and mce.
func (rt *Runtime) ensureNetwork(ctx context.Context, endpoint string, isolated bool) error {
	defer rt.lockNetworks(endpoint)()
	name := rt.networkName(endpoint, isolated)
	// Not cut short by the caller: an engine that was asked to create a
	// network creates it even if the client stops waiting, and an unseen
	// network would be left behind by teardown. Cancellation is checked after.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	f := client.Filters{}.Add("label", LabelInstance+"="+rt.opts.Instance).Add("label", LabelEndpoint+"="+endpoint)
	list, err := rt.engine.NetworkList(cctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return classify("list networks", err)
	}
	for _, n := range list.Items {
		if n.Name == name {
			return nil
		}
	}
	_, err = rt.engine.NetworkCreate(cctx, name, client.NetworkCreateOptions{Driver: "bridge", Internal: isolated, Labels: rt.labels(endpoint)})
	if err != nil && !cerrdefs.IsConflict(err) { // conflict: a concurrent generation made it
		return classify("create network "+name, err)
	}
	return ctx.Err()
}

// removeNetworkIfUnused removes the endpoint's network once no deployment of
// the endpoint but except is left.
func (rt *Runtime) removeNetworkIfUnused(ctx context.Context, endpoint string, except deploymentKey) error {
	defer rt.lockNetworks(endpoint)()
	rt.mu.Lock()
	for k := range rt.deployments {
		if k.endpoint == endpoint && k != except {
			rt.mu.Unlock()
			return nil
		}
	}
	rt.mu.Unlock()
	var errs []error
	for _, isolated := range []bool{false, true} {
		name := rt.networkName(endpoint, isolated)
		if err := rt.removeNetwork(ctx, name); !gone(err) {
			errs = append(errs, classify("remove network "+name, err))
		}
	}
	return errors.Join(errs...)
}

// removeNetwork removes one network. Docker 20.10 can refuse it for "active
// endpoints" that no container holds, for good: seen once in CI, after
// TestFifteenContainers removed its fifteen containers, with `docker network
// inspect` listing none and the refusal lasting minutes (moby issue 42119;
// a restart of the daemon clears it). Trying again cannot help, so the
// error says what does.
func (rt *Runtime) removeNetwork(ctx context.Context, name string) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	_, err := rt.engine.NetworkRemove(cctx, name, client.NetworkRemoveOptions{})
	cancel()
	if err != nil && strings.Contains(err.Error(), "has active endpoints") {
		return fmt.Errorf("%w (if `docker network inspect %s` lists no container, Docker counts an endpoint "+
			"that none holds, a known Docker bug that restarting the Docker daemon clears)", err, name)
	}
	return err
}

// networkLocks serializes finding, creating and removing one endpoint's
// networks: generations of one endpoint may deploy at once (the copies of
// inference components do), and Docker accepts two networks of one name.
var networkLocks sync.Map // resourceName → *sync.Mutex

// lockNetworks locks the endpoint's networks and returns the unlock.
func (rt *Runtime) lockNetworks(endpoint string) func() {
	m, _ := networkLocks.LoadOrStore(rt.resourceName(endpoint), new(sync.Mutex))
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}
