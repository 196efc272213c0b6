package cloudwatch

import (
	"math"
	"slices"

	"github.com/DataDog/sketches-go/ddsketch"
)

// The read side of the store: the datapoints of some series in a window,
// summed up per period of the request. Each stored datapoint (a record on
// disk or an open slot) falls whole into the request's period holding its
// start; records of the same period (a period reopened after a restart)
// merge like any two.

// aggPoint is one period of an answer.
type aggPoint struct {
	start int64
	unit  string
	st    stats
	sk    *ddsketch.DDSketch // nil unless percentiles were asked for
}

// window is a request's time range and period: [from, to), periods of
// length period starting at from.
type window struct {
	from, to, period int64
}

// aggregate sums the datapoints of ss in w. byUnit keeps each unit apart
// (GetMetricStatistics answers a datapoint per unit); wantSketch merges the
// sketches for percentiles. The answer is sorted by start (then unit).
func (st *store) aggregate(ss []*series, w window, byUnit, wantSketch bool) []*aggPoint {
	type key struct {
		k    int64
		unit string
	}
	points := map[key]*aggPoint{}
	get := func(unit string, t int64) *aggPoint {
		k := key{k: (t - w.from) / w.period}
		if byUnit {
			k.unit = unit
		}
		p := points[k]
		if p == nil {
			p = &aggPoint{start: w.from + k.k*w.period, unit: unit}
			if wantSketch {
				p.sk = newSketch()
			}
			points[k] = p
		}
		return p
	}
	var buf []byte
	st.mu.RLock()
	for _, s := range ss {
		for _, hr := range s.hours {
			if hr.hour+hourSeconds <= w.from || hr.hour >= w.to {
				continue
			}
			seg := st.segs[hr.hour]
			if seg == nil {
				continue
			}
			for _, r := range hr.refs {
				t := hr.hour + int64(r.sec)
				if t < w.from || t >= w.to {
					continue
				}
				var pr pointRec
				var ok bool
				pr, buf, ok = readPoint(seg, r, buf, wantSketch)
				if !ok {
					continue
				}
				p := get(s.unit, t)
				p.st.merge(pr.st)
				if wantSketch && len(pr.sketch) > 0 {
					_ = p.sk.DecodeAndMergeWith(pr.sketch)
				}
			}
		}
		s.mu.Lock()
		for i := range s.slots {
			b := &s.slots[i]
			if b.start == 0 || b.st.count == 0 || b.start < w.from || b.start >= w.to {
				continue
			}
			p := get(s.unit, b.start)
			p.st.merge(b.st)
			if wantSketch && b.sketch != nil {
				_ = p.sk.MergeWith(b.sketch)
			}
		}
		s.mu.Unlock()
	}
	st.mu.RUnlock()
	out := make([]*aggPoint, 0, len(points))
	for _, p := range points {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *aggPoint) int {
		if a.start != b.start {
			if a.start < b.start {
				return -1
			}
			return 1
		}
		if a.unit < b.unit {
			return -1
		}
		if a.unit > b.unit {
			return 1
		}
		return 0
	})
	return out
}

// seriesOf returns the series of one metric (exact dimension set), those of
// unit only when unit is not empty.
func (st *store) seriesOf(ns, name string, dims []Dimension, unit string) []*series {
	mkey := metricKey(ns, name, dims)
	st.mu.RLock()
	defer st.mu.RUnlock()
	var out []*series
	for _, s := range st.reg.byMetric[mkey] {
		if unit == "" || s.unit == unit {
			out = append(out, s)
		}
	}
	return out
}

// statValue answers one statistic of a period; ok is false when it has
// none (a percentile of a period with a negative value). A sum past the
// largest double is answered as that double.
func statValue(p *aggPoint, st statistic) (float64, bool) {
	v, ok := rawStat(p, st)
	if math.IsInf(v, 1) {
		v = math.MaxFloat64
	} else if math.IsInf(v, -1) {
		v = -math.MaxFloat64
	}
	return v, ok
}

func rawStat(p *aggPoint, st statistic) (float64, bool) {
	switch st.kind {
	case statSum:
		return p.st.sum, true
	case statAverage:
		return p.st.sum / p.st.count, true
	case statMinimum:
		return p.st.min, true
	case statMaximum:
		return p.st.max, true
	case statSampleCount:
		return p.st.count, true
	case statPercentile:
		if p.sk == nil || p.st.min < 0 {
			return 0, false
		}
		return quantile(p.sk, st.pct, p.st.min, p.st.max)
	}
	return 0, false
}
