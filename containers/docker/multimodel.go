package docker

import (
	"context"
	"path/filepath"
	"time"

	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers/gpu"
	"github.com/mce-run/mce/containers/mme"
)

// multiModelCache makes (once) the cache of a multi-model container
// definition: the folder mounted read-only at /opt/ml/models in each copy.
func (d *Deployment) multiModelCache(variant string, cs ContainerSpec) (*mme.Cache, error) {
	key := modelKey{variant, cs.Hostname}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.caches[key]; c != nil {
		return c, nil
	}
	f, err := d.rt.artifactFetcher()
	if err != nil {
		return nil, err
	}
	obs := d.rt.multiModelObserver(d.endpoint, variant, cs.Hostname)
	c, err := mme.NewCache(mme.CacheOptions{
		Dir:      filepath.Join(d.workDir, variant, cs.Hostname, "models"),
		Prefix:   cs.ModelDataURL,
		BaseDir:  cs.BaseDir,
		Fetcher:  f,
		Capacity: d.rt.opts.MultiModel.DiskCapacity,
		Budget:   d.rt.budget,
		Observer: obs,
		Logger:   d.rt.log.With().Str("endpoint", d.endpoint).Str("variant", variant).Str("container", cs.Hostname).Logger(),
	})
	if err != nil {
		return nil, err
	}
	d.caches[key] = c
	return c, nil
}

// attachModels gives a multi-model container its manager.
func (d *Deployment) attachModels(c *Container, cache *mme.Cache) error {
	o := d.rt.opts.MultiModel
	obs := d.rt.multiModelObserver(d.endpoint, c.variant, c.spec.Hostname)
	opts := mme.ManagerOptions{
		Store: cache, BaseURL: c.BaseURL, LoadTimeout: o.LoadTimeout, IdleTTL: o.IdleTTL,
		CacheDisabled: c.spec.ModelCacheDisabled, GPUThreshold: o.GPUThreshold, Observer: obs,
		// The manager adds endpoint, variant and container itself; c.log
		// has them already, and JSON lines must not carry a key twice.
		Logger:   d.rt.log.With().Int("copy", c.copy).Logger(),
		Endpoint: d.endpoint, Variant: c.variant, Container: c.spec.Hostname, Image: c.spec.Image,
	}
	if !c.spec.GPUs.IsZero() {
		if idx, inv := d.rt.gpuIndexes(c.spec.GPUs); len(idx) > 0 {
			opts.GPU, opts.GPUIndexes = containerGPU{inv: inv, id: c.ID}, idx
			if o.RestartOnLeak > 0 {
				opts.RestartOnLeak, opts.Restart = o.RestartOnLeak, c.restartForLeak
			}
		}
	}
	m, err := mme.NewManager(opts)
	if err != nil {
		return err
	}
	c.models = m
	return nil
}

// containerGPU is the GPU memory of one container for its manager: NVML's
// figures for its GPUs, and its own processes' share of them (matched by
// their cgroup to the container's current ID), so that containers sharing
// a GPU each see their own use.
type containerGPU struct {
	inv *gpu.Inventory
	id  func() string
}

func (g containerGPU) Memory(index int) (uint64, uint64, error) { return g.inv.Memory(index) }

func (g containerGPU) ContainerMemory(index int) (uint64, uint64, bool, error) {
	return g.inv.ContainerMemory(index, gpu.CgroupOwner("", g.id()))
}

var _ mme.ContainerGPUMemory = containerGPU{}

// restartForLeak stops the container so that its supervisor starts it
// again (supervise.go), which gives back the GPU memory its server kept
// after unloads; the supervisor then resets its manager and models load
// again on demand. Calls in flight on it fail as in any restart. It
// returns at once (mme.ManagerOptions.Restart).
func (c *Container) restartForLeak(reason string) {
	c.recycle.Store(&reason)
	go func() { // bounded by the stop's timeout and by the container's life
		secs := int(c.rt.opts.StopGrace / time.Second)
		ctx, cancel := context.WithTimeout(c.ctx, c.rt.opts.StopGrace+callTimeout)
		defer cancel()
		if _, err := c.rt.engine.ContainerStop(ctx, c.ID(), client.ContainerStopOptions{Timeout: &secs}); err != nil && c.ctx.Err() == nil {
			c.recycle.Store(nil)
			c.log.Warn().Err(err).Msg("could not stop the multi-model container to give back its GPU memory")
		}
	}()
}
