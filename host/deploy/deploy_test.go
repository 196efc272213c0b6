package deploy

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/internal/awsclock"
)

type route struct{ name string }

// TestSplitShare: over many calls the share of calls to green is the one
// set, within 5 standard deviations; 0 and 1 are exact.
func TestSplitShare(t *testing.T) {
	blue, green := &route{"blue"}, &route{"green"}
	s := NewSplit(green)
	const n = 200000
	for _, share := range []float64{0, 0.1, 0.25, 0.5, 0.9, 1} {
		s.Set(share)
		k := 0
		for range n {
			if s.Pick(blue) == green {
				k++
			}
		}
		sd := math.Sqrt(n * share * (1 - share))
		if d := math.Abs(float64(k) - n*share); d > 5*sd+0.5 {
			t.Errorf("share %v: %d of %d calls to green (%.4f), off by %.1f sd", share, k, n, float64(k)/n, d/sd)
		}
		if got := s.Share(); math.Abs(got-share) > 1e-6 {
			t.Errorf("Share() = %v after Set(%v)", got, share)
		}
	}
	for _, bad := range []float64{-1, math.NaN()} {
		s.Set(bad)
		if s.Share() != 0 {
			t.Errorf("Set(%v) gave share %v, want 0", bad, s.Share())
		}
	}
	s.Set(7)
	if s.Share() != 1 {
		t.Errorf("Set(7) gave share %v, want 1", s.Share())
	}
}

// TestSplitPickCost: a pick allocates nothing and costs about an atomic
// load and a random draw (well under a microsecond even under -race).
func TestSplitPickCost(t *testing.T) {
	blue, green := &route{"blue"}, &route{"green"}
	s := NewSplit(green)
	s.Set(0.3)
	if a := testing.AllocsPerRun(1000, func() { s.Pick(blue) }); a != 0 {
		t.Errorf("Pick allocates %v times", a)
	}
	r := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			s.Pick(blue)
		}
	})
	if ns := r.NsPerOp(); ns > 1000 {
		t.Errorf("Pick takes %d ns", ns)
	}
}

func BenchmarkSplitPick(b *testing.B) {
	blue, green := &route{"blue"}, &route{"green"}
	s := NewSplit(green)
	s.Set(0.3)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.Pick(blue)
		}
	})
}

func policy(typ string, wait int32, size *spec.CapacitySize) *spec.BlueGreenUpdatePolicy {
	t := &spec.TrafficRoutingConfig{Type: typ, WaitIntervalInSeconds: &wait}
	if typ == spec.TrafficCanary {
		t.CanarySize = size
	} else {
		t.LinearStepSize = size
	}
	return &spec.BlueGreenUpdatePolicy{TrafficRoutingConfiguration: t}
}

func size(typ string, v int32) *spec.CapacitySize { return &spec.CapacitySize{Type: typ, Value: &v} }

func TestBlueGreenSteps(t *testing.T) {
	m := time.Minute
	cases := []struct {
		p    *spec.BlueGreenUpdatePolicy
		n    int
		want []Step
	}{
		{policy(spec.TrafficAllAtOnce, 60, nil), 3, []Step{{Share: 1, Wait: m}}},
		{policy(spec.TrafficCanary, 60, size(spec.InstanceCount, 1)), 4, []Step{{Share: 0.25, Wait: m}, {Share: 1, Wait: 0}}},
		{policy(spec.TrafficCanary, 60, size(spec.CapacityPercent, 10)), 10, []Step{{Share: 0.1, Wait: m}, {Share: 1, Wait: 0}}},
		{policy(spec.TrafficCanary, 60, size(spec.CapacityPercent, 10)), 3, []Step{{Share: 1.0 / 3, Wait: m}, {Share: 1, Wait: 0}}}, // 10% of 3 rounds up to 1
		{policy(spec.TrafficLinear, 60, size(spec.InstanceCount, 1)), 4, []Step{{Share: 0.25, Wait: m}, {Share: 0.5, Wait: m}, {Share: 0.75, Wait: m}, {Share: 1, Wait: m}}},
		{policy(spec.TrafficLinear, 60, size(spec.InstanceCount, 2)), 5, []Step{{Share: 0.4, Wait: m}, {Share: 0.8, Wait: m}, {Share: 1, Wait: m}}},
		{policy(spec.TrafficLinear, 0, size(spec.CapacityPercent, 50)), 2, []Step{{Share: 0.5, Wait: 0}, {Share: 1, Wait: 0}}},
	}
	for _, c := range cases {
		if got := BlueGreenSteps(c.p, c.n); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s of %d: %v, want %v", c.p.TrafficRoutingConfiguration.Type, c.n, got, c.want)
		}
	}
}

// target records what Run does.
type target struct {
	err    error
	mu     sync.Mutex
	shifts []float64
	phases []string
}

func (t *target) Shift(st Step) error {
	t.mu.Lock()
	t.shifts = append(t.shifts, st.Share)
	t.mu.Unlock()
	return t.err
}
func (t *target) Phase(status, _ string) {
	t.mu.Lock()
	t.phases = append(t.phases, status)
	t.mu.Unlock()
}

// source is an AlarmSource whose states the test sets.
type source struct {
	mu     sync.Mutex
	states map[string]string
	hooks  map[int]func(string, string)
	next   int
}

func newSource(states map[string]string) *source {
	return &source{states: states, hooks: map[int]func(string, string){}}
}

func (s *source) AlarmState(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.states[name]
	return st, ok
}

func (s *source) OnAlarmChange(f func(string, string)) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.next
	s.next++
	s.hooks[id] = f
	return func() { s.mu.Lock(); delete(s.hooks, id); s.mu.Unlock() }
}

func (s *source) set(name, st string) {
	s.mu.Lock()
	s.states[name] = st
	var hs []func(string, string)
	for _, h := range s.hooks {
		hs = append(hs, h)
	}
	s.mu.Unlock()
	for _, h := range hs {
		h(name, st)
	}
}

func fast(t *testing.T) Clock {
	c, err := awsclock.New(3600) // an hour is a second
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRunCompletes(t *testing.T) {
	src := newSource(map[string]string{"a": "OK"})
	w := Watch(src, []string{"a"})
	defer w.Close()
	var tg target
	steps := []Step{{Share: 0.25, Wait: time.Minute}, {Share: 0.5, Wait: time.Minute}, {Share: 1, Wait: 0}}
	out := Run(context.Background(), fast(t), steps, time.Now(), 0, w, &tg)
	if !out.Completed || out.Reason != "" {
		t.Fatalf("outcome %+v", out)
	}
	if !reflect.DeepEqual(tg.shifts, []float64{0.25, 0.5, 1}) ||
		!reflect.DeepEqual(tg.phases, []string{"ActivatingTraffic", "Baking", "ActivatingTraffic", "Baking", "ActivatingTraffic"}) {
		t.Errorf("shifts %v phases %v", tg.shifts, tg.phases)
	}
}

// TestRunRollsBackOnAlarm: an alarm going to ALARM during a bake ends the
// deployment at once (long before the bake would), naming the alarm; an
// alarm not watched changes nothing.
func TestRunRollsBackOnAlarm(t *testing.T) {
	src := newSource(map[string]string{"a": "OK", "other": "OK"})
	w := Watch(src, []string{"a"})
	defer w.Close()
	var tg target
	steps := []Step{{Share: 0.1, Wait: 10 * time.Hour}, {Share: 1, Wait: 0}} // 10 s of wall time
	go func() {
		time.Sleep(50 * time.Millisecond)
		src.set("other", "ALARM")
		time.Sleep(50 * time.Millisecond)
		src.set("a", "ALARM")
	}()
	start := time.Now()
	out := Run(context.Background(), fast(t), steps, time.Now(), 0, w, &tg)
	if out.Completed || out.Canceled || !strings.Contains(out.Reason, "CloudWatch alarm a went into the ALARM state") {
		t.Fatalf("outcome %+v", out)
	}
	if d := time.Since(start); d > 3*time.Second || d < 90*time.Millisecond {
		t.Errorf("rolled back after %v", d)
	}
	if !reflect.DeepEqual(tg.shifts, []float64{0.1}) {
		t.Errorf("shifts %v: the full shift must not happen", tg.shifts)
	}
}

func TestRunAlarmAlreadyInAlarm(t *testing.T) {
	src := newSource(map[string]string{"a": "ALARM"})
	w := Watch(src, []string{"a"})
	defer w.Close()
	var tg target
	out := Run(context.Background(), fast(t), []Step{{Share: 1, Wait: time.Minute}}, time.Now(), 0, w, &tg)
	if out.Completed || out.Reason == "" || len(tg.shifts) != 0 {
		t.Fatalf("outcome %+v, shifts %v: nothing may shift while an alarm is in ALARM", out, tg.shifts)
	}
}

func TestRunTimesOut(t *testing.T) {
	var tg target
	clock := fast(t)
	// 600 s of timeout counted from 500 s ago: 100 s (28 ms) are left, the
	// bake is an hour (1 s).
	started := clock.Now().Add(-500 * time.Second)
	out := Run(context.Background(), clock, []Step{{Share: 0.5, Wait: time.Hour}, {Share: 1, Wait: 0}}, started, 600*time.Second, nil, &tg)
	if out.Completed || !strings.Contains(out.Reason, "MaximumExecutionTimeoutInSeconds (600)") {
		t.Fatalf("outcome %+v", out)
	}
}

func TestRunCanceled(t *testing.T) {
	var tg target
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	out := Run(ctx, fast(t), []Step{{Share: 0.5, Wait: time.Hour}, {Share: 1, Wait: 0}}, time.Now(), 0, nil, &tg)
	if !out.Canceled || out.Completed {
		t.Fatalf("outcome %+v", out)
	}
}

func TestWatcherMissingAndClose(t *testing.T) {
	src := newSource(map[string]string{"a": "OK"})
	if got := Missing(src, []string{"a", "b", "c"}); !reflect.DeepEqual(got, []string{"b", "c"}) {
		t.Errorf("Missing = %v", got)
	}
	w := Watch(src, []string{"a"})
	src.set("a", "INSUFFICIENT_DATA")
	select {
	case <-w.Changed():
	default:
		t.Error("a change of a watched alarm was not signalled")
	}
	if w.Tripped() != "" {
		t.Error("INSUFFICIENT_DATA counted as tripped")
	}
	src.set("a", "ALARM")
	src.set("a", "OK")
	if w.Tripped() != "a" {
		t.Error("an alarm that went to ALARM and back was forgotten")
	}
	w.Close()
	w.Close()
	if len(src.hooks) != 0 {
		t.Errorf("%d hooks left after Close", len(src.hooks))
	}
}

func TestRollingSteps(t *testing.T) {
	w := int32(60)
	p := &spec.RollingUpdatePolicy{MaximumBatchSize: size(spec.InstanceCount, 1), WaitIntervalInSeconds: &w}
	got := RollingSteps(p, []int{4}, []int{4})
	want := []Step{
		{Share: 0.2, Wait: time.Minute, Green: []int{1}, Blue: []int{4}},
		{Share: 0.4, Wait: time.Minute, Green: []int{2}, Blue: []int{3}},
		{Share: 0.6, Wait: time.Minute, Green: []int{3}, Blue: []int{2}},
		{Share: 1, Wait: time.Minute, Green: []int{4}, Blue: []int{1}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("1 of 4:\n got %v\nwant %v", got, want)
	}
	p.MaximumBatchSize = size(spec.CapacityPercent, 50)
	got = RollingSteps(p, []int{4, 1}, []int{2})
	want = []Step{
		{Share: 1.0 / 6, Wait: time.Minute, Green: []int{1}, Blue: []int{4, 1}},
		{Share: 1, Wait: time.Minute, Green: []int{2}, Blue: []int{2, 1}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("50%% of [4 1] to [2]:\n got %v\nwant %v", got, want)
	}
	rb := RollbackSteps(p, []int{2, 1}, []int{4, 1}, 2)
	if want := []Step{{Share: 2.0 / 7, Blue: []int{4, 1}}}; !reflect.DeepEqual(rb, want) {
		t.Errorf("rollback all at once: %v, want %v", rb, want)
	}
	p.RollbackMaximumBatchSize = size(spec.InstanceCount, 1)
	rb = RollbackSteps(p, []int{1, 1}, []int{4, 1}, 3)
	if want := []Step{{Share: 0.5, Blue: []int{2, 1}}, {Share: 3.0 / 7, Blue: []int{3, 1}}, {Share: 3.0 / 8, Blue: []int{4, 1}}}; !reflect.DeepEqual(rb, want) {
		t.Errorf("rollback by 1:\n got %v\nwant %v", rb, want)
	}
}

func TestRunShiftFailureRollsBack(t *testing.T) {
	tg := target{err: errors.New("no room")}
	out := Run(context.Background(), fast(t), []Step{{Share: 0.5, Wait: time.Hour}}, time.Now(), 0, nil, &tg)
	if out.Completed || !strings.Contains(out.Reason, "no room") {
		t.Fatalf("outcome %+v", out)
	}
}
