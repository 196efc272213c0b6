package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// NetworkJoin is for mce running in a container on the engine it drives (for
// instance under docker-compose). Docker isolates bridge networks from each
// other, so the endpoint containers' addresses are not routable from mce's
// own network; mce connects its own container to each endpoint network once
// that network exists, reaches the containers at their addresses on it (as
// NetworkAddress does), and disconnects before the network is removed.
// Addresses rather than the ContainerHostname DNS names: two generations of
// an endpoint share its network, and the copies of a variant share a name.
const NetworkJoin NetworkMode = "join"

// InContainerSigns are where mce looks for signs of running in a container
// of its engine (NetworkJoin, and the lease's owner). The zero value looks
// where Docker puts them.
type InContainerSigns struct {
	// DockerEnv is the file Docker creates in every container; "" means
	// /.dockerenv.
	DockerEnv string
	// MountInfo names the container's /etc/hostname, with its ID; "" means
	// /proc/self/mountinfo.
	MountInfo string
	// Hostname is the container's ID prefix unless set otherwise; nil means
	// os.Hostname.
	Hostname func() (string, error)
}

func (s InContainerSigns) withDefaults() InContainerSigns {
	if s.DockerEnv == "" {
		s.DockerEnv = "/.dockerenv"
	}
	if s.MountInfo == "" {
		s.MountInfo = "/proc/self/mountinfo"
	}
	if s.Hostname == nil {
		s.Hostname = os.Hostname
	}
	return s
}

var containerIDRe = regexp.MustCompile(`/containers/([0-9a-f]{64})/(?:hostname|hosts|resolv\.conf) `)

// networkDisconnecter is what leaving a network takes; *client.Client has it.
// It is not part of Engine so that engines without it (test fakes) still
// satisfy Engine; they cannot run in NetworkJoin mode.
type networkDisconnecter interface {
	NetworkDisconnect(ctx context.Context, network string, options client.NetworkDisconnectOptions) (client.NetworkDisconnectResult, error)
}

// selfContainer finds the container this process runs in on rt's engine: it
// needs /.dockerenv, and a running container that the engine knows by
// the ID in the bind mount of its /etc/hostname, or by os.Hostname() (the ID
// prefix Docker gives as hostname) with a matching ID or hostname. It returns
// nil when mce is not in a container of this engine (on the host, or under
// another engine).
func (rt *Runtime) selfContainer(ctx context.Context) (*container.InspectResponse, error) {
	signs := rt.opts.InContainer.withDefaults()
	if _, err := os.Stat(signs.DockerEnv); err != nil {
		return nil, nil
	}
	// The ID from mountinfo first: it names one container, where a hostname
	// set with `hostname:` might also be some other container's name.
	var candidates []string
	if b, err := os.ReadFile(signs.MountInfo); err == nil {
		if m := containerIDRe.FindSubmatch(b); m != nil {
			candidates = append(candidates, string(m[1]))
		}
	}
	h, _ := signs.Hostname()
	if h != "" {
		candidates = append(candidates, h)
	}
	for _, c := range candidates {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		res, err := rt.engine.ContainerInspect(cctx, c, client.ContainerInspectOptions{})
		cancel()
		if gone(err) && err != nil {
			continue
		}
		if err != nil {
			return nil, classify("inspect the container mce runs in ("+c+")", err)
		}
		ic := &res.Container
		matches := strings.HasPrefix(ic.ID, c) || (c == h && ic.Config != nil && ic.Config.Hostname == h)
		if matches && ic.State != nil && ic.State.Running {
			return ic, nil
		}
	}
	return nil, nil
}

// pickJoin decides whether mce runs in a container of its engine and so must
// join the endpoint networks. ok is false when it does not (the other rules
// of NetworkAuto apply). A container on the host's network reaches container
// addresses directly; one sharing another container's network stack joins
// that container to the networks.
func (rt *Runtime) pickJoin(ctx context.Context) (mode NetworkMode, why string, ok bool, err error) {
	self, err := rt.selfContainer(ctx)
	if err != nil || self == nil {
		return "", "", false, err
	}
	name := strings.TrimPrefix(self.Name, "/")
	var nm container.NetworkMode
	if self.HostConfig != nil {
		nm = self.HostConfig.NetworkMode
	}
	switch {
	case nm.IsHost():
		return NetworkAddress, "mce runs in container " + name + " on the host's network: reaching containers at their addresses on the endpoint networks", true, nil
	case nm.IsNone():
		return "", "", true, fmt.Errorf("mce runs in container %s with network mode none and cannot reach the endpoint containers; give it a network", name)
	case nm.IsContainer():
		rt.self = nm.ConnectedContainer()
		return NetworkJoin, "mce runs in container " + name + ", which shares the network of container " + rt.self +
			": joining that container to each endpoint network and reaching containers at their addresses there", true, nil
	}
	if _, ok := rt.engine.(networkDisconnecter); !ok {
		return "", "", true, errors.New("mce runs in a container, but its Docker client cannot disconnect from networks")
	}
	rt.self = self.ID
	return NetworkJoin, "mce runs in container " + name + ": joining each endpoint network and reaching containers at their addresses there", true, nil
}

// startJoin prepares a runtime in NetworkJoin mode: every network removal
// first disconnects mce (so networks with mce attached can be removed, by
// teardown and by Reconcile alike), and with Options.Adopt mce rejoins the
// networks an earlier run of this instance left, so the containers to be
// adopted answer. A network that cannot be rejoined is left to Reconcile.
func (rt *Runtime) startJoin(ctx context.Context) {
	rt.engine = &joinedEngine{Client: rt.engine, rt: rt}
	if !rt.opts.Adopt {
		return
	}
	f := client.Filters{}.Add("label", LabelInstance+"="+rt.opts.Instance).Add("label", LabelManaged+"=true")
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	list, err := rt.engine.NetworkList(cctx, client.NetworkListOptions{Filters: f})
	cancel()
	if err != nil {
		rt.log.Warn().Err(err).Msg("could not list the networks of an earlier run to rejoin them")
		return
	}
	for _, n := range list.Items {
		if err := rt.joinNetwork(ctx, n.Name); err != nil {
			rt.log.Warn().Err(err).Str("network", n.Name).Msg("could not rejoin a network of an earlier run")
		}
	}
}

// joinNetwork connects mce's container to the named network; in any other
// mode it does nothing. Being connected already is success.
func (rt *Runtime) joinNetwork(ctx context.Context, name string) error {
	if rt.network != NetworkJoin {
		return nil
	}
	if rt.selfOn(ctx, name) {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	_, err := rt.engine.NetworkConnect(cctx, name, client.NetworkConnectOptions{Container: rt.self})
	cancel()
	if err != nil && !rt.selfOn(ctx, name) { // connected meanwhile by a concurrent deploy: fine
		return classify("connect mce's container to network "+name, err)
	}
	rt.log.Debug().Str("network", name).Msg("joined the endpoint network")
	return nil
}

// leaveNetwork disconnects mce's container from the named network. Not being
// connected, or the network being gone, is success.
func (rt *Runtime) leaveNetwork(ctx context.Context, name string) error {
	if rt.network != NetworkJoin || rt.self == "" {
		return nil
	}
	nd, ok := rt.engine.(networkDisconnecter)
	if !ok {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	_, err := nd.NetworkDisconnect(cctx, name, client.NetworkDisconnectOptions{Container: rt.self})
	cancel()
	if gone(err) || !rt.selfOn(ctx, name) {
		return nil
	}
	return classify("disconnect mce's container from network "+name, err)
}

// selfOn reports whether mce's container is attached to the network, by name
// or ID. An error reading it counts as not attached.
func (rt *Runtime) selfOn(ctx context.Context, network string) bool {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	res, err := rt.engine.ContainerInspect(cctx, rt.self, client.ContainerInspectOptions{})
	cancel()
	if err != nil || res.Container.NetworkSettings == nil {
		return false
	}
	for n, ep := range res.Container.NetworkSettings.Networks {
		if n == network || (ep != nil && ep.NetworkID != "" && ep.NetworkID == network) {
			return true
		}
	}
	return false
}

// joinedEngine disconnects mce's container from a network before removing it:
// the engine refuses to remove a network with a container attached.
type joinedEngine struct {
	Client
	rt *Runtime
}

func (e *joinedEngine) NetworkRemove(ctx context.Context, id string, options client.NetworkRemoveOptions) (client.NetworkRemoveResult, error) {
	if err := e.rt.leaveNetwork(ctx, id); err != nil {
		e.rt.log.Warn().Err(err).Str("network", id).Msg("could not leave the network before removing it")
	}
	return e.Client.NetworkRemove(ctx, id, options)
}

// NetworkDisconnect passes through to the wrapped engine.
func (e *joinedEngine) NetworkDisconnect(ctx context.Context, network string, options client.NetworkDisconnectOptions) (client.NetworkDisconnectResult, error) {
	nd, ok := e.Client.(networkDisconnecter)
	if !ok {
		return client.NetworkDisconnectResult{}, errors.New("the Docker client cannot disconnect from networks")
	}
	return nd.NetworkDisconnect(ctx, network, options)
}
