package mme

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/mce-run/mce/pipeline"
)

// A container that forgets its models without restarting (its server's worker died and a fresh one took its
// place) answers 404 to the invoke of a model the manager counts as loaded: NotLoaded loads it again.
func TestNotLoadedReloadsAModelTheContainerForgot(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.put(t, "a.tar.gz", 10)
	e.put(t, "b.tar.gz", 10)
	ctx := context.Background()
	e.use(t, "b.tar.gz")
	l, err := e.mgr.Acquire(ctx, "a.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if st, err := invoke(ctx, http.DefaultClient, e.base, l); err != nil || st != http.StatusOK {
		t.Fatalf("invoke = %d, %v", st, err)
	}

	e.fake.forgetAll()
	if st, _ := invoke(ctx, http.DefaultClient, e.base, l); st != http.StatusNotFound {
		t.Fatalf("invoke of a forgotten model = %d, want 404 from the fake", st)
	}
	retry, err := l.NotLoaded(ctx)
	if err != nil || !retry {
		t.Fatalf("NotLoaded = %v, %v; want true, nil", retry, err)
	}
	if st, err := invoke(ctx, http.DefaultClient, e.base, l); err != nil || st != http.StatusOK {
		t.Fatalf("invoke after NotLoaded = %d, %v", st, err)
	}
	if n := e.fake.loadsOf("a.tar.gz"); n != 2 {
		t.Errorf("loads of a.tar.gz = %d, want 2", n)
	}
	if e.fake.describes.Load() != 1 {
		t.Errorf("describe calls = %d, want 1", e.fake.describes.Load())
	}
	if e.obs.downloads.Load() != 2 { // a and b, once each: the files stayed cached
		t.Errorf("downloads = %d, want 2", e.obs.downloads.Load())
	}
	// b is still counted as loaded (no call told otherwise); its next call finds out the same way.
	if got := e.mgr.Loaded(); !slices.Equal(got, []string{"a.tar.gz", "b.tar.gz"}) {
		t.Errorf("Loaded = %v", got)
	}
	lb, err := e.mgr.Acquire(ctx, "b.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Release()
	if st, _ := invoke(ctx, http.DefaultClient, e.base, lb); st != http.StatusNotFound {
		t.Fatalf("invoke of forgotten b = %d, want 404", st)
	}
	if retry, err := lb.NotLoaded(ctx); err != nil || !retry {
		t.Fatalf("NotLoaded(b) = %v, %v", retry, err)
	}
	if st, _ := invoke(ctx, http.DefaultClient, e.base, lb); st != http.StatusOK {
		t.Errorf("invoke of b after NotLoaded = %d", st)
	}
	if o := e.obs.loadedNow.Load(); o != 2 {
		t.Errorf("LoadedModelCount = %d, want 2", o)
	}
	e.fake.check(t)
}

// A 404 that is the model's own answer (the container still has the model) is passed on: nothing is loaded again.
func TestNotLoadedKeepsTheModelsOwn404(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.put(t, "a.tar.gz", 10)
	e.fake.own404["a.tar.gz"] = true
	ctx := context.Background()
	l, err := e.mgr.Acquire(ctx, "a.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if st, _ := invoke(ctx, http.DefaultClient, e.base, l); st != http.StatusNotFound {
		t.Fatalf("invoke = %d, want the model's 404", st)
	}
	retry, err := l.NotLoaded(ctx)
	if err != nil || retry {
		t.Fatalf("NotLoaded = %v, %v; want false, nil", retry, err)
	}
	if n := e.fake.loadsOf("a.tar.gz"); n != 1 {
		t.Errorf("loads = %d, want 1", n)
	}
	if got := e.mgr.Loaded(); !slices.Equal(got, []string{"a.tar.gz"}) {
		t.Errorf("Loaded = %v", got)
	}
	e.fake.check(t)
}

// Many calls of one forgotten model see 404 at once: one load brings it back for all of them.
func TestNotLoadedConcurrentCallsShareOneReload(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.put(t, "a.tar.gz", 10)
	ctx := context.Background()
	e.use(t, "a.tar.gz")
	const n = 16
	leases := make([]*Lease, n)
	for i := range leases {
		l, err := e.mgr.Acquire(ctx, "a.tar.gz")
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = l
	}
	e.fake.forgetAll()
	for _, l := range leases { // every call has its 404 before any reports it
		if st, _ := invoke(ctx, http.DefaultClient, e.base, l); st != http.StatusNotFound {
			t.Fatalf("invoke of the forgotten model = %d, want 404", st)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for _, l := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer l.Release()
			retry, err := l.NotLoaded(ctx)
			if err != nil || !retry {
				errs <- "NotLoaded: " + errString(err)
				return
			}
			if st, _ := invoke(ctx, http.DefaultClient, e.base, l); st != http.StatusOK {
				errs <- "retry not 200"
			}
		}()
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Error(s)
	}
	if got := e.fake.loadsOf("a.tar.gz"); got != 2 {
		t.Errorf("loads = %d, want 2 (the first and one reload)", got)
	}
	if c := e.fake.conflicts.Load(); c != 0 {
		t.Errorf("409s = %d, want 0", c)
	}
	e.fake.check(t)
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// mmContainer is a multi-model container for the pipeline, as the engines adapt theirs.
type mmContainer struct {
	base string
	mgr  *Manager
}

func (c mmContainer) Hostname() string { return "torch" }
func (c mmContainer) BaseURL() string  { return c.base }
func (c mmContainer) Ready() bool      { return true }
func (c mmContainer) Acquire(ctx context.Context, target string) (pipeline.Lease, error) {
	l, err := c.mgr.Acquire(ctx, target)
	if err != nil {
		return nil, err
	}
	return l, nil
}

var _ pipeline.NotLoadedLease = (*Lease)(nil)

// The pipeline's invoke of a forgotten model answers 200: it asks the lease to load the model again and retries once.
// A model's own 404 reaches the client.
func TestPipelineRetriesAForgottenModel(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.put(t, "a.tar.gz", 10)
	e.put(t, "own.tar.gz", 10)
	e.fake.own404["own.tar.gz"] = true
	iv := pipeline.NewInvoker(pipeline.Options{})
	defer iv.Close()
	c := mmContainer{base: e.base, mgr: e.mgr}
	route := pipeline.NewRoute("mme", pipeline.Serial,
		[]*pipeline.Variant{pipeline.NewVariant("AllTraffic", 1, []*pipeline.Instance{pipeline.NewInstance([]pipeline.Container{c})})})
	call := func(target string) (int, error) {
		resp, err := iv.Invoke(context.Background(), route, &pipeline.Request{Body: []byte(`{}`), ContentType: "application/json", TargetModel: target})
		if err != nil {
			var me *pipeline.ModelError
			if errors.As(err, &me) {
				return me.OriginalStatusCode, nil
			}
			return 0, err
		}
		defer resp.Release()
		return http.StatusOK, nil
	}
	if st, err := call("a.tar.gz"); st != http.StatusOK {
		t.Fatalf("first call = %d, %v", st, err)
	}
	e.fake.forgetAll()
	if st, err := call("a.tar.gz"); st != http.StatusOK {
		t.Fatalf("call of a forgotten model = %d, %v; want 200 after a reload", st, err)
	}
	if n := e.fake.loadsOf("a.tar.gz"); n != 2 {
		t.Errorf("loads = %d, want 2", n)
	}
	invokes := e.fake.invokes.Load()
	if st, err := call("own.tar.gz"); st != http.StatusNotFound {
		t.Errorf("call of a model answering 404 itself = %d, %v; want its 404", st, err)
	}
	if got := e.fake.invokes.Load() - invokes; got != 1 {
		t.Errorf("invokes for the model's own 404 = %d, want 1 (no retry)", got)
	}
	if n := e.fake.loadsOf("own.tar.gz"); n != 1 {
		t.Errorf("loads of own.tar.gz = %d, want 1", n)
	}
	e.fake.check(t)
}
