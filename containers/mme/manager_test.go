package mme

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestAcquireLoadsThenHits(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.put(t, "sentiment/en.tar.gz", 100)
	ctx := context.Background()

	l, err := e.mgr.Acquire(ctx, "sentiment/en.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	if l.ModelID() != ModelID("sentiment/en.tar.gz") {
		t.Errorf("ModelID = %q", l.ModelID())
	}
	if st, err := invoke(ctx, http.DefaultClient, e.base, l); err != nil || st != http.StatusOK {
		t.Fatalf("invoke = %d, %v", st, err)
	}
	l.Release()
	l.Release() // idempotent
	e.use(t, "sentiment/en.tar.gz")

	if got := e.mgr.Loaded(); !slices.Equal(got, []string{"sentiment/en.tar.gz"}) {
		t.Errorf("Loaded = %v", got)
	}
	if !e.onDisk("sentiment/en.tar.gz") {
		t.Error("model files are not in the cache folder")
	}
	if fi, err := os.Stat(filepath.Join(e.cacheDir, ModelID("sentiment/en.tar.gz"))); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("model folder mode = %v, %v; want 0755 (containers run as any user)", fi.Mode(), err)
	}
	o := e.obs
	if o.hits.Load() != 1 || o.misses.Load() != 1 || o.downloads.Load() != 1 || o.loads.Load() != 1 ||
		o.waits.Load() != 1 || o.loadedNow.Load() != 1 {
		t.Errorf("metrics: hits %d misses %d downloads %d loads %d waits %d loaded %d; want 1 each",
			o.hits.Load(), o.misses.Load(), o.downloads.Load(), o.loads.Load(), o.waits.Load(), o.loadedNow.Load())
	}
	if bytes, n := e.cache.Usage(); n != 1 || bytes < 100 {
		t.Errorf("Usage = %d bytes, %d models", bytes, n)
	}
	e.fake.check(t)
}

func TestConcurrentFirstCallsShareOneDownloadAndLoad(t *testing.T) {
	e := newEnv(t, envOptions{fake: func(f *fakeMME) { f.loadDelay = 100 * time.Millisecond }})
	e.put(t, "big.tar.gz", 4096)
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			l, err := e.mgr.Acquire(context.Background(), "big.tar.gz")
			if err != nil {
				errs <- err
				return
			}
			l.Release()
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if d, c := e.obs.downloads.Load(), e.fake.loadCalls.Load(); d != 1 || c != 1 {
		t.Errorf("%d concurrent first calls: %d downloads, %d load calls; want 1 and 1", n, d, c)
	}
	if h, m := e.obs.hits.Load(), e.obs.misses.Load(); h+m != n {
		t.Errorf("cache-hit samples = %d, want %d", h+m, n)
	}
	e.fake.check(t)
}

func TestLeasedModelIsNeverEvicted(t *testing.T) {
	var mu sync.Mutex
	open := map[string]int{}
	e := newEnv(t, envOptions{
		fake: func(f *fakeMME) {
			f.capacity = 2
			f.open = func(id string) int { mu.Lock(); defer mu.Unlock(); return open[id] }
		},
		mgr: func(o *ManagerOptions) { o.EvictWait = 50 * time.Millisecond },
	})
	for _, m := range []string{"a", "b", "c", "d", "e"} {
		e.put(t, m, 10)
	}
	ctx := context.Background()
	acquire := func(target string) *Lease {
		t.Helper()
		l, err := e.mgr.Acquire(ctx, target)
		if err != nil {
			t.Fatalf("Acquire(%s): %v", target, err)
		}
		mu.Lock()
		open[l.ModelID()]++
		mu.Unlock()
		return l
	}
	release := func(l *Lease) {
		mu.Lock()
		open[l.ModelID()]--
		mu.Unlock()
		l.Release()
	}

	a := acquire("a") // held throughout
	release(acquire("b"))
	release(acquire("c")) // 507: b is idle, a is leased → b goes
	if e.fake.isLoaded("b") || !e.fake.isLoaded("a") || !e.fake.isLoaded("c") {
		t.Fatalf("after c: loaded %v, want a and c", e.mgr.Loaded())
	}
	d := acquire("d") // 507: c goes
	if e.fake.isLoaded("c") || !e.fake.isLoaded("a") {
		t.Fatalf("after d: loaded %v, want a and d", e.mgr.Loaded())
	}
	// Both loaded models are leased: nothing can go.
	_, err := e.mgr.Acquire(ctx, "e")
	if !errors.Is(err, ErrNoMemory) {
		t.Fatalf("Acquire(e) with every model leased = %v, want ErrNoMemory", err)
	}
	// OutOfMemory from a's invoke: d is leased too, nothing can go.
	if err := a.OutOfMemory(ctx); !errors.Is(err, ErrNoMemory) {
		t.Fatalf("OutOfMemory with every other model leased = %v, want ErrNoMemory", err)
	}
	release(d)
	if err := a.OutOfMemory(ctx); err != nil { // d is idle now: it goes, a stays
		t.Fatalf("OutOfMemory = %v", err)
	}
	if e.fake.isLoaded("d") || !e.fake.isLoaded("a") {
		t.Fatalf("after OutOfMemory: loaded %v, want a", e.mgr.Loaded())
	}
	if err := a.OutOfMemory(ctx); !errors.Is(err, ErrNoMemory) {
		t.Fatalf("OutOfMemory with nothing else loaded = %v, want ErrNoMemory", err)
	}
	release(a)
	if e.fake.unloads.Load() != 3 {
		t.Errorf("unloads = %d, want 3 (b, c, d)", e.fake.unloads.Load())
	}
	if got := e.obs.evictions.Load(); got != 3 {
		t.Errorf("evictions = %d, want 3 (b, c, d made room)", got)
	}
	e.fake.check(t)
}

func TestBusyModelBecomesIdleDuringLoad(t *testing.T) {
	e := newEnv(t, envOptions{fake: func(f *fakeMME) { f.capacity = 1 }})
	e.put(t, "a", 10)
	e.put(t, "b", 10)
	a, err := e.mgr.Acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		a.Release()
	}()
	// b's load is answered 507 while a is busy; it waits for a to be idle.
	e.use(t, "b")
	if got := e.mgr.Loaded(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("Loaded = %v, want [b]", got)
	}
	e.fake.check(t)
}

func TestLoadAnswers(t *testing.T) {
	e := newEnv(t, envOptions{fake: func(f *fakeMME) {
		f.refuse["bad-config"] = http.StatusBadRequest
		f.refuse["huge"] = http.StatusInsufficientStorage
	}})
	for _, m := range []string{"bad-config", "huge", "preloaded"} {
		e.put(t, m, 10)
	}
	ctx := context.Background()

	_, err := e.mgr.Acquire(ctx, "bad-config")
	var le *LoadError
	if !errors.As(err, &le) || le.Status != 400 || le.Message != "failed to load 'bad-config': bad config" {
		t.Fatalf("Acquire(bad-config) = %v, want *LoadError 400 with the container's message", err)
	}
	_, err = e.mgr.Acquire(ctx, "huge")
	if !errors.Is(err, ErrNoMemory) {
		t.Fatalf("Acquire(huge) = %v, want ErrNoMemory", err)
	}
	t.Log(err)
	if len(e.mgr.Loaded()) != 0 {
		t.Errorf("Loaded = %v after refused loads", e.mgr.Loaded())
	}
	// Files the container refused are deleted (issue 9, class 5); files of
	// a model refused for memory are fine and stay.
	if e.onDisk("bad-config") {
		t.Error("files of a model the container refused stay in the cache")
	}
	if !e.onDisk("huge") {
		t.Error("files of a model refused for lack of memory were deleted; they stay cached")
	}

	// 409: the container already has the model (e.g. mce restarted).
	e.fake.mu.Lock()
	e.fake.loaded[ModelID("preloaded")] = "preloaded"
	e.fake.mu.Unlock()
	e.use(t, "preloaded")
	if e.fake.conflicts.Load() != 1 || !slices.Equal(e.mgr.Loaded(), []string{"preloaded"}) {
		t.Errorf("409: conflicts %d, Loaded %v", e.fake.conflicts.Load(), e.mgr.Loaded())
	}
	e.fake.check(t)
}

func TestLoadTimeoutNotReadyThenHit(t *testing.T) {
	e := newEnv(t, envOptions{
		fake: func(f *fakeMME) { f.loadDelay = 300 * time.Millisecond },
		mgr:  func(o *ManagerOptions) { o.LoadTimeout = 30 * time.Millisecond },
	})
	e.put(t, "slow", 10)
	ctx := context.Background()
	_, err := e.mgr.Acquire(ctx, "slow")
	var nr *NotReadyError
	if !errors.As(err, &nr) || nr.TargetModel != "slow" {
		t.Fatalf("Acquire = %v, want *NotReadyError", err)
	}
	// A caller whose own deadline ends first gets NotReady too.
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	_, err = e.mgr.Acquire(short, "slow")
	cancel()
	if !errors.As(err, &nr) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with a short deadline = %v, want *NotReadyError", err)
	}
	waitFor(t, "the background load", func() bool { return slices.Equal(e.mgr.Loaded(), []string{"slow"}) })
	hits := e.obs.hits.Load()
	e.use(t, "slow")
	if e.obs.hits.Load() != hits+1 || e.fake.loadCalls.Load() != 1 {
		t.Errorf("after the load: hits +%d, load calls %d; want a hit and 1 load", e.obs.hits.Load()-hits, e.fake.loadCalls.Load())
	}
	// Cancelled callers get their context's error, without NotReady.
	e.put(t, "slow2", 10)
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, err := e.mgr.Acquire(cctx, "slow2"); !errors.Is(err, context.Canceled) || errors.As(err, &nr) {
		t.Errorf("Acquire with a cancelled context = %v, want context.Canceled", err)
	}
	e.fake.check(t)
}

func TestCacheDisabled(t *testing.T) {
	e := newEnv(t, envOptions{mgr: func(o *ManagerOptions) { o.CacheDisabled = true }})
	e.put(t, "once", 10)
	l, err := e.mgr.Acquire(context.Background(), "once")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := e.mgr.Acquire(context.Background(), "once")
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	time.Sleep(20 * time.Millisecond)
	if !e.fake.isLoaded("once") {
		t.Fatal("unloaded while a lease was still open")
	}
	l2.Release()
	waitFor(t, "the unload and deletion", func() bool {
		return !e.fake.isLoaded("once") && !e.onDisk("once") && len(e.cacheEntries(t)) == 0
	})
	e.use(t, "once") // downloaded and loaded again
	if d := e.obs.downloads.Load(); d != 2 {
		t.Errorf("downloads = %d, want 2", d)
	}
	e.fake.check(t)
}

func TestIdleTTL(t *testing.T) {
	e := newEnv(t, envOptions{mgr: func(o *ManagerOptions) { o.IdleTTL = 80 * time.Millisecond }})
	e.put(t, "idle", 10)
	e.put(t, "busy", 10)
	e.use(t, "idle")
	busy, err := e.mgr.Acquire(context.Background(), "busy")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the idle model's unload", func() bool { return !e.fake.isLoaded("idle") })
	time.Sleep(100 * time.Millisecond)
	if !e.fake.isLoaded("busy") {
		t.Fatal("a model with a request in flight was unloaded by the sweeper")
	}
	if !e.onDisk("idle") {
		t.Error("IdleTTL deleted files; they stay cached")
	}
	busy.Release()
	waitFor(t, "the second unload", func() bool { return !e.fake.isLoaded("busy") })
	if got := e.obs.loadedNow.Load(); got != 0 {
		t.Errorf("LoadedModelCount = %d, want 0", got)
	}
	if got := e.obs.evictions.Load(); got != 0 {
		t.Errorf("evictions = %d, want 0: idle unloads make no room for anyone", got)
	}
	e.fake.check(t)
}

func TestDiskCapacityDeletesOnlyUnloadedModels(t *testing.T) {
	const size = 10_000
	e := newEnv(t, envOptions{capacity: 3*size + size/2, fake: func(f *fakeMME) { f.capacity = 2 }})
	for _, m := range []string{"a", "b", "c", "d"} {
		e.put(t, m, size)
	}
	e.use(t, "a")
	e.use(t, "b")
	e.use(t, "c") // 507 → a unloaded; a, b, c on disk
	if e.fake.isLoaded("a") || !e.onDisk("a") {
		t.Fatal("a should be unloaded but cached")
	}
	e.use(t, "d") // download takes the cache over capacity: a (unloaded) goes; then 507 → b unloaded
	if e.onDisk("a") {
		t.Error("the unloaded model a was kept over capacity")
	}
	for _, m := range []string{"b", "c", "d"} {
		if !e.onDisk(m) {
			t.Errorf("%s deleted; it was loaded when the cache went over capacity", m)
		}
	}
	e.use(t, "a") // downloaded again: b (unloaded by now) goes, c and d are loaded
	if e.onDisk("b") || !e.onDisk("c") || !e.onDisk("d") || !e.onDisk("a") {
		t.Errorf("on disk: a %v b %v c %v d %v; want a, c, d", e.onDisk("a"), e.onDisk("b"), e.onDisk("c"), e.onDisk("d"))
	}
	if used, n := e.cache.Usage(); used > 3*size+size/2 || n != 3 {
		t.Errorf("Usage = %d bytes in %d models, capacity %d", used, n, 3*size+size/2)
	}

	// Files of loaded models are never deleted, even over capacity; they go
	// as soon as they are unloaded.
	e2 := newEnv(t, envOptions{capacity: size + size/2})
	e2.put(t, "x", size)
	e2.put(t, "y", size)
	e2.use(t, "x")
	e2.use(t, "y")
	if !e2.onDisk("x") || !e2.onDisk("y") {
		t.Fatal("files of loaded models deleted")
	}
	e2.mgr.Reset() // the container restarted: nothing loaded, both deletable
	if e2.onDisk("x") == e2.onDisk("y") {
		t.Errorf("after unloading: x on disk %v, y %v; want one of them", e2.onDisk("x"), e2.onDisk("y"))
	}
	e.fake.check(t)
}

func TestResetReloadsFromCache(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.put(t, "m", 10)
	e.use(t, "m")
	// The container restarts: it has nothing loaded.
	e.fake.mu.Lock()
	clear(e.fake.loaded)
	e.fake.mu.Unlock()
	e.mgr.Reset()
	if len(e.mgr.Loaded()) != 0 {
		t.Fatalf("Loaded = %v after Reset", e.mgr.Loaded())
	}
	l, err := e.mgr.Acquire(context.Background(), "m")
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := invoke(context.Background(), http.DefaultClient, e.base, l); st != http.StatusOK {
		t.Errorf("invoke after Reset = %d", st)
	}
	l.Release()
	if e.obs.downloads.Load() != 1 || e.fake.loads.Load() != 2 {
		t.Errorf("downloads %d, loads %d; want 1 and 2", e.obs.downloads.Load(), e.fake.loads.Load())
	}
	e.fake.check(t)
}

func TestClose(t *testing.T) {
	e := newEnv(t, envOptions{fake: func(f *fakeMME) { f.loadDelay = 5 * time.Second }})
	e.put(t, "m", 10)
	done := make(chan error, 1)
	go func() {
		_, err := e.mgr.Acquire(context.Background(), "m")
		done <- err
	}()
	waitFor(t, "the load call", func() bool { return e.fake.loadCalls.Load() == 1 })
	start := time.Now()
	e.mgr.Close()
	if err := <-done; err == nil {
		t.Error("Acquire succeeded across Close")
	}
	if time.Since(start) > 2*time.Second {
		t.Error("Close waited for the load instead of cancelling it")
	}
	if _, err := e.mgr.Acquire(context.Background(), "m"); !errors.Is(err, ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
	if _, n := e.cache.Usage(); n != 1 {
		t.Errorf("cached models = %d; files stay after Close", n)
	}
}

func TestOptionsValidation(t *testing.T) {
	dir := t.TempDir()
	for name, o := range map[string]CacheOptions{
		"no dir":          {Prefix: "file://x/"},
		"bad scheme":      {Dir: dir, Prefix: "http://x/"},
		"no bucket":       {Dir: dir, Prefix: "s3:///x/"},
		"negative cap":    {Dir: dir, Prefix: "file://x/", Capacity: -1},
		"empty file path": {Dir: dir, Prefix: "file://"},
	} {
		if _, err := NewCache(o); err == nil {
			t.Errorf("NewCache(%s) succeeded", name)
		}
	}
	c, err := NewCache(CacheOptions{Dir: dir, Prefix: "file://x"})
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]ManagerOptions{
		"no cache":        {BaseURL: func() string { return "" }},
		"no base":         {Store: c},
		"gpu without ids": {Store: c, BaseURL: func() string { return "" }, GPU: &fakeGPU{}},
		"threshold":       {Store: c, BaseURL: func() string { return "" }, GPUThreshold: 1.5},
		"negative":        {Store: c, BaseURL: func() string { return "" }, IdleTTL: -1},
	} {
		if _, err := NewManager(o); err == nil {
			t.Errorf("NewManager(%s) succeeded", name)
		}
	}
}

func TestNewCacheRemovesLeftovers(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, ".tmp-123/model/x", []byte("x"))
	writeFile(t, dir, ".trash-1-abc/model/x", []byte("x"))
	writeFile(t, dir, ModelID("old")+"/model/x", []byte("x"))
	writeFile(t, dir, "keep-me.txt", []byte("x"))
	if _, err := NewCache(CacheOptions{Dir: dir, Prefix: "file://x/"}); err != nil {
		t.Fatal(err)
	}
	des, _ := os.ReadDir(dir)
	if len(des) != 1 || des[0].Name() != "keep-me.txt" {
		t.Errorf("left in the cache folder: %v", des)
	}
}
