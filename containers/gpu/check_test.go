//go:build cgo

package gpu

import (
	"errors"
	"fmt"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func TestCheck(t *testing.T) {
	two := []Device{newFake(0).want(0), newFake(1).want(1)}
	one := two[:1]
	nvidia := RuntimeInfo{Runtimes: []string{"runc", "nvidia"}, DefaultRuntime: "runc"}
	noNVIDIA := RuntimeInfo{Runtimes: []string{"runc", "io.containerd.runc.v2"}, DefaultRuntime: "runc"}
	cdiDirs := []string{"/etc/cdi", "/var/run/cdi"}
	cdiListed := RuntimeInfo{Runtimes: []string{"runc"}, CDISpecDirs: cdiDirs, CDIDevices: []string{"nvidia.com/gpu=0", "nvidia.com/gpu=all"}, APIVersion: "1.51"}
	cdiUnlisted := RuntimeInfo{Runtimes: []string{"runc"}, CDISpecDirs: cdiDirs, APIVersion: "1.44"}
	cdiNoSpec := RuntimeInfo{Runtimes: []string{"runc"}, CDISpecDirs: cdiDirs, CDIDevices: []string{"vendor.com/fpga=0"}, APIVersion: "1.51"}
	noDriver := fmt.Errorf("%w: %w", ErrNoDriver, nvml.ERROR_LIBRARY_NOT_FOUND)
	listed := "this host has 2 GPUs: 0 " + two[0].UUID + " (NVIDIA H100 80GB HBM3), 1 " + two[1].UUID + " (NVIDIA H100 80GB HBM3)"

	tests := []struct {
		name    string
		req     Request
		devs    []Device
		devErr  error
		rt      RuntimeInfo
		migs    []MIGDevice
		wantIs  error
		wantMsg string
	}{
		{name: "a MIG partition NVML lists", req: Request{DeviceIDs: []string{migA}}, devs: two, rt: nvidia, migs: []MIGDevice{{Parent: 1, Index: 2, UUID: migA, Profile: "3g.40gb"}}},
		{
			name: "a MIG partition NVML does not list", req: Request{DeviceIDs: []string{"MIG-0000"}}, devs: two, rt: nvidia,
			migs:    []MIGDevice{{Parent: 1, Index: 2, UUID: migA, Profile: "3g.40gb"}, {Parent: 1, Index: 3, UUID: "MIG-1111"}},
			wantIs:  ErrUnknownDevice,
			wantMsg: "GPU requested (device=MIG-0000) but unknown GPU MIG-0000: " + listed + "; its MIG partitions: 1:2 " + migA + " (3g.40gb), 1:3 MIG-1111 (profile unknown)",
		},
		{
			name: "a MIG partition on GPUs without MIG", req: Request{DeviceIDs: []string{migA}}, devs: two, rt: nvidia,
			wantIs:  ErrUnknownDevice,
			wantMsg: "GPU requested (device=" + migA + ") but unknown GPU " + migA + ": " + listed + "; no GPU has MIG partitions (MIG mode off, or none created)",
		},
		{name: "no request, no driver, no runtime", req: Request{}, devErr: noDriver, rt: RuntimeInfo{}},
		{name: "all", req: Request{All: true}, devs: two, rt: nvidia},
		{name: "count fits", req: Request{Count: 2}, devs: two, rt: nvidia},
		{name: "ids by index and uuid", req: Request{DeviceIDs: []string{"1", two[0].UUID}}, devs: two, rt: nvidia},
		{name: "uuid in other case", req: Request{DeviceIDs: []string{"gpu-00000001-0000-0000-0000-000000000000"}}, devs: two, rt: nvidia},
		{name: "nvidia is the default runtime", req: Request{All: true}, devs: one, rt: RuntimeInfo{Runtimes: []string{"runc"}, DefaultRuntime: "nvidia"}},
		{name: "nvidia-cdi runtime", req: Request{All: true}, devs: one, rt: RuntimeInfo{Runtimes: []string{"runc", "nvidia-cdi"}}},
		{
			name: "no driver", req: Request{All: true}, devErr: noDriver, rt: nvidia,
			wantIs:  ErrNoDriver,
			wantMsg: "GPU requested (all) but no NVIDIA driver found on this host: ERROR_LIBRARY_NOT_FOUND",
		},
		{
			name: "no driver beats no runtime", req: Request{Count: 1}, devErr: noDriver, rt: noNVIDIA,
			wantIs:  ErrNoDriver,
			wantMsg: "GPU requested (count=1) but no NVIDIA driver found on this host: ERROR_LIBRARY_NOT_FOUND",
		},
		{
			name: "listing failed", req: Request{All: true}, devErr: fmt.Errorf("count GPUs: %w", nvml.ERROR_UNKNOWN), rt: nvidia,
			wantIs:  nvml.ERROR_UNKNOWN,
			wantMsg: "GPU requested (all) but the GPUs could not be listed: count GPUs: ERROR_UNKNOWN",
		},
		{
			name: "no GPU", req: Request{All: true}, devs: []Device{}, rt: nvidia,
			wantIs:  ErrNoGPU,
			wantMsg: "GPU requested (all) but no GPU found on this host",
		},
		{
			name: "too many", req: Request{Count: 3}, devs: two, rt: nvidia,
			wantIs:  ErrTooMany,
			wantMsg: "GPU requested (count=3) but not enough GPUs: " + listed,
		},
		{
			name: "too many on one GPU", req: Request{Count: 2}, devs: one, rt: nvidia,
			wantIs:  ErrTooMany,
			wantMsg: "GPU requested (count=2) but not enough GPUs: this host has 1 GPU: 0 " + one[0].UUID + " (NVIDIA H100 80GB HBM3)",
		},
		{
			name: "unknown index", req: Request{DeviceIDs: []string{"0", "2"}}, devs: two, rt: nvidia,
			wantIs:  ErrUnknownDevice,
			wantMsg: "GPU requested (device=0,2) but unknown GPU 2: " + listed,
		},
		{
			name: "unknown uuid and index", req: Request{DeviceIDs: []string{uuidA, "1", "7"}}, devs: two, rt: nvidia,
			wantIs:  ErrUnknownDevice,
			wantMsg: "GPU requested (device=" + uuidA + ",1,7) but unknown GPU " + uuidA + ", 7: " + listed,
		},
		{
			name: "no runtime", req: Request{All: true}, devs: two, rt: RuntimeInfo{Runtimes: []string{"runc"}, DefaultRuntime: "runc"},
			wantIs:  ErrNoRuntime,
			wantMsg: "GPU requested (all) but the Docker engine has no NVIDIA container runtime (runtimes: runc) and CDI is off (no CDI spec folders); install nvidia-container-toolkit",
		},
		{
			name: "no runtime, several listed sorted", req: Request{DeviceIDs: []string{"0"}}, devs: two, rt: noNVIDIA,
			wantIs:  ErrNoRuntime,
			wantMsg: "GPU requested (device=0) but the Docker engine has no NVIDIA container runtime (runtimes: io.containerd.runc.v2, runc) and CDI is off (no CDI spec folders); install nvidia-container-toolkit",
		},
		{
			name: "no runtime, none listed", req: Request{All: true}, devs: two, rt: RuntimeInfo{},
			wantIs:  ErrNoRuntime,
			wantMsg: "GPU requested (all) but the Docker engine has no NVIDIA container runtime (runtimes: none) and CDI is off (no CDI spec folders); install nvidia-container-toolkit",
		},
		{
			name: "runtime merely containing nvidia", req: Request{All: true}, devs: two, rt: RuntimeInfo{Runtimes: []string{"not-nvidia"}},
			wantIs:  ErrNoRuntime,
			wantMsg: "GPU requested (all) but the Docker engine has no NVIDIA container runtime (runtimes: not-nvidia) and CDI is off (no CDI spec folders); install nvidia-container-toolkit",
		},
		{name: "CDI only, devices listed", req: Request{All: true}, devs: two, rt: cdiListed},
		{name: "CDI only, API 1.44 cannot list devices", req: Request{All: true}, devs: two, rt: cdiUnlisted},
		{
			name: "CDI on, no NVIDIA spec", req: Request{All: true}, devs: two, rt: cdiNoSpec,
			wantIs:  ErrNoCDISpec,
			wantMsg: "GPU requested (all) but the Docker engine has no NVIDIA container runtime (runtimes: runc) and no NVIDIA CDI device (CDI spec folders: /etc/cdi, /var/run/cdi; CDI devices: vendor.com/fpga=0)",
		},
		{
			name: "CDI folders on an engine too old for CDI", req: Request{All: true}, devs: two,
			rt:     RuntimeInfo{Runtimes: []string{"runc"}, CDISpecDirs: []string{"/etc/cdi"}, APIVersion: "1.43"},
			wantIs: ErrNoRuntime,
		},
		{name: "malformed request", req: Request{All: true, Count: 2}, devs: two, rt: nvidia, wantIs: ErrInvalidRequest},
		{name: "negative count", req: Request{Count: -1}, devs: two, rt: nvidia, wantIs: ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.req, tt.devs, tt.devErr, tt.rt, tt.migs...)
			if tt.wantIs == nil {
				if err != nil {
					t.Fatalf("Check() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.wantIs) {
				t.Fatalf("Check() = %v, want error wrapping %v", err, tt.wantIs)
			}
			if tt.wantMsg != "" && err.Error() != tt.wantMsg {
				t.Errorf("Check() message\n got %q\nwant %q", err, tt.wantMsg)
			}
		})
	}
}

// TestCheckWithInventory runs Check on what Inventory reports from the mock.
func TestCheckWithInventory(t *testing.T) {
	noLib := fakeLib()
	noLib.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	rt := RuntimeInfo{Runtimes: []string{"nvidia", "runc"}}
	tests := []struct {
		name   string
		lib    nvml.Interface
		req    string
		wantIs error
	}{
		{"no library", noLib, "all", ErrNoDriver},
		{"no GPU", fakeLib(), "all", ErrNoGPU},
		{"four GPUs, all", fakeLib(fakes(4)...), "all", nil},
		{"four GPUs, 0 and 3", fakeLib(fakes(4)...), "0,3", nil},
		{"four GPUs, count 5", fakeLib(fakes(4)...), "5", ErrTooMany},
		{"four GPUs, index 4", fakeLib(fakes(4)...), "device=4", ErrUnknownDevice},
		{"no library, no request", noLib, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := ParseRequest(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			inv := NewInventory(tt.lib)
			devs, devErr := inv.Devices()
			if err := Check(req, devs, devErr, rt); !errors.Is(err, tt.wantIs) || (tt.wantIs == nil && err != nil) {
				t.Errorf("Check(%q) = %v, want %v", tt.req, err, tt.wantIs)
			}
		})
	}
}
