package pipeline

import (
	"context"
	"errors"
	"math"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestChoose(t *testing.T) {
	type inst struct {
		hosts       []string
		down        []bool // per container
		outstanding int64
	}
	tests := []struct {
		name      string
		insts     []inst
		direct    bool
		host      string
		exclude   int   // index of the excluded instance, -1 none
		want      []int // acceptable picks (ties); empty: none
		wantIdx   int
		wantKnown bool
	}{
		{"least outstanding", []inst{{[]string{"a"}, nil, 3}, {[]string{"a"}, nil, 1}, {[]string{"a"}, nil, 2}}, false, "", -1, []int{1}, -1, true},
		{"ties are shared", []inst{{[]string{"a"}, nil, 1}, {[]string{"a"}, nil, 4}, {[]string{"a"}, nil, 1}}, false, "", -1, []int{0, 2}, -1, true},
		{"serial skips a partly down instance", []inst{{[]string{"a", "b"}, []bool{false, true}, 0}, {[]string{"a", "b"}, nil, 9}}, false, "", -1, []int{1}, -1, true},
		{"direct needs only its container", []inst{{[]string{"a", "b"}, []bool{false, true}, 0}, {[]string{"a", "b"}, nil, 9}}, true, "a", -1, []int{0}, 0, true},
		{"direct target down everywhere", []inst{{[]string{"a", "b"}, []bool{true, false}, 0}}, true, "a", -1, nil, -1, true},
		{"direct unknown host", []inst{{[]string{"a", "b"}, nil, 0}}, true, "zz", -1, nil, -1, false},
		{"direct index follows the instance", []inst{{[]string{"a", "b"}, nil, 5}, {[]string{"b", "a"}, nil, 0}}, true, "a", -1, []int{1}, 1, true},
		{"exclude", []inst{{[]string{"a"}, nil, 0}, {[]string{"a"}, nil, 7}}, false, "", 0, []int{1}, -1, true},
		{"nothing left after exclude", []inst{{[]string{"a"}, nil, 0}}, false, "", 0, nil, -1, true},
		{"empty instance is never ready", []inst{{nil, nil, 0}}, false, "", -1, nil, -1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			insts := make([]*Instance, len(tt.insts))
			for i, in := range tt.insts {
				cs := make([]Container, len(in.hosts))
				for j, h := range in.hosts {
					c := newFake(h, "http://127.0.0.1:1")
					if j < len(in.down) && in.down[j] {
						c.ready.Store(false)
					}
					cs[j] = c
				}
				insts[i] = NewInstance(cs)
				insts[i].outstanding.Store(in.outstanding)
			}
			var exclude *Instance
			if tt.exclude >= 0 {
				exclude = insts[tt.exclude]
			}
			picked := map[int]int{}
			for range 400 {
				got, idx, known := choose(insts, tt.direct, tt.host, exclude, false)
				if known != tt.wantKnown {
					t.Fatalf("known = %v, want %v", known, tt.wantKnown)
				}
				if got == nil {
					if len(tt.want) != 0 {
						t.Fatalf("picked nothing, want one of %v", tt.want)
					}
					continue
				}
				if idx != tt.wantIdx {
					t.Errorf("container index = %d, want %d", idx, tt.wantIdx)
				}
				for i, in := range insts {
					if in == got {
						picked[i]++
					}
				}
			}
			for _, w := range tt.want {
				if picked[w] == 0 {
					t.Errorf("instance %d never picked in 400 draws; picks %v, want spread over %v", w, picked, tt.want)
				}
			}
			if len(picked) > len(tt.want) {
				t.Errorf("picks %v, want only %v", picked, tt.want)
			}
		})
	}
}

// TestChooseSuspect: an instance whose container broke at the transport is
// passed over while another is ready, whatever its load, and chosen again
// when it is the only one left or once the suspicion expires.
func TestChooseSuspect(t *testing.T) {
	a := NewInstance([]Container{newFake("a", "http://127.0.0.1:1")})
	b := NewInstance([]Container{newFake("a", "http://127.0.0.1:1")})
	b.outstanding.Store(50)
	now := time.Now()
	a.suspect(now)
	if got, _, _ := choose([]*Instance{a, b}, false, "", nil, false); got != b {
		t.Errorf("chose the suspected idle instance over a loaded healthy one")
	}
	if got, _, _ := choose([]*Instance{a}, false, "", nil, false); got != a {
		t.Errorf("the only ready instance, though suspected, was not chosen")
	}
	a.suspectUntil.Store(now.Add(-time.Millisecond).UnixNano())
	if got, _, _ := choose([]*Instance{a, b}, false, "", nil, false); got != a {
		t.Errorf("an expired suspicion still held the instance back")
	}
}

func TestPickVariantWeights(t *testing.T) {
	const draws = 10000
	tests := []struct {
		name    string
		weights []float64
	}{
		{"three to one, and a zero", []float64{3, 1, 0}},
		{"equal", []float64{1, 1}},
		{"fractional", []float64{0.2, 0.8}},
		{"single", []float64{2}},
		{"negative and NaN count as zero", []float64{-1, math.NaN(), 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := make([]*Variant, len(tt.weights))
			var sum float64
			for i, w := range tt.weights {
				vs[i] = NewVariant("v"+string(rune('a'+i)), w, nil)
				if w > 0 {
					sum += w
				}
			}
			r := NewRoute("E", Serial, vs)
			counts := map[*Variant]int{}
			for range draws {
				v, err := r.pickVariant("")
				if err != nil {
					t.Fatalf("pickVariant: %v", err)
				}
				counts[v]++
			}
			for i, v := range vs {
				p := 0.0
				if tt.weights[i] > 0 {
					p = tt.weights[i] / sum
				}
				want := p * draws
				// Six standard deviations of the binomial, plus one.
				tol := 6*math.Sqrt(draws*p*(1-p)) + 1
				if got := float64(counts[v]); math.Abs(got-want) > tol {
					t.Errorf("%s (weight %v) drawn %v times, want %v ± %.0f", v.Name(), tt.weights[i], got, want, tol)
				}
			}
		})
	}
}

func TestSetWeight(t *testing.T) {
	a, b := NewVariant("a", 1, nil), NewVariant("b", 0, nil)
	r := NewRoute("E", Serial, []*Variant{a, b})
	a.SetWeight(0)
	b.SetWeight(5)
	for range 100 {
		v, err := r.pickVariant("")
		if err != nil || v != b {
			t.Fatalf("pickVariant = %v, %v; want b", v, err)
		}
	}
	for _, w := range []float64{-3, math.NaN(), math.Inf(1), math.Inf(-1)} {
		b.SetWeight(w)
		if got := b.Weight(); got != 0 {
			t.Errorf("SetWeight(%v) stored %v, want 0", w, got)
		}
	}
}

func TestTargetVariant(t *testing.T) {
	mainSrv := startServer(t, echo("|main", "text/plain"))
	shadowSrv := startServer(t, echo("|shadow", "text/plain"))
	route := NewRoute("E", Serial, []*Variant{
		NewVariant("main", 1, []*Instance{NewInstance([]Container{newFake("m", mainSrv.srv.URL)})}),
		NewVariant("shadow", 0, []*Instance{NewInstance([]Container{newFake("m", shadowSrv.srv.URL)})}),
	})
	iv := NewInvoker(Options{})
	defer iv.Close()
	tests := []struct {
		target, wantVariant, wantBody string
	}{
		{"", "main", "x|main"},
		{"shadow", "shadow", "x|shadow"},
		{"main", "main", "x|main"},
	}
	for _, tt := range tests {
		t.Run("target="+tt.target, func(t *testing.T) {
			for range 20 {
				resp, err := iv.Invoke(context.Background(), route, &Request{Body: []byte("x"), TargetVariant: tt.target})
				if err != nil {
					t.Fatalf("Invoke: %v", err)
				}
				if resp.Variant != tt.wantVariant || string(resp.Body) != tt.wantBody {
					t.Errorf("variant, body = %q, %q; want %q, %q", resp.Variant, resp.Body, tt.wantVariant, tt.wantBody)
				}
				resp.Release()
			}
		})
	}
}

func TestLeastOutstandingAvoidsSlowInstance(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var slowCalls atomic.Int64
	slow := startServer(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		// Only the first call is held, so that a selection that ignores
		// outstanding requests fails the count below instead of hanging.
		if slowCalls.Add(1) == 1 {
			entered <- struct{}{}
			<-release
		}
		_, _ = w.Write([]byte("slow"))
	})
	fast := startServer(t, echo("", "text/plain"))
	route := NewRoute("E", Direct, []*Variant{NewVariant("v", 1, []*Instance{
		NewInstance([]Container{newFake("m", slow.srv.URL)}),
		NewInstance([]Container{newFake("m", fast.srv.URL)}),
	})})
	iv := NewInvoker(Options{})
	defer iv.Close()
	req := &Request{Body: []byte("x"), TargetContainerHostname: "m"}

	// Send calls one at a time until one lands on the slow instance and stays
	// there; the others finish on the fast one. With ties broken at random,
	// 200 tries all missing it has probability 2^-200.
	var wg sync.WaitGroup
	defer func() {
		close(release)
		wg.Wait()
	}()
	stuck := false
	for range 200 {
		done := make(chan error, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := iv.Invoke(context.Background(), route, req)
			resp.Release()
			done <- err
		}()
		select {
		case <-entered:
			stuck = true
		case err := <-done:
			if err != nil {
				t.Fatalf("Invoke: %v", err)
			}
			continue
		}
		break
	}
	if !stuck {
		t.Fatal("no call reached the slow instance")
	}
	fastBefore := fast.calls.Load()
	const n = 100
	for range n {
		resp, err := iv.Invoke(context.Background(), route, req)
		if err != nil {
			t.Fatalf("Invoke: %v", err)
		}
		resp.Release()
	}
	if got := slow.calls.Load(); got != 1 {
		t.Errorf("slow instance got %d calls, want only the 1 still outstanding", got)
	}
	if got := fast.calls.Load() - fastBefore; got != n {
		t.Errorf("fast instance got %d of %d calls", got, n)
	}
}

func TestConcurrentReconfiguration(t *testing.T) {
	const workers, calls = 4, 100
	srvs, csA := chain(t, 1)
	_, csB := chain(t, 1)
	setA := []*Instance{NewInstance(csA)}
	setB := []*Instance{NewInstance(csB), NewInstance(csA)}
	v1 := NewVariant("v1", 1, setA)
	v2 := NewVariant("v2", 1, setB)
	route := NewRoute("E", Serial, []*Variant{v1})
	iv := NewInvoker(Options{})
	defer iv.Close()

	stop := make(chan struct{})
	reconfigured := make(chan int)
	go func() {
		n := 0
		defer func() { reconfigured <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			n++
			runtime.Gosched()
			if n%2 == 0 {
				v1.SetInstances(setA)
				v2.SetWeight(0)
				route.SetVariants([]*Variant{v1})
			} else {
				v1.SetInstances(setB)
				v2.SetWeight(2)
				route.SetVariants([]*Variant{v1, v2})
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, workers*calls)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				resp, err := iv.Invoke(context.Background(), route, &Request{Body: []byte("x")})
				if err != nil {
					errs <- err
					continue
				}
				if string(resp.Body) != "x|container-1" {
					errs <- errors.New("unexpected body " + string(resp.Body))
				}
				resp.Release()
			}
		}()
	}
	wg.Wait()
	close(stop)
	if n := <-reconfigured; n < 2 {
		t.Logf("only %d reconfigurations ran during the calls", n)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if srvs[0].calls.Load() == 0 {
		t.Error("container A never served a call")
	}
	for _, in := range append(setA, setB...) {
		if got := in.Outstanding(); got != 0 {
			t.Errorf("instance left with %d outstanding", got)
		}
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[Mode]string{Serial: "Serial", Direct: "Direct", Mode(7): "Mode(7)"} {
		if got := m.String(); got != want {
			t.Errorf("Mode(%d).String() = %q, want %q", int(m), got, want)
		}
	}
}

// TestRoutingStrategy invokes a variant whose ready instances carry
// different loads: LEAST_OUTSTANDING_REQUESTS sends every call to the idle
// one, RANDOM spreads the calls evenly over every ready instance whatever
// its load, and never to one that is not ready.
func TestRoutingStrategy(t *testing.T) {
	const calls = 600
	load := []int64{7, 3, 0, 0} // the last instance is not ready
	srvs := make([]*fakeServer, len(load))
	insts := make([]*Instance, len(load))
	for i, n := range load {
		srvs[i] = startServer(t, echo("", "text/plain"))
		c := newFake("model", srvs[i].srv.URL)
		if i == len(load)-1 {
			c.ready.Store(false)
		}
		insts[i] = NewInstance([]Container{c})
		insts[i].outstanding.Store(n) // calls held elsewhere; Invoke adds and removes its own
	}
	v := NewVariant("AllTraffic", 1, insts)
	route := NewRoute("e", Serial, []*Variant{v})
	iv := NewInvoker(Options{})
	defer iv.Close()
	run := func(s Strategy) []int64 {
		t.Helper()
		v.SetStrategy(s)
		before := make([]int64, len(srvs))
		for i, fs := range srvs {
			before[i] = fs.calls.Load()
		}
		for range calls {
			resp, err := iv.Invoke(context.Background(), route, &Request{Body: []byte("x"), ContentType: "text/plain"})
			if err != nil {
				t.Fatalf("%v: Invoke: %v", s, err)
			}
			resp.Release()
		}
		got := make([]int64, len(srvs))
		for i, fs := range srvs {
			got[i] = fs.calls.Load() - before[i]
		}
		return got
	}

	if v.Strategy() != LeastOutstanding {
		t.Fatalf("a new variant's strategy is %v, want LEAST_OUTSTANDING_REQUESTS", v.Strategy())
	}
	if got := run(LeastOutstanding); got[2] != calls {
		t.Errorf("LEAST_OUTSTANDING_REQUESTS: calls per instance %v, want all %d on the idle instance 2", got, calls)
	}
	got := run(Random)
	if got[3] != 0 {
		t.Errorf("RANDOM sent %d calls to an instance that is not ready", got[3])
	}
	// Each of the 3 ready instances expects 200 calls (σ ≈ 11.5): 120 is
	// about 7σ below, so a fair draw never fails while a load-weighted one
	// (instance 0 carries 7 calls) does.
	for i := range 3 {
		if got[i] < 120 {
			t.Errorf("RANDOM: calls per instance %v, want about %d on each of instances 0-2", got, calls/3)
			break
		}
	}
	if got := run(LeastOutstanding); got[2] != calls {
		t.Errorf("back to LEAST_OUTSTANDING_REQUESTS: calls per instance %v, want all on instance 2", got)
	}
	for i, in := range insts {
		if in.Outstanding() != load[i] {
			t.Errorf("instance %d outstanding = %d after the calls, want %d", i, in.Outstanding(), load[i])
		}
	}
}

// TestChooseRandomSuspect: RANDOM too passes over an instance suspected
// after a transport failure while another is ready.
func TestChooseRandomSuspect(t *testing.T) {
	a := NewInstance([]Container{newFake("a", "http://127.0.0.1:1")})
	b := NewInstance([]Container{newFake("a", "http://127.0.0.1:1")})
	a.suspect(time.Now())
	for range 100 {
		if got, _, _ := choose([]*Instance{a, b}, false, "", nil, true); got != b {
			t.Fatal("RANDOM chose the suspected instance while a healthy one was ready")
		}
	}
}

func TestStrategyOf(t *testing.T) {
	for in, want := range map[string]Strategy{"": LeastOutstanding, "LEAST_OUTSTANDING_REQUESTS": LeastOutstanding, "RANDOM": Random, "PREFIX_AWARE": PrefixAware} {
		if got := StrategyOf(in); got != want {
			t.Errorf("StrategyOf(%q) = %v, want %v", in, got, want)
		}
		if in != "" && want.String() != in {
			t.Errorf("%v.String() = %q, want %q", want, want.String(), in)
		}
	}
}
