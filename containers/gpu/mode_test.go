package gpu

import (
	"reflect"
	"testing"
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

func TestCDIDevices(t *testing.T) {
	devs := []Device{{Index: 0, UUID: "GPU-aaaa-0000"}, {Index: 1, UUID: "GPU-bbbb-1111"}}
	tests := []struct {
		req  string
		want []string
	}{
		{"", nil},
		{"all", []string{"nvidia.com/gpu=all"}},
		{"2", []string{"nvidia.com/gpu=0", "nvidia.com/gpu=1"}}, // the first indexes
		{"device=1", []string{"nvidia.com/gpu=1"}},
		{"GPU-BBBB-1111", []string{"nvidia.com/gpu=1"}},   // a UUID: its index
		{"GPU-cccc", []string{"nvidia.com/gpu=GPU-cccc"}}, // unknown: as given
		{"MIG-dddd-2222", []string{"nvidia.com/gpu=1:3"}}, // a MIG UUID: its "gpu:partition"
		{"MIG-eeee", []string{"nvidia.com/gpu=MIG-eeee"}}, // unknown: as given
	}
	migs := []MIGDevice{{Parent: 1, Index: 0, UUID: "MIG-ffff"}, {Parent: 1, Index: 3, UUID: "MIG-DDDD-2222"}}
	for _, tt := range tests {
		req, err := ParseRequest(tt.req)
		if err != nil {
			t.Fatal(err)
		}
		if got := req.CDIDevices(devs, migs...); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("CDIDevices(%q) = %q, want %q", tt.req, got, tt.want)
		}
	}
}
