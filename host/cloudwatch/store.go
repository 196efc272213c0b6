package cloudwatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
)

// The datapoint store. A series is one (namespace, metric name, dimension
// set, unit) at one storage resolution. Each series aggregates what it is
// told in the open period (a statistic set — count, sum, minimum, maximum —
// and a sketch for percentiles) in one of two slots, so that the period
// that just closed can be written while the next one fills. The flusher
// (flush.go) writes closed periods to the hour's segment file (segment.go)
// and only then moves them from the slot to the series' index of records
// on disk, so a datapoint is in exactly one of the two places at any time,
// and every query sees both.

// Resolution is how many seconds one stored datapoint of a series covers.
// CloudWatch stores standard metrics per minute and high-resolution ones
// per second; SageMaker publishes some of its metrics every 10 seconds.
type Resolution int

const (
	// Standard is CloudWatch's one-minute resolution.
	Standard Resolution = 60
	// HighResolution is ten seconds, the resolution SageMaker publishes its
	// high-resolution metrics at.
	HighResolution Resolution = 10
)

// valid: 5 s and up. A one-second series would need its period written
// before the next-but-one begins, faster than the flusher's second of grace
// and its tick allow with two slots.
func (r Resolution) valid() bool {
	switch r {
	case 5, 10, 20, 30, 60:
		return true
	}
	return false
}

// Units is CloudWatch's StandardUnit enumeration.
var Units = []string{"Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes",
	"Terabytes", "Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count", "Bytes/Second",
	"Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second", "Bits/Second",
	"Kilobits/Second", "Megabits/Second", "Gigabits/Second", "Terabits/Second", "Count/Second", "None"}

func validUnit(u string) bool { return slices.Contains(Units, u) }

// CloudWatch's bounds on a metric's identity.
const (
	maxNameLen      = 255
	maxDimValueLen  = 1024
	maxDimensions   = 30
	maxDimFilters   = 10
	maxStatistics   = 5
	maxExtendedStat = 10
)

// ErrSeriesLimit is returned by Service.Series when Options.MaxSeries series
// exist: the handle it returns still works, but drops (and counts) what it
// is told until a series expires and leaves room.
var ErrSeriesLimit = errors.New("cloudwatch: the number of metric series is at its limit")

// stats is a statistic set.
type stats struct {
	count, sum, min, max float64
}

func (s *stats) add(v float64) {
	if s.count == 0 || v < s.min {
		s.min = v
	}
	if s.count == 0 || v > s.max {
		s.max = v
	}
	s.count++
	s.sum += v
}

func (s *stats) merge(o stats) {
	if o.count == 0 {
		return
	}
	if s.count == 0 || o.min < s.min {
		s.min = o.min
	}
	if s.count == 0 || o.max > s.max {
		s.max = o.max
	}
	s.count += o.count
	s.sum += o.sum
}

// bucket is a series' open (or closing) period.
type bucket struct {
	start  int64 // the period's first second (unix); 0 when the slot is free
	st     stats
	sketch *ddsketch.DDSketch
	// sealed: the flusher has written it; it is cleared once the record is
	// in the index. Nothing is added to a sealed bucket.
	sealed bool
}

func (b *bucket) clear() {
	b.start, b.st, b.sealed = 0, stats{}, false
	if b.sketch != nil {
		b.sketch.Clear()
	}
}

// recRef locates one datapoint record in an hour's segment.
type recRef struct {
	off, size uint32
	sec       uint16 // the period's start, seconds after the hour
}

type hourRefs struct {
	hour int64 // unix seconds of the hour
	refs []recRef
}

type series struct {
	id   uint32
	key  string // identity: metric key, unit and resolution
	mkey string // metric identity: namespace, name and dimensions
	ns   string
	name string
	unit string
	dims []Dimension // sorted by name
	res  int64

	lastSeen atomic.Int64 // the start of the newest period with data

	mu       sync.Mutex
	slots    [2]bucket
	retired  bool   // removed from the registry; handles resolve again
	observed uint64 // values stored, for Stats

	hours []hourRefs // under store.mu, sorted by hour
}

// appendKeyPart appends a length-prefixed string, so that no name can
// forge another identity.
func appendKeyPart(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func metricKey(ns, name string, dims []Dimension) string {
	b := make([]byte, 0, 64)
	b = appendKeyPart(b, ns)
	b = appendKeyPart(b, name)
	for _, d := range dims {
		b = appendKeyPart(b, d.Name)
		b = appendKeyPart(b, d.Value)
	}
	return string(b)
}

func seriesKey(mkey, unit string, res int64) string {
	b := []byte(mkey)
	b = append(b, 0xff) // never the start of a length prefix of a valid part
	b = appendKeyPart(b, unit)
	b = binary.AppendUvarint(b, uint64(res))
	return string(b)
}

// sortedDims copies dims sorted by name and checks CloudWatch's bounds:
// at most 30, names 1–255 bytes, values 1–1024, no name twice.
func sortedDims(dims []Dimension) ([]Dimension, error) {
	if len(dims) > maxDimensions {
		return nil, fmt.Errorf("%d dimensions; at most %d", len(dims), maxDimensions)
	}
	out := slices.Clone(dims)
	slices.SortFunc(out, func(a, b Dimension) int { return strings.Compare(a.Name, b.Name) })
	for i, d := range out {
		if d.Name == "" || len(d.Name) > maxNameLen || d.Value == "" || len(d.Value) > maxDimValueLen {
			return nil, fmt.Errorf("dimension %q: a name of 1 to %d bytes and a value of 1 to %d", clip(d.Name), maxNameLen, maxDimValueLen)
		}
		if i > 0 && out[i-1].Name == d.Name {
			return nil, fmt.Errorf("dimension %q given twice", clip(d.Name))
		}
	}
	return out, nil
}

func checkIdentity(ns, name, unit string, res Resolution) error {
	switch {
	case ns == "" || len(ns) > maxNameLen || ns[0] == ':':
		return fmt.Errorf("namespace %q: 1 to %d bytes, not starting with ':'", clip(ns), maxNameLen)
	case name == "" || len(name) > maxNameLen:
		return fmt.Errorf("metric name %q: 1 to %d bytes", clip(name), maxNameLen)
	case !validUnit(unit):
		return fmt.Errorf("unit %q is not one of CloudWatch's", clip(unit))
	case !res.valid():
		return fmt.Errorf("resolution %d s: one of 5, 10, 20, 30, 60", res)
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// counters are the store's running totals (Stats reads them).
type counters struct {
	observations    atomic.Uint64 // of series no longer in the registry
	dropped         atomic.Uint64 // observations not stored (see Stats)
	seriesRefused   atomic.Uint64
	invalidValues   atomic.Uint64
	recordsWritten  atomic.Uint64
	recordsLost     atomic.Uint64
	tornRecords     atomic.Uint64
	tornBytes       atomic.Uint64
	segmentsEvicted atomic.Uint64
	segmentsExpired atomic.Uint64

	alarmFilesQuarantined atomic.Uint64
}

// registry is the set of series. Its maps and list change under store.mu.
type registry struct {
	byKey    map[string]*series
	byMetric map[string][]*series
	nextID   uint32
}

// lookup returns the series of key, creating it when there is room. It is
// called with store.mu held for writing.
func (st *store) lookupLocked(ns, name string, dims []Dimension, unit string, res int64) (*series, error) {
	mkey := metricKey(ns, name, dims)
	key := seriesKey(mkey, unit, res)
	if s := st.reg.byKey[key]; s != nil {
		return s, nil
	}
	if len(st.reg.byKey) >= st.maxSeries {
		st.c.seriesRefused.Add(1)
		return nil, ErrSeriesLimit
	}
	st.reg.nextID++
	s := &series{id: st.reg.nextID, key: key, mkey: mkey, ns: ns, name: name, unit: unit, dims: dims, res: res}
	st.reg.byKey[key] = s
	st.reg.byMetric[mkey] = append(st.reg.byMetric[mkey], s)
	return s, nil
}

// removeLocked takes s out of the registry (store.mu held for writing).
func (st *store) removeLocked(s *series) {
	st.c.observations.Add(s.observed) // s.mu held by the caller
	delete(st.reg.byKey, s.key)
	l := st.reg.byMetric[s.mkey]
	l = slices.DeleteFunc(l, func(x *series) bool { return x == s })
	if len(l) == 0 {
		delete(st.reg.byMetric, s.mkey)
	} else {
		st.reg.byMetric[s.mkey] = l
	}
}

// Series is a handle on one metric series for the hot path: Observe adds a
// value to the series' open period with no map lookup and no allocation.
// A handle is safe for concurrent use and stays valid for the Service's
// life (a series that expired is found or made again on the next Observe).
type Series struct {
	st *store
	s  atomic.Pointer[series]

	ns, name, unit string
	dims           []Dimension
	res            int64
	// retryAt: when a handle that found no room may look again (unix s).
	retryAt atomic.Int64
}

// Observe adds v to the series' current period (by the Service's clock).
// NaN and ±Inf are dropped and counted (CloudWatch refuses them too).
func (h *Series) Observe(v float64) {
	if h == nil {
		return
	}
	h.ObserveAt(h.st.now(), v)
}

// ObserveAt adds v to the period holding t: the hot path's form, for a
// caller that has read the clock already (the end of the call it measured),
// which saves the clock read Observe makes. t is a reading of now: a t in
// a period already written opens it again (its records merge when read);
// one whose slot still holds another period is dropped and counted.
func (h *Series) ObserveAt(t time.Time, v float64) {
	if h == nil {
		return
	}
	st := h.st
	if math.IsNaN(v) || math.IsInf(v, 0) {
		st.c.invalidValues.Add(1)
		return
	}
	for range 2 {
		s := h.s.Load()
		if s == nil {
			if s = h.resolve(); s == nil {
				st.c.dropped.Add(1)
				return
			}
		}
		switch st.observe(s, t.Unix(), v) {
		case observed:
			return
		case dropped:
			st.c.dropped.Add(1)
			return
		case retired:
			h.s.CompareAndSwap(s, nil)
			h.retryAt.Store(0)
		}
	}
	st.c.dropped.Add(1)
}

// resolve finds or makes the handle's series again (after it expired, or
// once a minute while the registry is full).
func (h *Series) resolve() *series {
	now := h.st.nowUnix()
	if at := h.retryAt.Load(); at != 0 && now < at {
		return nil
	}
	h.st.mu.Lock()
	s, err := h.st.lookupLocked(h.ns, h.name, h.dims, h.unit, h.res)
	h.st.mu.Unlock()
	if err != nil {
		h.retryAt.Store(now + 60)
		h.st.logRefused(h.ns, h.name)
		return nil
	}
	h.s.Store(s)
	return s
}

type outcome int

const (
	observed outcome = iota
	dropped
	retired
)

func (st *store) observe(s *series, now int64, v float64) outcome {
	p := now - mod(now, s.res)
	s.mu.Lock()
	if s.retired {
		s.mu.Unlock()
		return retired
	}
	b := &s.slots[mod(p/s.res, 2)]
	if b.start != p {
		if b.start != 0 {
			// The slot still holds a period two or more periods old that
			// the flusher has not taken (it is behind), or the clock went
			// back: keep what is there, drop this value.
			s.mu.Unlock()
			return dropped
		}
		b.start = p
	} else if b.sealed {
		s.mu.Unlock() // the period closed while this value waited
		return dropped
	}
	b.st.add(v)
	s.observed++
	if b.sketch == nil {
		b.sketch = newSketch()
	}
	sketchAdd(b.sketch, v)
	s.mu.Unlock()
	if s.lastSeen.Load() < p {
		s.lastSeen.Store(p)
	}
	return observed
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

func (st *store) nowUnix() int64 { return st.now().Unix() }

// logRefused logs a refused series at most once a minute.
func (st *store) logRefused(ns, name string) {
	now := st.nowUnix()
	last := st.lastRefusedLog.Load()
	if now-last < 60 || !st.lastRefusedLog.CompareAndSwap(last, now) {
		return
	}
	st.log.Warn().Str("namespace", clip(ns)).Str("metric", clip(name)).Int("max_series", st.maxSeries).
		Uint64("refused_total", st.c.seriesRefused.Load()).
		Msg("cloudwatch: metric series limit reached; datapoints of new series are dropped")
}

// snapshotSeries lists the registry's series (store.mu held, read or write).
func (st *store) snapshotLocked() []*series {
	out := make([]*series, 0, len(st.reg.byKey))
	for _, s := range st.reg.byKey {
		out = append(out, s)
	}
	return out
}

// periodStart is the start of the period of length res holding t.
func periodStart(t time.Time, res int64) int64 {
	u := t.Unix()
	return u - mod(u, res)
}
