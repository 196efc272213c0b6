package mme

import "sync"

// GPUMemory reads a GPU's memory in bytes; *gpu.Inventory implements it
// with NVML.
type GPUMemory interface {
	Memory(index int) (used, total uint64, err error)
}

// maxFootprints bounds the per-model footprints remembered.
const maxFootprints = 10_000

// gpuAccount learns model footprints and keeps loads under the threshold.
// Its fields after mu are guarded by mu, which also serializes GPU loads.
type gpuAccount struct {
	mem       GPUMemory
	indexes   []int
	threshold float64

	mu         sync.Mutex
	footprints map[string]uint64
	sum        uint64
}

func newGPUAccount(mem GPUMemory, indexes []int, threshold float64) gpuAccount {
	return gpuAccount{mem: mem, indexes: indexes, threshold: threshold, footprints: make(map[string]uint64)}
}

func (g *gpuAccount) enabled() bool { return g.mem != nil }

// usage sums the memory of the container's GPUs.
func (g *gpuAccount) usage() (used, total uint64, err error) {
	for _, i := range g.indexes {
		u, t, err := g.mem.Memory(i)
		if err != nil {
			return 0, 0, err
		}
		used += u
		total += t
	}
	return used, total, nil
}

// over reports whether used passes the threshold of total.
func (g *gpuAccount) over(used, total uint64) bool {
	return total > 0 && float64(used) > g.threshold*float64(total)
}

// expected is id's learned footprint, else the mean of those learned, else 0.
func (g *gpuAccount) expected(id string) uint64 {
	if f, ok := g.footprints[id]; ok {
		return f
	}
	if n := uint64(len(g.footprints)); n > 0 {
		return g.sum / n
	}
	return 0
}

// learn records id's footprint from the memory used before and after its load.
func (g *gpuAccount) learn(id string, before, after uint64) {
	if after <= before {
		return
	}
	f := after - before
	if old, ok := g.footprints[id]; ok {
		g.sum -= old
	} else if len(g.footprints) >= maxFootprints {
		return
	}
	g.footprints[id] = f
	g.sum += f
}
