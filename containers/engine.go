package containers

import (
	"context"
	"fmt"

	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/pipeline"
)

// Engine brings an endpoint's containers up and down: the seam between host
// (which knows no engine; its Config.Backend holds one) and the engines,
// docker.Engine and kubernetes.Engine, handed to host by `mce serve`; tests
// of the HTTP front may use httptest servers instead.
// What an engine can do beyond Engine it offers by implementing the optional
// interfaces below and in capacity.go (found by type assertion on the
// Engine value): Preflighter, UsageSource, MultiModelObservable,
// CopyPlacer, AdapterStore. The containers an engine hands out
// (Launched.Copies) may implement ContainerDetail, MultiModelDetail and
// MultiModelGPUDetail, and pipeline.MultiModel.
type Engine interface {
	// Launch starts every container of the plan as generation gen and
	// returns once all are ready, or fails having removed whatever it started.
	Launch(ctx context.Context, plan EndpointPlan, gen int) (Launched, error)
	// Adopt takes over generation gen of the plan left running by an earlier
	// run of mce, if it matches the plan and is healthy.
	Adopt(ctx context.Context, plan EndpointPlan, gen int) (Launched, error)
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

// Preflighter is an Engine that checks a plan before launching it, without
// starting, pulling or downloading anything, and reports every problem at
// once. Launch runs after it only when it found none.
type Preflighter interface {
	Preflight(ctx context.Context, plan EndpointPlan) []Problem
}

// Problem is one thing the pre-flight found that would keep an endpoint
// from starting: where, what is wrong, and what to do. Variant and
// Container are empty when it concerns several containers.
type Problem struct {
	Variant   string `json:"Variant,omitempty"`
	Container string `json:"Container,omitempty"`
	What      string `json:"What"`
	Fix       string `json:"Fix,omitempty"`
}

// Headline is where and what, without the fix.
func (p Problem) Headline() string {
	if p.Container == "" {
		return p.What
	}
	return fmt.Sprintf("container %q (variant %q): %s", p.Container, p.Variant, p.What)
}

func (p Problem) String() string {
	if p.Fix == "" {
		return p.Headline()
	}
	return p.Headline() + " — " + p.Fix
}

// UsageSource is implemented by engines that can sample their containers'
// resource use (docker.Engine does).
type UsageSource interface {
	Usage(ctx context.Context) []Usage
	DiskPercent() (float64, error)
	GPUUtilization(index int) (gpuPercent, memoryPercent float64, err error)
}

// MultiModelObservable is implemented by engines whose multi-model
// containers report their model manager's events (loads, evictions, cache
// hits); host hands them its metrics sink.
type MultiModelObservable interface {
	SetMultiModelObserver(fn func(endpoint, variant, container string) mme.Observer)
}

// ContainerDetail is what the Docker engine's containers tell beyond
// pipeline.Container; other engines' containers show hostname and health.
type ContainerDetail interface {
	ID() string
	Restarts() int
	LastExitCode() int
	LogTail() []string
	Unavailable() string
}

// MultiModelDetail is implemented by multi-model containers.
type MultiModelDetail interface {
	LoadedModels() []string
	CacheUsage() (bytes int64, models int)
}

// MultiModelGPUDetail is implemented by multi-model containers whose
// manager accounts GPU memory; false when it does not.
type MultiModelGPUDetail interface {
	GPUMemory() (mme.GPUReport, bool)
}
