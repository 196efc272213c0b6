package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeTarGz(t *testing.T, path string, files map[string]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFetchCommand drives `mce fetch` as the kubernetes engine's init
// container does: an archive inside a model root lands in --dest, one
// outside is refused, an unsafe archive is refused and leaves nothing.
func TestFetchCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := t.TempDir()
	writeTarGz(t, filepath.Join(root, "model.tar.gz"), map[string]string{"weights.txt": "w", "sub/vocab.txt": "v"})
	dest := filepath.Join(t.TempDir(), "model")
	out, err := runCLI(ctx, "fetch", "--url", "file://"+root+"/model.tar.gz", "--dest", dest, "--model-root", root)
	if err != nil {
		t.Fatalf("fetch: %v\n%s", err, out)
	}
	for name, want := range map[string]string{"weights.txt": "w", "sub/vocab.txt": "v"} {
		if b, err := os.ReadFile(filepath.Join(dest, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", name, b, err)
		}
	}
	if entries, _ := os.ReadDir(dest); len(entries) != 2 {
		t.Errorf("dest holds %d entries, want weights.txt and sub (no work folder left)", len(entries))
	}

	// --timeout (ModelDataDownloadTimeoutInSeconds) ends a fetch that takes longer, naming the setting.
	out, err = runCLI(ctx, "fetch", "--url", "file://"+root+"/model.tar.gz", "--dest", filepath.Join(t.TempDir(), "late"), "--model-root", root, "--timeout", "1ns")
	if err == nil || !strings.Contains(err.Error()+out, "ModelDataDownloadTimeoutInSeconds") {
		t.Errorf("a fetch past --timeout: %v\n%s", err, out)
	}

	other := t.TempDir()
	if out, err := runCLI(ctx, "fetch", "--url", "file://"+root+"/model.tar.gz", "--dest", filepath.Join(other, "d"), "--model-root", other); err == nil {
		t.Errorf("fetched from outside the model roots: %s", out)
	}

	writeTarGz(t, filepath.Join(root, "evil.tar.gz"), map[string]string{"../escape.txt": "x"})
	dest2 := filepath.Join(t.TempDir(), "model")
	out, err = runCLI(ctx, "fetch", "--url", "file://"+root+"/evil.tar.gz", "--dest", dest2, "--model-root", root)
	if err == nil || !strings.Contains(err.Error()+out, "unsafe") {
		t.Errorf("an archive escaping its folder: %v\n%s", err, out)
	}
	if entries, _ := os.ReadDir(dest2); len(entries) != 0 {
		t.Errorf("a refused archive left %d entries", len(entries))
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dest2), "escape.txt")); err == nil {
		t.Error("the archive wrote outside dest")
	}
}
