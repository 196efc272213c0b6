package backend

import (
	"context"

	"github.com/mce-run/mce/host"
)

var _ host.CapacitySource = (*Docker)(nil)

// InstanceCapacity implements host.CapacitySource: the Docker engine's
// machine, for the placement of inference-component copies.
func (b *Docker) InstanceCapacity(ctx context.Context) (host.InstanceCapacity, error) {
	c, err := b.Runtime.Capacity(ctx)
	if err != nil {
		return host.InstanceCapacity{}, err
	}
	return host.InstanceCapacity{CPUs: c.CPUs, MemoryMiB: c.MemoryBytes >> 20, GPUs: c.GPUs}, nil
}
