package host

import (
	"context"

	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// Backend brings an endpoint's containers up and down. host knows no engine:
// the Docker one is containers/backend.Docker, handed in by `mce serve`;
// tests of the HTTP front may use httptest servers instead. What an engine
// can do beyond Backend it offers by implementing the optional interfaces
// below (found by type assertion on the Backend value): Preflighter,
// UsageSource, MultiModelObservable.
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

// MultiModelObservable is implemented by backends whose multi-model
// containers report their model manager's events (loads, evictions, cache
// hits); host hands them its metrics sink.
type MultiModelObservable interface {
	SetMultiModelObserver(fn func(endpoint, variant, container string) mme.Observer)
}
