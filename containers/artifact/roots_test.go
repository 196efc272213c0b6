package artifact

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// confinedLayout makes a model root and, beside it, a folder that must stay
// out of reach, plus every kind of escape and special file seen in the
// probe (issue 9, class 3).
func confinedLayout(t *testing.T) (root, outside string) {
	t.Helper()
	root, outside = t.TempDir(), t.TempDir()
	write := func(p, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(outside, "secret"), "host secret")
	write(filepath.Join(root, "good/model.bin"), "weights")
	write(filepath.Join(root, "good/sub/config.json"), "{}")
	link("model.bin", filepath.Join(root, "good/alias"))
	link("../model.bin", filepath.Join(root, "good/sub/up"))
	link(outside, filepath.Join(root, "escape"))
	link("/var/run", filepath.Join(root, "run"))
	link("../../../../../../../../etc", filepath.Join(root, "etc"))
	link(outside+"/secret", filepath.Join(root, "withabs/l"))
	link("../../escape/secret", filepath.Join(root, "inner/deep/up"))
	link("d/l/..", filepath.Join(root, "chain/a")) // escapes only together with d/l
	link("..", filepath.Join(root, "chain/d/l"))
	write(filepath.Join(root, "withfifo/model.bin"), "w")
	if err := syscall.Mkfifo(filepath.Join(root, "withfifo/pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(root, "withsock/model.bin"), "w")
	ln, err := net.Listen("unix", filepath.Join(root, "withsock/docker.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if os.Geteuid() == 0 {
		write(filepath.Join(root, "withdev/model.bin"), "w")
		if err := syscall.Mknod(filepath.Join(root, "withdev/null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

// TestPrepareFileConfined reproduces the probe's file:// escapes: every one
// is refused with a caller's error that names neither host folder.
func TestPrepareFileConfined(t *testing.T) {
	root, outside := confinedLayout(t)
	f, err := NewFetcher(Options{ModelRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		url     string
		wantErr error
		wantMsg string
	}{
		{"docker socket folder", "file:///var/run", ErrOutsideModelRoots, "--model-root"},
		{"docker socket", "file:///var/run/docker.sock", ErrOutsideModelRoots, "--model-root"},
		{"host root", "file:///", ErrOutsideModelRoots, "--model-root"},
		{"dotdot to etc", "file://../../etc", ErrOutsideModelRoots, "--model-root"},
		{"dotdot inside then out", "file://good/../../x", ErrOutsideModelRoots, "--model-root"},
		{"another folder", "file://" + outside, ErrOutsideModelRoots, "--model-root"},
		{"link to another folder", "file://escape", ErrOutsideModelRoots, "--model-root"},
		{"through a link", "file://escape/secret", ErrOutsideModelRoots, "--model-root"},
		{"link to /var/run", "file://run", ErrOutsideModelRoots, "--model-root"},
		{"relative link to /etc", "file://etc", ErrOutsideModelRoots, "--model-root"},
		{"socket itself", "file://withsock/docker.sock", ErrUnsafeArchive, "neither a folder nor a regular file"},
		{"folder with a socket", "file://withsock", ErrUnsafeArchive, `"docker.sock": sockets are not allowed`},
		{"folder with a FIFO", "file://withfifo", ErrUnsafeArchive, `"pipe": named pipes (FIFOs) are not allowed`},
		{"folder with an absolute link", "file://withabs", ErrUnsafeArchive, "is absolute"},
		{"folder with a link out", "file://inner", ErrUnsafeArchive, "link leads outside the model folder"},
		{"folder with a link chain out", "file://chain", ErrUnsafeArchive, "resolves outside"},
	}
	if os.Geteuid() == 0 {
		tests = append(tests, struct {
			name    string
			url     string
			wantErr error
			wantMsg string
		}{"folder with a device", "file://withdev", ErrUnsafeArchive, `"null": devices are not allowed`})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			workDir := filepath.Join(t.TempDir(), "work")
			got, err := f.Prepare(context.Background(), tc.url, root, workDir)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Prepare(%q) = %q, %v; want %v", tc.url, got, err, tc.wantErr)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("error %q does not contain %q", msg, tc.wantMsg)
			}
			for _, p := range []string{root, outside, workDir} {
				if !strings.Contains(tc.url, p) && strings.Contains(msg, p) {
					t.Errorf("error %q names the host path %s", msg, p)
				}
			}
			if left := workDirEntries(t, workDir); len(left) != 0 {
				t.Errorf("failed Prepare left %q under workDir", left)
			}
		})
	}
}

// TestPrepareFolderStaged: a folder artifact reaches the container as a
// copy holding its regular files, folders and internal links, so later
// changes to the original (a file swapped for a socket) cannot reach it.
func TestPrepareFolderStaged(t *testing.T) {
	root, _ := confinedLayout(t)
	f, err := NewFetcher(Options{ModelRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	workDir := t.TempDir()
	got, err := f.Prepare(context.Background(), "file://good", root, workDir)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(got) != workDir {
		t.Fatalf("Prepare = %q, want a copy under %q", got, workDir)
	}
	want := map[string]string{
		"model.bin":       "f 0644 weights",
		"alias":           "l model.bin",
		"sub":             "d 0755",
		"sub/config.json": "f 0644 {}",
		"sub/up":          "l ../model.bin",
	}
	diffTrees(t, treeOf(t, got), want)
	if err := os.Remove(filepath.Join(root, "good/model.bin")); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, treeOf(t, got), want)
}

// TestPrepareFileNoRoots: without model roots no file:// URL is served.
func TestPrepareFileNoRoots(t *testing.T) {
	base := fileLayout(t)
	f, err := NewFetcher(Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Prepare(context.Background(), "file://models/model.tar.gz", base, t.TempDir())
	if !errors.Is(err, ErrOutsideModelRoots) {
		t.Fatalf("Prepare without roots = %v, want ErrOutsideModelRoots", err)
	}
}

// TestModelRootThroughLink: a root given through a symbolic link serves
// URLs written with either path.
func TestModelRootThroughLink(t *testing.T) {
	base := fileLayout(t)
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(base, alias); err != nil {
		t.Fatal(err)
	}
	f, err := NewFetcher(Options{ModelRoots: []string{alias}})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"file://" + alias + "/models/model.tar", "file://" + base + "/models/model.tar"} {
		if _, err := f.Prepare(context.Background(), u, "", t.TempDir()); err != nil {
			t.Errorf("Prepare(%q): %v", u, err)
		}
	}
}

// BenchmarkStageFolder: the cost of staging (copying) a folder artifact,
// 8 files of 8 MiB.
func BenchmarkStageFolder(b *testing.B) {
	root := b.TempDir()
	chunk := make([]byte, 8<<20)
	for i := range chunk {
		chunk[i] = byte(i * 31)
	}
	for i := range 8 {
		if err := os.MkdirAll(filepath.Join(root, "m", "sub"), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "m", "sub", "w"+string(rune('0'+i))), chunk, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	f, err := NewFetcher(Options{ModelRoots: []string{root}})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(8 * 8 << 20)
	for b.Loop() {
		work := b.TempDir()
		if _, err := f.Prepare(context.Background(), "file://m", root, work); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		os.RemoveAll(work)
		b.StartTimer()
	}
}
