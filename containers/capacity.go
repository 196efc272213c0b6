package containers

import (
	"context"
	"strconv"

	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers/gpu"
)

// Capacity is what the engine's machine offers the copies of inference
// components: its CPUs and memory as the engine reports them, and the GPUs
// NVML lists (by index; none where NVML is unavailable).
type Capacity struct {
	CPUs        float64
	MemoryBytes int64
	GPUs        []string
}

// Capacity reads the machine's capacity.
func (rt *Runtime) Capacity(ctx context.Context) (Capacity, error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	info, err := rt.engine.Info(cctx, client.InfoOptions{})
	cancel()
	if err != nil {
		return Capacity{}, classify("read Docker engine info", err)
	}
	c := Capacity{CPUs: float64(info.Info.NCPU), MemoryBytes: info.Info.MemTotal}
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
