package async

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/background"
	"github.com/mce-run/mce/pipeline"
)

// The queue on its Options alone: a container served by httptest, S3 kept
// in memory, endpoints found through a map. host's tests drive the same
// queue through InvokeEndpointAsync with real S3 and real containers.

// memObjects is an ObjectStore in memory.
type memObjects struct {
	mu      sync.Mutex
	objects map[string]memObject
}

type memObject struct {
	body        []byte
	contentType string
	meta        map[string]string
}

var _ ObjectStore = (*memObjects)(nil)

func (m *memObjects) OpenObject(_ context.Context, url string) (io.ReadCloser, artifact.ObjectInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[url]
	if !ok {
		return nil, artifact.ObjectInfo{}, fmt.Errorf("%s: %w", url, artifact.ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(o.body)), artifact.ObjectInfo{Size: int64(len(o.body)), ContentType: o.contentType}, nil
}

func (m *memObjects) PutObject(_ context.Context, url string, body []byte, contentType string, meta map[string]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[url] = memObject{body: bytes.Clone(body), contentType: contentType, meta: meta}
	return nil
}

func (m *memObjects) ObjectMetadata(_ context.Context, url string) (map[string]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[url]
	if !ok {
		return nil, fmt.Errorf("%s: %w", url, artifact.ErrNotFound)
	}
	return o.meta, nil
}

// wait polls for the object at url.
func (m *memObjects) wait(t *testing.T, url string) memObject {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m.mu.Lock()
		o, ok := m.objects[url]
		m.mu.Unlock()
		if ok {
			return o
		}
		if time.Now().After(deadline) {
			t.Fatalf("no object at %s", url)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// mapEndpoints finds endpoints in a map.
type mapEndpoints map[string]Target

func (m mapEndpoints) AsyncTarget(name string) (Target, bool) {
	t, ok := m[strings.ToLower(name)]
	return t, ok
}

// echoContainer is a container that answers its input, upper-cased.
type echoContainer struct{ url string }

func (c echoContainer) Hostname() string { return "c" }
func (c echoContainer) BaseURL() string  { return c.url }
func (c echoContainer) Ready() bool      { return true }

func newEcho(t *testing.T) pipeline.Container {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		w.Write(bytes.ToUpper(b))
	}))
	t.Cleanup(srv.Close)
	return echoContainer{url: srv.URL}
}

func newTestQueue(t *testing.T, eps Endpoints, objs ObjectStore) (*Queue, *store.Store, *prometheus.Registry) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	bg := background.New(context.Background(), zerolog.Nop())
	reg := prometheus.NewRegistry()
	q := NewQueue(Options{Store: st, Objects: objs, Endpoints: eps, Background: bg, Registerer: reg, Logger: zerolog.Nop()})
	t.Cleanup(func() {
		bg.Stop()
		q.Close()
		st.Close()
	})
	return q, st, reg
}

func record(key, endpoint string) Record {
	return Record{Key: key, Endpoint: endpoint, InferenceID: key, Input: "s3://b/in/" + key,
		Output: "s3://b/out/" + key + ".out", Failure: "s3://b/failed/" + key + "-error.out",
		Accepted: time.Now(), TTL: time.Hour, Timeout: time.Minute}
}

// TestQueueOnItsOptions: an accepted request runs on its endpoint's route
// and its answer lands at its output location, carrying its key in the
// metadata, after which the store no longer holds it; a request for an
// endpoint that does not exist fails at its failure location with the
// error InvokeEndpoint would give. The backlog slot each took is the
// queue's until it is settled.
func TestQueueOnItsOptions(t *testing.T) {
	route := pipeline.NewRoute("ep", pipeline.Serial, []*pipeline.Variant{
		pipeline.NewVariant("AllTraffic", 1, []*pipeline.Instance{pipeline.NewInstance([]pipeline.Container{newEcho(t)})}),
	})
	eps := mapEndpoints{"ep": {Route: route, Plan: &containers.AsyncPlan{MaxConcurrentPerInstance: 1}}}
	objs := &memObjects{objects: map[string]memObject{
		"s3://b/in/answered": {body: []byte("hello"), contentType: "text/plain"},
		"s3://b/in/orphan":   {body: []byte("x")},
	}}
	q, st, reg := newTestQueue(t, eps, objs)

	for _, rec := range []Record{record("answered", "EP"), record("orphan", "gone")} {
		if _, ok := q.Reserve(); !ok {
			t.Fatal("Reserve refused on an empty backlog")
		}
		if err := q.Accept(rec); err != nil {
			t.Fatal(err)
		}
	}
	out := objs.wait(t, "s3://b/out/answered.out")
	if string(out.body) != "HELLO" || out.contentType != "text/plain" || out.meta[MetaRequest] != "answered" {
		t.Errorf("answer %q (%s, meta %v); want HELLO, text/plain, %s=answered", out.body, out.contentType, out.meta, MetaRequest)
	}
	fail := objs.wait(t, "s3://b/failed/orphan-error.out")
	var doc struct {
		Type    string `json:"__type"`
		Message string
	}
	if err := json.Unmarshal(fail.body, &doc); err != nil || doc.Type != "ValidationError" || !strings.Contains(doc.Message, "was deleted before inference request orphan ran") {
		t.Errorf("failure %q (%v); want a ValidationError saying the endpoint is gone", fail.body, err)
	}
	backlog := func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		n := q.reserved
		for _, eq := range q.queues {
			n += len(eq.pending) + len(eq.running)
		}
		return n
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		left := 0
		store.List(st, store.AsyncRequests, func(Record) error { left++; return nil })
		n := backlog()
		if left == 0 && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still in the store, backlog %d; want none", left, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := testutil.ToFloat64(q.metrics.completed.WithLabelValues("EP", "answered")); got != 1 {
		t.Errorf("mce_async_requests_completed_total{outcome=answered} = %v, want 1", got)
	}
	if n, err := testutil.GatherAndCount(reg, "mce_async_requests_accepted_total"); err != nil || n != 2 {
		t.Errorf("accepted series on the registerer: %d (%v), want 2", n, err)
	}
}

// TestQueueBacklogCap: Reserve refuses beyond MaxBacklog, counting slots
// taken and not yet accepted, and Release gives one back.
func TestQueueBacklogCap(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	bg := background.New(context.Background(), zerolog.Nop())
	defer bg.Stop()
	q := NewQueue(Options{Store: st, Endpoints: mapEndpoints{}, Background: bg, MaxBacklog: 2})
	defer q.Close()
	for i := range 2 {
		if n, ok := q.Reserve(); !ok || n != i {
			t.Fatalf("Reserve %d: backlog %d, ok %v", i, n, ok)
		}
	}
	if n, ok := q.Reserve(); ok || n != 2 {
		t.Errorf("Reserve beyond the cap: backlog %d, ok %v; want 2, refused", n, ok)
	}
	q.Release()
	if n, ok := q.Reserve(); !ok || n != 1 {
		t.Errorf("Reserve after Release: backlog %d, ok %v; want 1, taken", n, ok)
	}
}

// TestInlineInputs: an inline Body is kept in the store, not in the queue's
// memory; a queue started on the same store (a restart) runs it; the inline
// bytes queued are bounded by Options.Memory and given back when settled.
func TestInlineInputs(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	bg := background.New(context.Background(), zerolog.Nop())
	objs := &memObjects{objects: map[string]memObject{}}
	// An endpoint that does not run yet: the request waits in the queue.
	waiting := mapEndpoints{"ep": {Plan: &containers.AsyncPlan{MaxConcurrentPerInstance: 1}}}
	q := NewQueue(Options{Store: st, Objects: objs, Endpoints: waiting, Background: bg, Logger: zerolog.Nop(), MaxPayload: 1 << 20, Memory: 2<<20 + MaxInline})
	rec := record("inline", "ep")
	rec.Input, rec.Body = "", []byte("inline input")
	q.Reserve()
	if err := q.Accept(rec); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	held := q.queues["ep"].pending[0].rec
	q.mu.Unlock()
	if held.Body != nil || held.InlineSize != len("inline input") || q.inline.Load() != int64(len("inline input")) {
		t.Fatalf("queued record holds its body (%q) or the wrong size (%d, %d)", held.Body, held.InlineSize, q.inline.Load())
	}
	// The budget: Memory (2 MiB + MaxInline) less what is queued.
	big := record("big", "ep")
	big.Input, big.Body = "", bytes.Repeat([]byte("b"), MaxInline)
	for i := 0; ; i++ {
		big.Key = fmt.Sprintf("big-%d", i)
		q.Reserve()
		if err := q.Accept(big); err == ErrInlineFull {
			q.Release()
			break
		} else if err != nil || i > 100 {
			t.Fatalf("Accept %d: %v", i, err)
		}
	}
	bg.Stop()
	q.Close()

	// The restart: the endpoint is there now, and every request runs.
	route := pipeline.NewRoute("ep", pipeline.Serial, []*pipeline.Variant{
		pipeline.NewVariant("AllTraffic", 1, []*pipeline.Instance{pipeline.NewInstance([]pipeline.Container{newEcho(t)})}),
	})
	bg = background.New(context.Background(), zerolog.Nop())
	q = NewQueue(Options{Store: st, Objects: objs, Endpoints: mapEndpoints{"ep": {Route: route, Plan: &containers.AsyncPlan{MaxConcurrentPerInstance: 2}}},
		Background: bg, Logger: zerolog.Nop(), MaxPayload: 1 << 20, Memory: 2<<20 + MaxInline})
	t.Cleanup(func() { bg.Stop(); q.Close(); st.Close() })
	if err := q.Recover(); err != nil {
		t.Fatal(err)
	}
	if out := objs.wait(t, "s3://b/out/inline.out"); string(out.body) != "INLINE INPUT" {
		t.Errorf("answer %q", out.body)
	}
	if out := objs.wait(t, "s3://b/out/big.out"); len(out.body) != MaxInline || out.body[0] != 'B' {
		t.Errorf("big answer: %d bytes", len(out.body))
	}
	for deadline := time.Now().Add(10 * time.Second); q.inline.Load() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("inline bytes still counted after every request settled: %d", q.inline.Load())
		}
	}
}
