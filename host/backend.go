package host

import "github.com/mce-run/mce/containers"

// The engine contract is declared in package containers, so that engines
// implement it without importing host (and host imports no engine); host
// names its parts as it always has.
type (
	// Backend brings an endpoint's containers up and down: containers.Engine.
	Backend = containers.Engine
	// Launched is one generation of an endpoint's running containers.
	Launched = containers.Launched
	// Preflighter is a Backend that checks a plan before launching it.
	Preflighter = containers.Preflighter
	// Problem is one thing the pre-flight found.
	Problem = containers.Problem
	// UsageSource is a Backend that samples its containers' resource use.
	UsageSource = containers.UsageSource
	// MultiModelObservable is a Backend whose multi-model containers report
	// their model manager's events.
	MultiModelObservable = containers.MultiModelObservable
	// ContainerDetail is what the Docker engine's containers tell beyond
	// pipeline.Container.
	ContainerDetail = containers.ContainerDetail
	// MultiModelDetail is implemented by multi-model containers.
	MultiModelDetail = containers.MultiModelDetail
	// MultiModelGPUDetail is implemented by multi-model containers whose
	// manager accounts GPU memory.
	MultiModelGPUDetail = containers.MultiModelGPUDetail
)
