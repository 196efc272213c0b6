package pipeline

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// mmFake is a multi-model Container whose leases count what the pipeline
// asked of them.
type mmFake struct {
	*fakeContainer
	evictions, reloads atomic.Int32
}

func (m *mmFake) Acquire(context.Context, string) (Lease, error) { return mmLease{m}, nil }

type mmLease struct{ m *mmFake }

func (l mmLease) ModelID() string { return "m1" }
func (l mmLease) OutOfMemory(context.Context) error {
	l.m.evictions.Add(1)
	return nil
}
func (l mmLease) Release() {}
func (l mmLease) NotLoaded(context.Context) (bool, error) {
	l.m.reloads.Add(1)
	return true, nil
}

var (
	_ MultiModel     = (*mmFake)(nil)
	_ NotLoadedLease = mmLease{}
)

// A call whose model the container forgot and which then meets 507s gets the
// reload and every one of its maxMemoryRetries evictions: the reload does
// not take one of them.
func TestHopReloadDoesNotTakeAnEviction(t *testing.T) {
	var calls atomic.Int32
	var always507 atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/models/m1/invoke" {
			http.Error(w, "unexpected "+r.URL.Path, http.StatusBadRequest)
			return
		}
		switch n := calls.Add(1); {
		case always507.Load():
			w.WriteHeader(http.StatusInsufficientStorage)
		case n == 1:
			w.WriteHeader(http.StatusNotFound) // forgotten
		case n <= 1+maxMemoryRetries:
			w.WriteHeader(http.StatusInsufficientStorage)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	}))
	defer srv.Close()
	c := &mmFake{fakeContainer: newFake("primary", srv.URL)}
	iv := NewInvoker(Options{})
	defer iv.Close()
	route := NewRoute("mme", Serial, []*Variant{NewVariant("AllTraffic", 1, []*Instance{NewInstance([]Container{c})})})
	resp, err := iv.Invoke(context.Background(), route, &Request{Body: []byte("{}"), TargetModel: "a.tar.gz"})
	if err != nil {
		t.Fatalf("invoke: %v (calls %d, reloads %d, evictions %d)", err, calls.Load(), c.reloads.Load(), c.evictions.Load())
	}
	defer resp.Release()
	if string(resp.Body) != "ok" || c.reloads.Load() != 1 || c.evictions.Load() != maxMemoryRetries {
		t.Errorf("body %q, reloads %d, evictions %d; want ok, 1, %d", resp.Body, c.reloads.Load(), c.evictions.Load(), maxMemoryRetries)
	}

	// One 507 more than the evictions allow reaches the client as the container's answer.
	calls.Store(0)
	c.reloads.Store(0)
	c.evictions.Store(0)
	always507.Store(true)
	if _, err := iv.Invoke(context.Background(), route, &Request{Body: []byte("{}"), TargetModel: "a.tar.gz"}); err == nil {
		t.Fatal("a container that always answers 507: no error")
	}
	if c.evictions.Load() != maxMemoryRetries || calls.Load() != 1+maxMemoryRetries {
		t.Errorf("evictions %d, calls %d; want %d and %d", c.evictions.Load(), calls.Load(), maxMemoryRetries, 1+maxMemoryRetries)
	}
}
