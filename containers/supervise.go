package containers

import (
	"context"
	"strconv"
	"time"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"
)

// stableAfter is how long a restarted container must stay up before its
// restart backoff starts again from the beginning.
const stableAfter = time.Minute

// supervise runs for a ready container until it is removed: a liveness ping
// every HealthInterval, and on exit a restart with exponential backoff. While
// the container is down or failing pings, Ready is false and calls to it fail
// fast.
func (c *Container) supervise() {
	defer c.wg.Done()
	tick := time.NewTicker(c.rt.opts.HealthInterval)
	defer tick.Stop()
	backoff := c.rt.opts.RestartBackoff
	upSince := time.Now()
	failed := 0
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
			if err := c.ping(c.ctx); err != nil {
				failed++
				if failed == failedPingsToUnready && c.ready.Load() {
					c.ready.Store(false)
					c.log.Warn().Err(err).Msg("container failed its liveness pings; taken out of routing")
				}
				continue
			}
			if failed >= failedPingsToUnready {
				c.log.Info().Msg("container answers /ping again; back in routing")
			}
			failed = 0
			c.ready.Store(true)
		case code := <-c.died:
			if c.stopping.Load() {
				return
			}
			c.ready.Store(false)
			c.lastExit.Store(int64(code))
			if time.Since(upSince) > stableAfter {
				backoff = c.rt.opts.RestartBackoff
			}
			c.log.Error().Int("exit_code", code).Dur("restart_in", backoff).Msg("container exited; restarting")
			if !c.restart(backoff) {
				return
			}
			backoff = min(backoff*2, c.rt.opts.RestartBackoffMax)
			upSince = time.Now()
			failed = 0
		}
	}
}

// restart waits out the backoff, starts the container again and waits for it
// to pass /ping within its health window. It keeps trying until the container
// is up or removed; it returns false only when the container is being removed.
func (c *Container) restart(wait time.Duration) bool {
	for {
		select {
		case <-c.ctx.Done():
			return false
		case <-time.After(wait):
		}
		if c.stopping.Load() {
			return false
		}
		cctx, cancel := context.WithTimeout(c.ctx, callTimeout)
		_, err := c.rt.engine.ContainerStart(cctx, c.id, client.ContainerStartOptions{})
		cancel()
		if err == nil {
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
			c.ready.Store(true)
			c.log.Info().Int64("restarts", c.restarts.Load()).Str("url", c.BaseURL()).Msg("container restarted and ready")
			return true
		}
		if c.ctx.Err() != nil {
			return false
		}
		c.log.Error().Err(err).Msg("restart failed; trying again")
		wait = min(wait*2, c.rt.opts.RestartBackoffMax)
	}
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
		res, err := rt.engine.ContainerInspect(cctx, c.id, client.ContainerInspectOptions{})
		cancel()
		if err != nil || res.Container.State == nil {
			continue
		}
		if !res.Container.State.Running && !res.Container.State.Restarting {
			c.notifyDied(res.Container.State.ExitCode)
		}
	}
}
