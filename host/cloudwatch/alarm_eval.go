package cloudwatch

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Alarm evaluation: what an alarm's datapoints say its state is, as the
// CloudWatch user guide describes it ("Configuring how CloudWatch alarms
// treat missing data"), and the one goroutine that evaluates every alarm
// each Options.AlarmInterval.
//
// The evaluation range is the alarm's EvaluationPeriods plus two periods,
// ending with the period that holds now (mce answers the open period's
// values at once, so an alarm sees a burst of errors within one
// evaluation; CloudWatch waits about a period). In it:
//   - with at least N real datapoints, the N most recent decide, whatever
//     TreatMissingData says: ALARM when M of them breach, OK otherwise;
//   - with none, missing gives INSUFFICIENT_DATA, ignore keeps the state,
//     breaching ALARM and notBreaching OK;
//   - with some but fewer than N, every real datapoint counts and the
//     missing ones are filled: breaching and notBreaching count them so;
//     missing decides on the real ones alone (ALARM when at least
//     min(M, real) breach); ignore is missing except that it never moves
//     the alarm to ALARM on so few datapoints (it keeps the state).

// evalPoint is one period of the evaluation range.
type evalPoint struct {
	start int64
	value float64
	ok    bool // false: no datapoint (missing)
}

// verdict is an evaluation's outcome.
type verdict struct {
	state State
	keep  bool // keep the current state (ignore)
	// used are the real datapoints that decided, newest first; breaching
	// how many of them breach; filled the missing ones counted.
	used      []evalPoint
	breaching int
	filled    int
}

func breaches(op string, v, threshold float64) bool {
	switch op {
	case "GreaterThanOrEqualToThreshold":
		return v >= threshold
	case "GreaterThanThreshold":
		return v > threshold
	case "LessThanThreshold":
		return v < threshold
	case "LessThanOrEqualToThreshold":
		return v <= threshold
	}
	return false
}

// decide applies CloudWatch's evaluation to the range's points (oldest
// first): n is EvaluationPeriods, m DatapointsToAlarm.
func decide(points []evalPoint, n, m int, op string, threshold float64, treat string) verdict {
	var real []evalPoint // newest first
	for i := len(points) - 1; i >= 0; i-- {
		if points[i].ok {
			real = append(real, points[i])
		}
	}
	v := verdict{}
	if len(real) > n {
		real = real[:n]
	}
	v.used = real
	for _, p := range real {
		if breaches(op, p.value, threshold) {
			v.breaching++
		}
	}
	alarmIf := func(b bool) verdict {
		if b {
			v.state = StateAlarm
		} else {
			v.state = StateOK
		}
		return v
	}
	if len(real) == n {
		return alarmIf(v.breaching >= m)
	}
	v.filled = n - len(real)
	if len(real) == 0 {
		switch treat {
		case "breaching":
			return alarmIf(true)
		case "notBreaching":
			return alarmIf(false)
		case "ignore":
			v.keep = true
			return v
		}
		v.state = StateInsufficientData
		return v
	}
	switch treat {
	case "breaching":
		return alarmIf(v.breaching+v.filled >= m)
	case "notBreaching":
		return alarmIf(v.breaching >= m)
	}
	v.filled = 0
	out := alarmIf(v.breaching >= min(m, len(real)))
	if treat == "ignore" && out.state == StateAlarm {
		out.keep = true
	}
	return out
}

// reason writes a verdict as StateReason (a sentence in CloudWatch's
// manner) and StateReasonData (JSON: the statistic, the period, the
// datapoints that decided, oldest first, and the threshold).
func (v verdict) reason(a *Alarm, stat string, m int, now time.Time) (string, string) {
	if len(v.used) > maxReasonPoints {
		v.used = v.used[:maxReasonPoints] // the newest; the text stays within its bound
	}
	var b strings.Builder
	if v.state == StateInsufficientData {
		fmt.Fprintf(&b, "Insufficient Data: no datapoint in the last %d periods of %d seconds.", int(a.EvaluationPeriods)+evalExtraPeriods, a.Period)
	} else {
		counted := v.breaching
		if a.TreatMissingData == "breaching" {
			counted += v.filled
		}
		var vals []string
		for i := len(v.used) - 1; i >= 0; i-- {
			p := v.used[i]
			vals = append(vals, strconv.FormatFloat(p.value, 'f', -1, 64)+" ("+time.Unix(p.start, 0).UTC().Format("02/01/06 15:04:05")+")")
		}
		verb := "were"
		if v.state == StateOK {
			verb = "were, fewer than needed,"
		}
		fmt.Fprintf(&b, "Threshold Crossed: %d out of the last %d datapoints [%s] %s %s the threshold (%s) (minimum %d for ALARM).",
			counted, a.EvaluationPeriods, strings.Join(vals, ", "), verb, comparisonText(a.ComparisonOperator),
			strconv.FormatFloat(a.Threshold, 'f', -1, 64), m)
		if v.filled > 0 {
			fmt.Fprintf(&b, " %d missing datapoints were treated as %s.", v.filled, a.TreatMissingData)
		}
	}
	type dp struct {
		Timestamp string  `json:"timestamp"`
		Value     float64 `json:"value"`
	}
	data := struct {
		Version             string    `json:"version"`
		QueryDate           string    `json:"queryDate"`
		StartDate           string    `json:"startDate,omitempty"`
		Statistic           string    `json:"statistic"`
		Period              int32     `json:"period"`
		RecentDatapoints    []float64 `json:"recentDatapoints"`
		Threshold           float64   `json:"threshold"`
		EvaluatedDatapoints []dp      `json:"evaluatedDatapoints,omitempty"`
	}{Version: "1.0", QueryDate: isoMillis(now), Statistic: stat, Period: a.Period, Threshold: a.Threshold, RecentDatapoints: []float64{}}
	for i := len(v.used) - 1; i >= 0; i-- {
		p := v.used[i]
		if data.StartDate == "" {
			data.StartDate = isoMillis(time.Unix(p.start, 0))
		}
		data.RecentDatapoints = append(data.RecentDatapoints, p.value)
		data.EvaluatedDatapoints = append(data.EvaluatedDatapoints, dp{isoMillis(time.Unix(p.start, 0)), p.value})
	}
	raw, _ := json.Marshal(data)
	return truncate(b.String(), maxStateReason), truncate(string(raw), maxStateReasonData)
}

func comparisonText(op string) string {
	switch op {
	case "GreaterThanOrEqualToThreshold":
		return "greater than or equal to"
	case "GreaterThanThreshold":
		return "greater than"
	case "LessThanThreshold":
		return "less than"
	case "LessThanOrEqualToThreshold":
		return "less than or equal to"
	}
	return op
}

func isoMillis(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000+0000") }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// pointsOf reads an alarm's evaluation range from the store with the code
// GetMetricStatistics answers with: the series of the metric (exact
// dimensions; the alarm's unit when it has one, else every unit merged),
// aggregated per period, the alarm's statistic of each.
func (s *Service) pointsOf(c *alarmConfig, now int64) []evalPoint {
	period := int64(c.period)
	end := now - mod(now, period) + period
	n := int64(c.n) + evalExtraPeriods
	w := window{from: end - n*period, to: end, period: period}
	agg := s.st.aggregate(s.st.seriesOf(c.ns, c.metric, c.dims, c.unit), w, false, c.stat.kind == statPercentile)
	points := make([]evalPoint, n)
	for i := range points {
		points[i].start = w.from + int64(i)*period
	}
	for _, p := range agg {
		i := (p.start - w.from) / period
		if i < 0 || i >= n {
			continue
		}
		if v, ok := statValue(p, c.stat); ok {
			points[i].value, points[i].ok = v, true
		}
	}
	return points
}

// evalExtraPeriods widen the evaluation range past EvaluationPeriods (the
// user guide's example evaluates 3 periods in a range of 5).
const evalExtraPeriods = 2

// maxReasonPoints bounds the datapoints a StateReason and its data list.
const maxReasonPoints = 20

// evaluator runs every Options.AlarmInterval until Close.
func (s *Service) evaluator() {
	defer s.wg.Done()
	t := time.NewTicker(s.al.interval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.EvaluateAlarms()
		}
	}
}

// EvaluateAlarms evaluates every alarm once, now, as the evaluator does
// each Options.AlarmInterval (tests, and a caller that has just recorded
// what an alarm watches). State changes are recorded, persisted and handed
// to the OnStateChange hooks before it returns.
func (s *Service) EvaluateAlarms() {
	now := s.st.now()
	for _, c := range s.al.configs() {
		if s.ctx.Err() != nil {
			return
		}
		points := s.pointsOf(c, now.Unix())
		v := decide(points, c.n, c.m, c.op, c.threshold, c.treat)
		if v.keep {
			continue
		}
		s.transitionVerdict(c, v, now)
	}
}
