package cloudwatch

import (
	"strconv"
	"strings"
	"time"
)

// The statistics mce answers, and the period and time-window rules every
// operation shares.

type statKind int

const (
	statSum statKind = iota + 1
	statAverage
	statMinimum
	statMaximum
	statSampleCount
	statPercentile
)

// statistic is a parsed statistic: one of the five, or a percentile pNN.NN.
type statistic struct {
	kind statKind
	pct  float64 // 0..100 for statPercentile
	name string  // as asked ("p99", "p99.9"), the answer's key
}

func parseBasicStat(s string) (statistic, bool) {
	switch s {
	case "Sum":
		return statistic{kind: statSum, name: s}, true
	case "Average":
		return statistic{kind: statAverage, name: s}, true
	case "Minimum":
		return statistic{kind: statMinimum, name: s}, true
	case "Maximum":
		return statistic{kind: statMaximum, name: s}, true
	case "SampleCount":
		return statistic{kind: statSampleCount, name: s}, true
	}
	return statistic{}, false
}

// parsePercentile reads "pNN" or "pNN.NN…" (at most 10 decimals) between
// p0 and p100, the only extended statistic mce serves; CloudWatch's others
// (tm, wm, tc, ts, PR, IQM) are refused by the caller.
func parsePercentile(s string) (statistic, bool) {
	if len(s) < 2 || len(s) > 14 || s[0] != 'p' {
		return statistic{}, false
	}
	num := s[1:]
	intPart, frac, hasDot := strings.Cut(num, ".")
	if intPart == "" || len(intPart) > 3 || (hasDot && (frac == "" || len(frac) > 10)) {
		return statistic{}, false
	}
	for _, c := range intPart + frac {
		if c < '0' || c > '9' {
			return statistic{}, false
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || v > 100 {
		return statistic{}, false
	}
	return statistic{kind: statPercentile, pct: v, name: s}, true
}

// otherExtended says whether s looks like one of CloudWatch's extended
// statistics mce does not compute, for a clearer refusal.
func otherExtended(s string) bool {
	for _, p := range []string{"tm", "wm", "tc", "ts", "TM(", "WM(", "TC(", "TS(", "PR(", "IQM"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// validPeriod: 1, 5, 10, 20, 30 (high resolution), or a positive multiple
// of 60, as the API reference states.
func validPeriod(p int32) bool {
	switch p {
	case 1, 5, 10, 20, 30:
		return true
	}
	return p >= 60 && p%60 == 0
}

// maxDatapointsPerCall is GetMetricStatistics' limit.
const maxDatapointsPerCall = 1440

// windowOf turns a request's StartTime, EndTime and period into the window
// mce reads: StartTime rounded down to the minute (or, for periods under a
// minute, to a multiple of the period), as CloudWatch rounds it for
// datapoints less than 15 days old; EndTime exclusive.
func windowOf(start, end time.Time, period int32) window {
	from := start.Unix()
	if period%60 == 0 {
		from -= mod(from, 60)
	} else {
		from -= mod(from, int64(period))
	}
	to := end.Unix()
	if end.Nanosecond() > 0 {
		to++ // a fractional end still covers its second
	}
	return window{from: from, to: to, period: int64(period)}
}

// periods is how many periods of w there are (rounded up).
func (w window) periods() int64 {
	return (w.to - w.from + w.period - 1) / w.period
}

func f64(v float64) *float64 { return &v }
