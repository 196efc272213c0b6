package docker

import (
	"context"
	"strconv"

	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/gpu"
)

var _ containers.CapacitySource = (*Engine)(nil)

// InstanceCapacity implements containers.CapacitySource: the engine's
// machine, for the placement of inference-component copies.
func (e *Engine) InstanceCapacity(ctx context.Context) (containers.InstanceCapacity, error) {
	return e.Runtime.Capacity(ctx)
}

// Capacity reads what the engine's machine offers the copies of inference
// components: its CPUs and memory as the engine reports them, and the GPUs
// NVML lists (by index; none where NVML is unavailable).
func (rt *Runtime) Capacity(ctx context.Context) (containers.InstanceCapacity, error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	info, err := rt.engine.Info(cctx, client.InfoOptions{})
	cancel()
	if err != nil {
		return containers.InstanceCapacity{}, classify("read Docker engine info", err)
	}
	c := containers.InstanceCapacity{CPUs: float64(info.Info.NCPU), MemoryMiB: info.Info.MemTotal >> 20}
	rt.mu.Lock()
	if rt.gpus == nil {
		rt.gpus = gpu.NewInventory(nil)
	}
	inv := rt.gpus
	rt.mu.Unlock()
	if devs, err := inv.Devices(); err == nil {
		for _, d := range devs {
			c.GPUs = append(c.GPUs, strconv.Itoa(d.Index))
		}
	}
	return c, nil
}
