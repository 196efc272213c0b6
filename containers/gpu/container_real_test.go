//go:build cgo

package gpu

import (
	"os"
	"strconv"
	"testing"
)

// TestRealContainerMemory reads the per-process GPU memory through the
// system's libnvidia-ml (MCE_GPU_TEST=1): counting every process that /proc
// can place gives at most the GPU's used memory, and a container ID that no
// process has gives 0.
func TestRealContainerMemory(t *testing.T) {
	if os.Getenv("MCE_GPU_TEST") != "1" {
		t.Skip("set MCE_GPU_TEST=1 on a machine with an NVIDIA GPU and driver to test against the real NVML")
	}
	inv := NewInventory(nil)
	t.Cleanup(func() { inv.Close() })
	all := func(pid uint32) (bool, bool) {
		_, err := os.Stat("/proc/" + strconv.FormatUint(uint64(pid), 10))
		return err == nil, err == nil
	}
	used, total, err := inv.Memory(0)
	if err != nil {
		t.Fatal(err)
	}
	own, total2, ok, err := inv.ContainerMemory(0, all)
	t.Logf("GPU 0: used %d MiB of %d MiB; its processes that /proc shows: %d MiB (ok %v)", used>>20, total>>20, own>>20, ok)
	if err != nil || total2 != total || (ok && own > used) {
		t.Errorf("ContainerMemory(0, every process) = %d, %d, %v, %v; Memory said %d of %d", own, total2, ok, err, used, total)
	}
	if own, _, ok, err := inv.ContainerMemory(0, CgroupOwner("", "ffffffffffffffffffffffffffffffff")); err != nil || (ok && own != 0) {
		t.Errorf("a container with no process uses %d (ok %v, %v)", own, ok, err)
	}
}
