package containers

import (
	"path/filepath"

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
		Endpoint: d.endpoint, Variant: c.variant, Container: c.spec.Hostname,
	}
	if !c.spec.GPUs.IsZero() {
		if idx, inv := d.rt.gpuIndexes(c.spec.GPUs); len(idx) > 0 {
			opts.GPU, opts.GPUIndexes = inv, idx
		}
	}
	m, err := mme.NewManager(opts)
	if err != nil {
		return err
	}
	c.models = m
	return nil
}
