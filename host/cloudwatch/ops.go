package cloudwatch

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
)

// The three operations, on typed inputs (whatever protocol they came in),
// answering typed outputs or an *APIError with CloudWatch's code and, where
// it is known, CloudWatch's message. Parameter names in messages are the
// query protocol's (Statistics.member.1), as CloudWatch writes them.

const (
	maxMetricDataQueries    = 500
	defaultMaxDatapoints    = 100800
	listMetricsPageSize     = 500
	recentlyActiveSeconds   = 3 * 3600
	statisticsSetText       = "[ SampleCount, Average, Sum, Minimum, Maximum ]"
	periodRuleText          = "must be 1, 5, 10, 20, 30, or a multiple of 60"
	scanByDescending        = "TimestampDescending"
	scanByAscending         = "TimestampAscending"
	statusComplete          = "Complete"
	statusPartialData       = "PartialData"
	expressionRefusalFormat = "The parameter MetricDataQueries.member.%d.Expression is not served: mce does not evaluate " +
		"metric math or Metrics Insights queries. Ask for each metric with MetricStat and compute the expression in the client."
)

func checkNamespace(param string, ns string) *APIError {
	if ns == "" || len(ns) > maxNameLen || ns[0] == ':' {
		return invalidValue("The value %s for parameter %s is invalid: a namespace is 1 to 255 characters and does not start with ':'.", quoted(ns), param)
	}
	return nil
}

func checkName(param, name string) *APIError {
	if name == "" || len(name) > maxNameLen {
		return invalidValue("The value %s for parameter %s is invalid: 1 to 255 characters.", quoted(name), param)
	}
	return nil
}

// checkMetric checks a call's Namespace, MetricName and Dimensions, as
// GetMetricStatistics and PutMetricAlarm name them, and returns the
// dimensions sorted.
func checkMetric(ns, name string, dims []Dimension) ([]Dimension, *APIError) {
	if e := checkNamespace("Namespace", ns); e != nil {
		return nil, e
	}
	if e := checkName("MetricName", name); e != nil {
		return nil, e
	}
	return checkDims("Dimensions", dims, invalidValue)
}

func checkDims(param string, dims []Dimension, mk func(string, ...any) *APIError) ([]Dimension, *APIError) {
	if len(dims) > maxDimensions {
		return nil, mk("The collection %s must not have a size greater than %d.", param, maxDimensions)
	}
	for i, d := range dims {
		if d.Name == "" || len(d.Name) > maxNameLen {
			return nil, mk("The value %s for parameter %s.member.%d.Name is invalid: 1 to 255 characters.", quoted(d.Name), param, i+1)
		}
		if d.Value == "" || len(d.Value) > maxDimValueLen {
			return nil, mk("The value %s for parameter %s.member.%d.Value is invalid: 1 to 1024 characters.", quoted(d.Value), param, i+1)
		}
	}
	sd, err := sortedDims(dims)
	if err != nil {
		return nil, mk("The parameter %s must not name a dimension twice.", param)
	}
	return sd, nil
}

func checkUnit(param string, u *string, mk func(string, ...any) *APIError) (string, *APIError) {
	if u == nil {
		return "", nil
	}
	if !validUnit(*u) {
		return "", mk("The parameter %s must be a value in the set [ %s ].", param, strings.Join(Units, ", "))
	}
	return *u, nil
}

func quoted(s string) string {
	if len(s) > 256 {
		s = s[:256] + "…"
	}
	return s
}

// GetMetricStatistics.
func (s *Service) getMetricStatistics(in *getMetricStatisticsInput) (*getMetricStatisticsOutput, *APIError) {
	for _, req := range []struct {
		name string
		set  bool
	}{{"Namespace", in.Namespace != nil}, {"MetricName", in.MetricName != nil}, {"StartTime", in.StartTime != nil}, {"EndTime", in.EndTime != nil}, {"Period", in.Period != nil}} {
		if !req.set {
			return nil, missing(req.name)
		}
	}
	dims, e := checkMetric(*in.Namespace, *in.MetricName, in.Dimensions)
	if e != nil {
		return nil, e
	}
	if !validPeriod(*in.Period) {
		return nil, invalidValue("The parameter Period %s.", periodRuleText)
	}
	if !in.StartTime.Before(in.EndTime.Time) {
		return nil, invalidValue("The parameter StartTime must be less than the parameter EndTime.")
	}
	var stats []statistic
	switch {
	case len(in.Statistics) == 0 && len(in.ExtendedStatistics) == 0:
		return nil, invalidCombination("Must specify either Statistics or ExtendedStatistics.")
	case len(in.Statistics) > 0 && len(in.ExtendedStatistics) > 0:
		return nil, invalidCombination("The parameters Statistics and ExtendedStatistics are mutually exclusive and you have specified both.")
	case len(in.Statistics) > maxStatistics:
		return nil, invalidValue("The collection Statistics must not have a size greater than %d.", maxStatistics)
	case len(in.ExtendedStatistics) > maxExtendedStat:
		return nil, invalidValue("The collection ExtendedStatistics must not have a size greater than %d.", maxExtendedStat)
	}
	for i, name := range in.Statistics {
		st, ok := parseBasicStat(name)
		if !ok {
			return nil, invalidValue("The parameter Statistics.member.%d must be a value in the set %s.", i+1, statisticsSetText)
		}
		stats = append(stats, st)
	}
	wantSketch := false
	for i, name := range in.ExtendedStatistics {
		st, ok := parsePercentile(name)
		if !ok {
			if otherExtended(name) {
				return nil, invalidValue("The value %s for parameter ExtendedStatistics.member.%d is not served: mce computes percentiles (p0.0 to p100) only.", quoted(name), i+1)
			}
			return nil, invalidValue("The value %s for parameter ExtendedStatistics.member.%d is invalid: a percentile between p0.0 and p100, such as p99 or p99.9.", quoted(name), i+1)
		}
		stats = append(stats, st)
		wantSketch = true
	}
	unit, e := checkUnit("Unit", in.Unit, invalidValue)
	if e != nil {
		return nil, e
	}
	w := windowOf(in.StartTime.Time, in.EndTime.Time, *in.Period)
	if n := w.periods(); n > maxDatapointsPerCall {
		return nil, invalidCombination("You have requested up to %d datapoints, which exceeds the limit of %d. You may reduce the datapoints requested by increasing Period, or decreasing the time range.", n, maxDatapointsPerCall)
	}
	points := s.st.aggregate(s.st.seriesOf(*in.Namespace, *in.MetricName, dims, unit), w, true, wantSketch)
	out := &getMetricStatisticsOutput{Label: *in.MetricName, Datapoints: make([]Datapoint, 0, len(points))}
	for _, p := range points {
		dp := Datapoint{Timestamp: timestampOf(p.start), Unit: p.unit}
		for _, st := range stats {
			v, ok := statValue(p, st)
			if !ok {
				continue
			}
			switch st.kind {
			case statSum:
				dp.Sum = f64(v)
			case statAverage:
				dp.Average = f64(v)
			case statMinimum:
				dp.Minimum = f64(v)
			case statMaximum:
				dp.Maximum = f64(v)
			case statSampleCount:
				dp.SampleCount = f64(v)
			case statPercentile:
				if dp.ExtendedStatistics == nil {
					dp.ExtendedStatistics = map[string]float64{}
				}
				dp.ExtendedStatistics[st.name] = v
			}
		}
		out.Datapoints = append(out.Datapoints, dp)
	}
	return out, nil
}

// A GetMetricData query, checked.
type dataQuery struct {
	id, label string
	series    []*series
	w         window
	stat      statistic
	ret       bool
}

// GetMetricData.
func (s *Service) getMetricData(in *getMetricDataInput) (*getMetricDataOutput, *APIError) {
	if len(in.MetricDataQueries) == 0 {
		return nil, missing("MetricDataQueries")
	}
	if len(in.MetricDataQueries) > maxMetricDataQueries {
		return nil, validation("The collection MetricDataQueries must not have a size greater than %d.", maxMetricDataQueries)
	}
	if in.StartTime == nil {
		return nil, missing("StartTime")
	}
	if in.EndTime == nil {
		return nil, missing("EndTime")
	}
	if in.StartTime.Equal(in.EndTime.Time) {
		return nil, validation("The parameter StartTime must not equal parameter EndTime.")
	}
	if in.StartTime.After(in.EndTime.Time) {
		return nil, validation("The parameter StartTime must be less than the parameter EndTime.")
	}
	scan := scanByDescending
	if in.ScanBy != nil {
		if *in.ScanBy != scanByDescending && *in.ScanBy != scanByAscending {
			return nil, validation("The parameter ScanBy must be a value in the set [ %s, %s ].", scanByDescending, scanByAscending)
		}
		scan = *in.ScanBy
	}
	maxPoints := defaultMaxDatapoints
	if in.MaxDatapoints != nil {
		if *in.MaxDatapoints <= 0 {
			return nil, validation("The parameter MaxDatapoints must be greater than 0.")
		}
		maxPoints = int(*in.MaxDatapoints)
	}
	queries := make([]dataQuery, 0, len(in.MetricDataQueries))
	ids := map[string]bool{}
	for i, q := range in.MetricDataQueries {
		n := i + 1
		if q.ID == nil {
			return nil, validation("The parameter MetricDataQueries.member.%d.Id is required.", n)
		}
		if !validID(*q.ID) {
			return nil, validation("The value %s for parameter MetricDataQueries.member.%d.Id is invalid: it starts with a lowercase letter and has only letters, numbers and underscores.", quoted(*q.ID), n)
		}
		if ids[*q.ID] {
			return nil, validation("The value %s for parameter MetricDataQueries.member.%d.Id is not unique.", quoted(*q.ID), n)
		}
		ids[*q.ID] = true
		if (q.MetricStat == nil) == (q.Expression == nil) {
			return nil, validation("The parameter MetricDataQueries.member.%d must have exactly one of MetricStat and Expression.", n)
		}
		if q.Expression != nil {
			return nil, validation(expressionRefusalFormat, n)
		}
		dq, e := s.checkMetricStat(n, q.MetricStat, in)
		if e != nil {
			return nil, e
		}
		dq.id = *q.ID
		dq.ret = q.ReturnData == nil || *q.ReturnData
		if q.Label != nil {
			dq.label = *q.Label
		}
		queries = append(queries, dq)
	}

	offset := 0
	fp := fingerprint(in)
	if in.NextToken != nil {
		o, ok := parseDataToken(*in.NextToken, fp)
		if !ok {
			return nil, invalidNextToken()
		}
		offset = o
	}

	type computed struct {
		ts   []int64
		vals []float64
	}
	results := make([]computed, len(queries))
	total := 0
	for i, q := range queries {
		if !q.ret {
			continue
		}
		points := s.st.aggregate(q.series, q.w, false, q.stat.kind == statPercentile)
		c := computed{ts: make([]int64, 0, len(points)), vals: make([]float64, 0, len(points))}
		for _, p := range points {
			if v, ok := statValue(p, q.stat); ok {
				c.ts = append(c.ts, p.start)
				c.vals = append(c.vals, v)
			}
		}
		if scan == scanByDescending {
			slices.Reverse(c.ts)
			slices.Reverse(c.vals)
		}
		results[i] = c
		total += len(c.ts)
	}
	if offset > total {
		return nil, invalidNextToken()
	}

	out := &getMetricDataOutput{MetricDataResults: []metricDataResult{}, Messages: []MessageData{}}
	pageEnd := offset + maxPoints
	pos := 0 // the first point of the current query in the whole answer
	for i, q := range queries {
		if !q.ret {
			continue
		}
		c := results[i]
		lo, hi := clampRange(offset-pos, pageEnd-pos, len(c.ts))
		r := metricDataResult{ID: q.id, Label: q.label, StatusCode: statusComplete,
			Timestamps: make([]Timestamp, 0, hi-lo), Values: make([]float64, 0, hi-lo)}
		for j := lo; j < hi; j++ {
			r.Timestamps = append(r.Timestamps, timestampOf(c.ts[j]))
			r.Values = append(r.Values, c.vals[j])
		}
		if hi < len(c.ts) {
			r.StatusCode = statusPartialData
		}
		out.MetricDataResults = append(out.MetricDataResults, r)
		pos += len(c.ts)
	}
	if pageEnd < total {
		tok := dataToken(pageEnd, fp)
		out.NextToken = &tok
	}
	return out, nil
}

func clampRange(lo, hi, n int) (int, int) {
	lo = max(0, min(lo, n))
	hi = max(lo, min(hi, n))
	return lo, hi
}

func (s *Service) checkMetricStat(n int, ms *metricStat, in *getMetricDataInput) (dataQuery, *APIError) {
	p := fmt.Sprintf("MetricDataQueries.member.%d.MetricStat", n)
	if ms.Metric == nil {
		return dataQuery{}, validation("The parameter %s.Metric is required.", p)
	}
	if ms.Metric.Namespace == nil {
		return dataQuery{}, validation("The parameter %s.Metric.Namespace is required.", p)
	}
	if ms.Metric.MetricName == nil {
		return dataQuery{}, validation("The parameter %s.Metric.MetricName is required.", p)
	}
	if ms.Period == nil {
		return dataQuery{}, validation("The parameter %s.Period is required.", p)
	}
	if ms.Stat == nil {
		return dataQuery{}, validation("The parameter %s.Stat is required.", p)
	}
	ns, name := *ms.Metric.Namespace, *ms.Metric.MetricName
	if ns == "" || len(ns) > maxNameLen || ns[0] == ':' {
		return dataQuery{}, validation("The value %s for parameter %s.Metric.Namespace is invalid.", quoted(ns), p)
	}
	if name == "" || len(name) > maxNameLen {
		return dataQuery{}, validation("The value %s for parameter %s.Metric.MetricName is invalid.", quoted(name), p)
	}
	dims, e := checkDims(p+".Metric.Dimensions", ms.Metric.Dimensions, validation)
	if e != nil {
		return dataQuery{}, e
	}
	if !validPeriod(*ms.Period) {
		return dataQuery{}, validation("The parameter %s.Period %s.", p, periodRuleText)
	}
	st, ok := parseBasicStat(*ms.Stat)
	if !ok {
		st, ok = parsePercentile(*ms.Stat)
	}
	if !ok {
		if otherExtended(*ms.Stat) {
			return dataQuery{}, validation("The value %s for parameter %s.Stat is not served: mce computes Sum, Average, Minimum, Maximum, SampleCount and percentiles (p0.0 to p100).", quoted(*ms.Stat), p)
		}
		return dataQuery{}, validation("The value %s for parameter %s.Stat is not a valid statistic.", quoted(*ms.Stat), p)
	}
	unit, e := checkUnit(p+".Unit", ms.Unit, validation)
	if e != nil {
		return dataQuery{}, e
	}
	return dataQuery{
		label:  name,
		series: s.st.seriesOf(ns, name, dims, unit),
		w:      windowOf(in.StartTime.Time, in.EndTime.Time, *ms.Period),
		stat:   st,
	}, nil
}

// validID: a lowercase letter, then letters, digits and underscores; at
// most 255 characters.
func validID(id string) bool {
	if id == "" || len(id) > 255 || id[0] < 'a' || id[0] > 'z' {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// fingerprint identifies a GetMetricData request but for its NextToken, so
// that a token is only good for the request it was given for.
func fingerprint(in *getMetricDataInput) uint64 {
	c := *in
	c.NextToken = nil
	b, _ := json.Marshal(&c)
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

func dataToken(offset int, fp uint64) string {
	b := binary.AppendUvarint([]byte{1}, uint64(offset))
	b = binary.BigEndian.AppendUint64(b, fp)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseDataToken(tok string, fp uint64) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) < 10 || b[0] != 1 {
		return 0, false
	}
	off, n := binary.Uvarint(b[1:])
	if n <= 0 || len(b[1+n:]) != 8 || binary.BigEndian.Uint64(b[1+n:]) != fp || off > 1<<40 {
		return 0, false
	}
	return int(off), true
}

// ListMetrics.
func (s *Service) listMetrics(in *listMetricsInput) (*listMetricsOutput, *APIError) {
	if in.Namespace != nil {
		if e := checkNamespace("Namespace", *in.Namespace); e != nil {
			return nil, e
		}
	}
	if in.MetricName != nil {
		if e := checkName("MetricName", *in.MetricName); e != nil {
			return nil, e
		}
	}
	if len(in.Dimensions) > maxDimFilters {
		return nil, invalidValue("The collection Dimensions must not have a size greater than %d.", maxDimFilters)
	}
	for i, f := range in.Dimensions {
		if f.Name == nil {
			return nil, missing("Dimensions.member." + strconv.Itoa(i+1) + ".Name")
		}
		if *f.Name == "" || len(*f.Name) > maxNameLen {
			return nil, invalidValue("The value %s for parameter Dimensions.member.%d.Name is invalid: 1 to 255 characters.", quoted(*f.Name), i+1)
		}
		if f.Value != nil && (*f.Value == "" || len(*f.Value) > maxDimValueLen) {
			return nil, invalidValue("The value %s for parameter Dimensions.member.%d.Value is invalid: 1 to 1024 characters.", quoted(*f.Value), i+1)
		}
	}
	var since int64
	if in.RecentlyActive != nil {
		if *in.RecentlyActive != "PT3H" {
			return nil, invalidValue("The parameter RecentlyActive must be a value in the set [ PT3H ].")
		}
		since = s.st.nowUnix() - recentlyActiveSeconds
	}
	var after string
	if in.NextToken != nil {
		b, err := base64.RawURLEncoding.DecodeString(*in.NextToken)
		if err != nil || len(b) == 0 {
			return nil, invalidValue("The value for parameter NextToken is invalid.")
		}
		after = string(b)
	}

	type found struct {
		mkey string
		s    *series
	}
	var matches []found
	st := s.st
	st.mu.RLock()
	for mkey, list := range st.reg.byMetric {
		if mkey <= after && after != "" {
			continue
		}
		first := list[0]
		if in.Namespace != nil && first.ns != *in.Namespace || in.MetricName != nil && first.name != *in.MetricName {
			continue
		}
		if !dimsMatch(first.dims, in.Dimensions) {
			continue
		}
		var seen int64
		for _, se := range list {
			seen = max(seen, se.lastSeen.Load())
		}
		if seen == 0 || (since != 0 && seen < since) {
			continue
		}
		matches = append(matches, found{mkey, first})
	}
	st.mu.RUnlock()
	slices.SortFunc(matches, func(a, b found) int { return strings.Compare(a.mkey, b.mkey) })

	out := &listMetricsOutput{Metrics: []Metric{}}
	for i, m := range matches {
		if i == listMetricsPageSize {
			tok := base64.RawURLEncoding.EncodeToString([]byte(matches[i-1].mkey))
			out.NextToken = &tok
			break
		}
		ns, name := m.s.ns, m.s.name
		out.Metrics = append(out.Metrics, Metric{Namespace: &ns, MetricName: &name, Dimensions: append([]Dimension{}, m.s.dims...)})
	}
	return out, nil
}

// dimsMatch: every filter names a dimension the metric has (with that
// value, when the filter has one).
func dimsMatch(dims []Dimension, filters []DimensionFilter) bool {
	for _, f := range filters {
		ok := false
		for _, d := range dims {
			if d.Name == *f.Name && (f.Value == nil || d.Value == *f.Value) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func itoa(i int) string { return strconv.Itoa(i) }

func fnv64(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}
