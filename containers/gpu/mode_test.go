package gpu

import (
	"reflect"
	"testing"

	"github.com/moby/moby/api/types/container"
)

func TestMode(t *testing.T) {
	dirs := []string{"/etc/cdi", "/var/run/cdi"}
	nvidiaCDI := []string{"nvidia.com/gpu=0", "nvidia.com/gpu=1", "nvidia.com/gpu=all"}
	tests := []struct {
		name string
		rt   RuntimeInfo
		want Mode
	}{
		{"Docker 20.10, no toolkit", RuntimeInfo{Runtimes: []string{"runc", "io.containerd.runc.v2"}, DefaultRuntime: "runc", APIVersion: "1.41"}, ModeNone},
		{"Docker 20.10 with the nvidia runtime", RuntimeInfo{Runtimes: []string{"runc", "nvidia"}, APIVersion: "1.41"}, ModeRuntime},
		{"nvidia is the default runtime", RuntimeInfo{DefaultRuntime: "nvidia"}, ModeRuntime},
		{"Docker 25, CDI off, nvidia runtime", RuntimeInfo{Runtimes: []string{"runc", "nvidia"}, APIVersion: "1.44"}, ModeRuntime},
		{"Docker 25, CDI on, no runtime (devices not listed before 1.50)", RuntimeInfo{Runtimes: []string{"runc"}, CDISpecDirs: dirs, APIVersion: "1.44"}, ModeCDI},
		{"Docker 25, CDI on and nvidia runtime: the runtime (spec unknown)", RuntimeInfo{Runtimes: []string{"runc", "nvidia"}, CDISpecDirs: dirs, APIVersion: "1.45"}, ModeRuntime},
		{"Docker 28.3, NVIDIA CDI devices listed, nvidia runtime too", RuntimeInfo{Runtimes: []string{"runc", "nvidia"}, CDISpecDirs: dirs, CDIDevices: nvidiaCDI, APIVersion: "1.51"}, ModeCDI},
		{"Docker 28.3, CDI on, no NVIDIA device, nvidia runtime", RuntimeInfo{Runtimes: []string{"runc", "nvidia"}, CDISpecDirs: dirs, APIVersion: "1.51"}, ModeRuntime},
		{"Docker 28.3, CDI on, no NVIDIA device, no runtime", RuntimeInfo{Runtimes: []string{"runc"}, CDISpecDirs: dirs, CDIDevices: []string{"vendor.com/fpga=0"}, APIVersion: "1.51"}, ModeNone},
		{"CDI folders reported at API 1.43", RuntimeInfo{CDISpecDirs: dirs, APIVersion: "1.43"}, ModeNone},
		{"CDI folders, API version unknown", RuntimeInfo{CDISpecDirs: dirs}, ModeCDI},
		{"API 1.100 compares as a number", RuntimeInfo{CDISpecDirs: dirs, CDIDevices: nvidiaCDI, APIVersion: "1.100"}, ModeCDI},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rt.Mode(); got != tt.want {
				t.Errorf("Mode() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDeviceRequestsFor(t *testing.T) {
	devs := []Device{{Index: 0, UUID: "GPU-aaaa-0000"}, {Index: 1, UUID: "GPU-bbbb-1111"}}
	gpuCap := [][]string{{"gpu"}}
	tests := []struct {
		name string
		req  string
		mode Mode
		want []container.DeviceRequest
	}{
		{"none, runtime", "", ModeRuntime, nil},
		{"none, CDI", "", ModeCDI, nil},
		{"all, runtime", "all", ModeRuntime, []container.DeviceRequest{{Driver: "nvidia", Count: -1, Capabilities: gpuCap}}},
		{"count, runtime", "2", ModeRuntime, []container.DeviceRequest{{Driver: "nvidia", Count: 2, Capabilities: gpuCap}}},
		{"ids, runtime", "1,GPU-aaaa-0000", ModeRuntime, []container.DeviceRequest{{Driver: "nvidia", DeviceIDs: []string{"1", "GPU-aaaa-0000"}, Capabilities: gpuCap}}},
		{"all, CDI", "all", ModeCDI, []container.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"nvidia.com/gpu=all"}}}},
		{"count, CDI: the first indexes", "2", ModeCDI, []container.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"nvidia.com/gpu=0", "nvidia.com/gpu=1"}}}},
		{"index, CDI", "device=1", ModeCDI, []container.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"nvidia.com/gpu=1"}}}},
		{"UUID, CDI: its index", "GPU-BBBB-1111", ModeCDI, []container.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"nvidia.com/gpu=1"}}}},
		{"unknown UUID, CDI: as given", "GPU-cccc", ModeCDI, []container.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"nvidia.com/gpu=GPU-cccc"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := ParseRequest(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if got := req.DeviceRequestsFor(tt.mode, devs); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DeviceRequestsFor(%q, %q) = %+v, want %+v", tt.req, tt.mode, got, tt.want)
			}
		})
	}
}
