package docker

import (
	"context"
	"strconv"

	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/gpu"
)

var _ containers.CopyPlacer = (*Engine)(nil)

// InstanceCapacity is the engine's machine, which every instance of a
// variant stands for in the placement of inference-component copies.
func (e *Engine) InstanceCapacity(ctx context.Context) (containers.InstanceCapacity, error) {
	return e.Runtime.Capacity(ctx)
}

// packer packs copies on the engine's machine (placement.go).
func (e *Engine) packer() Packer {
	return Packer{Capacity: e.InstanceCapacity, Log: e.Runtime.log}
}

// PlaceCopies implements containers.CopyPlacer: packed on the machine's
// instances, GPUs pinned by device ID.
func (e *Engine) PlaceCopies(ctx context.Context, req containers.CopyRequest) ([]containers.CopyPlace, string, error) {
	return e.packer().PlaceCopies(ctx, req)
}

// CopyFits implements containers.CopyPlacer: what an empty instance, the
// machine, lacks for one copy.
func (e *Engine) CopyFits(ctx context.Context, v containers.CopyVariant, n containers.CopyNeeds) (string, error) {
	return e.packer().CopyFits(ctx, v, n)
}

// KeepsCopy implements containers.CopyPlacer: a copy on one of the
// variant's instances.
func (e *Engine) KeepsCopy(v containers.CopyVariant, p containers.CopyPlace) bool {
	return e.packer().KeepsCopy(v, p)
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
	c.GPUs, c.Partitions = machineGPUs(inv)
	return c, nil
}

// gpuLister is what machineGPUs reads: gpu.Inventory.
type gpuLister interface {
	Devices() ([]gpu.Device, error)
	MIGDevices() ([]gpu.MIGDevice, error)
}

// machineGPUs lists the GPUs copies may take whole, by index, and the MIG
// partitions they may occupy, by UUID with SageMaker's profile names. A GPU
// in MIG mode is not taken whole: CUDA sees only its partitions. None of
// either where NVML is unavailable.
func machineGPUs(inv gpuLister) (whole []string, parts []containers.Partition) {
	devs, err := inv.Devices()
	if err != nil {
		return nil, nil
	}
	migs, err := inv.MIGDevices()
	if err != nil {
		migs = nil // listed whole as before; a partition asked for is then short
	}
	carved := map[int]bool{}
	for _, m := range migs {
		carved[m.Parent] = true
		parts = append(parts, containers.Partition{ID: m.UUID, Profile: containers.SageMakerProfile(m.Profile), GPU: m.Parent})
	}
	for _, d := range devs {
		if !carved[d.Index] {
			whole = append(whole, strconv.Itoa(d.Index))
		}
	}
	return whole, parts
}
