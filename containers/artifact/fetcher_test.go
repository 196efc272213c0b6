package artifact

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fileLayout makes a base folder (standing for the endpoint file's folder)
// holding a model directory and archives of the same tree.
func fileLayout(t *testing.T) (base string) {
	t.Helper()
	base = t.TempDir()
	for name, data := range map[string]string{
		"models/dir/config.pbtxt": "name: \"m\"",
		"models/dir/1/model.onnx": "onnx",
	} {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree := []entry{file("config.pbtxt", "name: \"m\""), file("1/model.onnx", "onnx")}
	for name, data := range map[string][]byte{
		"models/model.tar.gz": buildTar(t, true, tree...),
		"models/model.tgz":    buildTar(t, true, tree...),
		"models/model.tar":    buildTar(t, false, tree...),
		"models/evil.tar.gz":  buildTar(t, true, file("ok", "x"), file("../evil", "x")),
		"models/bomb.tar.gz":  buildTar(t, true, entry{name: "big", zeros: 2 << 20}),
		"models/notes.txt":    []byte("not an archive"),
	} {
		if err := os.WriteFile(filepath.Join(base, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

var modelTree = map[string]string{
	"config.pbtxt": "f 0644 name: \"m\"",
	"1":            "d 0755",
	"1/model.onnx": "f 0644 onnx",
}

// workDirEntries lists what is left under workDir.
func workDirEntries(t *testing.T, workDir string) []string {
	t.Helper()
	ents, err := os.ReadDir(workDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestPrepareFile(t *testing.T) {
	base := fileLayout(t)
	// Folders are staged (copied) like archives are extracted: either way
	// a new folder under workDir holds the model tree.
	tests := []struct {
		name string
		url  string
	}{
		{name: "absolute directory", url: "file://" + filepath.Join(base, "models/dir")},
		{name: "relative directory", url: "file://models/dir"},
		{name: "dot-relative directory", url: "file://./models/dir/"},
		{name: "absolute tar.gz", url: "file://" + filepath.Join(base, "models/model.tar.gz")},
		{name: "relative tgz", url: "file://models/model.tgz"},
		{name: "dot-relative plain tar", url: "file://./models/model.tar"},
		{name: "relative with dotdot", url: "file://models/dir/../model.tar.gz"},
	}
	f, err := NewFetcher(Options{ModelRoots: []string{base}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			workDir := filepath.Join(t.TempDir(), "work")
			got, err := f.Prepare(context.Background(), tc.url, base, workDir)
			if err != nil {
				t.Fatalf("Prepare(%q): %v", tc.url, err)
			}
			if filepath.Dir(got) != workDir {
				t.Errorf("Prepare(%q) = %q, want a folder directly under %q", tc.url, got, workDir)
			}
			if fi, err := os.Stat(got); err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("extraction folder: %v, %v; want mode 0755", fi.Mode(), err)
			}
			diffTrees(t, treeOf(t, got), modelTree)
			if left := workDirEntries(t, workDir); len(left) != 1 {
				t.Errorf("workDir holds %q, want only the extraction folder", left)
			}
		})
	}
}

func TestPrepareErrors(t *testing.T) {
	base := fileLayout(t)
	f, err := NewFetcher(Options{MaxExtractedBytes: 1 << 20, ModelRoots: []string{base}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		url     string
		wantErr error
		wantMsg string
	}{
		{"empty URL", "", ErrUnsupportedURL, `unsupported model data URL ""`},
		{"https", "https://bucket.s3.amazonaws.com/model.tar.gz", ErrUnsupportedURL, "https://bucket.s3.amazonaws.com/model.tar.gz"},
		{"bare path", "/models/model.tar.gz", ErrUnsupportedURL, "s3://bucket/key"},
		{"upper-case scheme", "S3://b/k", ErrUnsupportedURL, "S3://b/k"},
		{"s3 without key", "s3://bucket", ErrUnsupportedURL, "bucket and an object key"},
		{"s3 with empty key", "s3://bucket/", ErrUnsupportedURL, "bucket and an object key"},
		{"s3 without bucket", "s3:///key", ErrUnsupportedURL, "bucket and an object key"},
		{"file without path", "file://", ErrUnsupportedURL, "path is empty"},
		{"missing file", "file://models/nope.tar.gz", ErrNotFound, `model data "file://models/nope.tar.gz" not found`},
		{"missing absolute", "file://" + base + "/nope/model.tar.gz", ErrNotFound, `not found: no such file or folder`},
		{"unsafe archive", "file://models/evil.tar.gz", ErrUnsafeArchive, `model data "file://models/evil.tar.gz": unsafe archive entry "../evil"`},
		{"too large", "file://models/bomb.tar.gz", ErrTooLarge, `model data "file://models/bomb.tar.gz": too large`},
		{"not an archive", "file://models/notes.txt", ErrInvalidArchive, "not a valid tar or tar.gz archive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			workDir := filepath.Join(t.TempDir(), "work")
			got, err := f.Prepare(context.Background(), tc.url, base, workDir)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Prepare(%q) = %q, %v; want %v", tc.url, got, err, tc.wantErr)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tc.wantMsg)
			}
			if got != "" {
				t.Errorf("Prepare returned %q with an error", got)
			}
			if left := workDirEntries(t, workDir); len(left) != 0 {
				t.Errorf("failed Prepare left %q under workDir", left)
			}
		})
	}
}

func TestPrepareCancelled(t *testing.T) {
	base := fileLayout(t)
	f, err := NewFetcher(Options{ModelRoots: []string{base}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	workDir := t.TempDir()
	if _, err := f.Prepare(ctx, "file://models/model.tar.gz", base, workDir); !errors.Is(err, context.Canceled) {
		t.Fatalf("Prepare error = %v, want context.Canceled", err)
	}
	if left := workDirEntries(t, workDir); len(left) != 0 {
		t.Errorf("cancelled Prepare left %q under workDir", left)
	}
}

func TestNewFetcherValidates(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"negative byte cap", Options{MaxExtractedBytes: -1}},
		{"negative entry cap", Options{MaxEntries: -1}},
		{"negative download cap", Options{MaxDownloadBytes: -1}},
		{"negative concurrency", Options{S3: S3Options{Concurrency: -1}}},
		{"tiny part size", Options{S3: S3Options{PartSizeBytes: 1024}}},
		{"endpoint without scheme", Options{S3: S3Options{Endpoint: "127.0.0.1:9000"}}},
		{"endpoint with another scheme", Options{S3: S3Options{Endpoint: "ftp://127.0.0.1"}}},
		{"negative ratio", Options{MaxRatio: -1}},
		{"root /", Options{ModelRoots: []string{"/"}}},
		{"root /etc", Options{ModelRoots: []string{"/etc"}}},
		{"root /var/run", Options{ModelRoots: []string{"/var/run"}}},
		{"root /var holds /var/run", Options{ModelRoots: []string{"/var"}}},
		{"root /proc/self", Options{ModelRoots: []string{"/proc/self"}}},
		{"root /usr/lib", Options{ModelRoots: []string{"/usr/lib"}}},
		{"root /lib64", Options{ModelRoots: []string{"/lib64"}}},
		{"root missing", Options{ModelRoots: []string{"/nonexistent-root"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if f, err := NewFetcher(tc.opts); err == nil {
				t.Errorf("NewFetcher(%+v) = %v, nil; want an error", tc.opts, f)
			}
		})
	}
	f, err := NewFetcher(Options{S3: S3Options{Endpoint: "http://127.0.0.1:9000"}})
	if err != nil {
		t.Fatalf("NewFetcher with a valid endpoint: %v", err)
	}
	if f.opts.MaxExtractedBytes != DefaultMaxExtractedBytes || f.opts.MaxEntries != DefaultMaxEntries ||
		f.opts.MaxDownloadBytes != DefaultMaxDownloadBytes || f.opts.S3.Concurrency != defaultConcurrency ||
		f.opts.S3.PartSizeBytes != defaultPartSize {
		t.Errorf("defaults not filled: %+v", f.opts)
	}
}
