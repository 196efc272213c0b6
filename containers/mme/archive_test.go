package mme

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mce-run/mce/containers/artifact"
)

// TestBadArtifactsAreRefusedHarmlessly: missing, corrupt and malicious
// artifacts fail with typed errors, leave nothing on disk, write nothing
// outside the cache, and do not disturb a loaded model.
func TestBadArtifactsAreRefusedHarmlessly(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.put(t, "good.tar.gz", 100)
	good, err := e.mgr.Acquire(context.Background(), "good.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer good.Release()
	goodDir := filepath.Join(e.cacheDir, ModelID("good.tar.gz"), "model")
	before, err := os.ReadFile(filepath.Join(goodDir, "1", "model.bin"))
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Dir(e.cacheDir) // the parent of the cache folder

	writeFile(t, e.prefixDir, "corrupt.tar.gz", []byte("\x1f\x8b\x08 this is not gzip"))
	writeFile(t, e.prefixDir, "slip.tar.gz", buildTarGz(t,
		tarEntry{name: "config.pbtxt", body: "x"}, tarEntry{name: "../../evil", body: "pwned"}))
	writeFile(t, e.prefixDir, "abs.tar.gz", buildTarGz(t, tarEntry{name: "/../../../../../../tmp/evil-abs", body: "pwned"}))
	writeFile(t, e.prefixDir, "link-out.tar.gz", buildTarGz(t,
		tarEntry{name: "config.pbtxt", body: "x"},
		tarEntry{name: "escape", typ: tar.TypeSymlink, link: "../../.."},
		tarEntry{name: "escape/evil", body: "pwned"}))
	writeFile(t, e.prefixDir, "link-abs.tar.gz", buildTarGz(t,
		tarEntry{name: "config.pbtxt", body: "x"},
		tarEntry{name: "passwd", typ: tar.TypeSymlink, link: "/etc/passwd"}))
	writeFile(t, e.prefixDir, "hardlink-out.tar.gz", buildTarGz(t,
		tarEntry{name: "config.pbtxt", body: "x"},
		tarEntry{name: "h", typ: tar.TypeLink, link: "../../good/model/1/model.bin"}))
	writeFile(t, e.prefixDir, "device.tar.gz", buildTarGz(t, tarEntry{name: "null", typ: tar.TypeChar}))
	if err := os.MkdirAll(filepath.Join(e.prefixDir, "a-folder"), 0o755); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		target string
		want   error
	}{
		{"missing.tar.gz", artifact.ErrNotFound},
		{"corrupt.tar.gz", artifact.ErrInvalidArchive},
		{"slip.tar.gz", artifact.ErrUnsafeArchive},
		{"abs.tar.gz", artifact.ErrUnsafeArchive},
		{"link-out.tar.gz", artifact.ErrUnsafeArchive},
		{"link-abs.tar.gz", artifact.ErrUnsafeArchive},
		{"hardlink-out.tar.gz", artifact.ErrUnsafeArchive},
		{"device.tar.gz", artifact.ErrUnsafeArchive},
		{"a-folder", errAny},
		{"../good.tar.gz", ErrInvalidTargetModel},
		{"/etc/passwd", ErrInvalidTargetModel},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			_, err := e.mgr.Acquire(context.Background(), tt.target)
			if err == nil || (tt.want != errAny && !errors.Is(err, tt.want)) {
				t.Fatalf("Acquire = %v, want %v", err, tt.want)
			}
			t.Log(err)
			var nf *ModelNotFoundError
			if errors.Is(tt.want, artifact.ErrNotFound) != errors.As(err, &nf) {
				t.Errorf("ModelNotFoundError = %v for %v", errors.As(err, &nf), err)
			}
		})
	}
	if got := e.cacheEntries(t); !slices.Equal(got, []string{ModelID("good.tar.gz")}) {
		t.Errorf("cache folder holds %v, want only the good model", got)
	}
	for _, p := range []string{filepath.Join(outside, "evil"), filepath.Join(filepath.Dir(outside), "evil"), "/tmp/evil-abs"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written outside the cache", p)
		}
	}
	after, err := os.ReadFile(filepath.Join(goodDir, "1", "model.bin"))
	if err != nil || string(after) != string(before) {
		t.Errorf("the good model's files changed: %v", err)
	}
	if got := e.mgr.Loaded(); !slices.Equal(got, []string{"good.tar.gz"}) {
		t.Errorf("Loaded = %v", got)
	}
	if e.fake.loadCalls.Load() != 1 {
		t.Errorf("load calls = %d; bad artifacts must not reach the container", e.fake.loadCalls.Load())
	}
	e.fake.check(t)
}

// TestLongTargetModelNamesNoHostPath reproduces issue 9, class 7: a
// TargetModel with a 300-byte segment under a file:// prefix gave an
// internal error naming the cache folder. It is now a missing model (a 400
// for the caller) whose message names neither the cache nor the store.
func TestLongTargetModelNamesNoHostPath(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, target := range []string{strings.Repeat("a", 300) + ".tar.gz", "x/" + strings.Repeat("b", 300), "missing.tar.gz"} {
		_, err := e.mgr.Acquire(context.Background(), target)
		var nf *ModelNotFoundError
		if !errors.As(err, &nf) {
			t.Fatalf("Acquire(%.20q…) = %v, want *ModelNotFoundError", target, err)
		}
		for _, p := range []string{e.cacheDir, e.prefixDir, filepath.Dir(e.cacheDir)} {
			if strings.Contains(err.Error(), p) {
				t.Errorf("error %q names the host path %s", err, p)
			}
		}
	}
	if got := e.cacheEntries(t); len(got) != 0 {
		t.Errorf("cache folder holds %v after failed downloads", got)
	}
}

// TestPrefixLinksConfined: a TargetModel under a file:// prefix resolves
// only inside the model roots, links included (issue 9, class 3).
func TestPrefixLinksConfined(t *testing.T) {
	e := newEnv(t, envOptions{})
	outside := t.TempDir()
	writeFile(t, outside, "secret.tar.gz", modelArchive(t, "secret", 10))
	if err := os.Symlink(filepath.Join(outside, "secret.tar.gz"), filepath.Join(e.prefixDir, "escape.tar.gz")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(e.prefixDir, "out")); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"escape.tar.gz", "out/secret.tar.gz"} {
		_, err := e.mgr.Acquire(context.Background(), target)
		if !errors.Is(err, artifact.ErrOutsideModelRoots) {
			t.Errorf("Acquire(%q) = %v, want ErrOutsideModelRoots", target, err)
			continue
		}
		if strings.Contains(err.Error(), outside) || strings.Contains(err.Error(), e.prefixDir) {
			t.Errorf("error %q names a host folder", err)
		}
	}
	if got := e.cacheEntries(t); len(got) != 0 {
		t.Errorf("cache holds %v", got)
	}
}
