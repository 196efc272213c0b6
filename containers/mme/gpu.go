package mme

import (
	"sync"
	"sync/atomic"
)

// GPUMemory reads a GPU's memory in bytes; *gpu.Inventory implements it
// with NVML.
type GPUMemory interface {
	Memory(index int) (used, total uint64, err error)
}

// ContainerGPUMemory is a GPUMemory that can also tell the container's own
// use of a GPU (NVML's per-process figures, matched to the container's
// processes), so that containers sharing a GPU each see their own. ok is
// false where it cannot tell; the Manager then uses the GPU's used memory.
// The Docker engine gives one over *gpu.Inventory (containers/multimodel.go).
type ContainerGPUMemory interface {
	GPUMemory
	ContainerMemory(index int) (used, total uint64, ok bool, err error)
}

// maxFootprints bounds the per-model footprints remembered.
const maxFootprints = 10_000

// maxFutileUnloads is how many unloads that freed nothing a load may cause
// ahead of itself before it is tried anyway (the container's 507 decides).
const maxFutileUnloads = 2

// gpuReading is one look at the container's GPUs, summed over them.
type gpuReading struct {
	device, total uint64 // every process's use, and the GPUs' memory
	own           uint64 // the container's own use; device where unknown
	perContainer  bool   // own is the container's, from its processes
}

// gpuAccount learns model footprints, keeps loads under the threshold and
// checks what unloads free. Its fields after mu are guarded by mu, which
// also serializes GPU loads and unloads so that each measured change is one
// model's; the atomics are read by reports without it.
type gpuAccount struct {
	mem       GPUMemory
	own       ContainerGPUMemory // mem, when it can tell the container's own use
	indexes   []int
	threshold float64

	mu         sync.Mutex
	footprints map[string]uint64
	sum        uint64
	// reuses: a load was seen to take memory that earlier unloads left
	// held (PyTorch's caching allocator does so), so held memory counts as
	// room for the container's next loads.
	reuses bool

	unreleased   atomic.Uint64 // bytes held after unloads beyond what the loaded models took
	leakyUnloads atomic.Int64  // unloads that freed less than half their model's footprint
	last         atomic.Pointer[gpuReading]
}

func newGPUAccount(mem GPUMemory, indexes []int, threshold float64) *gpuAccount {
	g := &gpuAccount{mem: mem, indexes: indexes, threshold: threshold, footprints: make(map[string]uint64)}
	if own, ok := mem.(ContainerGPUMemory); ok {
		g.own = own
	}
	return g
}

func (g *gpuAccount) enabled() bool { return g.mem != nil }

// read sums the memory of the container's GPUs.
func (g *gpuAccount) read() (gpuReading, error) {
	r := gpuReading{perContainer: g.own != nil}
	for _, i := range g.indexes {
		u, t, err := g.mem.Memory(i)
		if err != nil {
			return gpuReading{}, err
		}
		r.device += u
		r.total += t
		if r.perContainer {
			o, _, ok, err := g.own.ContainerMemory(i)
			if err != nil || !ok {
				r.perContainer = false
			}
			r.own += o
		}
	}
	if !r.perContainer {
		r.own = r.device
	}
	g.last.Store(&r)
	return r, nil
}

// need is how many bytes must be freed before a load expected to take
// expect bytes keeps the GPUs under the threshold; memory the container
// holds from unloads counts as room once it was seen to reuse it.
func (g *gpuAccount) need(r gpuReading, expect uint64) uint64 {
	if g.reuses {
		expect -= min(expect, g.unreleased.Load())
	}
	limit := uint64(g.threshold * float64(r.total))
	if r.total == 0 || r.device+expect <= limit {
		return 0
	}
	return r.device + expect - limit
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

// loaded records a load measured from before to after: the model's
// footprint, or, where the container took memory it held from unloads
// (grew less than half the expected footprint), less held memory.
func (g *gpuAccount) loaded(id string, before, after gpuReading) {
	grew := after.own - min(after.own, before.own)
	expect := g.expected(id)
	held := g.unreleased.Load()
	if held > 0 && expect > 0 && grew < expect/2 {
		g.reuses = true
		g.unreleased.Store(held - min(held, expect-grew))
		return
	}
	if held >= expect && expect > 0 && grew >= expect/2 {
		g.reuses = false // held memory is not reused: it is lost to the container
	}
	g.learn(id, grew)
}

// unloaded records an unload measured from before to after and reports
// whether it freed less than half of the model's footprint (a leak), and
// what it freed; an unload that freed about what was expected is the
// model's footprint, learned.
func (g *gpuAccount) unloaded(id string, before, after gpuReading) (freed uint64, leaky bool) {
	freed = before.own - min(before.own, after.own)
	fp := g.expected(id)
	held := g.unreleased.Load()
	switch {
	case fp > 0 && freed < fp/2:
		g.leakyUnloads.Add(1)
		g.unreleased.Add(fp - freed)
		return freed, true
	case freed > fp && held > 0: // it gave back memory held earlier
		g.unreleased.Store(held - min(held, freed-fp))
	default: // what the model took, measured from the other side
		g.learn(id, freed)
	}
	return freed, false
}

// learn records id's footprint f.
func (g *gpuAccount) learn(id string, f uint64) {
	if f == 0 {
		return
	}
	if old, ok := g.footprints[id]; ok {
		g.sum -= old
	} else if len(g.footprints) >= maxFootprints {
		return
	}
	g.footprints[id] = f
	g.sum += f
}

// reset forgets held memory: the container restarted.
func (g *gpuAccount) reset() {
	g.mu.Lock()
	g.reuses = false
	g.unreleased.Store(0)
	g.mu.Unlock()
}
