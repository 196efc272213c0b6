package statuspage

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

func TestLatencyBins(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0},
		{latencyBase, 0},
		{latencyBase + 1, 1},
		{2 * latencyBase, 2},
		{2*latencyBase + 1, 3},
		{time.Hour, latencyBins - 1},
	} {
		if got := latencyBin(c.d); got != c.want {
			t.Errorf("latencyBin(%v) = %d, want %d", c.d, got, c.want)
		}
	}
	if last := latencyBounds[len(latencyBounds)-1]; last < 50*time.Second || last > 60*time.Second {
		t.Errorf("the last bound is %v, want about 52 s", last)
	}
}

// TestSeriesRollover: a bucket's slot is reused one window later, and what
// it held then is gone; invocations land in the bucket of their end.
func TestSeriesRollover(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := NewRecorder(t0, nil)
	r.recordAt("ep", "A", t0.Add(1*time.Second), time.Millisecond, true)
	r.recordAt("ep", "A", t0.Add(4*time.Second), 3*time.Millisecond, true)
	r.recordAt("ep", "A", t0.Add(6*time.Second), time.Millisecond, false)

	ws := r.windows(t0.Add(7*time.Second), nil)
	if len(ws) != 1 {
		t.Fatalf("%d series, want 1", len(ws))
	}
	pts := ws[0].points()
	if len(pts) != 2 {
		t.Fatalf("points %+v, want 2 buckets", pts)
	}
	if p := pts[0]; !p.Start.Equal(t0) || p.Invocations != 2 || p.Errors != 0 ||
		p.LatencyMaxSeconds != 0.003 || p.LatencyMeanSeconds != 0.002 {
		t.Errorf("first bucket %+v", p)
	}
	if p := pts[1]; !p.Start.Equal(t0.Add(SeriesStep)) || p.Invocations != 1 || p.Errors != 1 || p.LatencyP50Seconds != 0 {
		t.Errorf("second bucket %+v", p)
	}

	// One window later the same slots serve new buckets.
	later := t0.Add(SeriesWindow)
	r.recordAt("ep", "A", later.Add(time.Second), 10*time.Millisecond, true)
	pts = r.windows(later.Add(2*time.Second), nil)[0].points()
	if len(pts) != 2 || pts[0].Invocations != 1 || !pts[0].Start.Equal(t0.Add(SeriesStep)) {
		t.Fatalf("after a window: %+v, want the 5 s bucket still in the window and the first one replaced", pts)
	}
	if p := pts[1]; !p.Start.Equal(later) || p.Invocations != 1 || p.LatencyMaxSeconds != 0.01 {
		t.Errorf("the reused slot: %+v", p)
	}
	// A late report for a bucket already reused is dropped, not mixed in.
	r.recordAt("ep", "A", t0.Add(2*time.Second), time.Millisecond, true)
	if pts := r.windows(later.Add(2*time.Second), nil)[0].points(); pts[1].Invocations != 1 {
		t.Errorf("a report older than the window changed a newer bucket: %+v", pts[1])
	}
	// Far later, nothing is left in the window.
	if ws := r.windows(later.Add(time.Hour), nil); len(ws) != 0 {
		t.Errorf("an hour later: %d series with invocations, want none", len(ws))
	}
	if r.Len() != 1 {
		t.Errorf("the idle series was forgotten: %d series", r.Len())
	}
}

// TestSeriesQuantiles: the percentiles from the bins are within a bin's
// width (√2) of the truth and never above the maximum.
func TestSeriesQuantiles(t *testing.T) {
	t0 := time.Now()
	r := NewRecorder(t0, nil)
	// 1..1000 ms: p50 is 500 ms, p99 990 ms.
	for i := 1; i <= 1000; i++ {
		r.recordAt("ep", "A", t0, time.Duration(i)*time.Millisecond, true)
	}
	p := r.windows(t0, nil)[0].points()[0]
	near := func(name string, got, want float64) {
		if got < want/math.Sqrt2 || got > want*math.Sqrt2 {
			t.Errorf("%s = %v, want within √2 of %v", name, got, want)
		}
	}
	near("p50", p.LatencyP50Seconds, 0.5)
	near("p99", p.LatencyP99Seconds, 0.99)
	if p.LatencyMaxSeconds != 1 || p.LatencyP99Seconds > 1 {
		t.Errorf("max %v, p99 %v", p.LatencyMaxSeconds, p.LatencyP99Seconds)
	}
	if math.Abs(p.LatencyMeanSeconds-0.5005) > 1e-9 {
		t.Errorf("mean %v, want 0.5005", p.LatencyMeanSeconds)
	}
	// One sample: every percentile is that sample (capped by the max).
	r.recordAt("one", "A", t0, 7*time.Millisecond, true)
	for _, w := range r.windows(t0, nil) {
		if w.key.endpoint == "one" {
			if p := w.points()[0]; p.LatencyP50Seconds > 0.007 || p.LatencyP99Seconds > 0.007 || p.LatencyP50Seconds < 0.007/math.Sqrt2 || p.LatencyP99Seconds < p.LatencyP50Seconds {
				t.Errorf("one sample of 7 ms: %+v", p)
			}
		}
	}
}

// TestSeriesBounded: at most maxSeries series; beyond, invocations are
// counted as dropped; a deleted endpoint's series go at once, and those of
// endpoints that are gone make room at the cap.
func TestSeriesBounded(t *testing.T) {
	t0 := time.Now()
	live := map[string]bool{}
	var mu sync.Mutex
	r := NewRecorder(t0, func(e string) bool { mu.Lock(); defer mu.Unlock(); return live[e] })
	for i := range maxSeries + 10 {
		name := fmt.Sprintf("ep%d", i)
		mu.Lock()
		live[name] = true
		mu.Unlock()
		r.recordAt(name, "A", t0, time.Millisecond, true)
	}
	if r.Len() != maxSeries || r.dropped.Load() != 10 {
		t.Fatalf("%d series, %d dropped; want %d and 10", r.Len(), r.dropped.Load(), maxSeries)
	}
	r.Drop("ep0")
	if r.Len() != maxSeries-1 {
		t.Errorf("drop left %d series", r.Len())
	}
	// Endpoints that are gone make room at the cap, at most once a second.
	mu.Lock()
	for i := 1; i <= 20; i++ {
		delete(live, fmt.Sprintf("ep%d", i))
	}
	live["new1"], live["new2"] = true, true
	mu.Unlock()
	r.recordAt("new1", "A", t0.Add(time.Second), time.Millisecond, true) // fills the cap again
	r.recordAt("new2", "A", t0.Add(2*time.Second), time.Millisecond, true)
	if r.Len() != maxSeries-20+1 {
		t.Errorf("after pruning: %d series, want %d", r.Len(), maxSeries-19)
	}
	// windows drops the series of endpoints keep does not know.
	if ws := r.windows(t0, func(e string) bool { return e == "new2" }); len(ws) != 1 || ws[0].key.endpoint != "new2" {
		t.Errorf("windows(keep) = %d series", len(ws))
	}
	if r.Len() != 1 {
		t.Errorf("%d series left, want 1", r.Len())
	}
}

// TestSeriesConcurrent records from many goroutines while windows are read
// and series dropped (run with -race); no invocation is lost.
func TestSeriesConcurrent(t *testing.T) {
	t0 := time.Now()
	r := NewRecorder(t0, nil)
	const workers, each = 8, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r.recordAt("ep", []string{"A", "B"}[w%2], t0.Add(time.Duration(i)*time.Millisecond), time.Duration(i)*time.Microsecond, i%10 != 0)
				r.recordAt(fmt.Sprintf("tmp%d", w), "A", t0, time.Millisecond, true)
			}
		}()
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				r.windows(t0.Add(time.Second), nil)
				r.Drop("tmp0")
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-done
	var inv, errs int
	for _, w := range r.windows(t0.Add(2*time.Second), nil) {
		if w.key.endpoint != "ep" {
			continue
		}
		for _, p := range w.points() {
			inv += p.Invocations
			errs += p.Errors
		}
	}
	if inv != workers*each || errs != workers*each/10 {
		t.Errorf("counted %d invocations, %d errors; want %d, %d", inv, errs, workers*each, workers*each/10)
	}
}

// TestSeriesRecordAllocatesNothing: the hot path's call allocates nothing
// once its series exists.
func TestSeriesRecordAllocatesNothing(t *testing.T) {
	r := NewRecorder(time.Now(), nil)
	start := time.Now()
	r.Record("ep", "A", start, true)
	if n := testing.AllocsPerRun(1000, func() { r.Record("ep", "A", start, true) }); n != 0 {
		t.Errorf("record allocates %v times per call", n)
	}
}

// BenchmarkSeriesRecord is the recorder's cost per invocation, all
// goroutines on one series (the worst case for its lock).
func BenchmarkSeriesRecord(b *testing.B) {
	r := NewRecorder(time.Now(), nil)
	start := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Record("endpoint-name", "AllTraffic", start, true)
		}
	})
}
