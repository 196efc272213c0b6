package docker

import (
	"reflect"
	"testing"

	"github.com/moby/moby/api/types/container"

	"github.com/mce-run/mce/containers/gpu"
)

func TestDeviceRequestsFor(t *testing.T) {
	devs := []gpu.Device{{Index: 0, UUID: "GPU-aaaa-0000"}, {Index: 1, UUID: "GPU-bbbb-1111"}}
	gpuCap := [][]string{{"gpu"}}
	tests := []struct {
		name string
		req  string
		mode gpu.Mode
		want []container.DeviceRequest
	}{
		{"none, runtime", "", gpu.ModeRuntime, nil},
		{"none, CDI", "", gpu.ModeCDI, nil},
		{"all, runtime", "all", gpu.ModeRuntime, []container.DeviceRequest{{Driver: "nvidia", Count: -1, Capabilities: gpuCap}}},
		{"count, runtime", "2", gpu.ModeRuntime, []container.DeviceRequest{{Driver: "nvidia", Count: 2, Capabilities: gpuCap}}},
		{"ids, runtime", "1,GPU-aaaa-0000", gpu.ModeRuntime, []container.DeviceRequest{{Driver: "nvidia", DeviceIDs: []string{"1", "GPU-aaaa-0000"}, Capabilities: gpuCap}}},
		{"all, CDI", "all", gpu.ModeCDI, []container.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"nvidia.com/gpu=all"}}}},
		{"count, CDI: the first indexes", "2", gpu.ModeCDI, []container.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"nvidia.com/gpu=0", "nvidia.com/gpu=1"}}}},
		{"index, CDI", "device=1", gpu.ModeCDI, []container.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"nvidia.com/gpu=1"}}}},
		{"UUID, CDI: its index", "GPU-BBBB-1111", gpu.ModeCDI, []container.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"nvidia.com/gpu=1"}}}},
		{"unknown UUID, CDI: as given", "GPU-cccc", gpu.ModeCDI, []container.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"nvidia.com/gpu=GPU-cccc"}}}},
		{"MIG partition, runtime: its UUID", "MIG-dddd-2222", gpu.ModeRuntime, []container.DeviceRequest{{Driver: "nvidia", DeviceIDs: []string{"MIG-dddd-2222"}, Capabilities: gpuCap}}},
		{"MIG partition, CDI: gpu:partition", "MIG-dddd-2222", gpu.ModeCDI, []container.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"nvidia.com/gpu=1:4"}}}},
	}
	migs := []gpu.MIGDevice{{Parent: 1, Index: 4, UUID: "MIG-dddd-2222", Profile: "3g.40gb"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := gpu.ParseRequest(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if got := DeviceRequestsFor(req, tt.mode, devs, migs...); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DeviceRequestsFor(%q, %q) = %+v, want %+v", tt.req, tt.mode, got, tt.want)
			}
		})
	}
}

func TestDeviceRequestsOfTheRuntime(t *testing.T) {
	gpuCaps := [][]string{{"gpu"}}
	tests := []struct {
		name string
		req  gpu.Request
		want []container.DeviceRequest
	}{
		{"none", gpu.Request{}, nil},
		{"all", gpu.Request{All: true}, []container.DeviceRequest{{Driver: "nvidia", Count: -1, Capabilities: gpuCaps}}},
		{"count", gpu.Request{Count: 2}, []container.DeviceRequest{{Driver: "nvidia", Count: 2, Capabilities: gpuCaps}}},
		{"ids", gpu.Request{DeviceIDs: []string{"0", "GPU-5a3d1c2e-0f4b-4c1a-9e8d-1234567890ab"}}, []container.DeviceRequest{{Driver: "nvidia", DeviceIDs: []string{"0", "GPU-5a3d1c2e-0f4b-4c1a-9e8d-1234567890ab"}, Capabilities: gpuCaps}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DeviceRequestsFor(tt.req, gpu.ModeRuntime, nil)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DeviceRequests() = %+v, want %+v", got, tt.want)
			}
		})
	}

	t.Run("ids are copied", func(t *testing.T) {
		req := gpu.Request{DeviceIDs: []string{"0", "1"}}
		drs := DeviceRequestsFor(req, gpu.ModeRuntime, nil)
		drs[0].DeviceIDs[0] = "9"
		if req.DeviceIDs[0] != "0" {
			t.Errorf("changing the DeviceRequest changed the Request: %v", req.DeviceIDs)
		}
	})
}
