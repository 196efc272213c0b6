package docker

import (
	"context"
	"fmt"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/gpu"
	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/pipeline"
)

// Engine is the Docker engine as host drives it (containers.Engine, as
// kubernetes.Engine is for a cluster): it translates a resolved SageMaker
// endpoint (containers.EndpointPlan) into an EndpointSpec (SpecOf) that its
// Runtime launches, adopts, scales and removes, and offers the optional
// capabilities (containers.Preflighter, UsageSource, MultiModelObservable).
type Engine struct {
	Runtime *Runtime
}

var (
	_ containers.Engine               = (*Engine)(nil)
	_ containers.Preflighter          = (*Engine)(nil)
	_ containers.UsageSource          = (*Engine)(nil)
	_ containers.MultiModelObservable = (*Engine)(nil)
)

// Launch implements containers.Engine.
func (e *Engine) Launch(ctx context.Context, plan containers.EndpointPlan, gen int) (containers.Launched, error) {
	es, err := SpecOf(plan)
	if err != nil {
		return nil, err
	}
	es.Generation = gen
	d, err := e.Runtime.Deploy(ctx, es)
	if err != nil {
		return nil, err
	}
	return launched{d}, nil
}

// Adopt implements containers.Engine.
func (e *Engine) Adopt(ctx context.Context, plan containers.EndpointPlan, gen int) (containers.Launched, error) {
	es, err := SpecOf(plan)
	if err != nil {
		return nil, err
	}
	es.Generation = gen
	d, err := e.Runtime.Adopt(ctx, es)
	if err != nil {
		return nil, err
	}
	return launched{d}, nil
}

// Reconcile implements containers.Engine.
func (e *Engine) Reconcile(ctx context.Context) error { return e.Runtime.Reconcile(ctx) }

// SetMultiModelObserver implements containers.MultiModelObservable.
func (e *Engine) SetMultiModelObserver(fn func(endpoint, variant, container string) mme.Observer) {
	e.Runtime.SetMultiModelObserver(fn)
}

// Usage implements containers.UsageSource.
func (e *Engine) Usage(ctx context.Context) []containers.Usage { return e.Runtime.Usage(ctx) }

// DiskPercent implements containers.UsageSource.
func (e *Engine) DiskPercent() (float64, error) { return e.Runtime.DiskPercent() }

// GPUUtilization implements containers.UsageSource.
func (e *Engine) GPUUtilization(i int) (float64, float64, error) {
	return e.Runtime.GPUUtilization(i)
}

// SpecOf translates a resolved SageMaker endpoint into what the Docker
// runtime launches.
func SpecOf(plan containers.EndpointPlan) (EndpointSpec, error) {
	es := EndpointSpec{Name: plan.Name}
	for _, v := range plan.Variants {
		vs := VariantSpec{Name: v.Name, Copies: v.InstanceCount, HealthTimeout: v.HealthCheckTimeout,
			DownloadTimeout: v.DownloadTimeout, NetworkIsolation: v.NetworkIsolation, Shadow: v.Shadow}
		for _, c := range v.Containers {
			req, err := gpu.ParseRequest(c.GPUs)
			if err != nil {
				return es, fmt.Errorf("variant %q container %q: GPUs: %w", v.Name, c.Hostname, err)
			}
			vs.Containers = append(vs.Containers, ContainerSpec{
				Hostname:            c.Hostname,
				Image:               c.Image,
				Environment:         c.Environment,
				ModelDataURL:        c.ModelDataURL,
				BaseDir:             c.BaseDir,
				MultiModel:          c.Mode == "MultiModel",
				ModelCacheDisabled:  c.ModelCacheSetting == "Disabled",
				GPUs:                req,
				CPUs:                c.Resources.Cpus,
				MemoryBytes:         c.Resources.MemoryMiB << 20,
				Adapters:            c.Adapters,
				AdditionalModelData: c.AdditionalModelData,
			})
		}
		es.Variants = append(es.Variants, vs)
	}
	return es, nil
}

// launched is one generation of an endpoint on the Docker engine.
type launched struct{ d *Deployment }

func (l launched) Copies(variant string) [][]pipeline.Container {
	copies := l.d.Copies(variant)
	out := make([][]pipeline.Container, len(copies))
	for i, cp := range copies {
		for _, c := range cp {
			if c.Models() != nil {
				out[i] = append(out[i], multiModelContainer{c})
				continue
			}
			out[i] = append(out[i], c)
		}
	}
	return out
}

func (l launched) Scale(ctx context.Context, variant string, n int) error {
	return l.d.Scale(ctx, variant, n)
}

func (l launched) Close(ctx context.Context) error { return l.d.Close(ctx) }

// multiModelContainer lets the pipeline reach a MultiModel container's model
// manager (Go has no covariant results: *mme.Lease is returned as a
// pipeline.Lease here, and never as a typed nil).
type multiModelContainer struct{ *Container }

func (m multiModelContainer) Acquire(ctx context.Context, target string) (pipeline.Lease, error) {
	l, err := m.Models().Acquire(ctx, target)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// LoadedModels and CacheUsage implement containers.MultiModelDetail.
func (m multiModelContainer) LoadedModels() []string   { return m.Models().Loaded() }
func (m multiModelContainer) CacheUsage() (int64, int) { return m.Models().CacheUsage() }

// GPUMemory implements containers.MultiModelGPUDetail.
func (m multiModelContainer) GPUMemory() (mme.GPUReport, bool) { return m.Models().GPUMemory() }

var (
	_ containers.Launched            = launched{}
	_ pipeline.Container             = (*Container)(nil)
	_ pipeline.MultiModel            = multiModelContainer{}
	_ containers.ContainerDetail     = (*Container)(nil)
	_ containers.MultiModelDetail    = multiModelContainer{}
	_ containers.MultiModelGPUDetail = multiModelContainer{}
)
