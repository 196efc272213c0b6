package loadtest

import (
	"sort"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds, in microseconds: 1 µs to 10 minutes at 3 significant
// digits (about 200 KiB each; a handful are alive at once).
const (
	histLowest  = 1
	histHighest = int64(10 * time.Minute / time.Microsecond)
	histDigits  = 3
)

func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(histLowest, histHighest, histDigits)
}

func recordDur(h *hdrhistogram.Histogram, d time.Duration) {
	us := d.Microseconds()
	if us < histLowest {
		us = histLowest
	}
	if us > histHighest {
		us = histHighest
	}
	h.RecordValue(us) // in range: cannot fail
}

// Latency summarises a histogram in milliseconds.
type Latency struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
}

func summarise(h *hdrhistogram.Histogram) Latency {
	if h == nil || h.TotalCount() == 0 {
		return Latency{}
	}
	return Latency{
		Count: h.TotalCount(),
		P50:   usToMS(h.ValueAtQuantile(50)),
		P90:   usToMS(h.ValueAtQuantile(90)),
		P99:   usToMS(h.ValueAtQuantile(99)),
		Max:   usToMS(h.Max()),
		Mean:  h.Mean() / 1000,
	}
}

func usToMS(us int64) float64 { return float64(us) / 1000 }

// result is one request as the runner saw it.
type result struct {
	stage    int
	model    string
	intended time.Time // when it should have been sent
	sent     time.Time // when it was handed to the Invoker
	done     time.Time
	ttfb     time.Duration // from sent; 0 when not streaming
	code     string        // "" for success
	message  string        // the error's text, kept for the first of each code
	variant  string        // the variant that answered, "" when unknown
}

// maxCodes bounds the distinct error codes kept: codes come from the
// endpoint (a ModelStreamError's code is the container's), so past this
// they are counted as "Other".
const maxCodes = 100

// maxVariants bounds the variants kept apart (SageMaker allows 10
// production variants an endpoint): the names come from the endpoint, so
// past this their calls are counted under OtherVariants.
const maxVariants = 20

// OtherVariants is the name under which calls answered by variants past
// the first 20 are counted.
const OtherVariants = "(other)"

// stageAcc accumulates one stage.
type stageAcc struct {
	sent, completed, errors int64
	codes                   map[string]int64
	lat, ttfb, lag          *hdrhistogram.Histogram
}

func newStageAcc() *stageAcc {
	return &stageAcc{codes: map[string]int64{}, lat: newHist(), ttfb: newHist(), lag: newHist()}
}

// Second is one second of a run, by the time requests completed.
type Second struct {
	T         int              `json:"t_s"`    // seconds since the start
	Span      float64          `json:"span_s"` // 1, or less for the last second of a run
	Stage     int              `json:"stage"`
	Users     int              `json:"users"`
	Completed int64            `json:"completed"`
	RPS       float64          `json:"rps"` // completed / span
	Errors    int64            `json:"errors"`
	Codes     map[string]int64 `json:"errors_by_code,omitempty"`
	Latency
}

// recorder collects results. Safe for concurrent use.
type recorder struct {
	mu     sync.Mutex
	start  time.Time
	stages []*stageAcc

	samples map[string]string // first message per code

	cold, warm *hdrhistogram.Histogram
	seen       map[string]bool

	variants map[string]*hdrhistogram.Histogram // latency of successful calls by the variant that answered

	// the second being filled, reset when it closes
	cur      int
	curStage int
	curUsers int
	curAcc   *stageAcc
	seconds  []Second
	maxSecs  int
}

func newRecorder(start time.Time, stages int, maxSeconds int) *recorder {
	r := &recorder{start: start, cold: newHist(), warm: newHist(), seen: map[string]bool{}, samples: map[string]string{}, curAcc: newStageAcc(), maxSecs: maxSeconds,
		variants: map[string]*hdrhistogram.Histogram{}}
	for range stages {
		r.stages = append(r.stages, newStageAcc())
	}
	return r
}

// sent counts a request handed to the Invoker.
func (r *recorder) sent(stage int) {
	r.mu.Lock()
	r.stages[stage].sent++
	r.mu.Unlock()
}

// setLoad tells the recorder which stage and how many users the current
// second belongs to (the last value in a second wins).
func (r *recorder) setLoad(stage, users int) {
	r.mu.Lock()
	r.curStage, r.curUsers = stage, users
	r.mu.Unlock()
}

func (r *recorder) add(res result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advanceLocked(res.done)
	lat := res.done.Sub(res.intended)
	if res.code != "" {
		if _, ok := r.samples[res.code]; !ok {
			if len(r.samples) >= maxCodes {
				res.code = "Other"
			}
			if _, ok := r.samples[res.code]; !ok {
				r.samples[res.code] = trunc(res.message, 300)
			}
		}
	}
	for _, a := range []*stageAcc{r.stages[res.stage], r.curAcc} {
		a.completed++
		if res.code != "" {
			a.errors++
			a.codes[res.code]++
			continue
		}
		recordDur(a.lat, lat)
		if res.ttfb > 0 {
			recordDur(a.ttfb, res.sent.Sub(res.intended)+res.ttfb)
		}
	}
	recordDur(r.stages[res.stage].lag, res.sent.Sub(res.intended))
	if res.code == "" && res.variant != "" {
		h := r.variants[res.variant]
		if h == nil {
			if len(r.variants) >= maxVariants {
				res.variant = OtherVariants
			}
			if h = r.variants[res.variant]; h == nil {
				h = newHist()
				r.variants[res.variant] = h
			}
		}
		recordDur(h, lat)
	}
	if res.code == "" && res.model != "" {
		if !r.seen[res.model] {
			r.seen[res.model] = true
			recordDur(r.cold, lat)
		} else {
			recordDur(r.warm, lat)
		}
	}
}

// advance closes the seconds before now.
func (r *recorder) advance(now time.Time) {
	r.mu.Lock()
	r.advanceLocked(now)
	r.mu.Unlock()
}

func (r *recorder) advanceLocked(now time.Time) {
	sec := int(now.Sub(r.start) / time.Second)
	for r.cur < sec {
		r.closeLocked()
		r.cur++
	}
}

func (r *recorder) closeLocked() {
	a := r.curAcc
	if len(r.seconds) < r.maxSecs {
		s := Second{T: r.cur, Span: 1, Stage: r.curStage + 1, Users: r.curUsers, Completed: a.completed, RPS: float64(a.completed), Errors: a.errors, Latency: summarise(a.lat)}
		if len(a.codes) > 0 {
			s.Codes = a.codes
		}
		r.seconds = append(r.seconds, s)
	}
	a.completed, a.errors, a.codes = 0, 0, map[string]int64{}
	a.lat.Reset()
	a.ttfb.Reset()
}

// finish closes the last (partial) second and returns the seconds.
func (r *recorder) finish(now time.Time) []Second {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advanceLocked(now)
	if r.curAcc.completed > 0 {
		r.closeLocked()
		if n := len(r.seconds); n > 0 && r.seconds[n-1].T == r.cur {
			last := &r.seconds[n-1]
			last.Span = max(0.001, now.Sub(r.start).Seconds()-float64(r.cur))
			last.RPS = float64(last.Completed) / last.Span
		}
	}
	return r.seconds
}

// variantReports returns the client-side figures of each variant that
// answered, by name.
func (r *recorder) variantReports() []VariantReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []VariantReport
	for _, name := range sortedKeys(r.variants) {
		l := summarise(r.variants[name])
		out = append(out, VariantReport{Variant: name, Answered: l.Count, Latency: &l})
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedCodes(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
