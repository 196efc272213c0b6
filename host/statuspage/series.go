package statuspage

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// The status page's charts read a small recorder of their own rather than
// the Prometheus registry: a fixed ring of time buckets per endpoint and
// variant, counting invocations and errors and holding a fixed latency
// histogram per bucket. Its memory is bounded (maxSeries series of
// seriesSlots buckets, about 36 KiB each) and recording allocates nothing.
const (
	// SeriesStep is the width of one bucket of the status page's charts.
	SeriesStep = 5 * time.Second
	// SeriesWindow is how far back the charts reach.
	SeriesWindow = 15 * time.Minute
	seriesSlots  = int(SeriesWindow / SeriesStep)
	// maxSeries caps the endpoint/variant pairs tracked; invocations of
	// others are counted in SeriesDropped only.
	maxSeries = 128
	// latencyBins is the number of latency histogram bins: bin i holds
	// durations up to latencyBase·√2^i (50 µs … about 52 s), the last one
	// everything longer.
	latencyBins = 42
	latencyBase = 50 * time.Microsecond
	// pruneEvery is how often, at most, a recorder at its cap looks for
	// series of endpoints that are gone.
	pruneEvery = time.Second
)

// latencyBounds[i] is the upper bound of bin i; the last bin has none.
var latencyBounds = func() (b [latencyBins - 1]time.Duration) {
	for i := range b {
		d := float64(latencyBase)
		for range i / 2 {
			d *= 2
		}
		if i%2 == 1 {
			d *= 1.4142135623730951
		}
		b[i] = time.Duration(d)
	}
	return b
}()

// latencyBin returns the bin of a duration: the first whose bound is not
// below it (a binary search over 41 bounds, no allocation).
func latencyBin(d time.Duration) int {
	lo, hi := 0, len(latencyBounds)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if latencyBounds[m] < d {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

type seriesKey struct{ endpoint, variant string }

// slot is one time bucket of one series.
type slot struct {
	step        int64 // the bucket this slot holds: steps since the recorder's origin
	invocations uint32
	errors      uint32
	// Latency of the successful invocations.
	sum, max time.Duration
	bins     [latencyBins]uint32
}

// series is one endpoint and variant's ring of buckets.
type series struct {
	key   seriesKey
	mu    sync.Mutex
	slots [seriesSlots]slot
}

// Recorder is safe for concurrent use. Recording takes an atomic load
// of an immutable map and one short per-series critical section; adding a
// series copies the map (rare: once per endpoint and variant).
type Recorder struct {
	// origin anchors the buckets on the monotonic clock, so a step of the
	// wall clock neither loses nor misplaces invocations.
	origin time.Time
	// live reports whether an endpoint still exists; at the cap, series of
	// endpoints that are gone make room. Nil: every endpoint is live.
	live func(endpoint string) bool

	m         atomic.Pointer[map[seriesKey]*series]
	mu        sync.Mutex // serializes changes to m
	lastPrune time.Time  // guarded by mu
	dropped   atomic.Int64
}

func NewRecorder(origin time.Time, live func(string) bool) *Recorder {
	r := &Recorder{origin: origin, live: live}
	r.m.Store(&map[seriesKey]*series{})
	return r
}

// step is the bucket number of a time.
func (r *Recorder) step(t time.Time) int64 {
	return int64(t.Sub(r.origin) / SeriesStep)
}

// Record counts one invocation of the endpoint and variant ("" when it
// failed before a variant was picked) that started at start and ended now;
// the latency of a successful one goes into the bucket's histogram.
func (r *Recorder) Record(endpoint, variant string, start time.Time, ok bool) {
	r.recordAt(endpoint, variant, time.Now(), time.Since(start), ok)
}

func (r *Recorder) recordAt(endpoint, variant string, end time.Time, d time.Duration, ok bool) {
	k := seriesKey{endpoint, variant}
	s := (*r.m.Load())[k]
	if s == nil {
		if s = r.add(k, end); s == nil {
			r.dropped.Add(1)
			return
		}
	}
	step := r.step(end)
	if step < 0 {
		return
	}
	bin := latencyBin(d)
	sl := &s.slots[step%int64(seriesSlots)]
	s.mu.Lock()
	if sl.step != step {
		if sl.step > step { // older than the window
			s.mu.Unlock()
			return
		}
		*sl = slot{step: step}
	}
	sl.invocations++
	if ok {
		sl.sum += d
		sl.max = max(sl.max, d)
		sl.bins[bin]++
	} else {
		sl.errors++
	}
	s.mu.Unlock()
}

// add returns the series of k, creating it unless the recorder holds
// maxSeries already; then it first drops the series of endpoints that are
// gone (at most once per pruneEvery).
func (r *Recorder) add(k seriesKey, now time.Time) *series {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.m.Load()
	if s := old[k]; s != nil {
		return s
	}
	if len(old) >= maxSeries {
		if r.live == nil || now.Sub(r.lastPrune) < pruneEvery {
			return nil
		}
		r.lastPrune = now
		r.retainLocked(r.live)
		old = *r.m.Load()
		if len(old) >= maxSeries {
			return nil
		}
	}
	m := make(map[seriesKey]*series, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	// The slots start out as step 0 of the origin; -1 marks them empty so
	// that the first bucket is never read as recorded.
	s := &series{key: k}
	for i := range s.slots {
		s.slots[i].step = -1
	}
	m[k] = s
	r.m.Store(&m)
	return s
}

// Drop forgets the series of an endpoint (it was deleted).
func (r *Recorder) Drop(endpoint string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retainLocked(func(e string) bool { return e != endpoint })
}

func (r *Recorder) retainLocked(keep func(string) bool) {
	old := *r.m.Load()
	m := make(map[seriesKey]*series, len(old))
	for k, v := range old {
		if keep(k.endpoint) {
			m[k] = v
		}
	}
	if len(m) != len(old) {
		r.m.Store(&m)
	}
}

// Len is the number of series tracked.
func (r *Recorder) Len() int { return len(*r.m.Load()) }

// Series is one endpoint and variant's invocations over the last
// SeriesWindow, in SeriesStep buckets; buckets without invocations are left
// out. VariantName is "" for invocations that failed before a variant was
// picked.
type Series struct {
	EndpointName string        `json:"EndpointName"`
	VariantName  string        `json:"VariantName"`
	Points       []SeriesPoint `json:"Points"`
}

// SeriesPoint is one bucket. Latencies are those of the successful
// invocations, in seconds, from the request's arrival at mce to its answer
// (ModelLatency plus OverheadLatency); the percentiles come from a histogram
// with bins √2 apart, interpolated within the bin, so they are within a
// factor of √2, one bin (TestSeriesQuantiles), and never above
// LatencyMaxSeconds, which is exact.
type SeriesPoint struct {
	Start              time.Time `json:"Start"`
	Invocations        int       `json:"Invocations"`
	Errors             int       `json:"Errors"`
	LatencyP50Seconds  float64   `json:"LatencyP50Seconds,omitempty"`
	LatencyP99Seconds  float64   `json:"LatencyP99Seconds,omitempty"`
	LatencyMeanSeconds float64   `json:"LatencyMeanSeconds,omitempty"`
	LatencyMaxSeconds  float64   `json:"LatencyMaxSeconds,omitempty"`
}

// window is a copy of a series' buckets for the window ending at a step,
// oldest first; buckets not recorded in that window are zero.
type window struct {
	key   seriesKey
	first time.Time // start of slots[0]
	slots [seriesSlots]slot
}

// windows copies the buckets of every series with invocations in the window
// ending now, sorted by endpoint and variant (a variant an update removed
// drops out of the charts once its last invocation leaves the window). The series of endpoints that keep reports gone are
// dropped first (nil keeps all).
func (r *Recorder) windows(now time.Time, keep func(string) bool) []*window {
	if keep != nil {
		r.mu.Lock()
		r.retainLocked(keep)
		r.mu.Unlock()
	}
	cur := r.step(now)
	firstStep := cur - int64(seriesSlots) + 1
	first := r.origin.Add(time.Duration(firstStep) * SeriesStep)
	var out []*window
	for _, s := range *r.m.Load() {
		w := &window{key: s.key, first: first}
		recorded := false
		s.mu.Lock()
		for i := range w.slots {
			step := firstStep + int64(i)
			if step < 0 {
				continue
			}
			if sl := &s.slots[step%int64(seriesSlots)]; sl.step == step {
				w.slots[i] = *sl
				recorded = true
			}
		}
		s.mu.Unlock()
		if recorded {
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].key.endpoint != out[j].key.endpoint {
			return out[i].key.endpoint < out[j].key.endpoint
		}
		return out[i].key.variant < out[j].key.variant
	})
	return out
}

// merge adds another window's buckets (of the same time span) to w.
func (w *window) merge(o *window) {
	for i := range w.slots {
		w.slots[i].add(&o.slots[i])
	}
}

// total is the window's buckets added into one: its invocations, errors
// and latency histogram over the whole window. (The counts are a bucket's
// uint32s: they would wrap only past 2³² invocations in SeriesWindow, some
// 4.7 million a second for 15 minutes.)
func (w *window) total() slot {
	var t slot
	for i := range w.slots {
		t.add(&w.slots[i])
	}
	return t
}

// add counts another bucket's invocations into sl.
func (sl *slot) add(o *slot) {
	sl.invocations += o.invocations
	sl.errors += o.errors
	sl.sum += o.sum
	sl.max = max(sl.max, o.max)
	for j := range sl.bins {
		sl.bins[j] += o.bins[j]
	}
}

// points are the window's buckets with invocations.
func (w *window) points() []SeriesPoint {
	var out []SeriesPoint
	for i := range w.slots {
		sl := &w.slots[i]
		if sl.invocations == 0 {
			continue
		}
		out = append(out, sl.point(w.first.Add(time.Duration(i)*SeriesStep)))
	}
	return out
}

func (sl *slot) point(start time.Time) SeriesPoint {
	p := SeriesPoint{Start: start.UTC(), Invocations: int(sl.invocations), Errors: int(sl.errors)}
	if ok := sl.invocations - sl.errors; ok > 0 {
		p.LatencyP50Seconds = sl.quantile(0.5).Seconds()
		p.LatencyP99Seconds = sl.quantile(0.99).Seconds()
		p.LatencyMeanSeconds = (sl.sum / time.Duration(ok)).Seconds()
		p.LatencyMaxSeconds = sl.max.Seconds()
	}
	return p
}

// quantile estimates the q-quantile of the bucket's successful latencies:
// the bin holding it, interpolated linearly inside the bin, capped at the
// largest latency seen.
func (sl *slot) quantile(q float64) time.Duration {
	n := sl.invocations - sl.errors
	if n == 0 {
		return 0
	}
	rank := q * float64(n)
	var seen float64
	for i, c := range sl.bins {
		if c == 0 {
			continue
		}
		if seen+float64(c) >= rank {
			lo := time.Duration(0)
			if i > 0 {
				lo = latencyBounds[i-1]
			}
			hi := sl.max
			if i < len(latencyBounds) {
				hi = min(latencyBounds[i], sl.max)
			}
			if hi < lo {
				return hi
			}
			frac := (rank - seen) / float64(c)
			return lo + time.Duration(frac*float64(hi-lo))
		}
		seen += float64(c)
	}
	return sl.max
}
