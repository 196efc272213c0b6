package containers

import "context"

// InstanceCapacity is what one instance of a variant offers the copies of
// inference components.
type InstanceCapacity struct {
	CPUs      float64
	MemoryMiB int64
	// GPUs are the machine's GPU device IDs (indexes or UUIDs).
	GPUs []string
}

// CapacitySource is an Engine that knows its machine's capacity, for the
// placement of inference-component copies (docker.Engine does).
type CapacitySource interface {
	InstanceCapacity(ctx context.Context) (InstanceCapacity, error)
}

// AdapterStore is an Engine that gives the copies of inference components
// a folder of adapters (docker.Engine does): each copy of a component
// whose ContainerPlan has Adapters set sees, read-only at AdapterMount,
// the adapters staged for that component, also those staged after it
// started. The host then registers each adapter with the copy's
// container by the path returned.
type AdapterStore interface {
	// StageAdapter fetches artifactURL (s3:// or file://, a relative one
	// against baseDir; archives extracted as hostile input) into the
	// folder of component base on endpoint, as adapter name, replacing
	// what was there, and returns the adapter's path inside the copies.
	StageAdapter(ctx context.Context, endpoint, base, name, artifactURL, baseDir string) (string, error)
	// RemoveAdapter removes what StageAdapter staged; nothing staged is
	// no error.
	RemoveAdapter(endpoint, base, name string) error
}

// AdapterMount is where a copy of an inference component sees its
// adapters: AdapterMount/<adapter name>.
const AdapterMount = "/opt/ml/adapters"

// CopyNeeds is what one copy of an inference component asks for.
type CopyNeeds struct {
	CPUs      float64 // cores; 0: none asked
	MemoryMiB int64   // the minimum; 0: none asked
	GPUs      int     // whole GPUs
}

// CopyScheduler is an Engine whose cluster's scheduler places the copies of
// inference components (kubernetes.Engine): host neither packs them on
// instances nor pins GPUs to them; it launches each copy with its resources
// and the engine fails the launch with an *UnschedulableError when the
// scheduler finds no room for it.
type CopyScheduler interface {
	// CopyFits is the pre-flight of a new specification: what no instance of
	// the cluster could offer one copy even when empty ("" when one could,
	// or when the engine cannot tell).
	CopyFits(ctx context.Context, n CopyNeeds) (short string, err error)
}

// UnschedulableError is a copy the engine's scheduler found no room for.
// Short names what was short, in SageMaker's words ("accelerator devices",
// "CPU cores", "memory", or "instances" when the variant's instance bound
// kept it off nodes that had room); Message is the whole sentence, with the
// scheduler's own words.
type UnschedulableError struct {
	Short   []string
	Message string
}

func (e *UnschedulableError) Error() string { return e.Message }
