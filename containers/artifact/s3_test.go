package artifact

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/mce-run/mce/internal/awstest"
	"github.com/mce-run/mce/internal/s3test"
)

// TestMain isolates the AWS SDK from the network and the developer's AWS files.
func TestMain(m *testing.M) { os.Exit(awstest.Run(m)) }

// testS3 is a real S3 server (versitygw, internal/s3test) on loopback, and
// a transparent proxy in front of it that counts ranged GETs and can hold
// them, so a test proves parallel part downloads rather than hoping for them.
type testS3 struct {
	*s3test.Server
	proxyURL string // the proxy; the server itself is at Endpoint

	rangeGets   atomic.Int64 // GETs with a Range header through the proxy
	inflight    atomic.Int64 // ranged GETs being served now
	maxInflight atomic.Int64
	// holdRanges makes ranged GETs past the first part wait (up to 5 s)
	// until two are in flight at once.
	holdRanges atomic.Bool
	peer       chan struct{}
	peerOnce   sync.Once
}

func newS3(t *testing.T, region string, buckets ...string) *testS3 {
	t.Helper()
	ts := &testS3{Server: s3test.StartInRegion(t, region), peer: make(chan struct{})}
	target, err := url.Parse(ts.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	// The Host header is part of the SigV4 signature: the proxy keeps the
	// client's, so the server checks the signature the client made.
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rng := r.Header.Get("Range"); r.Method == http.MethodGet && rng != "" {
			ts.rangeGets.Add(1)
			n := ts.inflight.Add(1)
			defer ts.inflight.Add(-1)
			for m := ts.maxInflight.Load(); n > m && !ts.maxInflight.CompareAndSwap(m, n); m = ts.maxInflight.Load() {
			}
			if n >= 2 {
				ts.peerOnce.Do(func() { close(ts.peer) })
			}
			if ts.holdRanges.Load() && !strings.HasPrefix(rng, "bytes=0-") {
				select {
				case <-ts.peer:
				case <-time.After(5 * time.Second):
				case <-r.Context().Done():
				}
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ts.proxyURL = srv.URL
	for _, b := range buckets {
		ts.Bucket(t, b)
	}
	return ts
}

func (ts *testS3) put(t *testing.T, bucket, key string, data []byte) {
	t.Helper()
	ts.Put(t, bucket, key, data)
}

// options points a Fetcher straight at the server with explicit static
// credentials and region, so nothing is looked up elsewhere.
func (ts *testS3) options() Options {
	return Options{S3: S3Options{
		Endpoint:     ts.Endpoint,
		Region:       ts.Region,
		UsePathStyle: true,
		Credentials:  ts.Credentials(),
	}}
}

func TestPrepareS3(t *testing.T) {
	fake := newS3(t, "us-east-1", "models")
	fake.put(t, "models", "small/model.tar.gz", buildTar(t, true, file("config.pbtxt", "name: \"m\""), file("1/model.onnx", "onnx")))
	fake.put(t, "models", "dir/my model+v1.tar", buildTar(t, false, file("config.pbtxt", "name: \"m\""), file("1/model.onnx", "onnx")))
	f, err := NewFetcher(fake.options())
	if err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{"s3://models/small/model.tar.gz", "s3://models/dir/my model+v1.tar"} {
		t.Run(url, func(t *testing.T) {
			t.Parallel() // both race to build the lazy S3 client
			workDir := t.TempDir()
			got, err := f.Prepare(context.Background(), url, "", workDir)
			if err != nil {
				t.Fatalf("Prepare(%q): %v", url, err)
			}
			if filepath.Dir(got) != workDir {
				t.Errorf("Prepare = %q, want a folder directly under %q", got, workDir)
			}
			diffTrees(t, treeOf(t, got), modelTree)
			if left := workDirEntries(t, workDir); len(left) != 1 {
				t.Errorf("workDir holds %q, want only the extraction folder (download file removed)", left)
			}
		})
	}
}

func TestPrepareS3LargeObjectInRanges(t *testing.T) {
	fake := newS3(t, "us-east-1", "models")
	payload := make([]byte, 40<<20)
	rng := rand.New(rand.NewChaCha8([32]byte{1, 2, 3}))
	for i := 0; i < len(payload); i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			payload[i+j] = byte(v >> (8 * j))
		}
	}
	data := buildTar(t, false, entry{name: "weights.bin", body: string(payload)}, file("config.pbtxt", "c"))
	fake.put(t, "models", "large.tar", data)
	fake.holdRanges.Store(true)
	opts := fake.options()
	opts.S3.Endpoint = fake.proxyURL
	opts.S3.Concurrency = 4
	opts.S3.PartSizeBytes = 5 << 20
	f, err := NewFetcher(opts)
	if err != nil {
		t.Fatal(err)
	}
	workDir := t.TempDir()
	got, err := f.Prepare(context.Background(), "s3://models/large.tar", "", workDir)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(got, "weights.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if gotSum, wantSum := sha256.Sum256(b), sha256.Sum256(payload); gotSum != wantSum || len(b) != len(payload) {
		t.Errorf("weights.bin: %d bytes, sha256 %x; want %d bytes, sha256 %x", len(b), gotSum, len(payload), wantSum)
	}
	if wantParts := int64((len(data) + 5<<20 - 1) / (5 << 20)); fake.rangeGets.Load() != wantParts {
		t.Errorf("%d ranged GETs, want %d (one per 5 MiB part)", fake.rangeGets.Load(), wantParts)
	}
	if got := fake.maxInflight.Load(); got < 2 {
		t.Errorf("at most %d ranged GET in flight at once, want parallel parts", got)
	}
	if left := workDirEntries(t, workDir); len(left) != 1 {
		t.Errorf("workDir holds %q, want only the extraction folder", left)
	}
}

func TestClassifyS3(t *testing.T) {
	status := func(code int) error {
		return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}},
			Err:      errors.New("response error"),
		}}
	}
	tests := []struct {
		name         string
		err          error
		wantNotFound bool
	}{
		{"NoSuchKey", &s3types.NoSuchKey{}, true},
		{"NoSuchBucket", &s3types.NoSuchBucket{}, true},
		{"HEAD NotFound", &s3types.NotFound{}, true},
		{"generic NoSuchBucket code", &smithy.GenericAPIError{Code: "NoSuchBucket"}, true},
		{"bare 404", status(http.StatusNotFound), true},
		{"AccessDenied", &smithy.GenericAPIError{Code: "AccessDenied"}, false},
		{"403", status(http.StatusForbidden), false},
		{"500", status(http.StatusInternalServerError), false},
		{"network", errors.New("connection refused"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := classifyS3(tc.err)
			if errors.Is(got, ErrNotFound) != tc.wantNotFound {
				t.Errorf("classifyS3(%v) = %v; ErrNotFound %v, want %v", tc.err, got, !tc.wantNotFound, tc.wantNotFound)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("classifyS3(%v) = %v, which lost the cause", tc.err, got)
			}
		})
	}
}

func TestPrepareS3Errors(t *testing.T) {
	fake := newS3(t, "us-east-1", "models")
	fake.put(t, "models", "notes.txt", []byte("plain text"))
	fake.put(t, "models", "empty.tar.gz", nil)
	fake.put(t, "models", "evil.tar.gz", buildTar(t, true, symlink("l", "../../etc")))
	fake.put(t, "models", "big.tar", buildTar(t, false, entry{name: "big", typ: tar.TypeReg, zeros: 1 << 20}))
	opts := fake.options()
	opts.MaxDownloadBytes = 512 << 10
	f, err := NewFetcher(opts)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url     string
		wantErr error
		wantMsg string
	}{
		{"s3://models/nope.tar.gz", ErrNotFound, `model data "s3://models/nope.tar.gz" not found`},
		{"s3://no-such-bucket/model.tar.gz", ErrNotFound, `model data "s3://no-such-bucket/model.tar.gz" not found`},
		{"s3://models/notes.txt", ErrInvalidArchive, `model data "s3://models/notes.txt": not a valid tar`},
		{"s3://models/empty.tar.gz", ErrInvalidArchive, "empty"},
		{"s3://models/evil.tar.gz", ErrUnsafeArchive, `unsafe archive entry "l"`},
		{"s3://models/big.tar", ErrTooLarge, "S3 object size exceeds the limit of 524288 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			workDir := filepath.Join(t.TempDir(), "work")
			got, err := f.Prepare(context.Background(), tc.url, "", workDir)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Prepare(%q) = %q, %v; want %v", tc.url, got, err, tc.wantErr)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tc.wantMsg)
			}
			if left := workDirEntries(t, workDir); len(left) != 0 {
				t.Errorf("failed Prepare left %q under workDir", left)
			}
		})
	}
}

// TestPrepareS3DefaultChain uses no explicit credentials or region: both
// come from the environment through aws-sdk-go-v2's default chain.
func TestPrepareS3DefaultChain(t *testing.T) {
	fake := newS3(t, "eu-west-1", "models")
	fake.put(t, "models", "m.tar.gz", buildTar(t, true, file("a", "x")))
	t.Setenv("AWS_ACCESS_KEY_ID", fake.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", fake.SecretKey)
	t.Setenv("AWS_REGION", "eu-west-1")
	f, err := NewFetcher(Options{S3: S3Options{Endpoint: fake.Endpoint, UsePathStyle: true}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Prepare(context.Background(), "s3://models/m.tar.gz", "", t.TempDir())
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	diffTrees(t, treeOf(t, got), map[string]string{"a": "f 0644 x"})
	c, err := f.clients(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if region := c.api.Options().Region; region != "eu-west-1" {
		t.Errorf("region = %q, want AWS_REGION's eu-west-1", region)
	}
}

// TestS3KeySegmentsNeverRead: whatever reaches the fetcher, an s3:// URL
// whose key has a ., .. or empty segment is refused before any S3 request
// (no credentials are even looked up): a file-backed S3 server would
// resolve it to another object than the one authorized.
func TestS3KeySegmentsNeverRead(t *testing.T) {
	f, err := NewFetcher(Options{S3: S3Options{Endpoint: "http://127.0.0.1:1", Region: "us-east-1"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, url := range []string{"s3://b/x/../secret", "s3://b/./m.tar.gz", "s3://b//m.tar.gz", "s3://b/a/../"} {
		if _, err := f.Prepare(ctx, url, "", t.TempDir()); !errors.Is(err, ErrUnsupportedURL) || !strings.Contains(err.Error(), "path segment") {
			t.Errorf("Prepare(%s): %v, want ErrUnsupportedURL naming the path segment", url, err)
		}
		if err := f.Check(ctx, url, "", false); !errors.Is(err, ErrUnsupportedURL) {
			t.Errorf("Check(%s): %v, want ErrUnsupportedURL", url, err)
		}
		if _, _, err := f.OpenObject(ctx, url); !errors.Is(err, ErrUnsupportedURL) {
			t.Errorf("OpenObject(%s): %v, want ErrUnsupportedURL", url, err)
		}
	}
}
