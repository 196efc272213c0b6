package docker

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers/gpu"
)

// apiVersion stands in for the engine client, which says the API version
// it negotiated.
type apiVersion string

func (v apiVersion) ClientVersion() string { return string(v) }

// TestGPUHostConfig builds a container's create options on engines that
// report, in /info, the NVIDIA runtime, CDI, both or neither, and checks
// the HostConfig's DeviceRequests and the pre-flight's verdict.
func TestGPUHostConfig(t *testing.T) {
	cdiDirs := []string{"/etc/cdi", "/var/run/cdi"}
	nvidiaRuntime := map[string]system.RuntimeWithStatus{"runc": {}, "nvidia": {}}
	gpuCap := [][]string{{"gpu"}}
	tests := []struct {
		name    string
		info    system.Info
		version string
		gpus    string
		want    []container.DeviceRequest
		wantErr error
	}{
		{
			name: "Docker 20.10 with the NVIDIA runtime", version: "1.41", gpus: "all",
			info: system.Info{Runtimes: nvidiaRuntime, DefaultRuntime: "runc"},
			want: []container.DeviceRequest{{Driver: "nvidia", Count: -1, Capabilities: gpuCap}},
		},
		{
			name: "Docker 25 with CDI on and no runtime", version: "1.44", gpus: "all",
			info: system.Info{Runtimes: map[string]system.RuntimeWithStatus{"runc": {}}, CDISpecDirs: cdiDirs},
			want: []container.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"nvidia.com/gpu=all"}}},
		},
		{
			name: "Docker 28.3 listing NVIDIA CDI devices, runtime too: CDI", version: "1.51", gpus: "2",
			info: system.Info{Runtimes: nvidiaRuntime, CDISpecDirs: cdiDirs, DiscoveredDevices: []system.DeviceInfo{
				{Source: "cdi", ID: "nvidia.com/gpu=0"}, {Source: "cdi", ID: "nvidia.com/gpu=1"}, {Source: "cdi", ID: "nvidia.com/gpu=all"}}},
			want: []container.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"nvidia.com/gpu=0", "nvidia.com/gpu=1"}}},
		},
		{
			name: "Docker 25 with CDI folders reported but API 1.43 negotiated", version: "1.43", gpus: "device=1",
			info:    system.Info{Runtimes: map[string]system.RuntimeWithStatus{"runc": {}}, CDISpecDirs: cdiDirs},
			want:    []container.DeviceRequest{{Driver: "nvidia", DeviceIDs: []string{"1"}, Capabilities: gpuCap}},
			wantErr: gpu.ErrNoRuntime,
		},
		{
			name: "Docker 28.3, CDI on, no NVIDIA spec", version: "1.51", gpus: "all",
			info:    system.Info{Runtimes: map[string]system.RuntimeWithStatus{"runc": {}}, CDISpecDirs: cdiDirs},
			want:    []container.DeviceRequest{{Driver: "nvidia", Count: -1, Capabilities: gpuCap}},
			wantErr: gpu.ErrNoCDISpec,
		},
		{
			name: "no GPU asked", version: "1.51", gpus: "",
			info: system.Info{CDISpecDirs: cdiDirs},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := gpu.ParseRequest(tt.gpus)
			if err != nil {
				t.Fatal(err)
			}
			ri := GPURuntimeInfo(client.SystemInfoResult{Info: tt.info}, apiVersion(tt.version))
			rt := &Runtime{opts: Options{Instance: "t"}, log: zerolog.Nop(), rtInfo: ri}
			d := &Deployment{rt: rt, endpoint: "ep", gen: 1, netName: "mce-t-ep"}
			v := VariantSpec{Name: "v1"}
			cs := ContainerSpec{Hostname: "gpu", Image: "img", GPUs: req}
			opts, _, err := d.createOptions(v, 0, 0, cs, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := opts.HostConfig.DeviceRequests; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DeviceRequests = %+v, want %+v", got, tt.want)
			}
			// The pre-flight's verdict on this engine, with two GPUs present.
			devs := []gpu.Device{{Index: 0, UUID: "GPU-0"}, {Index: 1, UUID: "GPU-1"}}
			cerr := gpu.Check(req, devs, nil, *ri)
			switch {
			case tt.wantErr == nil && cerr != nil:
				t.Errorf("Check = %v, want nil", cerr)
			case tt.wantErr != nil && !errors.Is(cerr, tt.wantErr):
				t.Errorf("Check = %v, want %v", cerr, tt.wantErr)
			}
			if tt.wantErr != nil {
				fix := GPUFix(cerr)
				for _, s := range []string{"nvidia-ctk cdi generate", "nvidia-ctk runtime configure"} {
					if !strings.Contains(fix, s) {
						t.Errorf("fix %q does not say %q", fix, s)
					}
				}
			}
		})
	}
}
