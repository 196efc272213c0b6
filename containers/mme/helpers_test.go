package mme

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers/artifact"

	"github.com/mce-run/mce/internal/awstest"
)

// TestMain isolates the AWS SDK from the network and the developer's AWS files.
func TestMain(m *testing.M) { os.Exit(awstest.Run(m)) }

// tarEntry is one archive member.
type tarEntry struct {
	name, body, link string
	typ              byte // tar.TypeReg when zero
}

func buildTarGz(tb testing.TB, entries ...tarEntry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.body))
		}
		if h.Typeflag == tar.TypeDir || h.Typeflag == tar.TypeSymlink {
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			tb.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := io.WriteString(tw, e.body); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// modelArchive is a Triton-shaped model: config.pbtxt and 1/model.bin of size bytes.
func modelArchive(tb testing.TB, name string, size int) []byte {
	return buildTarGz(tb,
		tarEntry{name: "config.pbtxt", body: fmt.Sprintf("name: %q\n", name)},
		tarEntry{name: "1/", typ: tar.TypeDir},
		tarEntry{name: "1/model.bin", body: strings.Repeat("w", size)},
	)
}

// writeFile writes data at dir/name, making folders.
func writeFile(tb testing.TB, dir, name string, data []byte) {
	tb.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// fakeGPU is GPU memory that the fake container fills on load and frees on unload.
type fakeGPU struct {
	mu          sync.Mutex
	used, total uint64
	maxUsed     uint64
	reserved    uint64 // kept by the container after unloads (keep == keepCache)
}

// How the fake container treats GPU memory on unload.
const (
	keepNothing = iota // frees it
	keepCache          // keeps it reserved and loads take it first: PyTorch's caching allocator without empty_cache
	keepLost           // keeps it and never uses it again: a leak
)

func (g *fakeGPU) Memory(index int) (uint64, uint64, error) {
	if index != 0 {
		return 0, 0, fmt.Errorf("unknown GPU %d", index)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.used, g.total, nil
}

// fakeMME is a multi-model container with Triton's SageMaker semantics
// (https://github.com/triton-inference-server/server/blob/main/src/sagemaker_server.cc): 409 on a second load, 404 for
// unknown models, 507 when full, the model named by the Target-Model
// header, {"error": …} bodies. It checks what mce sends and counts.
type fakeMME struct {
	tb       testing.TB
	modelDir string // the host folder standing in for /opt/ml/models

	capacity   int           // loaded models at most; 0 = unlimited
	gpu        *fakeGPU      // when set, each load takes footprint bytes
	footprint  uint64        //
	keep       int           // keepNothing, keepCache or keepLost
	loadDelay  time.Duration // each load takes this long
	refuse     map[string]int
	open       func(id string) int // open leases of a model, from the harness
	oomEvery   int64               // every n-th invoke answers 507 when full
	own404     map[string]bool     // models whose invokes answer 404 themselves (by Target-Model)
	loadedHook func(id string)

	mu        sync.Mutex
	loaded    map[string]string // id → Target-Model
	perModel  map[string]int    // successful loads per id
	maxLoaded int

	loadCalls, loads, conflicts, full507 atomic.Int64
	unloads, unload404                   atomic.Int64
	invokes, invoke404, invoke507        atomic.Int64
	describes                            atomic.Int64
	violations                           atomic.Int64 // contract breaks seen
	lastViolation                        atomic.Value
}

var urlPattern = regexp.MustCompile(`^/opt/ml/models/([0-9A-Za-z._]+)/model$`)

func newFakeMME(tb testing.TB, modelDir string) *fakeMME {
	return &fakeMME{tb: tb, modelDir: modelDir, loaded: map[string]string{}, perModel: map[string]int{}, refuse: map[string]int{},
		own404: map[string]bool{}}
}

func (f *fakeMME) violate(format string, args ...any) {
	f.violations.Add(1)
	f.lastViolation.Store(fmt.Sprintf(format, args...))
}

func (f *fakeMME) start(tb testing.TB) string {
	srv := httptest.NewServer(f)
	tb.Cleanup(srv.Close)
	return srv.URL
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func (f *fakeMME) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get(TargetModelHeader)
	rest, _ := strings.CutPrefix(r.URL.Path, "/models")
	rest = strings.TrimPrefix(rest, "/")
	id, invoke := strings.CutSuffix(rest, "/invoke")
	switch {
	case r.Method == http.MethodPost && rest == "":
		f.load(w, r, target)
	case r.Method == http.MethodPost && invoke:
		f.invoke(w, id, target)
	case r.Method == http.MethodDelete && id != "" && !invoke:
		f.unload(w, id, target)
	case r.Method == http.MethodGet && id != "" && !invoke:
		f.describe(w, id)
	default:
		w.WriteHeader(http.StatusBadRequest)
	}
}

func (f *fakeMME) load(w http.ResponseWriter, r *http.Request, target string) {
	f.loadCalls.Add(1)
	var body struct {
		ModelName string `json:"model_name"`
		URL       string `json:"url"`
	}
	if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Accept") != "application/json" {
		f.violate("load without JSON content type/accept")
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&body); err != nil {
		f.violate("load body: %v", err)
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	m := urlPattern.FindStringSubmatch(body.URL)
	if m == nil || m[1] != body.ModelName {
		f.violate("load url %q for %q", body.URL, body.ModelName)
		writeError(w, http.StatusBadRequest, `Invalid "url"`)
		return
	}
	if target == "" || ModelID(target) != body.ModelName {
		f.violate("load of %q with Target-Model %q", body.ModelName, target)
	}
	if _, err := os.Stat(filepath.Join(f.modelDir, body.ModelName, "model", "config.pbtxt")); err != nil {
		f.violate("load of %q: model files missing: %v", target, err)
		writeError(w, http.StatusBadRequest, "no config.pbtxt")
		return
	}
	if f.loadDelay > 0 {
		select {
		case <-time.After(f.loadDelay):
		case <-r.Context().Done():
			return
		}
	}
	if st, ok := f.refuse[target]; ok {
		writeError(w, st, "failed to load '"+target+"': bad config")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.loaded[body.ModelName]; ok {
		f.conflicts.Add(1)
		writeError(w, http.StatusConflict, "model '"+target+"' is already loaded")
		return
	}
	if f.capacity > 0 && len(f.loaded) >= f.capacity {
		f.full507.Add(1)
		writeError(w, http.StatusInsufficientStorage, "failed to load: CUDA out of memory")
		return
	}
	if f.gpu != nil {
		f.gpu.mu.Lock()
		take := min(f.gpu.reserved, f.footprint)
		if f.gpu.used+f.footprint-take > f.gpu.total {
			f.gpu.mu.Unlock()
			f.full507.Add(1)
			writeError(w, http.StatusInsufficientStorage, "failed to load: CUDA out of memory")
			return
		}
		f.gpu.reserved -= take
		f.gpu.used += f.footprint - take
		f.gpu.maxUsed = max(f.gpu.maxUsed, f.gpu.used)
		f.gpu.mu.Unlock()
	}
	f.loaded[body.ModelName] = target
	f.perModel[body.ModelName]++
	f.maxLoaded = max(f.maxLoaded, len(f.loaded))
	f.loads.Add(1)
	if f.loadedHook != nil {
		f.loadedHook(body.ModelName)
	}
	w.WriteHeader(http.StatusOK)
}

func (f *fakeMME) unload(w http.ResponseWriter, id, target string) {
	if f.open != nil && f.open(id) > 0 {
		f.violate("unload of %q while a lease is open", target)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	got, ok := f.loaded[id]
	if !ok {
		f.unload404.Add(1)
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if got != target {
		f.violate("unload of %q with Target-Model %q", got, target)
	}
	delete(f.loaded, id)
	if f.gpu != nil {
		f.gpu.mu.Lock()
		switch f.keep {
		case keepNothing:
			f.gpu.used -= f.footprint
		case keepCache:
			f.gpu.reserved += f.footprint
		}
		f.gpu.mu.Unlock()
	}
	f.unloads.Add(1)
	w.WriteHeader(http.StatusOK)
}

// describe answers GET /models/<id>: 200 when loaded, else 404.
func (f *fakeMME) describe(w http.ResponseWriter, id string) {
	f.describes.Add(1)
	f.mu.Lock()
	target, ok := f.loaded[id]
	f.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "model "+id+" is not loaded")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"modelName": id, "targetModel": target})
}

// forgetAll drops every loaded model without a word to mce, as a model server
// whose worker process died and was replaced does.
func (f *fakeMME) forgetAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.loaded)
}

func (f *fakeMME) invoke(w http.ResponseWriter, id, target string) {
	n := f.invokes.Add(1)
	f.mu.Lock()
	got, ok := f.loaded[id]
	full := f.capacity > 0 && len(f.loaded) >= f.capacity
	f.mu.Unlock()
	if !ok {
		f.invoke404.Add(1)
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if got != target {
		f.violate("invoke of %q with Target-Model %q", got, target)
	}
	f.mu.Lock()
	own := f.own404[target]
	f.mu.Unlock()
	if own {
		writeError(w, http.StatusNotFound, "no such item (the model's own answer)")
		return
	}
	if full && f.oomEvery > 0 && n%f.oomEvery == 0 {
		f.invoke507.Add(1)
		writeError(w, http.StatusInsufficientStorage, "CUDA out of memory")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"model":%q}`, target)
}

func (f *fakeMME) isLoaded(target string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.loaded[ModelID(target)]
	return ok
}

func (f *fakeMME) loadsOf(target string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.perModel[ModelID(target)]
}

func (f *fakeMME) check(tb testing.TB) {
	tb.Helper()
	if n := f.violations.Load(); n > 0 {
		tb.Errorf("the fake container saw %d contract violations; last: %v", n, f.lastViolation.Load())
	}
}

// countingObserver counts the metrics.
type countingObserver struct {
	hits, misses, downloads, loads, unloads, waits atomic.Int64
	evictions                                      atomic.Int64
	loadedNow, maxLoaded                           atomic.Int64
}

func (o *countingObserver) ModelLoadingWaitTime(time.Duration) { o.waits.Add(1) }
func (o *countingObserver) ModelDownloadingTime(time.Duration) { o.downloads.Add(1) }
func (o *countingObserver) ModelLoadingTime(time.Duration)     { o.loads.Add(1) }
func (o *countingObserver) ModelUnloadingTime(time.Duration)   { o.unloads.Add(1) }
func (o *countingObserver) ModelEvicted()                      { o.evictions.Add(1) }
func (o *countingObserver) ModelCacheHit(hit bool) {
	if hit {
		o.hits.Add(1)
	} else {
		o.misses.Add(1)
	}
}
func (o *countingObserver) LoadedModelCount(n int) {
	o.loadedNow.Store(int64(n))
	for m := o.maxLoaded.Load(); int64(n) > m && !o.maxLoaded.CompareAndSwap(m, int64(n)); m = o.maxLoaded.Load() {
	}
}

var _ Observer = (*countingObserver)(nil)

// env is a Cache and a Manager in front of a fake container.
type env struct {
	prefixDir, cacheDir string
	fake                *fakeMME
	base                string
	obs                 *countingObserver
	cache               *Cache
	mgr                 *Manager
}

type envOptions struct {
	capacity int64
	mgr      func(*ManagerOptions)
	fake     func(*fakeMME)
	prefix   string // default file:// of prefixDir
	cacheOpt func(*CacheOptions)
}

func newEnv(tb testing.TB, eo envOptions) *env {
	tb.Helper()
	root := tb.TempDir()
	e := &env{prefixDir: filepath.Join(root, "store"), cacheDir: filepath.Join(root, "cache"), obs: &countingObserver{}}
	if err := os.MkdirAll(e.prefixDir, 0o755); err != nil {
		tb.Fatal(err)
	}
	e.fake = newFakeMME(tb, e.cacheDir)
	if eo.fake != nil {
		eo.fake(e.fake)
	}
	e.base = e.fake.start(tb)
	prefix := eo.prefix
	if prefix == "" {
		prefix = "file://" + e.prefixDir + "/"
	}
	fetcher, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{e.prefixDir}})
	if err != nil {
		tb.Fatal(err)
	}
	co := CacheOptions{Dir: e.cacheDir, Prefix: prefix, Capacity: eo.capacity, Observer: e.obs, Logger: zerolog.Nop(), Fetcher: fetcher}
	if eo.cacheOpt != nil {
		eo.cacheOpt(&co)
	}
	if e.cache, err = NewCache(co); err != nil {
		tb.Fatal(err)
	}
	mo := ManagerOptions{Store: e.cache, BaseURL: func() string { return e.base }, Observer: e.obs, Logger: zerolog.Nop(),
		Endpoint: "ep", Variant: "v", Container: "c"}
	if eo.mgr != nil {
		eo.mgr(&mo)
	}
	if e.mgr, err = NewManager(mo); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(e.mgr.Close)
	return e
}

// put stores a model archive under the prefix.
func (e *env) put(tb testing.TB, target string, size int) {
	writeFile(tb, e.prefixDir, target, modelArchive(tb, target, size))
}

// use acquires and releases target.
func (e *env) use(tb testing.TB, target string) {
	tb.Helper()
	l, err := e.mgr.Acquire(context.Background(), target)
	if err != nil {
		tb.Fatalf("Acquire(%q): %v", target, err)
	}
	l.Release()
}

// onDisk reports whether target's files are in the cache folder.
func (e *env) onDisk(target string) bool {
	_, err := os.Stat(filepath.Join(e.cacheDir, ModelID(target), "model", "config.pbtxt"))
	return err == nil
}

// cacheEntries lists the cache folder.
func (e *env) cacheEntries(tb testing.TB) []string {
	des, err := os.ReadDir(e.cacheDir)
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

// invoke calls the model like the pipeline does.
func invoke(ctx context.Context, hc *http.Client, base string, l *Lease) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/models/"+l.ModelID()+"/invoke", strings.NewReader(`{}`))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(TargetModelHeader, l.TargetModel())
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// waitFor polls cond for up to 5 s.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lease is the pipeline's view of a lease.
type lease interface {
	ModelID() string
	OutOfMemory(ctx context.Context) error
	Release()
}

var _ lease = (*Lease)(nil)

var errAny = errors.New("any error")

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
