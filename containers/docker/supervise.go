package docker

import (
	"context"
	"errors"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"
)

// stableAfter is how long a restarted container must stay up before its
// restart backoff starts again from the beginning.
const stableAfter = time.Minute

// supervise runs for a ready container until it is removed: a liveness ping
// every HealthInterval, and on exit a restart with exponential backoff. A
// container that disappeared (docker rm -f) or cannot be started again is
// recreated from its definition. While the container is down or failing
// pings, Ready is false, Unavailable says why, and calls to it fail fast.
func (c *Container) supervise() {
	defer c.wg.Done()
	tick := time.NewTicker(c.rt.opts.HealthInterval)
	defer tick.Stop()
	backoff := c.rt.opts.RestartBackoff
	upSince := time.Now()
	failed := 0
	died := func(code int) bool {
		c.ready.Store(false)
		c.lastExit.Store(int64(code))
		if time.Since(upSince) > stableAfter {
			backoff = c.rt.opts.RestartBackoff
		}
		if why := c.recycle.Swap(nil); why != nil {
			c.setDown("is being restarted by mce: %s", *why)
			c.log.Warn().Int("exit_code", code).Msg("multi-model container stopped to give back GPU memory; restarting")
		} else {
			c.setDown("exited with code %d; mce is restarting it", code)
			c.log.Error().Int("exit_code", code).Dur("restart_in_ms", backoff).Msg("container exited; restarting")
		}
		if !c.restart(backoff) {
			return false
		}
		backoff = min(backoff*2, c.rt.opts.RestartBackoffMax)
		upSince = time.Now()
		failed = 0
		return true
	}
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
			if err := c.ping(c.ctx); err != nil {
				failed++
				if failed == failedPingsToUnready && c.ready.Load() {
					c.ready.Store(false)
					c.setDown("fails its liveness pings (%v)", err)
					c.log.Warn().Err(err).Msg("container failed its liveness pings; taken out of routing")
				}
				// A container removed while its die event was missed never
				// answers again: look, and bring it back.
				if failed >= failedPingsToUnready && !c.stopping.Load() && !c.exists() {
					if !died(-1) {
						return
					}
				}
				continue
			}
			if failed >= failedPingsToUnready {
				c.log.Info().Msg("container answers /ping again; back in routing")
			}
			failed = 0
			c.down.Store(nil)
			c.ready.Store(true)
		case code := <-c.died:
			if c.stopping.Load() {
				return
			}
			if !died(code) {
				return
			}
		}
	}
}

// exists reports whether the engine still has the container running; true
// when the engine cannot tell.
func (c *Container) exists() bool {
	cctx, cancel := context.WithTimeout(c.ctx, callTimeout)
	defer cancel()
	res, err := c.rt.engine.ContainerInspect(cctx, c.ID(), client.ContainerInspectOptions{})
	if err != nil {
		return !cerrdefs.IsNotFound(err)
	}
	st := res.Container.State
	return st == nil || st.Running || st.Restarting
}

// errStopping ends a recreation of a container that is being removed.
var errStopping = errors.New("the container is being removed")

// restart waits out the backoff, starts the container again and waits for it
// to pass /ping within its health window. When the engine no longer has the
// container, or cannot start it, the container is recreated from its
// definition (same name, hostname, environment, mounts, network and alias).
// It keeps trying until the container is up or removed; it returns false only
// when the container is being removed.
func (c *Container) restart(wait time.Duration) bool {
	recreate := false
	for {
		select {
		case <-c.ctx.Done():
			return false
		case <-time.After(wait):
		}
		if c.stopping.Load() {
			return false
		}
		var err error
		if recreate {
			err = c.recreate()
		} else {
			cctx, cancel := context.WithTimeout(c.ctx, callTimeout)
			_, err = c.rt.engine.ContainerStart(cctx, c.ID(), client.ContainerStartOptions{})
			cancel()
			err = classify("start container "+c.name, err)
			if err != nil && c.ctx.Err() == nil {
				recreate = true // until one succeeds, every try makes it anew
				if errors.Is(err, ErrNotFound) {
					c.log.Warn().Msg("container is gone from the engine; recreating it from its definition")
				} else {
					c.log.Warn().Err(err).Msg("container cannot be started; recreating it from its definition")
				}
				err = c.recreate()
			}
		}
		if err == nil {
			recreate = false
			err = c.refreshAddress(c.ctx)
		}
		if err == nil {
			c.rt.invalidate(c)
			err = c.waitHealthy(c.ctx, c.health)
		}
		if err == nil {
			if c.models != nil {
				c.models.Reset() // a restarted container has no model loaded
			}
			c.restarts.Add(1)
			c.down.Store(nil)
			c.ready.Store(true)
			c.log.Info().Int64("restarts", c.restarts.Load()).Str("url", c.BaseURL()).Msg("container restarted and ready")
			return true
		}
		if c.ctx.Err() != nil || errors.Is(err, errStopping) {
			return false
		}
		c.setDown("could not be restarted: %v", err)
		c.log.Error().Err(err).Msg("restart failed; trying again")
		wait = min(max(wait, c.rt.opts.RestartBackoff)*2, c.rt.opts.RestartBackoffMax)
	}
}

// recreate replaces the container with a new one made from its definition
// and starts it. The old one is removed first (it may be a stopped container
// that cannot start); the new one is tracked before anything can fail, so
// teardown always finds it.
func (c *Container) recreate() error {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	if c.stopping.Load() {
		return errStopping
	}
	if c.create.Config == nil {
		return errors.New("no definition to recreate the container from")
	}
	old := c.ID()
	rctx, cancel := context.WithTimeout(c.ctx, callTimeout)
	_, err := c.rt.engine.ContainerRemove(rctx, old, client.ContainerRemoveOptions{Force: true})
	cancel()
	if !gone(err) {
		return classify("remove container "+c.name, err)
	}
	// The endpoint's network may have been removed with the container.
	isolated := c.network == c.rt.networkName(c.endpoint, true)
	if err := c.rt.ensureNetwork(c.ctx, c.endpoint, isolated); err != nil {
		return err
	}
	if err := c.rt.joinNetwork(c.ctx, c.network); err != nil {
		return err
	}
	// As at deploy: a create the engine carries out must be seen.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), callTimeout)
	res, err := c.rt.engine.ContainerCreate(cctx, c.create)
	cancel()
	if err != nil {
		return classify("recreate container "+c.name, err)
	}
	c.rt.retrack(c, old, res.ID)
	c.log.Info().Str("id", shortID(res.ID)).Msg("container recreated from its definition")
	sctx, cancel := context.WithTimeout(c.ctx, callTimeout)
	_, err = c.rt.engine.ContainerStart(sctx, res.ID, client.ContainerStartOptions{})
	cancel()
	return classify("start recreated container "+c.name, err)
}

// OnAddressChange registers a function called when a restarted container
// comes back at a different address (so the router can drop pooled
// connections to the old one). It must not block.
func (rt *Runtime) OnAddressChange(fn func(oldURL string)) {
	rt.mu.Lock()
	rt.onAddr = append(rt.onAddr, fn)
	rt.mu.Unlock()
}

func (rt *Runtime) invalidate(c *Container) {
	rt.mu.Lock()
	fns := rt.onAddr
	rt.mu.Unlock()
	for _, fn := range fns {
		fn(c.BaseURL())
	}
}

// watchEvents follows the engine's container "die" events for this instance and
// hands each to its container. If the stream breaks it reconnects and sweeps,
// so no exit goes unnoticed.
func (rt *Runtime) watchEvents() {
	defer rt.wg.Done()
	f := client.Filters{}.
		Add("type", string(events.ContainerEventType)).
		Add("event", string(events.ActionDie)).
		Add("label", LabelInstance+"="+rt.opts.Instance)
	for rt.ctx.Err() == nil {
		res := rt.engine.Events(rt.ctx, client.EventsListOptions{Filters: f})
		rt.sweep()
	stream:
		for {
			select {
			case <-rt.ctx.Done():
				return
			case msg := <-res.Messages:
				c := rt.lookup(msg.Actor.ID)
				if c == nil || c.stopping.Load() {
					continue
				}
				code, err := strconv.Atoi(msg.Actor.Attributes["exitCode"])
				if err != nil {
					code = -1
				}
				c.notifyDied(code)
			case err := <-res.Err:
				if rt.ctx.Err() == nil {
					rt.log.Warn().Err(err).Msg("Docker event stream broke; reconnecting")
				}
				break stream
			}
		}
		select {
		case <-rt.ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// sweep inspects every tracked container and reports those that are not
// running, for exits the event stream may have missed.
func (rt *Runtime) sweep() {
	rt.mu.Lock()
	cs := make([]*Container, 0, len(rt.byID))
	for _, c := range rt.byID {
		cs = append(cs, c)
	}
	rt.mu.Unlock()
	for _, c := range cs {
		if c.stopping.Load() || !c.ready.Load() {
			continue
		}
		cctx, cancel := context.WithTimeout(rt.ctx, callTimeout)
		res, err := rt.engine.ContainerInspect(cctx, c.ID(), client.ContainerInspectOptions{})
		cancel()
		if cerrdefs.IsNotFound(err) {
			c.notifyDied(-1) // removed behind mce's back: recreate it
			continue
		}
		if err != nil || res.Container.State == nil {
			continue
		}
		if !res.Container.State.Running && !res.Container.State.Restarting {
			c.notifyDied(res.Container.State.ExitCode)
		}
	}
}
