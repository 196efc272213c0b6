//go:build cgo

package gpu

import (
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Device is one GPU as NVML reports it. Memory is in bytes, read when the
// Device was listed; MemoryUsed counts memory reserved by the driver, so it
// is the conservative figure for load decisions. Memory fields are zero on
// GPUs whose driver does not report memory.
type Device struct {
	Index       int
	UUID        string
	Name        string
	MemoryTotal uint64
	MemoryUsed  uint64
	MemoryFree  uint64
}

// Inventory lists the host's GPUs through NVML. NVML is initialised once, on
// first use; if that fails every call returns the same error wrapping
// ErrNoDriver. An Inventory is safe for concurrent use; Close waits for calls
// in flight.
type Inventory struct {
	lib nvml.Interface

	mu          sync.RWMutex // read: an NVML call in flight; write: Close
	closed      bool
	once        sync.Once
	initialised bool // Init succeeded; written once, inside once
	initErr     error
}

// NewInventory returns an Inventory over lib. A nil lib means the system's
// libnvidia-ml, opened only when first needed, so this never fails on hosts
// without a driver.
func NewInventory(lib nvml.Interface) *Inventory {
	if lib == nil {
		lib = nvml.New()
	}
	return &Inventory{lib: lib}
}

// begin takes the read lock and makes sure NVML is initialised. On success
// the caller must call inv.mu.RUnlock.
func (inv *Inventory) begin() error {
	inv.mu.RLock()
	if inv.closed {
		inv.mu.RUnlock()
		return ErrClosed
	}
	inv.once.Do(func() {
		if ret := inv.lib.Init(); ret != nvml.SUCCESS {
			inv.initErr = fmt.Errorf("%w: %w", ErrNoDriver, ret)
			return
		}
		inv.initialised = true
	})
	if inv.initErr != nil {
		inv.mu.RUnlock()
		return inv.initErr
	}
	return nil
}

// Devices lists every GPU with its current memory, ordered by index. It
// returns an error wrapping ErrNoDriver (and the nvml.Return) when NVML is
// missing or fails to initialise, and an empty list when the driver sees no
// GPU.
func (inv *Inventory) Devices() ([]Device, error) {
	if err := inv.begin(); err != nil {
		return nil, err
	}
	defer inv.mu.RUnlock()

	n, ret := inv.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("count GPUs: %w", ret)
	}
	devs := make([]Device, 0, n)
	for i := range n {
		d, err := inv.device(i)
		if err != nil {
			return nil, err
		}
		devs = append(devs, d)
	}
	return devs, nil
}

func (inv *Inventory) device(i int) (Device, error) {
	h, ret := inv.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return Device{}, fmt.Errorf("GPU %d: get handle: %w", i, ret)
	}
	uuid, ret := h.GetUUID()
	if ret != nvml.SUCCESS {
		return Device{}, fmt.Errorf("GPU %d: read UUID: %w", i, ret)
	}
	name, ret := h.GetName()
	if ret != nvml.SUCCESS {
		return Device{}, fmt.Errorf("GPU %d: read name: %w", i, ret)
	}
	d := Device{Index: i, UUID: uuid, Name: name}
	mem, ret := h.GetMemoryInfo()
	switch ret {
	case nvml.SUCCESS:
		d.MemoryTotal, d.MemoryUsed, d.MemoryFree = mem.Total, mem.Used, mem.Free
	case nvml.ERROR_NOT_SUPPORTED:
		// Listed without memory figures.
	default:
		return Device{}, fmt.Errorf("GPU %d: read memory: %w", i, ret)
	}
	return d, nil
}

// MIGDevices lists the MIG partitions of every GPU whose MIG mode is on,
// ordered by GPU and partition index; a GPU without MIG support, or with MIG
// off, has none. Errors are Devices'.
func (inv *Inventory) MIGDevices() ([]MIGDevice, error) {
	if err := inv.begin(); err != nil {
		return nil, err
	}
	defer inv.mu.RUnlock()
	n, ret := inv.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("count GPUs: %w", ret)
	}
	var out []MIGDevice
	for i := range n {
		h, ret := inv.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU %d: get handle: %w", i, ret)
		}
		current, _, ret := h.GetMigMode()
		switch {
		case ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.SUCCESS && current != nvml.DEVICE_MIG_ENABLE:
			continue
		case ret != nvml.SUCCESS:
			return nil, fmt.Errorf("GPU %d: read MIG mode: %w", i, ret)
		}
		slots, ret := h.GetMaxMigDeviceCount()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU %d: count MIG devices: %w", i, ret)
		}
		for j := range slots {
			m, ret := h.GetMigDeviceHandleByIndex(j)
			if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
				continue // a slot without a partition
			}
			if ret != nvml.SUCCESS {
				return nil, fmt.Errorf("GPU %d MIG device %d: get handle: %w", i, j, ret)
			}
			uuid, ret := m.GetUUID()
			if ret != nvml.SUCCESS {
				return nil, fmt.Errorf("GPU %d MIG device %d: read UUID: %w", i, j, ret)
			}
			md := MIGDevice{Parent: i, Index: j, UUID: uuid}
			if name, ret := m.GetName(); ret == nvml.SUCCESS {
				md.Profile = migProfile(name)
			}
			if mem, ret := m.GetMemoryInfo(); ret == nvml.SUCCESS {
				md.MemoryTotal = mem.Total
			}
			out = append(out, md)
		}
	}
	return out, nil
}

// Memory reads the used and total memory, in bytes, of the GPU at index. An
// index the driver does not know gives an error wrapping ErrUnknownDevice.
func (inv *Inventory) Memory(index int) (used, total uint64, err error) {
	if index < 0 {
		return 0, 0, fmt.Errorf("%w %d", ErrUnknownDevice, index)
	}
	if err := inv.begin(); err != nil {
		return 0, 0, err
	}
	defer inv.mu.RUnlock()

	h, ret := inv.lib.DeviceGetHandleByIndex(index)
	switch ret {
	case nvml.SUCCESS:
	case nvml.ERROR_INVALID_ARGUMENT, nvml.ERROR_NOT_FOUND:
		return 0, 0, fmt.Errorf("%w %d: %w", ErrUnknownDevice, index, ret)
	default:
		return 0, 0, fmt.Errorf("GPU %d: get handle: %w", index, ret)
	}
	mem, ret := h.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return 0, 0, fmt.Errorf("GPU %d: read memory: %w", index, ret)
	}
	return mem.Used, mem.Total, nil
}

// ContainerMemory sums the GPU memory that NVML lists for the compute
// processes on the GPU at index that owner says belong to one container, so
// that containers sharing a GPU each see their own use; total is the GPU's.
// ok is false when NVML cannot tell: it does not list processes
// (ERROR_NOT_SUPPORTED, as on some virtualised GPUs), it gives no per-process
// figure, or owner can place none of the processes it lists (mce runs in
// another PID namespace). Callers then fall back to the GPU's used memory
// ([Inventory.Memory]). A container with no process on the GPU uses 0.
func (inv *Inventory) ContainerMemory(index int, owner ProcessOwner) (used, total uint64, ok bool, err error) {
	if index < 0 {
		return 0, 0, false, fmt.Errorf("%w %d", ErrUnknownDevice, index)
	}
	if err := inv.begin(); err != nil {
		return 0, 0, false, err
	}
	defer inv.mu.RUnlock()
	h, ret := inv.lib.DeviceGetHandleByIndex(index)
	switch ret {
	case nvml.SUCCESS:
	case nvml.ERROR_INVALID_ARGUMENT, nvml.ERROR_NOT_FOUND:
		return 0, 0, false, fmt.Errorf("%w %d: %w", ErrUnknownDevice, index, ret)
	default:
		return 0, 0, false, fmt.Errorf("GPU %d: get handle: %w", index, ret)
	}
	mem, ret := h.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return 0, 0, false, fmt.Errorf("GPU %d: read memory: %w", index, ret)
	}
	procs, ret := h.GetComputeRunningProcesses()
	switch ret {
	case nvml.SUCCESS:
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NO_PERMISSION:
		return 0, mem.Total, false, nil
	default:
		return 0, 0, false, fmt.Errorf("GPU %d: list processes: %w", index, ret)
	}
	placed := 0
	for _, p := range procs {
		if p.UsedGpuMemory == notAvailable {
			return 0, mem.Total, false, nil
		}
		owned, known := owner(p.Pid)
		if !known {
			continue
		}
		placed++
		if owned {
			used += p.UsedGpuMemory
		}
	}
	if len(procs) > 0 && placed == 0 {
		return 0, mem.Total, false, nil
	}
	return used, mem.Total, true, nil
}

// notAvailable is NVML_VALUE_NOT_AVAILABLE as an unsigned long long: NVML
// gives it for a process's memory where it cannot read it.
const notAvailable = ^uint64(0)

// Close shuts NVML down if this Inventory initialised it, after calls in
// flight return. Later calls return ErrClosed; Close itself may be called
// more than once.
func (inv *Inventory) Close() error {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.closed {
		return nil
	}
	inv.closed = true
	if !inv.initialised {
		return nil
	}
	if ret := inv.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("shut down NVML: %w", ret)
	}
	return nil
}

// Utilization reads the GPU's busy share and its memory's used share, each
// 0–100, as SageMaker's GPUUtilization and GPUMemoryUtilization count them
// per GPU.
func (inv *Inventory) Utilization(index int) (gpuPercent, memoryPercent float64, err error) {
	if index < 0 {
		return 0, 0, fmt.Errorf("%w %d", ErrUnknownDevice, index)
	}
	if err := inv.begin(); err != nil {
		return 0, 0, err
	}
	defer inv.mu.RUnlock()
	h, ret := inv.lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		return 0, 0, fmt.Errorf("%w %d: %w", ErrUnknownDevice, index, ret)
	}
	u, ret := h.GetUtilizationRates()
	if ret != nvml.SUCCESS {
		return 0, 0, fmt.Errorf("GPU %d: read utilization: %w", index, ret)
	}
	mem, ret := h.GetMemoryInfo()
	if ret != nvml.SUCCESS || mem.Total == 0 {
		return float64(u.Gpu), 0, nil
	}
	return float64(u.Gpu), 100 * float64(mem.Used) / float64(mem.Total), nil
}
