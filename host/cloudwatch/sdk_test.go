package cloudwatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/smithy-go"

	"github.com/mce-run/mce/internal/awstest"
	"github.com/mce-run/mce/internal/sdkhttp"
)

func TestMain(m *testing.M) {
	code := awstest.Run(m)
	if fuzzSvc != nil {
		fuzzSvc.Close()
		os.RemoveAll(fuzzDir)
	}
	os.Exit(code)
}

// sdkServer serves s on 127.0.0.1 and returns aws-sdk-go-v2's CloudWatch
// client for it (RPC v2 CBOR, the protocol of service/cloudwatch v1.52 and
// later) and the requests it saw.
func sdkServer(t *testing.T, s *Service) (*cloudwatch.Client, *seen) {
	t.Helper()
	sn := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sn.add(r)
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c := cloudwatch.New(cloudwatch.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		HTTPClient:   &sdkhttp.Client{Next: srv.Client()},
		Retryer:      aws.NopRetryer{},
	})
	return c, sn
}

type seen struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (s *seen) add(r *http.Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r.Clone(context.Background()))
	s.mu.Unlock()
}

func (s *seen) last() *http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs[len(s.reqs)-1]
}

// TestSDKGoV2ReadsWhatWasRecorded: aws-sdk-go-v2's CloudWatch client, over
// RPC v2 CBOR, reads back the statistics, percentiles, GetMetricData pages
// and ListMetrics pages of what was recorded, and signs for "monitoring".
func TestSDKGoV2ReadsWhatWasRecorded(t *testing.T) {
	c := newClock(t0.Add(2 * time.Second))
	s := openTest(t, t.TempDir(), c, nil)
	cw, sn := sdkServer(t, s)
	ctx := context.Background()

	inv := mustSeries(t, s, "AWS/SageMaker", "Invocations", epDims, "Count", Standard)
	lat := mustSeries(t, s, "AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard)
	// 3 minutes: 10, 20, 30 calls; latencies 1..60 ms.
	n := 0
	for m := range 3 {
		c.Set(t0.Add(time.Duration(m)*time.Minute + 2*time.Second))
		s.Flush()
		for range (m + 1) * 10 {
			n++
			inv.Observe(1)
			lat.Observe(float64(n) * 1000)
		}
	}
	dims := []types.Dimension{{Name: aws.String("EndpointName"), Value: aws.String("ep")}, {Name: aws.String("VariantName"), Value: aws.String("v1")}}

	out, err := cw.GetMetricStatistics(ctx, &cloudwatch.GetMetricStatisticsInput{
		Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("Invocations"), Dimensions: dims,
		StartTime: aws.Time(t0), EndTime: aws.Time(t0.Add(3 * time.Minute)), Period: aws.Int32(60),
		Statistics: []types.Statistic{types.StatisticSum, types.StatisticSampleCount},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(out.Datapoints); got != 3 {
		t.Fatalf("%d datapoints, want 3", got)
	}
	for i, dp := range out.Datapoints {
		if !dp.Timestamp.Equal(t0.Add(time.Duration(i) * time.Minute)) {
			t.Errorf("datapoint %d at %v", i, dp.Timestamp)
		}
		if want := float64((i + 1) * 10); aws.ToFloat64(dp.Sum) != want || aws.ToFloat64(dp.SampleCount) != want {
			t.Errorf("datapoint %d: Sum %v SampleCount %v, want %v", i, aws.ToFloat64(dp.Sum), aws.ToFloat64(dp.SampleCount), want)
		}
		if dp.Unit != types.StandardUnitCount {
			t.Errorf("Unit %q", dp.Unit)
		}
	}
	if aws.ToString(out.Label) != "Invocations" {
		t.Errorf("Label %q", aws.ToString(out.Label))
	}
	r := sn.last()
	if r.URL.Path != CBORPathPrefix+"GetMetricStatistics" || r.Header.Get("Smithy-Protocol") != "rpc-v2-cbor" {
		t.Errorf("the SDK did not speak RPC v2 CBOR: %s %v", r.URL.Path, r.Header)
	}
	if a := r.Header.Get("Authorization"); !strings.Contains(a, "/us-east-1/"+SigningName+"/aws4_request") {
		t.Errorf("signed for another service: %s", a)
	}

	pct, err := cw.GetMetricStatistics(ctx, &cloudwatch.GetMetricStatisticsInput{
		Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("ModelLatency"), Dimensions: dims,
		StartTime: aws.Time(t0), EndTime: aws.Time(t0.Add(3 * time.Minute)), Period: aws.Int32(180),
		ExtendedStatistics: []string{"p50", "p99", "p100"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pct.Datapoints) != 1 {
		t.Fatalf("%v", pct.Datapoints)
	}
	ext := pct.Datapoints[0].ExtendedStatistics
	for k, want := range map[string]float64{"p50": 30000, "p99": 59000, "p100": 60000} {
		if math.Abs(ext[k]-want) > want*sketchAccuracy {
			t.Errorf("%s = %v, want %v ±1%%", k, ext[k], want)
		}
	}

	// GetMetricData: two queries, four datapoints a page.
	var got []float64
	var statuses []types.StatusCode
	pages := cloudwatch.NewGetMetricDataPaginator(cw, &cloudwatch.GetMetricDataInput{
		StartTime: aws.Time(t0), EndTime: aws.Time(t0.Add(3 * time.Minute)), MaxDatapoints: aws.Int32(4),
		ScanBy: types.ScanByTimestampAscending,
		MetricDataQueries: []types.MetricDataQuery{
			{Id: aws.String("calls"), Label: aws.String("calls"), MetricStat: &types.MetricStat{Metric: &types.Metric{Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("Invocations"), Dimensions: dims}, Period: aws.Int32(60), Stat: aws.String("Sum")}},
			{Id: aws.String("p90"), MetricStat: &types.MetricStat{Metric: &types.Metric{Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("ModelLatency"), Dimensions: dims}, Period: aws.Int32(60), Stat: aws.String("Maximum")}},
		},
	})
	npages := 0
	for pages.HasMorePages() {
		p, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		npages++
		for _, r := range p.MetricDataResults {
			got = append(got, r.Values...)
			statuses = append(statuses, r.StatusCode)
			if len(r.Timestamps) != len(r.Values) {
				t.Errorf("%d timestamps for %d values", len(r.Timestamps), len(r.Values))
			}
		}
	}
	want := []float64{10, 20, 30, 10000, 30000, 60000}
	if fmt.Sprint(got) != fmt.Sprint(want) || npages != 2 {
		t.Errorf("GetMetricData values %v in %d pages, want %v in 2", got, npages, want)
	}
	if statuses[0] != types.StatusCodeComplete || statuses[1] != types.StatusCodePartialData {
		t.Errorf("first page statuses %v, want Complete and PartialData", statuses[:2])
	}

	// ListMetrics pages 500 at a time.
	for i := range 1203 {
		mustSeries(t, s, "Custom", "M", []Dimension{{"I", fmt.Sprintf("%04d", i)}}, "None", Standard).Observe(1)
	}
	lp := cloudwatch.NewListMetricsPaginator(cw, &cloudwatch.ListMetricsInput{Namespace: aws.String("Custom")})
	var sizes []int
	seenDims := map[string]bool{}
	for lp.HasMorePages() {
		p, err := lp.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(p.Metrics))
		for _, m := range p.Metrics {
			seenDims[aws.ToString(m.Dimensions[0].Value)] = true
		}
	}
	if fmt.Sprint(sizes) != "[500 500 203]" || len(seenDims) != 1203 {
		t.Errorf("ListMetrics pages %v, %d distinct metrics; want [500 500 203] and 1203", sizes, len(seenDims))
	}
}

// TestSDKGoV2SeesCloudWatchErrors: a refusal reaches the SDK as the modeled
// error with CloudWatch's query code, an authorization refusal as
// AccessDenied (403).
func TestSDKGoV2SeesCloudWatchErrors(t *testing.T) {
	c := newClock(t0)
	s := openTest(t, t.TempDir(), c, func(o *Options) {
		o.Authorize = func(_ context.Context, r *http.Request, action string) error {
			if action == "cloudwatch:ListMetrics" {
				return errors.New("User: arn:aws:iam::000000000000:user/bob is not authorized to perform: cloudwatch:ListMetrics")
			}
			return nil
		}
	})
	cw, _ := sdkServer(t, s)
	ctx := context.Background()
	_, err := cw.GetMetricStatistics(ctx, &cloudwatch.GetMetricStatisticsInput{
		Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("Invocations"),
		StartTime: aws.Time(t0), EndTime: aws.Time(t0.Add(time.Hour)), Period: aws.Int32(61),
		Statistics: []types.Statistic{types.StatisticSum},
	})
	var ipv *types.InvalidParameterValueException
	if !errors.As(err, &ipv) || ipv.ErrorCode() != CodeInvalidParameterValue || !strings.Contains(ipv.ErrorMessage(), "Period") {
		t.Errorf("Period 61: %v, want InvalidParameterValueException (InvalidParameterValue)", err)
	}
	_, err = cw.GetMetricStatistics(ctx, &cloudwatch.GetMetricStatisticsInput{
		Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("Invocations"),
		StartTime: aws.Time(t0), EndTime: aws.Time(t0.Add(25 * time.Hour)), Period: aws.Int32(60),
		Statistics: []types.Statistic{types.StatisticSum},
	})
	var ipc *types.InvalidParameterCombinationException
	if !errors.As(err, &ipc) || !strings.Contains(ipc.ErrorMessage(), "You have requested up to 1500 datapoints, which exceeds the limit of 1440") {
		t.Errorf("25 h per minute: %v", err)
	}
	_, err = cw.ListMetrics(ctx, &cloudwatch.ListMetricsInput{})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != CodeAccessDenied || !strings.Contains(ae.ErrorMessage(), "not authorized to perform: cloudwatch:ListMetrics") {
		t.Errorf("denied ListMetrics: %v", err)
	}
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusForbidden {
		t.Errorf("denied ListMetrics: not 403: %v", err)
	}
}
