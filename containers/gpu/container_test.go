//go:build cgo

package gpu

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// fakeProc writes /proc/<pid>/cgroup files under a temporary root.
func fakeProc(t *testing.T, cgroups map[uint32]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, cg := range cgroups {
		dir := filepath.Join(root, strconv.Itoa(int(pid)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestContainerMemory (issue 19 item 3): two containers share a GPU; each
// sees the memory of its own processes as NVML lists them, and where NVML
// cannot tell, the caller is told to fall back to the GPU's figure.
func TestContainerMemory(t *testing.T) {
	const (
		idA = "4f1c2a9e8b7d6c5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e"
		idB = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d"
	)
	root := fakeProc(t, map[uint32]string{
		100: "12:memory:/docker/" + idA + "\n0::/docker/" + idA + "\n",                   // cgroup v1
		101: "0::/system.slice/docker-" + idA + ".scope\n",                               // cgroup v2, systemd
		200: "0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-" + idB + ".scope\n", // Kubernetes
		300: "0::/user.slice/user-1000.slice/session-2.scope\n",                          // a desktop process
	})
	procs := []nvml.ProcessInfo{
		{Pid: 100, UsedGpuMemory: 3 * gib},
		{Pid: 101, UsedGpuMemory: gib},
		{Pid: 200, UsedGpuMemory: 5 * gib},
		{Pid: 300, UsedGpuMemory: 2 * gib},
		{Pid: 400, UsedGpuMemory: 7 * gib}, // gone since NVML listed it
	}
	procRet := nvml.SUCCESS
	f := newFake(0)
	f.used = 20 * gib
	lib := fakeLib(f)
	dev := f.mock()
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return procs, procRet }
	lib.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i != 0 {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return dev, nvml.SUCCESS
	}
	inv := NewInventory(lib)
	tests := []struct {
		name      string
		owner     ProcessOwner
		setup     func()
		wantUsed  uint64
		wantOK    bool
		wantTotal uint64
	}{
		{name: "container A: two processes", owner: CgroupOwner(root, idA), wantUsed: 4 * gib, wantOK: true, wantTotal: 80 * gib},
		{name: "container B", owner: CgroupOwner(root, idB), wantUsed: 5 * gib, wantOK: true, wantTotal: 80 * gib},
		{name: "a container with no process on the GPU", owner: CgroupOwner(root, "0123456789abcdef0123"), wantUsed: 0, wantOK: true, wantTotal: 80 * gib},
		{name: "a short ID matches nothing", owner: CgroupOwner(root, "4f1c"), wantUsed: 0, wantOK: true, wantTotal: 80 * gib},
		{name: "no process can be placed (another PID namespace)", owner: CgroupOwner(t.TempDir(), idA), wantOK: false, wantTotal: 80 * gib},
		{name: "NVML does not list processes", owner: CgroupOwner(root, idA), setup: func() { procRet = nvml.ERROR_NOT_SUPPORTED }, wantOK: false, wantTotal: 80 * gib},
		{name: "no per-process figure", owner: CgroupOwner(root, idA), setup: func() {
			procRet = nvml.SUCCESS
			procs = append(procs, nvml.ProcessInfo{Pid: 100, UsedGpuMemory: notAvailable})
		}, wantOK: false, wantTotal: 80 * gib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup()
			}
			used, total, ok, err := inv.ContainerMemory(0, tt.owner)
			if err != nil || used != tt.wantUsed || ok != tt.wantOK || total != tt.wantTotal {
				t.Errorf("ContainerMemory = %d, %d, %v, %v; want %d, %d, %v, nil", used, total, ok, err, tt.wantUsed, tt.wantTotal, tt.wantOK)
			}
		})
	}
	if _, _, _, err := inv.ContainerMemory(3, CgroupOwner(root, idA)); err == nil {
		t.Error("ContainerMemory(3) on a one-GPU host: no error")
	}
	procRet = nvml.ERROR_GPU_IS_LOST
	if _, _, _, err := inv.ContainerMemory(0, CgroupOwner(root, idA)); err == nil {
		t.Error("a lost GPU gave no error")
	}
}
