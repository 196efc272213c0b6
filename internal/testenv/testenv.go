// Package testenv is shared support for mce's integration tests: it finds the
// Docker engine, builds the example images once per test binary, and gives
// each test a unique mce instance name so parallel test binaries never touch
// each other's containers.
//
// Integration tests must run in CI: when the CI variable is set and no engine
// answers, they fail. Elsewhere they skip, saying so loudly.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers/docker"
)

// NeedDocker skips a test that needs a Docker engine under -short (the
// loop without Docker: `make quick`). Docker, and every helper here that
// builds or runs images, call it first; a test that reaches Docker another
// way calls it itself.
func NeedDocker(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs a Docker engine; skipped under -short")
	}
}

// Docker returns a client for the local engine, or skips (fails in CI) when
// none answers.
func Docker(tb testing.TB) *client.Client {
	tb.Helper()
	NeedDocker(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := docker.Connect(ctx)
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("CI is set but no Docker engine answers: %v", err)
		}
		tb.Skipf("SKIPPING Docker integration test: no Docker engine answers (%v); CI never skips this", err)
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

// RepoRoot is the folder holding go.mod.
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("go.mod not found above the test's folder")
		}
		dir = parent
	}
}

var (
	buildMu    sync.Mutex
	builtImage = map[string]error{}
	modelsOnce sync.Once
	modelsErr  error
	mmeOnce    sync.Once
	mmeErr     error
	fwModOnce  sync.Once
	fwModErr   error
	fwOnce     sync.Once
	fwIDs      map[string]string
	fwErr      error
)

// The framework images scripts/framework-images.sh builds.
const (
	SklearnImage = "mce-framework/sklearn:latest"
	PyTorchImage = "mce-framework/pytorch:latest"
)

// FrameworkImages builds the framework images with
// scripts/framework-images.sh once per test binary (cached by Docker's layer
// cache and the bases' content hash) and returns each tag's image ID as the
// build printed it. Tests that run the ID cannot have the image swapped
// under them by a build from another checkout on the machine.
func FrameworkImages(tb testing.TB) map[string]string {
	tb.Helper()
	NeedDocker(tb)
	fwOnce.Do(func() {
		var out string
		if out, fwErr = run(tb, "scripts/framework-images.sh"); fwErr != nil {
			return
		}
		fwIDs = map[string]string{}
		for line := range strings.Lines(out) {
			if f := strings.Fields(line); len(f) >= 2 && (f[0] == SklearnImage || f[0] == PyTorchImage) {
				fwIDs[f[0]] = "sha256:" + f[1]
			}
		}
		if len(fwIDs) != 2 {
			fwErr = fmt.Errorf("scripts/framework-images.sh printed no image IDs:\n%s", out)
		}
	})
	if fwErr != nil {
		tb.Fatalf("building the framework images: %v", fwErr)
	}
	return fwIDs
}

// MMEModels generates the 200 multi-model artifacts and their manifest once
// per test binary and returns their folder.
func MMEModels(tb testing.TB) string {
	tb.Helper()
	root := RepoRoot(tb)
	dir := filepath.Join(root, "build", "mme-models")
	mmeOnce.Do(func() { _, mmeErr = run(tb, "scripts/mme-models.sh", dir) })
	if mmeErr != nil {
		tb.Fatalf("building multi-model artifacts: %v", mmeErr)
	}
	return dir
}

// Image makes sure mce-example/<name>:latest exists, building it with
// scripts/images.sh once per test binary, and returns its reference.
func Image(tb testing.TB, name string) string {
	tb.Helper()
	NeedDocker(tb)
	buildMu.Lock()
	defer buildMu.Unlock()
	err, done := builtImage[name]
	if !done {
		_, err = run(tb, "scripts/images.sh", name)
		builtImage[name] = err
	}
	if err != nil {
		tb.Fatalf("building image %s: %v", name, err)
	}
	return "mce-example/" + name + ":latest"
}

// OwnImage builds example image name from this checkout, as Image does, and
// tags it for tb alone (mce-test-<instance>/<name>:latest, removed when tb
// ends), and returns that tag. mce-example/<name>:latest is one tag for every
// checkout using the engine: another checkout's tests may retag it, with
// their own build, between Image and a container's start. A test that needs
// what this checkout's image does (and an older one does not) uses OwnImage.
func OwnImage(tb testing.TB, name string) string {
	tb.Helper()
	Image(tb, name)
	tag := "mce-test-" + Instance(tb) + "/" + name + ":latest"
	cmd := exec.Command("docker", "build", "-q", "-t", tag, filepath.Join(RepoRoot(tb), "build", "images", name))
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0") // the classic builder, as scripts/images.sh
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("docker build %s: %v\n%s", tag, err, out)
	}
	tb.Cleanup(func() { _ = exec.Command("docker", "rmi", tag).Run() })
	return tag
}

// Models builds the example model artifacts once per test binary and returns
// the folder holding the .tar.gz files.
func Models(tb testing.TB) string {
	tb.Helper()
	root := RepoRoot(tb)
	modelsOnce.Do(func() { _, modelsErr = run(tb, "scripts/models.sh", filepath.Join(root, "build", "models")) })
	if modelsErr != nil {
		tb.Fatalf("building model artifacts: %v", modelsErr)
	}
	return filepath.Join(root, "build", "models")
}

// FrameworkModels trains and packs the real-framework examples' models
// (scripts/framework-models.sh, cached by their inputs) once per test binary
// and returns the folder under build/models holding them.
func FrameworkModels(tb testing.TB) string {
	tb.Helper()
	NeedDocker(tb)
	fwModOnce.Do(func() { _, fwModErr = run(tb, "scripts/framework-models.sh") })
	if fwModErr != nil {
		tb.Fatalf("building the framework examples' models: %v", fwModErr)
	}
	return filepath.Join(RepoRoot(tb), "build", "models")
}

// run runs a script of the repository from its root and returns its output.
func run(tb testing.TB, script string, args ...string) (string, error) {
	root := RepoRoot(tb)
	cmd := exec.Command(filepath.Join(root, script), args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", script, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Instance returns a fresh mce instance name for one test.
func Instance(tb testing.TB) string {
	var b [4]byte
	rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

// Leftovers counts containers and networks that carry the instance's label.
func Leftovers(tb testing.TB, cli *client.Client, instance string) (containersLeft, networksLeft int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f := client.Filters{}.Add("label", docker.LabelInstance+"="+instance)
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		tb.Fatal(err)
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		tb.Fatal(err)
	}
	return len(cs.Items), len(ns.Items)
}

// SyncBuffer is a goroutine-safe log sink for tests that read mce's log.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
