//go:build cgo

package gpu

import (
	"errors"
	"os"
	"testing"
)

// TestRealNVML reads the host's GPUs through the system's libnvidia-ml. It
// runs only with MCE_GPU_TEST=1, on a machine with an NVIDIA GPU and driver.
func TestRealNVML(t *testing.T) {
	if os.Getenv("MCE_GPU_TEST") != "1" {
		t.Skip("set MCE_GPU_TEST=1 on a machine with an NVIDIA GPU and driver to test against the real NVML")
	}
	inv := NewInventory(nil)
	t.Cleanup(func() {
		if err := inv.Close(); err != nil {
			t.Errorf("Close(): %v", err)
		}
	})

	devs, err := inv.Devices()
	if err != nil {
		t.Fatalf("Devices(): %v", err)
	}
	if len(devs) == 0 {
		t.Fatal("Devices() found no GPU")
	}
	for i, d := range devs {
		t.Logf("GPU %d: %s %s: total %d MiB, used %d MiB, free %d MiB",
			d.Index, d.UUID, d.Name, d.MemoryTotal>>20, d.MemoryUsed>>20, d.MemoryFree>>20)
		if d.Index != i || d.UUID == "" || d.Name == "" {
			t.Errorf("device %d = %+v: want Index %d and a UUID and name", i, d, i)
		}
		if d.MemoryTotal == 0 || d.MemoryUsed > d.MemoryTotal || d.MemoryFree > d.MemoryTotal {
			t.Errorf("device %d memory implausible: %+v", i, d)
		}
		used, total, err := inv.Memory(d.Index)
		if err != nil {
			t.Fatalf("Memory(%d): %v", d.Index, err)
		}
		t.Logf("GPU %d: Memory() used %d MiB of %d MiB", d.Index, used>>20, total>>20)
		if total != d.MemoryTotal || used > total {
			t.Errorf("Memory(%d) = %d, %d; Devices said total %d", d.Index, used, total, d.MemoryTotal)
		}
	}
	if _, _, err := inv.Memory(len(devs)); !errors.Is(err, ErrUnknownDevice) {
		t.Errorf("Memory(%d) past the last GPU = %v, want ErrUnknownDevice", len(devs), err)
	}

	for _, s := range []string{"all", "1", "device=0", "device=" + devs[0].UUID} {
		req, err := ParseRequest(s)
		if err != nil {
			t.Fatalf("ParseRequest(%q): %v", s, err)
		}
		if err := Check(req, devs, nil, RuntimeInfo{Runtimes: []string{"nvidia", "runc"}}); err != nil {
			t.Errorf("Check(%q) on this host: %v", s, err)
		}
	}
}
