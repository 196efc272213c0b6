package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/internal/s3test"
)

type entry struct {
	name, body string
	typ        byte
	link       string
}

func tarGz(tb testing.TB, es ...entry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range es {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: typ, Linkname: e.link}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			tb.Fatal(err)
		}
		if typ == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func model(tb testing.TB, name string, size int) []byte {
	return tarGz(tb, entry{name: "config.pbtxt", body: "name: \"" + name + "\"\n"}, entry{name: "weights.bin", body: strings.Repeat("w", size)})
}

func put(tb testing.TB, dir, name string, data []byte) {
	tb.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// agentEnv is a real agent on loopback over a file:// prefix.
type agentEnv struct {
	prefixDir, cacheDir string
	srv                 *Server
	cache               *mme.Cache
	http                *httptest.Server
	downloads           atomic.Int64
}

type countObs struct {
	mme.NopObserver
	n *atomic.Int64
}

func (o countObs) ModelDownloadingTime(time.Duration) { o.n.Add(1) }

func newAgentEnv(t *testing.T, capacity int64, fetcher *artifact.Fetcher, prefix string) *agentEnv {
	t.Helper()
	root := t.TempDir()
	e := &agentEnv{prefixDir: filepath.Join(root, "models"), cacheDir: filepath.Join(root, "cache")}
	if err := os.MkdirAll(e.prefixDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if fetcher == nil {
		var err error
		fetcher, err = artifact.NewFetcher(artifact.Options{ModelRoots: []string{e.prefixDir}, MaxExtractedBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
	}
	if prefix == "" {
		prefix = "file://" + e.prefixDir + "/"
	}
	c, err := mme.NewCache(mme.CacheOptions{Dir: e.cacheDir, Prefix: prefix, Fetcher: fetcher, Capacity: capacity, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	e.cache = c
	e.srv = NewServer(c, zerolog.New(zerolog.NewTestWriter(t)))
	e.http = httptest.NewServer(e.srv)
	t.Cleanup(func() {
		e.http.Close()
		e.srv.Close()
		c.Close()
	})
	return e
}

func (e *agentEnv) client(t *testing.T, reset bool) *Client {
	t.Helper()
	c, err := NewClient(ClientOptions{BaseURL: func() string { return e.http.URL }, ResetFirst: reset,
		Observer: countObs{n: &e.downloads}, Logger: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// held counts the references the agent holds on target.
func (e *agentEnv) held(target string) int {
	e.srv.mu.Lock()
	defer e.srv.mu.Unlock()
	return len(e.srv.held[target])
}

// modelDirs lists the model folders in the cache folder.
func (e *agentEnv) modelDirs(t *testing.T) []string {
	t.Helper()
	des, err := os.ReadDir(e.cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

// waitFor polls cond for up to 5 s (releases are asynchronous).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestClientAcquireRelease: files land at <dir>/<ModelID>/model, a second
// acquire shares them without a download, the last release with Drop
// deletes them, and Usage follows the agent's answers.
func TestClientAcquireRelease(t *testing.T) {
	e := newAgentEnv(t, 0, nil, "")
	put(t, e.prefixDir, "en/a.tar.gz", model(t, "a", 1000))
	c := e.client(t, false)
	ctx := context.Background()
	f1, err := c.Acquire(ctx, "en/a.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	f2, err := c.Acquire(ctx, "en/a.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(e.cacheDir, mme.ModelID("en/a.tar.gz"), "model", "weights.bin"))
	if err != nil || len(got) != 1000 {
		t.Fatalf("model files: %d bytes, %v", len(got), err)
	}
	if f1.Size() < 1000 || f1.Size() != f2.Size() {
		t.Errorf("sizes %d and %d", f1.Size(), f2.Size())
	}
	if n := e.downloads.Load(); n != 1 {
		t.Errorf("%d downloads reported, want 1", n)
	}
	if b, n := c.Usage(); n != 1 || b != f1.Size() {
		t.Errorf("Usage = %d bytes, %d models", b, n)
	}
	c.Release(f1, true) // not the last reference: kept
	c.Release(f1, true) // twice is once
	waitFor(t, "one release", func() bool { return e.held("en/a.tar.gz") == 1 })
	if !e.cache.Has("en/a.tar.gz") {
		t.Fatal("files deleted while referenced")
	}
	c.Release(f2, true)
	waitFor(t, "the files to go", func() bool { return !e.cache.Has("en/a.tar.gz") })
	waitFor(t, "usage to drop", func() bool { _, n := c.Usage(); return n == 0 })
	waitFor(t, "the folder to go", func() bool { return len(e.modelDirs(t)) == 0 })
}

// TestClientTypedErrors: the agent's failures come back as the typed errors
// a local Cache gives, and leave nothing in the cache folder.
func TestClientTypedErrors(t *testing.T) {
	e := newAgentEnv(t, 0, nil, "")
	put(t, e.prefixDir, "corrupt.tar.gz", []byte("\x1f\x8b\x08 not gzip"))
	put(t, e.prefixDir, "slip.tar.gz", tarGz(t, entry{name: "config.pbtxt", body: "x"}, entry{name: "../../evil", body: "pwned"}))
	put(t, e.prefixDir, "link.tar.gz", tarGz(t, entry{name: "passwd", typ: tar.TypeSymlink, link: "/etc/passwd"}))
	put(t, e.prefixDir, "big.tar.gz", model(t, "big", 2<<20))
	if err := os.Symlink("/etc", filepath.Join(e.prefixDir, "out")); err != nil {
		t.Fatal(err)
	}
	c := e.client(t, false)
	for target, want := range map[string]error{
		"missing.tar.gz": artifact.ErrNotFound,
		"corrupt.tar.gz": artifact.ErrInvalidArchive,
		"slip.tar.gz":    artifact.ErrUnsafeArchive,
		"link.tar.gz":    artifact.ErrUnsafeArchive,
		"big.tar.gz":     artifact.ErrTooLarge,
		"out/passwd":     artifact.ErrOutsideModelRoots,
		"../x.tar.gz":    mme.ErrInvalidTargetModel,
	} {
		_, err := c.Acquire(context.Background(), target)
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", target, err, want)
			continue
		}
		var nf *mme.ModelNotFoundError
		if isNF := errors.As(err, &nf); isNF != (want == artifact.ErrNotFound) {
			t.Errorf("%s: ModelNotFoundError %v: %v", target, isNF, err)
		} else if isNF && (nf.TargetModel != target || !strings.HasSuffix(nf.URL, "/missing.tar.gz")) {
			t.Errorf("%s: %+v", target, nf)
		}
	}
	if d := e.modelDirs(t); len(d) != 0 {
		t.Errorf("left in the cache folder: %v", d)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(e.cacheDir), "evil")); err == nil {
		t.Error("an archive wrote outside the cache folder")
	}
}

// call sends a raw request to the agent and decodes an error answer.
func call(t *testing.T, base, method, path, ctype string, body []byte) (int, errorResponse) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var er errorResponse
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(data, &er); err != nil || er.Code == "" || er.Message == "" {
			t.Errorf("%s %s: status %d with a body that is not an error: %q", method, path, resp.StatusCode, data)
		}
	}
	return resp.StatusCode, er
}

// TestServerRefusesHostileInput: bad names, traversal, oversize and
// malformed bodies, other media types, unknown routes and methods get a
// clear 4xx and change nothing; the server never fetches outside its prefix.
func TestServerRefusesHostileInput(t *testing.T) {
	e := newAgentEnv(t, 0, nil, "")
	put(t, e.prefixDir, "ok.tar.gz", model(t, "ok", 10))
	put(t, filepath.Dir(e.prefixDir), "secret.tar.gz", model(t, "secret", 10)) // beside the prefix
	base := e.http.URL
	js := "application/json"
	body := func(target string) []byte { b, _ := json.Marshal(acquireRequest{TargetModel: target}); return b }
	tests := []struct {
		name, method, path, ctype string
		body                      []byte
		status                    int
		code                      string
	}{
		{"empty name", "POST", "/v1/acquire", js, body(""), 400, CodeInvalidTargetModel},
		{"absolute", "POST", "/v1/acquire", js, body("/etc/passwd"), 400, CodeInvalidTargetModel},
		{"dot dot", "POST", "/v1/acquire", js, body("../secret.tar.gz"), 400, CodeInvalidTargetModel},
		{"inner dot dot", "POST", "/v1/acquire", js, body("a/../../secret.tar.gz"), 400, CodeInvalidTargetModel},
		{"empty segment", "POST", "/v1/acquire", js, body("a//b"), 400, CodeInvalidTargetModel},
		{"nul", "POST", "/v1/acquire", js, body("a\x00b"), 400, CodeInvalidTargetModel},
		{"too long", "POST", "/v1/acquire", js, body(strings.Repeat("a", mme.MaxTargetModelLength+1)), 400, CodeInvalidTargetModel},
		{"release bad name", "POST", "/v1/release", js, []byte(`{"TargetModel":"../x"}`), 400, CodeInvalidTargetModel},
		{"oversize", "POST", "/v1/acquire", js, body(strings.Repeat("a", MaxRequestBytes)), 413, CodeRequestTooLarge},
		{"not json", "POST", "/v1/acquire", js, []byte("TargetModel=ok.tar.gz"), 400, CodeInvalidRequest},
		{"unknown field", "POST", "/v1/acquire", js, []byte(`{"TargetModel":"ok.tar.gz","URL":"file:///etc"}`), 400, CodeInvalidRequest},
		{"two values", "POST", "/v1/acquire", js, []byte(`{"TargetModel":"ok.tar.gz"}{}`), 400, CodeInvalidRequest},
		{"array", "POST", "/v1/acquire", js, []byte(`["ok.tar.gz"]`), 400, CodeInvalidRequest},
		{"no content type", "POST", "/v1/acquire", "", body("ok.tar.gz"), 415, CodeUnsupportedMediaType},
		{"form", "POST", "/v1/acquire", "application/x-www-form-urlencoded", body("ok.tar.gz"), 415, CodeUnsupportedMediaType},
		{"GET acquire", "GET", "/v1/acquire", "", nil, 405, CodeMethodNotAllowed},
		{"POST ping", "POST", "/ping", js, nil, 405, CodeMethodNotAllowed},
		{"root", "GET", "/", "", nil, 404, CodeUnknownRoute},
		{"dot segments", "POST", "/v1/x/../acquire", js, body("ok.tar.gz"), 404, CodeUnknownRoute},
		{"trailing slash", "POST", "/v1/acquire/", js, body("ok.tar.gz"), 404, CodeUnknownRoute},
		{"case", "POST", "/V1/ACQUIRE", js, body("ok.tar.gz"), 404, CodeUnknownRoute},
		{"pprof", "GET", "/debug/pprof/", "", nil, 404, CodeUnknownRoute},
		{"files", "GET", "/opt/ml/models/", "", nil, 404, CodeUnknownRoute},
		{"release not held", "POST", "/v1/release", js, []byte(`{"TargetModel":"ok.tar.gz"}`), 404, CodeNotHeld},
		{"reset with a body", "POST", "/v1/reset", js, []byte(`{"all":true}`), 400, CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, er := call(t, base, tt.method, tt.path, tt.ctype, tt.body)
			if status != tt.status || er.Code != tt.code {
				t.Errorf("%d %s (%s), want %d %s", status, er.Code, er.Message, tt.status, tt.code)
			}
		})
	}
	if d := e.modelDirs(t); len(d) != 0 {
		t.Errorf("hostile calls left %v in the cache folder", d)
	}
	// The documented routes still work.
	if status, _ := call(t, base, "GET", "/ping", "", nil); status != 200 {
		t.Errorf("ping: %d", status)
	}
	if status, er := call(t, base, "POST", "/v1/acquire", "application/json; charset=utf-8", body("ok.tar.gz")); status != 200 {
		t.Errorf("acquire: %d %+v", status, er)
	}
	if status, _ := call(t, base, "GET", "/v1/usage", "", nil); status != 200 {
		t.Errorf("usage: %d", status)
	}
}

// TestResetGivesBackEarlierReferences: a client attaching with ResetFirst
// gives back what an earlier one held, so capacity can delete those files.
func TestResetGivesBackEarlierReferences(t *testing.T) {
	size := 4000
	e := newAgentEnv(t, int64(2*size+size/2), nil, "")
	for _, m := range []string{"a", "b", "c"} {
		put(t, e.prefixDir, m+".tar.gz", model(t, m, size))
	}
	ctx := context.Background()
	old := e.client(t, false)
	for _, m := range []string{"a", "b"} {
		if _, err := old.Acquire(ctx, m+".tar.gz"); err != nil {
			t.Fatal(err)
		}
	}
	old.Close() // an mce that went away without releasing

	c := e.client(t, true)
	f, err := c.Acquire(ctx, "c.tar.gz") // resets first: a and b become deletable, a goes
	if err != nil {
		t.Fatal(err)
	}
	if e.cache.Has("a.tar.gz") || !e.cache.Has("b.tar.gz") || !e.cache.Has("c.tar.gz") {
		t.Errorf("after reset and a third model, on disk: a %v b %v c %v (capacity for 2)",
			e.cache.Has("a.tar.gz"), e.cache.Has("b.tar.gz"), e.cache.Has("c.tar.gz"))
	}
	if n, err := c.Reset(ctx); err != nil || n != 1 {
		t.Errorf("Reset = %d, %v; want the 1 reference on c", n, err)
	}
	c.Release(f, false) // the agent no longer holds it: logged, harmless
	if _, err := old.Acquire(ctx, "a.tar.gz"); !errors.Is(err, mme.ErrClosed) {
		t.Errorf("Acquire on a closed client: %v", err)
	}
}

// fakeContainer is an MME container that loads from the agent's folder (as
// the model container mounts it) and answers 507 past maxLoaded.
type fakeContainer struct {
	cacheDir  string
	maxLoaded int
	mu        sync.Mutex
	loaded    map[string]bool
	loads     int
}

func (f *fakeContainer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == "POST" && r.URL.Path == "/models":
		var b struct{ ModelName, URL string }
		var raw map[string]string
		json.NewDecoder(r.Body).Decode(&raw)
		b.ModelName, b.URL = raw["model_name"], raw["url"]
		rel, ok := strings.CutPrefix(b.URL, ModelsDir+"/")
		if !ok {
			w.WriteHeader(400)
			return
		}
		if _, err := os.Stat(filepath.Join(f.cacheDir, rel, "weights.bin")); err != nil {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":"no files at `+b.URL+`"}`)
			return
		}
		if len(f.loaded) >= f.maxLoaded {
			w.WriteHeader(507)
			io.WriteString(w, `{"error":"out of memory"}`)
			return
		}
		f.loaded[b.ModelName] = true
		f.loads++
	case r.Method == "DELETE" && strings.HasPrefix(r.URL.Path, "/models/"):
		delete(f.loaded, strings.TrimPrefix(r.URL.Path, "/models/"))
	default:
		w.WriteHeader(404)
	}
}

// TestManagerThroughAgent: an mme.Manager whose Store is the agent loads,
// evicts on 507 (the LRU is the Manager's, unchanged) and, with the cache
// disabled, deletes files in the agent after the last call.
func TestManagerThroughAgent(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		t.Run(map[bool]string{false: "cache", true: "disabled"}[disabled], func(t *testing.T) {
			e := newAgentEnv(t, 0, nil, "")
			for _, m := range []string{"a", "b", "c"} {
				put(t, e.prefixDir, m+".tar.gz", model(t, m, 100))
			}
			fc := &fakeContainer{cacheDir: e.cacheDir, maxLoaded: 2, loaded: map[string]bool{}}
			ctr := httptest.NewServer(fc)
			defer ctr.Close()
			store := e.client(t, true)
			m, err := mme.NewManager(mme.ManagerOptions{Store: store, BaseURL: func() string { return ctr.URL },
				CacheDisabled: disabled, EvictWait: 100 * time.Millisecond, Logger: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for _, target := range []string{"a.tar.gz", "b.tar.gz", "c.tar.gz", "a.tar.gz"} {
				l, err := m.Acquire(context.Background(), target)
				if err != nil {
					t.Fatalf("%s: %v", target, err)
				}
				if l.ModelID() != mme.ModelID(target) {
					t.Errorf("ModelID %s", l.ModelID())
				}
				l.Release()
			}
			if disabled {
				waitFor(t, "every file deleted", func() bool { _, n := e.cache.Usage(); return n == 0 })
				if got := m.Loaded(); len(got) != 0 {
					t.Errorf("loaded with the cache disabled: %v", got)
				}
				return
			}
			// a, b loaded; c: 507, a evicted; a again: 507, b evicted.
			if got := m.Loaded(); !slices.Equal(got, []string{"a.tar.gz", "c.tar.gz"}) {
				t.Errorf("Loaded = %v", got)
			}
			if fc.loads != 4 {
				t.Errorf("%d loads, want 4", fc.loads)
			}
			waitFor(t, "the agent to hold a and c only", func() bool {
				e.srv.mu.Lock()
				defer e.srv.mu.Unlock()
				return len(e.srv.held) == 2 && len(e.srv.held["a.tar.gz"]) == 1 && len(e.srv.held["c.tar.gz"]) == 1
			})
			if b, n := m.CacheUsage(); n != 3 || b <= 0 {
				t.Errorf("CacheUsage = %d, %d (files stay cached after an unload)", b, n)
			}
		})
	}
}

// TestClientBoundsAnswers: an answer that is too long, malformed, or never
// comes fails the call instead of hanging or reading without end.
func TestClientBoundsAnswers(t *testing.T) {
	var mode atomic.Value
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // then the server notices the client going
		switch mode.Load().(string) {
		case "huge":
			w.Write(bytes.Repeat([]byte(" "), 10<<20))
		case "garbage":
			w.Write([]byte("<html>"))
		case "slow":
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		case "500":
			w.WriteHeader(500)
			w.Write([]byte("boom"))
		}
	}))
	defer srv.Close()
	defer close(stop)
	c, err := NewClient(ClientOptions{BaseURL: func() string { return srv.URL }, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, m := range []string{"huge", "garbage", "slow", "500"} {
		mode.Store(m)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		start := time.Now()
		_, err := c.Acquire(ctx, "a.tar.gz")
		cancel()
		if err == nil || time.Since(start) > 3*time.Second {
			t.Errorf("%s: %v after %v", m, err, time.Since(start))
		}
		t.Logf("%s: %v", m, err)
	}
	if _, err := NewClient(ClientOptions{}); err == nil {
		t.Error("a client without BaseURL")
	}
	noAddr, _ := NewClient(ClientOptions{BaseURL: func() string { return "" }})
	if _, err := noAddr.Acquire(context.Background(), "a.tar.gz"); err == nil {
		t.Error("Acquire without an address")
	}
}

// TestS3PrefixThroughAgent: the agent downloads from a real S3 server
// (versitygw) with the fetcher's S3 settings, and a missing key is
// ModelNotFound with its s3:// URL.
func TestS3PrefixThroughAgent(t *testing.T) {
	s3 := s3test.Start(t)
	s3.Bucket(t, "models")
	s3.Put(t, "models", "mme/en/a.tar.gz", model(t, "a", 50_000))
	f, err := artifact.NewFetcher(artifact.Options{S3: artifact.S3Options{Endpoint: s3.Endpoint, Region: s3.Region,
		UsePathStyle: true, Credentials: s3.Credentials()}})
	if err != nil {
		t.Fatal(err)
	}
	e := newAgentEnv(t, 0, f, "s3://models/mme/")
	c := e.client(t, true)
	files, err := c.Acquire(context.Background(), "en/a.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	if files.Size() < 50_000 || !e.cache.Has("en/a.tar.gz") {
		t.Errorf("size %d", files.Size())
	}
	_, err = c.Acquire(context.Background(), "en/missing.tar.gz")
	var nf *mme.ModelNotFoundError
	if !errors.As(err, &nf) || nf.URL != "s3://models/mme/en/missing.tar.gz" || !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
}

// TestAcquireBeyondCapacityRefused: new files that do not fit in the disk
// capacity beside those of models in use are refused (507 CacheFull, which
// the client turns into artifact.ErrTooLarge as a full disk budget on
// Docker) and deleted; once a model is given back its files make room.
func TestAcquireBeyondCapacityRefused(t *testing.T) {
	size := 4000
	e := newAgentEnv(t, int64(2*size+size/2), nil, "")
	for _, m := range []string{"a", "b", "c"} {
		put(t, e.prefixDir, m+".tar.gz", model(t, m, size))
	}
	put(t, e.prefixDir, "huge.tar.gz", model(t, "huge", 3*size))
	ctx := context.Background()
	c := e.client(t, false)
	fa, err := c.Acquire(ctx, "a.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "b.tar.gz"); err != nil {
		t.Fatal(err)
	}
	js := "application/json"
	status, er := call(t, e.http.URL, "POST", "/v1/acquire", js, []byte(`{"TargetModel":"c.tar.gz"}`))
	if status != http.StatusInsufficientStorage || er.Code != CodeCacheFull || !strings.Contains(er.Message, "disk capacity") {
		t.Errorf("acquire past capacity: %d %s %q, want 507 %s", status, er.Code, er.Message, CodeCacheFull)
	}
	if _, err := c.Acquire(ctx, "c.tar.gz"); !errors.Is(err, artifact.ErrTooLarge) {
		t.Errorf("client acquire past capacity: %v, want artifact.ErrTooLarge", err)
	}
	if e.cache.Has("c.tar.gz") || e.held("c.tar.gz") != 0 {
		t.Errorf("refused model kept: on disk %v, %d references", e.cache.Has("c.tar.gz"), e.held("c.tar.gz"))
	}
	if b, _ := e.cache.Usage(); b > e.cache.Capacity() {
		t.Errorf("cache holds %d bytes, capacity %d", b, e.cache.Capacity())
	}
	// One model larger than the whole capacity is refused too.
	if _, err := c.Acquire(ctx, "huge.tar.gz"); !errors.Is(err, artifact.ErrTooLarge) {
		t.Errorf("model larger than the capacity: %v", err)
	}
	// A model already on disk takes a reference without new bytes.
	if _, err := c.Acquire(ctx, "a.tar.gz"); err != nil {
		t.Errorf("second reference on a model on disk: %v", err)
	}
	// Given back, a's files make room for c.
	c.Release(fa, false)
	waitFor(t, "a's release", func() bool { return e.held("a.tar.gz") == 1 })
	c2 := e.client(t, true) // gives back every reference: a and b become deletable
	if _, err := c2.Acquire(ctx, "c.tar.gz"); err != nil {
		t.Fatalf("acquire after a release: %v", err)
	}
	if !e.cache.Has("c.tar.gz") {
		t.Error("c not on disk after it was acquired")
	}
}

// TestReferencesPerModelCapped: past MaxReferencesPerModel on one model
// the agent refuses (409 TooManyReferences) instead of keeping them all;
// a release makes room again and a reset gives back exactly the cap.
func TestReferencesPerModelCapped(t *testing.T) {
	e := newAgentEnv(t, 0, nil, "")
	put(t, e.prefixDir, "a.tar.gz", model(t, "a", 10))
	put(t, e.prefixDir, "b.tar.gz", model(t, "b", 10))
	js := "application/json"
	a := []byte(`{"TargetModel":"a.tar.gz"}`)
	for i := range MaxReferencesPerModel {
		if status, er := call(t, e.http.URL, "POST", "/v1/acquire", js, a); status != 200 {
			t.Fatalf("acquire %d: %d %+v", i, status, er)
		}
	}
	status, er := call(t, e.http.URL, "POST", "/v1/acquire", js, a)
	if status != http.StatusConflict || er.Code != CodeTooManyReferences {
		t.Fatalf("acquire past the cap: %d %+v, want 409 %s", status, er, CodeTooManyReferences)
	}
	if n := e.held("a.tar.gz"); n != MaxReferencesPerModel {
		t.Errorf("%d references held, want %d", n, MaxReferencesPerModel)
	}
	// Another model is not affected.
	if status, er := call(t, e.http.URL, "POST", "/v1/acquire", js, []byte(`{"TargetModel":"b.tar.gz"}`)); status != 200 {
		t.Errorf("acquire of another model: %d %+v", status, er)
	}
	if status, er := call(t, e.http.URL, "POST", "/v1/release", js, a); status != 200 {
		t.Fatalf("release: %d %+v", status, er)
	}
	if status, er := call(t, e.http.URL, "POST", "/v1/acquire", js, a); status != 200 {
		t.Errorf("acquire after a release: %d %+v", status, er)
	}
	c := e.client(t, false)
	if n, err := c.Reset(context.Background()); err != nil || n != MaxReferencesPerModel+1 {
		t.Errorf("Reset = %d, %v; want %d", n, err, MaxReferencesPerModel+1)
	}
}
