package loadtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/smithy-go"
)

// mce publishes SageMaker's invocation metrics per variant under these
// (docs/cloudwatch-metrics.md).
const (
	cwNamespace    = "AWS/SageMaker"
	cwEndpointDim  = "EndpointName"
	cwVariantDim   = "VariantName"
	cwInvocations  = "Invocations"
	cw4XX          = "Invocation4XXErrors"
	cw5XX          = "Invocation5XXErrors"
	cwModelLatency = "ModelLatency"
	cwOverhead     = "OverheadLatency"
)

// DefaultCloudWatchTimeout bounds the calls to CloudWatch after a run.
const DefaultCloudWatchTimeout = 10 * time.Second

// CloudWatchAPI is what the per-variant figures need of aws-sdk-go-v2's
// CloudWatch client; *cloudwatch.Client has it.
type CloudWatchAPI interface {
	ListMetrics(ctx context.Context, in *cloudwatch.ListMetricsInput, optFns ...func(*cloudwatch.Options)) (*cloudwatch.ListMetricsOutput, error)
	GetMetricStatistics(ctx context.Context, in *cloudwatch.GetMetricStatisticsInput, optFns ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricStatisticsOutput, error)
}

// CloudWatch asks mce's CloudWatch API, once a run is over, for its own
// figures of each variant of the endpoint over the run's minutes:
// Invocations, Invocation4XXErrors and Invocation5XXErrors (Sum), and
// ModelLatency and OverheadLatency (p50, p99, Average). A failure is
// written in the report, never fatal.
type CloudWatch struct {
	Client CloudWatchAPI
	// URL is where Client calls, for the report.
	URL string
	// Timeout bounds all the calls together (default
	// DefaultCloudWatchTimeout).
	Timeout time.Duration
}

// CloudWatchReport says where and over which minutes the variants'
// server-side figures were read, or why there are none.
type CloudWatchReport struct {
	URL string `json:"url"`
	// Start and End are the window asked ([Start, End), whole minutes):
	// they hold the run, and may hold calls made just before or after it.
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	PeriodS int32     `json:"period_s"`
	// ClockOffsetS is how far mce's AWS time ran ahead of the wall clock
	// at the end of the run (mce serve --time-compression): Start and End
	// are on mce's clock, shifted by it. 0 without compression.
	ClockOffsetS float64 `json:"aws_clock_offset_s,omitempty"`
	// Error is why mce's figures are missing: the API could not be
	// reached, or answered an error.
	Error string `json:"error,omitempty"`
}

// VariantReport is one variant of the endpoint: what this tool measured of
// the calls it answered (client side) and mce's own figures for it (server
// side, from its CloudWatch API).
type VariantReport struct {
	Variant string `json:"variant"`
	// Answered counts the successful calls the endpoint said this variant
	// answered (InvokedProductionVariant); failures name no variant.
	Answered int64 `json:"answered"`
	// Latency is the client-side latency of those calls, from their
	// intended send time as every latency of the report.
	Latency *Latency `json:"client_latency,omitempty"`
	// Mce is mce's server-side figures; nil when not asked or not read.
	Mce *VariantMetrics `json:"mce,omitempty"`
}

// VariantMetrics is what mce's CloudWatch API answered for one variant over
// the report's CloudWatch window.
type VariantMetrics struct {
	Invocations float64 `json:"invocations"`
	Errors4XX   float64 `json:"invocation_4xx_errors"`
	Errors5XX   float64 `json:"invocation_5xx_errors"`
	// ModelLatency (the containers' time) and OverheadLatency (mce's own
	// time) of the calls the model answered; nil when there were none.
	ModelLatency    *ServerLatency `json:"model_latency,omitempty"`
	OverheadLatency *ServerLatency `json:"overhead_latency,omitempty"`
}

// ServerLatency is a latency metric of mce's, in milliseconds. Its
// percentiles come from mce's sketches, within 1 % of the true value.
type ServerLatency struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	Mean  float64 `json:"mean_ms"`
}

// CloudWatchWindow is what a run from start to end asks of CloudWatch: from
// the minute start falls in, one period of whole minutes that ends after
// end (CloudWatch rounds StartTime down to the minute anyway, and mce keeps
// its invocation metrics at one-minute resolution).
func CloudWatchWindow(start, end time.Time) (from, to time.Time, period int32) {
	from = start.Truncate(time.Minute).UTC() // the zero Time is on a minute, as the Unix epoch
	d := max(end.Unix()-from.Unix(), 0)
	minutes := min(d/60+1, 1<<31/60-1) // Period is an int32 of seconds
	period = int32(minutes * 60)
	return from, from.Add(time.Duration(period) * time.Second), period
}

// fill adds mce's figures to rep.Variants (and the variants only mce
// knows) and sets rep.CloudWatch.
func (c *CloudWatch) fill(ctx context.Context, rep *Report) {
	start, end := rep.Started, rep.Ended
	// Under mce serve --time-compression mce's CloudWatch is on its own
	// (AWS) clock: the run's minutes are asked for on it.
	var offset float64
	if m := rep.Metrics; m != nil && m.ClockOffsetFirst != nil && m.ClockOffsetLast != nil {
		offset = *m.ClockOffsetLast
		start = start.Add(time.Duration(*m.ClockOffsetFirst * float64(time.Second)))
		end = end.Add(time.Duration(*m.ClockOffsetLast * float64(time.Second)))
	}
	from, to, period := CloudWatchWindow(start, end)
	cr := &CloudWatchReport{URL: c.URL, Start: from, End: to, PeriodS: period, ClockOffsetS: offset}
	rep.CloudWatch = cr
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultCloudWatchTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	endpoint, names, err := c.variants(ctx, rep.Endpoint)
	if err != nil {
		cr.Error = c.describe(err)
		return
	}
	byName := map[string]int{}
	out := slices.Clone(rep.Variants)
	for i, v := range out {
		byName[v.Variant] = i
	}
	for _, n := range names {
		if _, ok := byName[n]; !ok {
			byName[n] = len(out)
			out = append(out, VariantReport{Variant: n})
		}
	}
	kept := out[:0]
	for _, v := range out {
		if v.Variant != OtherVariants {
			m, err := c.variant(ctx, endpoint, v.Variant, from, to, period)
			if err != nil {
				cr.Error = c.describe(err)
				return // rep.Variants stays as the run measured it
			}
			v.Mce = m
		}
		if v.Answered > 0 || v.Mce != nil && v.Mce.Invocations > 0 {
			kept = append(kept, v) // a variant listed but silent in the window was not part of the run
		}
	}
	slices.SortFunc(kept, func(a, b VariantReport) int { return strings.Compare(a.Variant, b.Variant) })
	rep.Variants = kept
}

// describe words a failed call for the report.
func (c *CloudWatch) describe(err error) string {
	var ae smithy.APIError
	switch {
	case errors.As(err, &ae):
		return fmt.Sprintf("mce's CloudWatch API at %s answered %s: %s", c.URL, ae.ErrorCode(), ae.ErrorMessage())
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("mce's CloudWatch API at %s did not answer within its time limit: %v", c.URL, err)
	}
	return fmt.Sprintf("mce's CloudWatch API at %s could not be reached: %v", c.URL, err)
}

// maxListPages bounds the ListMetrics pages read (500 metrics a page).
const maxListPages = 20

// variants lists the variants with an Invocations metric for the endpoint
// (any time in mce's retention), and the endpoint's name as mce spells it:
// names match case-insensitively in SageMaker, and mce labels its metrics
// with the endpoint's own spelling.
func (c *CloudWatch) variants(ctx context.Context, endpoint string) (string, []string, error) {
	exact, err := c.listVariants(ctx, endpoint, true)
	if err != nil || len(exact[endpoint]) > 0 {
		return endpoint, exact[endpoint], err
	}
	all, err := c.listVariants(ctx, endpoint, false)
	if err != nil {
		return endpoint, nil, err
	}
	for _, name := range sortedKeys(all) {
		if strings.EqualFold(name, endpoint) {
			return name, all[name], nil
		}
	}
	return endpoint, nil, nil
}

// listVariants lists the variants of Invocations by endpoint name: for
// endpoint alone (exact) or for every endpoint.
func (c *CloudWatch) listVariants(ctx context.Context, endpoint string, exact bool) (map[string][]string, error) {
	filter := cwtypes.DimensionFilter{Name: aws.String(cwEndpointDim)}
	if exact {
		filter.Value = aws.String(endpoint)
	}
	in := &cloudwatch.ListMetricsInput{Namespace: aws.String(cwNamespace), MetricName: aws.String(cwInvocations),
		Dimensions: []cwtypes.DimensionFilter{filter}}
	out := map[string][]string{}
	for range maxListPages {
		page, err := c.Client.ListMetrics(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, m := range page.Metrics {
			var ep, variant string
			for _, d := range m.Dimensions {
				switch aws.ToString(d.Name) {
				case cwEndpointDim:
					ep = aws.ToString(d.Value)
				case cwVariantDim:
					variant = aws.ToString(d.Value)
				}
			}
			// the variant's own series: EndpointName and VariantName alone
			if len(m.Dimensions) == 2 && ep != "" && variant != "" && !slices.Contains(out[ep], variant) {
				out[ep] = append(out[ep], variant)
			}
		}
		if aws.ToString(page.NextToken) == "" {
			break
		}
		in.NextToken = page.NextToken
	}
	return out, nil
}

// variant reads one variant's figures over [from, to) in one period.
func (c *CloudWatch) variant(ctx context.Context, endpoint, variant string, from, to time.Time, period int32) (*VariantMetrics, error) {
	dims := []cwtypes.Dimension{{Name: aws.String(cwEndpointDim), Value: aws.String(endpoint)}, {Name: aws.String(cwVariantDim), Value: aws.String(variant)}}
	get := func(metric string, stats []cwtypes.Statistic, ext []string) ([]cwtypes.Datapoint, error) {
		out, err := c.Client.GetMetricStatistics(ctx, &cloudwatch.GetMetricStatisticsInput{Namespace: aws.String(cwNamespace),
			MetricName: aws.String(metric), Dimensions: dims, StartTime: aws.Time(from), EndTime: aws.Time(to), Period: aws.Int32(period),
			Statistics: stats, ExtendedStatistics: ext})
		if err != nil {
			return nil, err
		}
		return out.Datapoints, nil
	}
	sum := func(metric string) (float64, error) {
		dps, err := get(metric, []cwtypes.Statistic{cwtypes.StatisticSum}, nil)
		var s float64
		for _, dp := range dps { // one period; a datapoint per unit recorded
			s += aws.ToFloat64(dp.Sum)
		}
		return s, err
	}
	latency := func(metric string) (*ServerLatency, error) {
		basic, err := get(metric, []cwtypes.Statistic{cwtypes.StatisticSampleCount, cwtypes.StatisticAverage}, nil)
		if err != nil || len(basic) == 0 {
			return nil, err
		}
		ext, err := get(metric, nil, []string{"p50", "p99"})
		if err != nil {
			return nil, err
		}
		b := pickLatency(basic)
		toMS := msPer(b.Unit)
		l := &ServerLatency{Count: int64(aws.ToFloat64(b.SampleCount)), Mean: aws.ToFloat64(b.Average) * toMS}
		for _, e := range ext {
			if e.Unit == b.Unit {
				l.P50, l.P99 = e.ExtendedStatistics["p50"]*toMS, e.ExtendedStatistics["p99"]*toMS
			}
		}
		return l, nil
	}
	m := &VariantMetrics{}
	var err error
	if m.Invocations, err = sum(cwInvocations); err != nil {
		return nil, err
	}
	if m.Errors4XX, err = sum(cw4XX); err != nil {
		return nil, err
	}
	if m.Errors5XX, err = sum(cw5XX); err != nil {
		return nil, err
	}
	if m.ModelLatency, err = latency(cwModelLatency); err != nil {
		return nil, err
	}
	if m.OverheadLatency, err = latency(cwOverhead); err != nil {
		return nil, err
	}
	return m, nil
}

// pickLatency takes the datapoint in a unit of time (mce records its
// latencies in Microseconds only; without Unit in the request, a metric
// recorded in two units answers a datapoint per unit), else the first.
func pickLatency(dps []cwtypes.Datapoint) cwtypes.Datapoint {
	for _, dp := range dps {
		switch dp.Unit {
		case cwtypes.StandardUnitMicroseconds, cwtypes.StandardUnitMilliseconds, cwtypes.StandardUnitSeconds:
			return dp
		}
	}
	return dps[0]
}

// msPer is how many milliseconds one of unit is; 1 for a unit that is not
// a time (taken as milliseconds).
func msPer(unit cwtypes.StandardUnit) float64 {
	switch unit {
	case cwtypes.StandardUnitMicroseconds:
		return 1e-3
	case cwtypes.StandardUnitSeconds:
		return 1e3
	}
	return 1
}
