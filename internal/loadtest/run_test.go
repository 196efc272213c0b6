package loadtest

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPercentilesKnownDistributions: the recorder's percentiles of a
// uniform and an exponential sample match the distributions' quantiles.
func TestPercentilesKnownDistributions(t *testing.T) {
	h := newHist()
	for v := 1; v <= 100000; v++ { // 1 µs to 100 ms, evenly
		recordDur(h, time.Duration(v)*time.Microsecond)
	}
	l := summarise(h)
	for _, c := range []struct{ got, want float64 }{{l.P50, 50}, {l.P90, 90}, {l.P99, 99}, {l.Max, 100}, {l.Mean, 50}} {
		if math.Abs(c.got-c.want)/c.want > 0.002 {
			t.Errorf("uniform: %.3f ms, want %.3f ms", c.got, c.want)
		}
	}
	// exponential with mean 20 ms: quantile q is -20 ln(1-q) ms
	h = newHist()
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 400000
	for range n {
		recordDur(h, time.Duration(rng.ExpFloat64()*20*float64(time.Millisecond)))
	}
	l = summarise(h)
	for _, c := range []struct {
		q   float64
		got float64
	}{{0.5, l.P50}, {0.9, l.P90}, {0.99, l.P99}} {
		want := -20 * math.Log(1-c.q)
		if math.Abs(c.got-want)/want > 0.02 {
			t.Errorf("exponential p%g: %.3f ms, want %.3f ms", c.q*100, c.got, want)
		}
	}
	if l.Count != n {
		t.Errorf("count %d", l.Count)
	}
	// out-of-range values are clamped, not lost
	h = newHist()
	recordDur(h, 0)
	recordDur(h, time.Hour)
	if h.TotalCount() != 2 || summarise(h).Max < 599000 {
		t.Errorf("clamped: %+v", summarise(h))
	}
}

func TestScheduleArithmetic(t *testing.T) {
	got := SpawnOffsets(2, 6, 2)
	want := []time.Duration{0, 500 * time.Millisecond, time.Second, 1500 * time.Millisecond}
	if len(got) != len(want) {
		t.Fatalf("offsets %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("offset %d: %v, want %v", i, got[i], want[i])
		}
	}
	if o := SpawnOffsets(0, 3, 0); len(o) != 3 || o[2] != 0 {
		t.Errorf("at once: %v", o)
	}
	if SpawnOffsets(5, 3, 1) != nil {
		t.Error("scaling down spawns no one")
	}
	t0 := time.Unix(0, 0)
	if d := IntendedAt(t0, 250, 100).Sub(t0); d != 2500*time.Millisecond {
		t.Errorf("IntendedAt %v", d)
	}
	if PlannedSends(100, 2500*time.Millisecond) != 250 || PlannedSends(3, 500*time.Millisecond) != 2 {
		t.Error("PlannedSends")
	}
}

// fake is an Invoker that sleeps and tracks concurrency over time.
type fake struct {
	mu       sync.Mutex
	start    time.Time
	service  time.Duration
	code     func(Call) string
	inflight int
	events   []event // (time since start, in flight after the call began)
	calls    atomic.Int64
	models   map[string]int
}

type event struct {
	at       time.Duration
	inflight int
}

func (f *fake) Invoke(ctx context.Context, c Call) Outcome {
	f.calls.Add(1)
	f.mu.Lock()
	f.inflight++
	f.events = append(f.events, event{time.Since(f.start), f.inflight})
	if f.models != nil {
		f.models[c.Model]++
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inflight--
		f.mu.Unlock()
	}()
	t := time.NewTimer(f.service)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return Outcome{Code: "Timeout", Message: ctx.Err().Error()}
	case <-t.C:
	}
	if f.code != nil {
		if code := f.code(c); code != "" {
			return Outcome{Code: code, Message: "fake " + code}
		}
	}
	return Outcome{}
}

func mustPlan(t *testing.T, p Plan) *Plan {
	t.Helper()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return &p
}

func dur(d time.Duration) Duration { return Duration(d) }

// TestRampAndScaleDown: users start no sooner than the spawn rate allows,
// all of them start, and extras stop when a stage has fewer users. Only
// "never early" and "eventually" are asserted: a loaded machine is late,
// never early.
func TestRampAndScaleDown(t *testing.T) {
	p := mustPlan(t, Plan{Stages: []Stage{
		{Users: 4, SpawnRate: 4, Duration: dur(1500 * time.Millisecond)},
		{Users: 1, Duration: dur(time.Second)},
	}})
	f := &fake{service: 5 * time.Millisecond, start: time.Now()}
	rep, err := Run(context.Background(), p, f, Options{Endpoint: "ep"})
	if err != nil {
		t.Fatal(err)
	}
	stage2 := rep.Stages[1].Started.Sub(rep.Started)
	peak := 0
	for _, e := range f.events {
		// users spawned by e.at: 1 at 0, then one every 250 ms
		if e.at < stage2 {
			allowed := int(e.at/(250*time.Millisecond)) + 1
			if e.inflight > allowed {
				t.Errorf("at %v: %d in flight, only %d users may have started", e.at, e.inflight, allowed)
			}
			peak = max(peak, e.inflight)
		} else if e.at > stage2+200*time.Millisecond && e.inflight > 1 {
			t.Errorf("at %v (stage 2 began %v): %d in flight with 1 user", e.at, stage2, e.inflight)
		}
	}
	if peak != 4 {
		t.Errorf("peak %d in flight, want 4", peak)
	}
	if rep.Stages[0].Users != 4 || rep.Stages[1].Users != 1 || rep.Stages[0].Completed == 0 || rep.Stages[1].Completed == 0 {
		t.Errorf("stages %+v", rep.Stages)
	}
	var secCompleted int64
	for _, s := range rep.Seconds {
		secCompleted += s.Completed
	}
	if total := rep.Stages[0].Completed + rep.Stages[1].Completed; secCompleted != total || total != f.calls.Load() {
		t.Errorf("seconds hold %d, stages %d, invoker saw %d", secCompleted, total, f.calls.Load())
	}
	if rep.Generator.CPUUserMS <= 0 || rep.Generator.GOMAXPROCS < 1 {
		t.Errorf("generator %+v", rep.Generator)
	}
}

// TestCoordinatedOmission: a rate stage against an endpoint that takes
// 50 ms per call with one call at a time. Latency from the intended send
// grows with the backlog far past the 50 ms service time, the sends that
// never happened are counted, and the same endpoint under one user (closed
// model, nothing scheduled) shows just the service time.
func TestCoordinatedOmission(t *testing.T) {
	p := mustPlan(t, Plan{
		Stages: []Stage{{Rate: 100, Duration: dur(time.Second)}, {Users: 1, Duration: dur(500 * time.Millisecond)}},
		Limits: Limits{MaxInFlight: 1},
	})
	f := &fake{service: 50 * time.Millisecond, start: time.Now()}
	rep, err := Run(context.Background(), p, f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	open, closed := rep.Stages[0], rep.Stages[1]
	if open.Intended != 100 || open.Sent+open.Unsent != open.Intended || open.Sent > 25 || open.Unsent < 75 {
		t.Errorf("intended %d, sent %d, unsent %d", open.Intended, open.Sent, open.Unsent)
	}
	// the k-th call was due at 10k ms but sent at about 50k ms
	if open.P90 < 300 || open.Max < 400 {
		t.Errorf("open model p90 %.1f ms, max %.1f ms: the backlog is hidden", open.P90, open.Max)
	}
	if open.SendLag.P90 < 250 {
		t.Errorf("send lag p90 %.1f ms", open.SendLag.P90)
	}
	if closed.P50 < 50 || closed.P50 > 150 {
		t.Errorf("closed model p50 %.1f ms, want about 50", closed.P50)
	}
	if !rep.Generator.Saturated || len(rep.Generator.Notes) == 0 {
		t.Errorf("a run that could not send on schedule is not marked: %+v", rep.Generator)
	}
}

func TestRateStageSendsOnSchedule(t *testing.T) {
	p := mustPlan(t, Plan{Stages: []Stage{{Rate: 200, Duration: dur(time.Second)}}, Traffic: Traffic{Models: 5}})
	f := &fake{service: time.Millisecond, start: time.Now(), models: map[string]int{}}
	rep, err := Run(context.Background(), p, f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Stages[0]
	if s.Intended != 200 || s.Sent+s.Unsent != 200 || s.Sent == 0 || s.Completed != s.Sent {
		t.Errorf("%+v", s)
	}
	if len(f.models) != 5 || f.models["model-1.tar.gz"] == 0 || f.models[""] != 0 {
		t.Errorf("models %v", f.models)
	}
	if rep.Cold.Count != 5 || rep.Warm.Count != s.Completed-5 {
		t.Errorf("cold %d warm %d", rep.Cold.Count, rep.Warm.Count)
	}
}

func TestMaxRequests(t *testing.T) {
	p := mustPlan(t, Plan{Stages: []Stage{{Users: 4, Duration: dur(10 * time.Second)}, {Users: 8, Duration: dur(10 * time.Second)}}, Limits: Limits{MaxRequests: 50}})
	f := &fake{service: time.Millisecond, start: time.Now()}
	begin := time.Now()
	rep, _ := Run(context.Background(), p, f, Options{})
	if f.calls.Load() != 50 || rep.Stages[0].Sent != 50 || rep.Stages[0].Completed != 50 {
		t.Errorf("calls %d, stage %+v", f.calls.Load(), rep.Stages[0])
	}
	if len(rep.Stages) != 1 || !strings.Contains(rep.StopReason, "max_requests") {
		t.Errorf("stages %d, reason %q", len(rep.Stages), rep.StopReason)
	}
	if time.Since(begin) > 8*time.Second {
		t.Errorf("took %v: the stage went on after the bound", time.Since(begin))
	}
}

func TestStopRules(t *testing.T) {
	three := []Stage{{Users: 1, Duration: dur(300 * time.Millisecond)}, {Users: 2, Duration: dur(300 * time.Millisecond)}, {Users: 3, Duration: dur(300 * time.Millisecond)}}
	t.Run("error rate", func(t *testing.T) {
		p := mustPlan(t, Plan{Stages: three, Stop: Stop{ErrorRate: 0.2}})
		f := &fake{service: time.Millisecond, start: time.Now(), code: func(Call) string { return "ThrottlingException" }}
		rep, _ := Run(context.Background(), p, f, Options{})
		if len(rep.Stages) != 1 || !strings.Contains(rep.StopReason, "error rate") {
			t.Errorf("stages %d, reason %q", len(rep.Stages), rep.StopReason)
		}
		s := rep.Stages[0]
		if s.Codes["ThrottlingException"] != s.Completed || s.ErrorRate != 1 || s.Count != 0 {
			t.Errorf("%+v", s)
		}
		if rep.ErrorSamples["ThrottlingException"] != "fake ThrottlingException" {
			t.Errorf("samples %v", rep.ErrorSamples)
		}
	})
	t.Run("target miss", func(t *testing.T) {
		p := mustPlan(t, Plan{Stages: three, Target: "p50=1ms", Stop: Stop{OnTargetMiss: true}})
		f := &fake{service: 20 * time.Millisecond, start: time.Now()}
		rep, _ := Run(context.Background(), p, f, Options{})
		if len(rep.Stages) != 1 || !strings.Contains(rep.StopReason, "missed") || *rep.Stages[0].MetTarget || rep.Answers.BestStage != 0 {
			t.Errorf("stages %d, reason %q, answers %+v", len(rep.Stages), rep.StopReason, rep.Answers)
		}
	})
	t.Run("target met", func(t *testing.T) {
		p := mustPlan(t, Plan{Stages: three, Target: "p50=5s"})
		f := &fake{service: time.Millisecond, start: time.Now()}
		rep, _ := Run(context.Background(), p, f, Options{})
		if len(rep.Stages) != 3 || rep.StopReason != "" || rep.Answers.BestStage == 0 || rep.Answers.BestRPS <= 0 {
			t.Errorf("stages %d, reason %q, answers %+v", len(rep.Stages), rep.StopReason, rep.Answers)
		}
	})
}

// TestInterrupt: cancelling the run's context (Ctrl-C) ends a long stage at
// once with a partial report, and the calls cut short are not errors.
func TestInterrupt(t *testing.T) {
	p := mustPlan(t, Plan{Stages: []Stage{{Users: 3, Duration: dur(time.Minute)}}})
	f := &fake{service: 30 * time.Millisecond, start: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	begin := time.Now()
	rep, err := Run(ctx, p, f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(begin); el > 10*time.Second {
		t.Errorf("took %v to stop", el)
	}
	if !rep.Interrupted || rep.StopReason != "interrupted" || rep.Stages[0].Errors != 0 || rep.Stages[0].Completed == 0 {
		t.Errorf("interrupted %v, reason %q, stage %+v", rep.Interrupted, rep.StopReason, rep.Stages[0])
	}
	if rep.Stages[0].Sent != rep.Stages[0].Completed {
		t.Errorf("sent %d, completed %d", rep.Stages[0].Sent, rep.Stages[0].Completed)
	}
}

func TestTimeoutIsCounted(t *testing.T) {
	p := mustPlan(t, Plan{Stages: []Stage{{Users: 1, Duration: dur(300 * time.Millisecond)}}, Request: Request{Timeout: dur(50 * time.Millisecond)}})
	f := &fake{service: time.Second, start: time.Now()}
	rep, _ := Run(context.Background(), p, f, Options{})
	if s := rep.Stages[0]; s.Codes["Timeout"] == 0 || s.Codes["Timeout"] != s.Completed {
		t.Errorf("%+v", s)
	}
}

// TestThinkTimePerStage: a user pauses for its current stage's think time,
// also when it was started in an earlier stage with another one.
func TestThinkTimePerStage(t *testing.T) {
	slow, none := dur(100*time.Millisecond), dur(0)
	p := mustPlan(t, Plan{Stages: []Stage{
		{Users: 1, Duration: dur(600 * time.Millisecond), ThinkTime: &slow},
		{Users: 1, Duration: dur(600 * time.Millisecond), ThinkTime: &none},
	}})
	f := &fake{service: time.Millisecond, start: time.Now()}
	rep, _ := Run(context.Background(), p, f, Options{})
	a, b := rep.Stages[0].Completed, rep.Stages[1].Completed
	// each call takes its 100 ms of thinking at least: at most one per 100 ms
	// of the stage's wall time (which a loaded machine may stretch), plus one
	if most := int64(rep.Stages[0].WallMS/100) + 1; a == 0 || a > most {
		t.Errorf("stage 1 with 100 ms think time: %d calls in %.0f ms", a, rep.Stages[0].WallMS)
	}
	if b < 3*a {
		t.Errorf("stage 2 without think time: %d calls, stage 1 with it: %d", b, a)
	}
	if rep.Stages[0].ThinkTimeMS != 100 {
		t.Errorf("think_time_ms %v", rep.Stages[0].ThinkTimeMS)
	}
}
