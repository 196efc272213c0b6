package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/mce-run/mce/internal/parallel"
)

// Close stops and removes every container of the deployment (SIGTERM, the
// grace period, then SIGKILL) and its extracted artifacts, and the endpoint's
// network when no other generation of the endpoint runs. It is safe to call
// more than once; later calls return the first call's result.
func (d *Deployment) Close(ctx context.Context) error {
	d.closeOnce.Do(func() {
		d.closeErr = d.teardown(ctx, d.rt.opts.StopGrace, false)
	})
	return d.closeErr
}

// teardown removes the deployment's containers and artifacts, forgets it, and
// removes the network if it was the endpoint's last deployment.
func (d *Deployment) teardown(ctx context.Context, grace time.Duration, failed bool) error {
	cs := d.rt.containersOf(d.endpoint, d.gen)
	errs := []error{parallel.Each(cs, func(c *Container) error { return c.remove(ctx, grace) })}
	d.mu.Lock()
	for _, c := range d.caches {
		c.Close()
	}
	d.rt.budget.Release(d.reserved)
	d.reserved = 0
	d.mu.Unlock()
	if err := os.RemoveAll(d.workDir); err != nil {
		errs = append(errs, fmt.Errorf("remove artifacts: %w", err))
	}
	os.Remove(filepath.Dir(d.workDir)) // the endpoint's folder, once no generation is left in it
	self := deploymentKey{d.endpoint, d.gen}
	if !failed { // a failed Deploy's reservation is released by settle
		d.rt.mu.Lock()
		delete(d.rt.deployments, self)
		d.rt.mu.Unlock()
	}
	errs = append(errs, d.rt.removeNetworkIfUnused(ctx, d.endpoint, self))
	return errors.Join(errs...)
}

// remove stops the container with the grace period, removes it and ends its
// background work. "Already gone" is success.
func (c *Container) remove(ctx context.Context, grace time.Duration) error {
	c.lifeMu.Lock() // waits out a recreation under way; none starts after
	c.stopping.Store(true)
	id := c.ID()
	c.lifeMu.Unlock()
	c.ready.Store(false)
	secs := int(grace / time.Second)
	sctx, cancel := context.WithTimeout(ctx, grace+callTimeout)
	_, err := c.rt.engine.ContainerStop(sctx, id, client.ContainerStopOptions{Timeout: &secs})
	cancel()
	var errs []error
	if !gone(err) {
		errs = append(errs, classify("stop container "+c.name, err))
	}
	// Docker 20.10 can fail to delete a removed container's folder while
	// something still writes in it ("unable to remove filesystem … directory
	// not empty", seen at shutdown in e2e); the container is left Dead, and
	// removing it again a moment later succeeds.
	err = retryTransient(ctx, "unable to remove filesystem", func(ctx context.Context) error {
		_, err := c.rt.engine.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
		return err
	})
	if !gone(err) {
		errs = append(errs, classify("remove container "+c.name, err))
	}
	c.cancel()
	c.wg.Wait()
	if c.models != nil {
		c.models.Close()
	}
	c.rt.untrack(c)
	return errors.Join(errs...)
}

// transientWaits are the pauses before a call Docker refused for a moment
// is tried again (about 1.5 s in all).
var transientWaits = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
	400 * time.Millisecond, 800 * time.Millisecond}

// retryTransient makes call until it succeeds, fails with an error whose
// message lacks transient, or transientWaits are spent; it returns the
// last error.
func retryTransient(ctx context.Context, transient string, call func(context.Context) error) error {
	for i := 0; ; i++ {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := call(cctx)
		cancel()
		if err == nil || i == len(transientWaits) || !strings.Contains(err.Error(), transient) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(transientWaits[i]):
		}
	}
}
