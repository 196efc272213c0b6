package artifact

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPrepareS3Prefix: an uncompressed model folder under an S3 prefix is
// staged file by file, with archives' rules on names and sizes.
func TestPrepareS3Prefix(t *testing.T) {
	fake := newS3(t, "us-east-1", "models")
	fake.put(t, "models", "llm/config.pbtxt", []byte(`name: "m"`))
	fake.put(t, "models", "llm/1/model.onnx", []byte("onnx"))
	fake.put(t, "models", "llm/1/", nil) // a console's folder marker
	fake.put(t, "models", "llm-other/x", []byte("not under llm/"))
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
		// A real server stores no key holding "..", so a hostile listing
		// comes from a stand-in that answers ListObjectsV2 with one.
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("list-type") != "2" {
				w.Write([]byte("x")) // any GET of an object
				return
			}
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>models</Name><Prefix>evil/</Prefix>`+
				`<KeyCount>1</KeyCount><IsTruncated>false</IsTruncated><Contents><Key>evil/../escape</Key><Size>1</Size></Contents></ListBucketResult>`)
		}))
		t.Cleanup(srv.Close)
		opts := fake.options()
		opts.S3.Endpoint = srv.URL
		hostile, err := NewFetcher(opts)
		if err != nil {
			t.Fatal(err)
		}
		work := t.TempDir()
		_, err = hostile.Prepare(context.Background(), "s3://models/evil/", "", work)
		if !errors.Is(err, ErrUnsafeArchive) {
			t.Fatalf("err = %v, want ErrUnsafeArchive", err)
		}
		if left := workDirEntries(t, work); len(left) != 0 {
			t.Errorf("left behind %q", left)
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
