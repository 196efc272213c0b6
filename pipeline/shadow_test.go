package pipeline

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// shadowLog is a ShadowObserver that keeps what it is told.
type shadowLog struct {
	mu    sync.Mutex
	calls []ShadowCall
	bodies,
	answers [][]byte
	drops map[DropReason]int
}

func (l *shadowLog) ObserveShadow(c *ShadowCall) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, *c)
	l.bodies = append(l.bodies, bytes.Clone(c.Request.Body))
	var a []byte
	if c.Response != nil {
		a = bytes.Clone(c.Response.Body)
	}
	l.answers = append(l.answers, a)
}

func (l *shadowLog) DroppedShadow(_, _ string, why DropReason) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.drops == nil {
		l.drops = map[DropReason]int{}
	}
	l.drops[why]++
}

func (l *shadowLog) snapshot() ([]ShadowCall, map[DropReason]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := map[DropReason]int{}
	for k, v := range l.drops {
		d[k] = v
	}
	return append([]ShadowCall(nil), l.calls...), d
}

// shadowRoute is a Serial route of one production variant "prod" (weight 1)
// and one shadow variant "shadow" of weight shadowWeight, each one
// container.
func shadowRoute(prod, shadow Container, shadowWeight float64) *Route {
	r := NewRoute("ep", Serial, []*Variant{NewVariant("prod", 1, []*Instance{NewInstance([]Container{prod})})})
	r.SetShadows([]*Variant{NewVariant("shadow", shadowWeight, []*Instance{NewInstance([]Container{shadow})})})
	return r
}

func TestShadowShare(t *testing.T) {
	for _, tt := range []struct{ prod, shadow, want float64 }{
		{1, 1, 1}, {1, 0.25, 0.25}, {2, 1, 0.5}, {1, 3, 1}, {1, 0, 0}, {0, 1, 1}, {0, 0, 0},
	} {
		if got := ShadowShare(tt.prod, tt.shadow); got != tt.want {
			t.Errorf("ShadowShare(%v, %v) = %v, want %v", tt.prod, tt.shadow, got, tt.want)
		}
	}
}

// Invoke never routes to a shadow variant, whatever its weight, and a
// TargetVariant naming it is refused.
func TestShadowNeverAnswers(t *testing.T) {
	prodSrv := startServer(t, echo("|prod", "text/plain"))
	shadowSrv := startServer(t, echo("|shadow", "text/plain"))
	r := shadowRoute(newFake("p", prodSrv.srv.URL), newFake("s", shadowSrv.srv.URL), 100)
	iv := NewInvoker(Options{})
	defer iv.Close()
	for range 20 {
		resp, err := iv.Invoke(context.Background(), r, &Request{Body: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Variant != "prod" || string(resp.Body) != "x|prod" {
			t.Fatalf("answered by %s with %q, want prod's answer", resp.Variant, resp.Body)
		}
		resp.Release()
	}
	if n := shadowSrv.calls.Load(); n != 0 {
		t.Errorf("the shadow's container was called %d times by Invoke", n)
	}
	_, err := iv.Invoke(context.Background(), r, &Request{Body: []byte("x"), TargetVariant: "shadow"})
	var ve *ValidationError
	if !errors.As(err, &ve) || !strings.Contains(ve.Message, "Variant shadow is a shadow variant of endpoint ep") {
		t.Errorf("TargetVariant naming the shadow: %v, want a ValidationError saying it is a shadow variant", err)
	}
	if r.Variant("shadow") == nil || r.Variant("prod") == nil || r.Variant("none") != nil {
		t.Error("Route.Variant does not find production and shadow variants by name")
	}
}

// counting returns a Sample func that yields 0, 0.01, …, 0.99, 0, …: over
// any 100 calls exactly share×100 are below share.
func counting() func() float64 {
	var n atomic.Int64
	return func() float64 { return float64((n.Add(1)-1)%100) / 100 }
}

// The shadow receives its share of the production calls (its weight over
// the production variant's), counted exactly with a fixed sampling
// sequence, and a copy of each sampled request.
func TestMirrorSamplesTheShare(t *testing.T) {
	for _, tt := range []struct {
		weight float64
		want   int64
	}{{0.25, 25}, {1, 100}, {5, 100}, {0, 0}} {
		prodSrv := startServer(t, echo("|prod", "text/plain"))
		shadowSrv := startServer(t, echo("|shadow", "text/plain"))
		r := shadowRoute(newFake("p", prodSrv.srv.URL), newFake("s", shadowSrv.srv.URL), tt.weight)
		iv := NewInvoker(Options{})
		var log shadowLog
		m := iv.NewMirror(MirrorOptions{Observer: &log, Sample: counting()})
		for range 100 {
			req := &Request{Body: []byte("hello"), ContentType: "text/plain", TargetVariant: "prod"}
			resp, err := iv.Invoke(context.Background(), r, req)
			if err != nil {
				t.Fatal(err)
			}
			m.Offer(r, resp.Variant, req, false)
			resp.Release()
			req.Body[0] = 'X' // the copy must not see the caller's buffer afterwards
		}
		m.Close()
		iv.Close()
		if got := shadowSrv.calls.Load(); got != tt.want {
			t.Errorf("weight %v: the shadow got %d of 100 calls, want %d", tt.weight, got, tt.want)
		}
		calls, drops := log.snapshot()
		if int64(len(calls)) != tt.want || len(drops) != 0 {
			t.Errorf("weight %v: observer saw %d calls and drops %v, want %d and none", tt.weight, len(calls), drops, tt.want)
		}
		for i, c := range calls {
			if c.Err != nil || c.Variant != "shadow" || c.Endpoint != "ep" || string(log.bodies[i]) != "hello" ||
				string(log.answers[i]) != "hello|shadow" || c.Request.TargetVariant != "" {
				t.Fatalf("shadow call %d = %+v (body %q, answer %q), want shadow's answer to a copy of hello", i, c, log.bodies[i], log.answers[i])
			}
		}
	}
}

// A shadow that never answers holds at most MaxInFlight copies; the
// copies beyond are dropped and counted, and Offer never waits for it. A
// failing shadow's error goes to the observer only.
func TestMirrorBoundsASilentShadow(t *testing.T) {
	release := make(chan struct{})
	var arrived atomic.Int64
	shadowSrv := startServer(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		arrived.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	prodSrv := startServer(t, echo("|prod", "text/plain"))
	r := shadowRoute(newFake("p", prodSrv.srv.URL), newFake("s", shadowSrv.srv.URL), 1)
	iv := NewInvoker(Options{})
	defer iv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var log shadowLog
	m := iv.NewMirror(MirrorOptions{Observer: &log, MaxInFlight: 3, Context: ctx})
	start := time.Now()
	for range 10 {
		m.Offer(r, "prod", &Request{Body: []byte("x")}, false)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("10 offers to a silent shadow took %v", d)
	}
	if got := r.Shadows()[0].InFlight(); got != 3 {
		t.Errorf("the shadow holds %d copies, want 3 (MaxInFlight)", got)
	}
	_, drops := log.snapshot()
	if drops[DropBusy] != 7 {
		t.Errorf("drops = %v, want 7 %s", drops, DropBusy)
	}
	deadline := time.Now().Add(20 * time.Second)
	for arrived.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel() // the copies in flight are cut
	m.Close()
	calls, _ := log.snapshot()
	if len(calls) != 3 {
		t.Fatalf("observer saw %d calls, want the 3 cut ones", len(calls))
	}
	for _, c := range calls {
		if c.Err == nil {
			t.Errorf("a cut shadow call has no error: %+v", c)
		}
	}
	if got := r.Shadows()[0].InFlight(); got != 0 {
		t.Errorf("after Close the shadow holds %d copies", got)
	}
	m.Offer(r, "prod", &Request{Body: []byte("x")}, false)
	if _, drops := log.snapshot(); drops[DropClosed] != 1 {
		t.Errorf("an offer after Close: drops %v, want one %s", drops, DropClosed)
	}
}

func TestMirrorBoundsMemory(t *testing.T) {
	release := make(chan struct{})
	shadowSrv := startServer(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	prodSrv := startServer(t, echo("|prod", "text/plain"))
	r := shadowRoute(newFake("p", prodSrv.srv.URL), newFake("s", shadowSrv.srv.URL), 1)
	iv := NewInvoker(Options{})
	defer iv.Close()
	var log shadowLog
	m := iv.NewMirror(MirrorOptions{Observer: &log, MaxBytes: 250})
	for range 5 {
		m.Offer(r, "prod", &Request{Body: make([]byte, 100)}, false)
	}
	_, drops := log.snapshot()
	close(release)
	m.Close()
	if drops[DropMemory] != 3 {
		t.Errorf("drops = %v, want 3 %s (2 bodies of 100 bytes fit in 250)", drops, DropMemory)
	}
}

func TestMirrorFailingShadow(t *testing.T) {
	shadowSrv := startServer(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	prodSrv := startServer(t, echo("|prod", "text/plain"))
	r := shadowRoute(newFake("p", prodSrv.srv.URL), newFake("s", shadowSrv.srv.URL), 1)
	rec := &recorder{}
	iv := NewInvoker(Options{Observer: rec})
	defer iv.Close()
	var log shadowLog
	m := iv.NewMirror(MirrorOptions{Observer: &log})
	req := &Request{Body: []byte("x")}
	resp, err := iv.Invoke(context.Background(), r, req)
	if err != nil {
		t.Fatal(err)
	}
	m.Offer(r, resp.Variant, req, false)
	if string(resp.Body) != "x|prod" {
		t.Errorf("production answer %q", resp.Body)
	}
	resp.Release()
	m.Close()
	calls, _ := log.snapshot()
	var me *ModelError
	if len(calls) != 1 || !errors.As(calls[0].Err, &me) || me.OriginalStatusCode != 500 || me.Variant != "shadow" {
		t.Fatalf("shadow calls = %+v, want one ModelError of status 500 in variant shadow", calls)
	}
	var shadowHops int
	for _, o := range rec.all() {
		if o.variant == "shadow" && o.container == "s" && o.status == 500 {
			shadowHops++
		}
	}
	if shadowHops != 1 {
		t.Errorf("container observations %+v, want one of the shadow's container with status 500", rec.all())
	}
}

// A copy of a streamed call is streamed too: its answer, of any length, is
// read and discarded.
func TestMirrorStreamedCopy(t *testing.T) {
	big := bytes.Repeat([]byte("y"), 8<<20) // past the 6 MiB cap of an unstreamed answer
	shadowSrv := startServer(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) { _, _ = w.Write(big) })
	prodSrv := startServer(t, echo("|prod", "text/plain"))
	r := shadowRoute(newFake("p", prodSrv.srv.URL), newFake("s", shadowSrv.srv.URL), 1)
	iv := NewInvoker(Options{})
	defer iv.Close()
	var log shadowLog
	m := iv.NewMirror(MirrorOptions{Observer: &log})
	m.Offer(r, "prod", &Request{Body: []byte("x")}, true)
	m.Close()
	calls, _ := log.snapshot()
	if len(calls) != 1 || calls[0].Err != nil || !calls[0].Streamed || calls[0].StreamedBytes != int64(len(big)) {
		t.Fatalf("shadow calls = %+v, want one streamed call of %d bytes", calls, len(big))
	}
}

// BenchmarkOffer is what a production call pays to mirror: on a route
// without shadow variants (one atomic load), and on one whose shadow
// takes every call (the decision, the copy of the body and the hand-over;
// the copy's goroutine is counted, not started, so that the shadow's calls
// do not compete for the CPU here: BenchmarkInvokeShadow has them).
//
//	go test -run '^$' -bench 'Offer|InvokeShadow' -benchmem ./pipeline
func BenchmarkOffer(b *testing.B) {
	srv := benchServer(b)
	req := &Request{Body: benchPayload(), ContentType: "application/json"}
	b.Run("no-shadow", func(b *testing.B) {
		r := NewRoute("ep", Serial, []*Variant{NewVariant("prod", 1, []*Instance{NewInstance([]Container{newFake("p", srv.URL)})})})
		iv := NewInvoker(Options{})
		defer iv.Close()
		m := iv.NewMirror(MirrorOptions{})
		b.ReportAllocs()
		for b.Loop() {
			m.Offer(r, "prod", req, false)
		}
	})
	b.Run("shadow-100pct", func(b *testing.B) {
		r := shadowRoute(newFake("p", srv.URL), newFake("s", srv.URL), 1)
		iv := NewInvoker(Options{})
		defer iv.Close()
		var handed atomic.Int64
		m := iv.NewMirror(MirrorOptions{MaxInFlight: 1 << 30, MaxBytes: 1 << 40, Go: func(func()) { handed.Add(1) }})
		b.ReportAllocs()
		for b.Loop() {
			m.Offer(r, "prod", req, false)
		}
	})
}

// BenchmarkInvokeShadow measures production calls (Invoke, then Offer, as
// the host makes them, one client) beside: no shadow; a shadow as fast as
// production taking every call; a shadow that sleeps 200 ms; one that
// answers 500. It reports the production calls' p50 and p99: the shadow's
// own calls run on their goroutines and never delay the production answer.
func BenchmarkInvokeShadow(b *testing.B) {
	fast := benchServer(b)
	slow := startServer(b, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		select {
		case <-time.After(200 * time.Millisecond):
		case <-r.Context().Done():
		}
	})
	failing := startServer(b, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	req := &Request{Body: benchPayload(), ContentType: "application/json"}
	for _, tt := range []struct {
		name   string
		shadow string // "" for none
	}{{"none", ""}, {"fast", fast.URL}, {"slow", slow.srv.URL}, {"failing", failing.srv.URL}} {
		b.Run(tt.name, func(b *testing.B) {
			prod := newFake("p", fast.URL)
			r := NewRoute("ep", Serial, []*Variant{NewVariant("prod", 1, []*Instance{NewInstance([]Container{prod})})})
			if tt.shadow != "" {
				r = shadowRoute(prod, newFake("s", tt.shadow), 1)
			}
			iv := NewInvoker(Options{})
			ctx, cancel := context.WithCancel(context.Background())
			m := iv.NewMirror(MirrorOptions{Context: ctx})
			defer func() { cancel(); m.Close(); iv.Close() }()
			lat := make([]time.Duration, 0, 1<<16)
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				resp, err := iv.Invoke(context.Background(), r, req)
				if err != nil {
					b.Fatal(err)
				}
				m.Offer(r, resp.Variant, req, false)
				resp.Release()
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
