package gpucheck

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mce-run/mce/containers/gpu"
)

// python is the interpreter with PyTorch and werkzeug: Debian's here.
func python(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("MCE_GPUCHECK_PYTHON"), "/usr/bin/python3", "python3"} {
		if p == "" {
			continue
		}
		if err := exec.Command(p, "-c", "import torch, numpy, werkzeug").Run(); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no python3 with torch, numpy and werkzeug (Debian: python3-torch python3-werkzeug)")
	}
	t.Skip("SKIPPED LOUDLY: no python3 with torch, numpy and werkzeug; the GPU check's dry run needs them")
	return ""
}

// TestDryRun runs the GPU check end to end on the CPU: the toolkit's
// server as a plain process, the real Manager, generated models, a RAM
// budget of 4 models that forces evictions and 507s.
func TestDryRun(t *testing.T) {
	py := python(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{
		Python: py, Toolkit: filepath.Join("..", "..", "examples", "containers", "framework"), Work: t.TempDir(),
		Dry: true, Models: 9, DryFit: 3, Calls: 60, Clients: 4, WarmCalls: 20,
		GPU: noGPU{},
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.Write(&b)
	t.Log("\n" + b.String())
	if rep.Failed != 0 {
		t.Errorf("%d calls failed: %v", rep.Failed, rep.FailedWhy)
	}
	if rep.Hits+rep.Misses != 60 || rep.Misses < 9 || rep.Hits == 0 {
		t.Errorf("hits %d, misses %d: want 60 calls, every model missed once at least, some hits", rep.Hits, rep.Misses)
	}
	if rep.Evictions == 0 {
		t.Errorf("no eviction with room for 3 of 9 models")
	}
	if rep.OOMStatuses[507] == 0 || rep.Fit < 1 {
		t.Errorf("fill with accounting off: statuses %v, fit %d; want 507s from the RAM budget and some models loaded", rep.OOMStatuses, rep.Fit)
	}
	if rep.WarmManager <= 0 || rep.WarmDirect <= 0 {
		t.Errorf("warm calls not timed: %v %v", rep.WarmManager, rep.WarmDirect)
	}
}

// noGPU is a host without NVML.
type noGPU struct{}

func (noGPU) Devices() ([]gpu.Device, error)             { return nil, gpu.ErrNoDriver }
func (noGPU) Memory(int) (used, total uint64, err error) { return 0, 0, gpu.ErrNoDriver }
