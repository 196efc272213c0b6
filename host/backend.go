package host

import (
	"context"
	"fmt"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/gpu"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// Backend brings an endpoint's containers up and down. The Docker backend is
// the real one; tests of the HTTP front may use httptest servers instead.
type Backend interface {
	// Launch starts every container of the plan as generation gen and
	// returns once all are ready, or fails having removed whatever it started.
	Launch(ctx context.Context, plan spec.EndpointPlan, gen int) (Launched, error)
	// Adopt takes over generation gen of the plan left running by an earlier
	// run of mce, if it matches the plan and is healthy.
	Adopt(ctx context.Context, plan spec.EndpointPlan, gen int) (Launched, error)
	// Reconcile removes whatever runs that no Launched owns.
	Reconcile(ctx context.Context) error
}

// Launched is one generation of an endpoint's running containers.
type Launched interface {
	// Copies returns, for a variant, each copy of its container set in chain
	// order.
	Copies(variant string) [][]pipeline.Container
	// Scale starts or removes copies of a variant until it has n.
	Scale(ctx context.Context, variant string, n int) error
	// Close stops and removes everything the launch created.
	Close(ctx context.Context) error
}

// DockerBackend launches endpoints on the Docker engine through a
// containers.Runtime.
type DockerBackend struct {
	Runtime *containers.Runtime
}

var _ Backend = (*DockerBackend)(nil)

// Launch implements Backend.
func (b *DockerBackend) Launch(ctx context.Context, plan spec.EndpointPlan, gen int) (Launched, error) {
	es, err := EndpointSpec(plan)
	if err != nil {
		return nil, err
	}
	es.Generation = gen
	d, err := b.Runtime.Deploy(ctx, es)
	if err != nil {
		return nil, err
	}
	return dockerLaunched{d}, nil
}

// Adopt implements Backend.
func (b *DockerBackend) Adopt(ctx context.Context, plan spec.EndpointPlan, gen int) (Launched, error) {
	es, err := EndpointSpec(plan)
	if err != nil {
		return nil, err
	}
	es.Generation = gen
	d, err := b.Runtime.Adopt(ctx, es)
	if err != nil {
		return nil, err
	}
	return dockerLaunched{d}, nil
}

// Reconcile implements Backend.
func (b *DockerBackend) Reconcile(ctx context.Context) error { return b.Runtime.Reconcile(ctx) }

// EndpointSpec translates a resolved SageMaker endpoint into what the Docker
// runtime launches.
func EndpointSpec(plan spec.EndpointPlan) (containers.EndpointSpec, error) {
	es := containers.EndpointSpec{Name: plan.Name}
	for _, v := range plan.Variants {
		vs := containers.VariantSpec{Name: v.Name, Copies: v.InstanceCount, HealthTimeout: v.HealthCheckTimeout,
			NetworkIsolation: v.NetworkIsolation}
		for _, c := range v.Containers {
			req, err := gpu.ParseRequest(c.GPUs)
			if err != nil {
				return es, fmt.Errorf("variant %q container %q: GPUs: %w", v.Name, c.Hostname, err)
			}
			vs.Containers = append(vs.Containers, containers.ContainerSpec{
				Hostname:           c.Hostname,
				Image:              c.Image,
				Environment:        c.Environment,
				ModelDataURL:       c.ModelDataURL,
				BaseDir:            c.BaseDir,
				MultiModel:         c.Mode == "MultiModel",
				ModelCacheDisabled: c.ModelCacheSetting == "Disabled",
				GPUs:               req,
				CPUs:               c.Resources.Cpus,
				MemoryBytes:        c.Resources.MemoryMiB << 20,
			})
		}
		es.Variants = append(es.Variants, vs)
	}
	return es, nil
}

type dockerLaunched struct{ d *containers.Deployment }

func (l dockerLaunched) Copies(variant string) [][]pipeline.Container {
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

// multiModelContainer lets the pipeline reach a MultiModel container's model
// manager (Go has no covariant results: *mme.Lease is returned as a
// pipeline.Lease here, and never as a typed nil).
type multiModelContainer struct{ *containers.Container }

func (m multiModelContainer) Acquire(ctx context.Context, target string) (pipeline.Lease, error) {
	l, err := m.Models().Acquire(ctx, target)
	if err != nil {
		return nil, err
	}
	return l, nil
}

var _ pipeline.MultiModel = multiModelContainer{}

func (l dockerLaunched) Scale(ctx context.Context, variant string, n int) error {
	return l.d.Scale(ctx, variant, n)
}

func (l dockerLaunched) Close(ctx context.Context) error { return l.d.Close(ctx) }

var _ pipeline.Container = (*containers.Container)(nil)
