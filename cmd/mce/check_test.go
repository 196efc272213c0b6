package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mce-run/mce/containers/check"
	"github.com/mce-run/mce/containers/gpu"
	"github.com/mce-run/mce/internal/testenv"
)

// TestCheckCommand drives `mce check` end to end: the JSON report of a
// passing image, the exit statuses of a failing image and of bad flags.
func TestCheckCommand(t *testing.T) {
	testenv.Docker(t)
	probe := testenv.Image(t, "probe")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	sample := filepath.Join(t.TempDir(), "sample.txt")
	if err := os.WriteFile(sample, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(ctx, "check", probe, "--input", sample, "--content-type", "text/plain", "--env", "PROBE_TAG=x", "--json")
	if err != nil {
		t.Fatalf("check %s: %v\n%s", probe, err, out)
	}
	var rep struct {
		Image  string `json:"image"`
		Passed bool   `json:"passed"`
		Checks []struct {
			Name       string  `json:"name"`
			Status     string  `json:"status"`
			Detail     string  `json:"detail"`
			DurationMS float64 `json:"duration_ms"`
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json printed something else: %v\n%s", err, out)
	}
	if !rep.Passed || rep.Image != probe || len(rep.Checks) < 8 {
		t.Errorf("report %+v", rep)
	}
	for _, c := range rep.Checks {
		// The probe echoes the body with PROBE_TAG appended: the sample and
		// --env both reached the container.
		if c.Name == "/invocations answers the sample" && (c.Status != "pass" || !strings.HasSuffix(c.Detail, ": hellox")) {
			t.Errorf("invocation: %+v", c)
		}
		if c.Name == "/ping 200 within 120s" && (c.Status != "pass" || c.DurationMS <= 0) {
			t.Errorf("ping: %+v", c)
		}
	}

	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"check", "mce-test-no-such-image:" + testenv.Instance(t)}, 1, "FAIL  image present"},
		{[]string{"check", probe, "--env", "NOEQUALS"}, 2, ""},
		{[]string{"check", probe, "--input", sample}, 2, ""}, // no content type
		{[]string{"check", probe, "--multi-model", "on"}, 2, ""},
		{[]string{"check", probe, "--input", filepath.Join(t.TempDir(), "missing")}, 2, ""},
	} {
		out, err := runCLI(ctx, tc.args...)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != tc.code {
			t.Errorf("mce %v: %v (%#v), want exit status %d\n%s", tc.args, err, err, tc.code, out)
		}
		if !strings.Contains(out, tc.out) {
			t.Errorf("mce %v printed %q, want %q in it", tc.args, out, tc.out)
		}
	}
}

// TestCheckGPUsWithoutGPU: `mce check --gpus all` on a host without a GPU
// says so and exits 2 before reaching the engine.
func TestCheckGPUsWithoutGPU(t *testing.T) {
	for _, tt := range []struct {
		name string
		inv  check.GPUInventory
		want string
	}{
		{"no driver", noGPUs{err: fmt.Errorf("%w: ERROR_LIBRARY_NOT_FOUND", gpu.ErrNoDriver)}, "--gpus all: GPU requested (all) but no NVIDIA driver found on this host"},
		{"no GPU", noGPUs{}, "--gpus all: GPU requested (all) but no GPU found on this host"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock") // never reached
			err := runCheck(context.Background(), checkFlags{gpus: "all", gpuThreshold: 1, gpu: tt.inv, multiModel: "on", modelData: "m.tar.gz"}, "img", io.Discard)
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != 2 || !strings.HasPrefix(ee.msg, tt.want) {
				t.Errorf("runCheck = %#v, want exit 2 %q", err, tt.want)
			}
		})
	}
}

type noGPUs struct{ err error }

func (n noGPUs) Devices() ([]gpu.Device, error)             { return nil, n.err }
func (n noGPUs) Memory(int) (used, total uint64, err error) { return 0, 0, n.err }
