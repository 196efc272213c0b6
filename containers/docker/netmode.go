package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"strings"

	"github.com/moby/moby/client"
)

// NetworkMode says how mce reaches its containers.
type NetworkMode string

const (
	// NetworkAuto picks NetworkJoin (join.go) when mce runs in a container
	// of its engine, else NetworkAddress on a Linux engine mce can route to
	// and NetworkPublished on Docker Desktop or a non-Linux host.
	NetworkAuto NetworkMode = "auto"
	// NetworkAddress reaches each container at its address on the endpoint's
	// bridge network: the kernel routes it, no proxy in between.
	NetworkAddress NetworkMode = "address"
	// NetworkPublished publishes each container's port on 127.0.0.1 (never on
	// another interface) and goes through Docker's userland proxy: about half
	// the throughput, but works where container addresses are unreachable.
	NetworkPublished NetworkMode = "published"
)

// NetworkMode is the way this runtime reaches containers.
func (rt *Runtime) NetworkMode() NetworkMode { return rt.network }

// pickNetworkMode resolves NetworkAuto and explains the choice.
func (rt *Runtime) pickNetworkMode(ctx context.Context) (NetworkMode, string, error) {
	switch rt.opts.Network {
	case NetworkAddress:
		return NetworkAddress, "reaching containers at their addresses on the endpoint networks (as configured)", nil
	case NetworkPublished:
		return NetworkPublished, "reaching containers through ports published on 127.0.0.1 (as configured)", nil
	case NetworkJoin, NetworkAuto:
	default:
		return "", "", fmt.Errorf("unknown network mode %q (want auto, address, published or join)", rt.opts.Network)
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	info, err := rt.engine.Info(cctx, client.InfoOptions{})
	if err != nil {
		return "", "", classify("read Docker engine info", err)
	}
	rt.rtInfo = GPURuntimeInfo(info, rt.engine)
	// In a container of this engine (docker-compose) the endpoint networks are
	// isolated from mce's own: join them (join.go).
	if mode, why, ok, err := rt.pickJoin(ctx); err != nil || ok {
		return mode, why, err
	}
	if rt.opts.Network == NetworkJoin {
		return "", "", errors.New("network mode join: mce does not run in a container of this Docker engine (no /.dockerenv, or the engine knows no running container by this hostname)")
	}
	os := info.Info.OperatingSystem
	switch {
	case goruntime.GOOS != "linux":
		return NetworkPublished, "container addresses are not routable from " + goruntime.GOOS + "; falling back to ports published on 127.0.0.1 (Docker's userland proxy, about half the throughput)", nil
	case strings.Contains(os, "Docker Desktop"):
		return NetworkPublished, "Docker Desktop keeps container addresses inside its VM; falling back to ports published on 127.0.0.1 (Docker's userland proxy, about half the throughput)", nil
	case remoteEngine():
		return NetworkPublished, "the Docker engine is remote (DOCKER_HOST); falling back to published ports", nil
	}
	return NetworkAddress, "reaching containers at their addresses on the endpoint networks", nil
}

// remoteEngine reports whether DOCKER_HOST names an engine on another machine.
func remoteEngine() bool {
	h := os.Getenv("DOCKER_HOST")
	if h == "" || strings.HasPrefix(h, "unix://") {
		return false
	}
	for _, local := range []string{"tcp://127.", "tcp://localhost", "tcp://[::1]"} {
		if strings.HasPrefix(h, local) {
			return false
		}
	}
	return true
}
