package host

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/authz"
	cw "github.com/mce-run/mce/host/cloudwatch"
	"github.com/mce-run/mce/internal/sdkhttp"
)

func openCloudWatch(t *testing.T) *cw.Service {
	t.Helper()
	svc, err := cw.Open(cw.Options{Dir: filepath.Join(t.TempDir(), "cloudwatch")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return svc
}

func (h *harness) cloudWatch(creds aws.CredentialsProvider) *cloudwatch.Client {
	if creds == nil {
		creds = aws.AnonymousCredentials{}
	}
	return cloudwatch.New(cloudwatch.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.http.URL),
		Credentials: creds, HTTPClient: &sdkhttp.Client{Next: h.http.Client()}})
}

// TestCloudWatchInvocationsPerVariant is the A/B notebook's question, asked
// with aws-sdk-go-v2's CloudWatch client (RPC v2 CBOR) against the
// server's own listener: after N calls to a variant its Invocations Sum is
// N, ModelLatency's SampleCount counts the calls the model answered, a 4xx
// of the model counts in Invocation4XXErrors, and percentiles come back.
func TestCloudWatchInvocationsPerVariant(t *testing.T) {
	h := newHarness(t, Config{CloudWatch: openCloudWatch(t)})
	if err := h.deploy(plan("ab", "Serial", map[string][]string{"VariantA": {"a:A"}, "VariantB": {"b:B"}})); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Minute)
	call := func(variant, attrs string) {
		in := &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab"), Body: body("x"),
			ContentType: aws.String("text/plain"), TargetVariant: aws.String(variant)}
		if attrs != "" {
			in.CustomAttributes = aws.String(attrs)
		}
		_, err := h.invoke(in)
		if attrs == "" && err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		call("VariantA", "")
	}
	call("VariantA", "status=404")
	call("VariantA", "status=503")
	for range 3 {
		call("VariantB", "")
	}
	c := h.cloudWatch(nil)
	ctx := context.Background()
	stat := func(variant, metric string, stats []cwtypes.Statistic, ext ...string) cwtypes.Datapoint {
		t.Helper()
		in := &cloudwatch.GetMetricStatisticsInput{Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String(metric),
			Dimensions: []cwtypes.Dimension{{Name: aws.String("EndpointName"), Value: aws.String("ab")},
				{Name: aws.String("VariantName"), Value: aws.String(variant)}},
			StartTime: aws.Time(start), EndTime: aws.Time(time.Now().Add(time.Minute)), Period: aws.Int32(3600),
			Statistics: stats}
		if len(ext) > 0 {
			in.Statistics, in.ExtendedStatistics = nil, ext
		}
		out, err := c.GetMetricStatistics(ctx, in)
		if err != nil {
			t.Fatalf("%s %s: %v", variant, metric, err)
		}
		if len(out.Datapoints) != 1 {
			t.Fatalf("%s %s: %d datapoints, want 1 (one hour-long period)", variant, metric, len(out.Datapoints))
		}
		return out.Datapoints[0]
	}
	sum := []cwtypes.Statistic{cwtypes.StatisticSum, cwtypes.StatisticSampleCount}
	for _, tc := range []struct {
		variant, metric string
		want            float64
	}{
		{"VariantA", "Invocations", 7}, {"VariantB", "Invocations", 3},
		{"VariantA", "Invocation4XXErrors", 1}, {"VariantA", "Invocation5XXErrors", 1},
		{"VariantA", "InvocationModelErrors", 2}, {"VariantB", "Invocation4XXErrors", 0},
		{"VariantA", "InvocationsPerInstance", 7},
	} {
		if got := aws.ToFloat64(stat(tc.variant, tc.metric, sum).Sum); got != tc.want {
			t.Errorf("%s %s Sum = %v, want %v", tc.variant, tc.metric, got, tc.want)
		}
	}
	for variant, n := range map[string]float64{"VariantA": 5, "VariantB": 3} {
		for _, m := range []string{"ModelLatency", "OverheadLatency"} {
			dp := stat(variant, m, sum)
			if got := aws.ToFloat64(dp.SampleCount); got != n {
				t.Errorf("%s %s SampleCount = %v, want %v (the calls the model answered)", variant, m, got, n)
			}
			if dp.Unit != cwtypes.StandardUnitMicroseconds {
				t.Errorf("%s %s unit = %q, want Microseconds", variant, m, dp.Unit)
			}
		}
		dp := stat(variant, "ModelLatency", nil, "p50", "p99")
		if dp.ExtendedStatistics["p50"] <= 0 || dp.ExtendedStatistics["p99"] < dp.ExtendedStatistics["p50"] {
			t.Errorf("%s ModelLatency percentiles = %v, want 0 < p50 ≤ p99", variant, dp.ExtendedStatistics)
		}
	}
	// ListMetrics finds both variants' series.
	lm, err := c.ListMetrics(ctx, &cloudwatch.ListMetricsInput{Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("Invocations")})
	if err != nil {
		t.Fatal(err)
	}
	if len(lm.Metrics) != 2 {
		t.Errorf("ListMetrics Invocations = %d metrics, want 2 (one per variant)", len(lm.Metrics))
	}
}

// TestCloudWatchAuthorized: CloudWatch's calls are authenticated (signed
// for "monitoring") and authorized as cloudwatch:<Operation> on "*" by the
// same policies as every other call; a refusal comes in CloudWatch's shape.
func TestCloudWatchAuthorized(t *testing.T) {
	cf := filepath.Join(t.TempDir(), "creds.yaml")
	if err := os.WriteFile(cf, []byte(`
Credentials:
  - {AccessKeyId: AKIAREADER000EXAMPLE, SecretAccessKey: reader-secret, Arn: "arn:aws:iam::123456789012:user/reader",
     Policies: [{Statement: {Effect: Allow, Action: "cloudwatch:ListMetrics", Resource: "*"}}]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := authz.Load(context.Background(), authz.Config{CredentialsFile: cf, Region: "us-east-1", Logger: zerolog.Nop(),
		Targets: AuthzTargets("us-east-1", "123456789012")})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{Authz: a, CloudWatch: openCloudWatch(t)})
	reader := h.cloudWatch(credentials.NewStaticCredentialsProvider("AKIAREADER000EXAMPLE", "reader-secret", ""))
	ctx := context.Background()
	if _, err := reader.ListMetrics(ctx, &cloudwatch.ListMetricsInput{}); err != nil {
		t.Fatalf("ListMetrics, allowed: %v", err)
	}
	_, err = reader.GetMetricStatistics(ctx, &cloudwatch.GetMetricStatisticsInput{Namespace: aws.String("AWS/SageMaker"),
		MetricName: aws.String("Invocations"), StartTime: aws.Time(time.Now().Add(-time.Hour)), EndTime: aws.Time(time.Now()),
		Period: aws.Int32(60), Statistics: []cwtypes.Statistic{cwtypes.StatisticSum}})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDenied" { // CloudWatch's query-compatible code
		t.Fatalf("GetMetricStatistics, not allowed: %v, want AccessDenied", err)
	}
	if _, err := h.cloudWatch(nil).ListMetrics(ctx, &cloudwatch.ListMetricsInput{}); err == nil {
		t.Fatal("an unsigned ListMetrics was answered with policies in force")
	}
	wrong := h.cloudWatch(credentials.NewStaticCredentialsProvider("AKIAREADER000EXAMPLE", "not-the-secret", ""))
	if _, err := wrong.ListMetrics(ctx, &cloudwatch.ListMetricsInput{}); !errors.As(err, &ae) || ae.ErrorCode() != "SignatureDoesNotMatch" {
		t.Fatalf("a bad signature: %v, want SignatureDoesNotMatch", err)
	}
}

// TestCloudWatchRefusesOtherQueryServices: a form on POST / of a Version
// that is neither CloudWatch's nor STS's or IAM's (SQS's) is refused with
// InvalidAction in the query protocol's XML, not served.
func TestCloudWatchRefusesOtherQueryServices(t *testing.T) {
	h := newHarness(t, Config{CloudWatch: openCloudWatch(t)})
	resp, err := h.http.Client().Post(h.http.URL+"/", "application/x-www-form-urlencoded",
		strings.NewReader("Action=ListQueues&Version=2012-11-05"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "<Code>InvalidAction</Code>") {
		t.Fatalf("%d %s, want 400 with InvalidAction in an ErrorResponse", resp.StatusCode, b)
	}
}
