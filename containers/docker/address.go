package docker

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// refreshAddress reads the container's address (it may change on restart).
func (c *Container) refreshAddress(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := c.rt.engine.ContainerInspect(cctx, c.ID(), client.ContainerInspectOptions{})
	if err != nil {
		return classify("inspect container "+c.name, err)
	}
	ns := res.Container.NetworkSettings
	if ns == nil {
		return errors.New("the engine reports no network settings")
	}
	var url string
	switch c.rt.network {
	case NetworkPublished:
		cport, _ := network.ParsePort(strconv.Itoa(c.port) + "/tcp")
		for _, b := range ns.Ports[cport] {
			if b.HostIP.String() == loopback && b.HostPort != "" {
				url = "http://" + loopback + ":" + b.HostPort
				break
			}
		}
		if url == "" {
			return fmt.Errorf("port %d is not published on %s", c.port, loopback)
		}
	default:
		ep := ns.Networks[c.network]
		if ep == nil || !ep.IPAddress.IsValid() {
			return fmt.Errorf("no address on network %s", c.network)
		}
		url = "http://" + ep.IPAddress.String() + ":" + strconv.Itoa(c.port)
	}
	c.url.Store(&url)
	return nil
}
