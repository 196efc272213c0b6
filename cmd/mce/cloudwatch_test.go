package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/mce-run/mce/internal/testenv"
)

// TestRestartKeepsCloudWatchDatapoints: mce serve publishes a call's
// SageMaker metrics to the CloudWatch store in its state folder and writes
// the open period when it stops, so after a restart on the same state the
// calls of the first run are still counted, and new ones add to them.
func TestRestartKeepsCloudWatchDatapoints(t *testing.T) {
	testenv.Docker(t)
	testenv.Image(t, "probe")
	listen := freePort(t)
	base := "http://" + listen
	f := serveFlagsFor(t, listen, endpointFile(t, ""))
	start := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- serve(ctx, f) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("serve: %v", err)
			}
		}
	}
	invoke := func(n int) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for i := 0; i < n; {
			resp, err := http.Post(base+"/endpoints/ep/invocations", "text/plain", strings.NewReader("hello"))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					i++
					continue
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("ep did not answer within 90 s: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	from := time.Now().Add(-time.Hour)
	invocations := func() float64 {
		t.Helper()
		c := cloudwatch.New(cloudwatch.Options{Region: "us-east-1", BaseEndpoint: aws.String(base), Credentials: aws.AnonymousCredentials{}})
		out, err := c.GetMetricStatistics(context.Background(), &cloudwatch.GetMetricStatisticsInput{
			Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("Invocations"),
			Dimensions: []cwtypes.Dimension{{Name: aws.String("EndpointName"), Value: aws.String("ep")},
				{Name: aws.String("VariantName"), Value: aws.String("AllTraffic")}},
			StartTime: aws.Time(from), EndTime: aws.Time(time.Now().Add(time.Hour)), Period: aws.Int32(60),
			Statistics: []cwtypes.Statistic{cwtypes.StatisticSum}})
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for _, d := range out.Datapoints {
			sum += aws.ToFloat64(d.Sum)
		}
		return sum
	}

	stop := start()
	invoke(5)
	if n := invocations(); n != 5 {
		t.Fatalf("first run: Invocations Sum = %v, want 5", n)
	}
	stop()

	stop = start()
	defer stop()
	invoke(3)
	if n := invocations(); n != 8 {
		t.Errorf("after a restart on the same state: Invocations Sum = %v, want 5 + 3", n)
	}
}
