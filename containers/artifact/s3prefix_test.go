package artifact

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestPrepareS3Prefix: an uncompressed model folder under an S3 prefix is
// staged file by file, with archives' rules on names and sizes.
func TestPrepareS3Prefix(t *testing.T) {
	fake := newFakeS3(t, "models")
	fake.put(t, "models", "llm/config.pbtxt", []byte(`name: "m"`))
	fake.put(t, "models", "llm/1/model.onnx", []byte("onnx"))
	fake.put(t, "models", "llm/1/", nil) // a console's folder marker
	fake.put(t, "models", "llm-other/x", []byte("not under llm/"))
	fake.put(t, "models", "evil/../escape", []byte("x"))
	fake.put(t, "models", "big/a", []byte(strings.Repeat("a", 600)))
	fake.put(t, "models", "big/b", []byte(strings.Repeat("b", 600)))
	f, err := NewFetcher(fake.options())
	if err != nil {
		t.Fatal(err)
	}
	workDir := t.TempDir()
	got, err := f.Prepare(context.Background(), "s3://models/llm/", "", workDir)
	if err != nil {
		t.Fatal(err)
	}
	diffTrees(t, treeOf(t, got), modelTree)

	t.Run("unsafe key", func(t *testing.T) {
		_, err := f.Prepare(context.Background(), "s3://models/evil/", "", t.TempDir())
		if !errors.Is(err, ErrUnsafeArchive) {
			t.Fatalf("err = %v, want ErrUnsafeArchive", err)
		}
	})
	t.Run("empty prefix", func(t *testing.T) {
		work := t.TempDir()
		_, err := f.Prepare(context.Background(), "s3://models/nothing/", "", work)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"s3://models/nothing/"`) {
			t.Fatalf("err = %v, want ErrNotFound naming the URL", err)
		}
		if left := workDirEntries(t, work); len(left) != 0 {
			t.Errorf("left behind %q", left)
		}
	})
	t.Run("too large", func(t *testing.T) {
		opts := fake.options()
		opts.MaxDownloadBytes = 1000
		small, err := NewFetcher(opts)
		if err != nil {
			t.Fatal(err)
		}
		work := t.TempDir()
		_, err = small.Prepare(context.Background(), "s3://models/big/", "", work)
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("err = %v, want ErrTooLarge", err)
		}
		if left := workDirEntries(t, work); len(left) != 0 {
			t.Errorf("left behind %q", left)
		}
	})
	t.Run("archives only", func(t *testing.T) {
		if _, err := f.PrepareArchive(context.Background(), "s3://models/llm/", "", t.TempDir()); err == nil {
			t.Fatal("PrepareArchive staged a prefix")
		}
	})
}
