//go:build cgo

package gpu

import (
	"reflect"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// MIGDevices lists the partitions of GPUs in MIG mode only, skipping empty
// slots, with the profile read from NVML's name and each partition's CDI
// name.
func TestMIGDevices(t *testing.T) {
	part := func(uuid, name string, mem uint64) *mock.Device {
		return &mock.Device{
			GetUUIDFunc:       func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
			GetNameFunc:       func() (string, nvml.Return) { return name, nvml.SUCCESS },
			GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: mem}, nvml.SUCCESS },
		}
	}
	parts := map[int]*mock.Device{
		0: part("MIG-aaaa", "NVIDIA H100 80GB HBM3 MIG 3g.40gb", 40*gib),
		2: part("MIG-bbbb", "NVIDIA H100 80GB HBM3 MIG 1g.10gb+me", 10*gib),
	}
	migGPU := &mock.Device{
		GetMigModeFunc:           func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS },
		GetMaxMigDeviceCountFunc: func() (int, nvml.Return) { return 7, nvml.SUCCESS },
		GetMigDeviceHandleByIndexFunc: func(j int) (nvml.Device, nvml.Return) {
			if d, ok := parts[j]; ok {
				return d, nvml.SUCCESS
			}
			return nil, nvml.ERROR_NOT_FOUND
		},
	}
	plainGPU := &mock.Device{GetMigModeFunc: func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_DISABLE, nvml.SUCCESS }}
	oldGPU := &mock.Device{GetMigModeFunc: func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }}
	devs := []nvml.Device{plainGPU, migGPU, oldGPU}
	lib := &mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			return devs[i], nvml.SUCCESS
		},
	}
	inv := NewInventory(lib)
	defer inv.Close()
	got, err := inv.MIGDevices()
	if err != nil {
		t.Fatal(err)
	}
	want := []MIGDevice{
		{Parent: 1, Index: 0, UUID: "MIG-aaaa", Profile: "3g.40gb", MemoryTotal: 40 * gib},
		{Parent: 1, Index: 2, UUID: "MIG-bbbb", Profile: "1g.10gb+me", MemoryTotal: 10 * gib},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("MIGDevices = %+v\nwant %+v", got, want)
	}
	if got[1].CDIName() != "nvidia.com/gpu=1:2" {
		t.Errorf("CDI name %q", got[1].CDIName())
	}
	for name, want := range map[string]string{"NVIDIA A100-SXM4-40GB MIG 3g.20gb": "3g.20gb", "NVIDIA H100": "", "MIG ": "", "x MIG 1g.5gb extra": ""} {
		if p := migProfile(name); p != want {
			t.Errorf("migProfile(%q) = %q, want %q", name, p, want)
		}
	}
}
