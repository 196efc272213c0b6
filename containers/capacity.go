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
