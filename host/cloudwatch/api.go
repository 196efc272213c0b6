package cloudwatch

import (
	"net/http"
	"slices"
	"time"

	"github.com/mce-run/mce/internal/awsquery"
)

// What host calls besides Serve: writing its own refusals (authentication)
// in the request's protocol, and reading statistics in Go (the status page,
// mce loadtest) without going through HTTP.

// WriteError writes an error host decided (a SigV4 failure, a throttle) in
// the shape of the CloudWatch request r: JSON or CBOR with __type and
// x-amzn-query-error, or the query protocol's ErrorResponse. code is the
// error's code as clients should see it (IncompleteSignature,
// InvalidClientTokenId, SignatureDoesNotMatch …); a status of 500 or more is
// the service's fault, any other the sender's.
func WriteError(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	p, _ := detect(r)
	if p == protoNone {
		p = protoJSON
	}
	e := newErr(status, code, code, message)
	if status >= 500 {
		e.Fault = awsquery.Receiver
	}
	writeError(w, p, e)
}

// Statistics answers what GetMetricStatistics would for one metric, in Go:
// the datapoints of ns/metric with exactly dims (and unit, when not empty)
// in [from, to), per period, with the statistics named (Sum, Average,
// Minimum, Maximum, SampleCount, or percentiles such as p99, together). The
// rules are the API's but for mixing both kinds, which is allowed here; an
// error is an *APIError.
func (s *Service) Statistics(ns, metric string, dims []Dimension, unit string, from, to time.Time, period int32, stats ...string) ([]Datapoint, error) {
	in := &getMetricStatisticsInput{Namespace: &ns, MetricName: &metric, Dimensions: dims,
		StartTime: &Timestamp{from}, EndTime: &Timestamp{to}, Period: &period}
	if unit != "" {
		in.Unit = &unit
	}
	for _, st := range stats {
		if _, ok := parseBasicStat(st); ok {
			in.Statistics = append(in.Statistics, st)
		} else {
			in.ExtendedStatistics = append(in.ExtendedStatistics, st)
		}
	}
	basic, ext := in.Statistics, in.ExtendedStatistics
	var out []Datapoint
	if len(basic) > 0 || len(ext) == 0 {
		in.ExtendedStatistics = nil
		o, e := s.getMetricStatistics(in)
		if e != nil {
			return nil, e
		}
		out = o.Datapoints
	}
	if len(ext) > 0 {
		in.Statistics, in.ExtendedStatistics = nil, ext
		o, e := s.getMetricStatistics(in)
		if e != nil {
			return nil, e
		}
		out = mergeDatapoints(out, o.Datapoints)
	}
	return out, nil
}

// mergeDatapoints joins the answers of two requests over the same window
// (statistics and percentiles) by timestamp and unit.
func mergeDatapoints(a, b []Datapoint) []Datapoint {
	if len(a) == 0 {
		return b
	}
	type key struct {
		t    int64
		unit string
	}
	idx := map[key]int{}
	for i, d := range a {
		idx[key{d.Timestamp.Unix(), d.Unit}] = i
	}
	for _, d := range b {
		i, ok := idx[key{d.Timestamp.Unix(), d.Unit}]
		if !ok {
			a = append(a, d)
			continue
		}
		if d.ExtendedStatistics != nil {
			a[i].ExtendedStatistics = d.ExtendedStatistics
		}
	}
	slices.SortStableFunc(a, func(x, y Datapoint) int { return x.Timestamp.Compare(y.Timestamp.Time) })
	return a
}
