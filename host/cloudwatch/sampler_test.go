package cloudwatch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestAddSamplerPublishesGauges: a sampler runs on its interval until
// stopped, a panicking one stops alone, and Close stops the rest.
func TestAddSamplerPublishesGauges(t *testing.T) {
	c := newClock(t0)
	s := openTest(t, t.TempDir(), c, nil)
	g := mustSeries(t, s, "/aws/sagemaker/Endpoints", "CPUUtilization", epDims, "Percent", Standard)
	var calls atomic.Int64
	stop := s.AddSampler(5*time.Millisecond, func(ctx context.Context) {
		calls.Add(1)
		g.Observe(50)
	})
	waitFor(t, func() bool { return calls.Load() >= 3 })
	stop() // returns once the sampler's goroutine has ended
	n := calls.Load()
	g.Observe(0) // a value after stop, for the count below
	if calls.Load() != n {
		t.Errorf("the sampler ran after stop: %d then %d", n, calls.Load())
	}
	dps := datapoints(t, okJSON(t, s, "GetMetricStatistics", map[string]any{"Namespace": "/aws/sagemaker/Endpoints",
		"MetricName": "CPUUtilization", "Dimensions": []map[string]string{{"Name": "EndpointName", "Value": "ep"}, {"Name": "VariantName", "Value": "v1"}},
		"StartTime": t0.Unix(), "EndTime": t0.Add(time.Minute).Unix(), "Period": 60, "Statistics": []string{"Average", "SampleCount"}}))
	if len(dps) != 1 || dps[0]["SampleCount"] != float64(n+1) || dps[0]["Average"] != 50*float64(n)/float64(n+1) {
		t.Errorf("%v, want %d samples of 50 and one of 0", dps, n)
	}

	var panics atomic.Int64
	s.AddSampler(time.Millisecond, func(context.Context) { panics.Add(1); panic("boom") })
	var other atomic.Int64
	s.AddSampler(time.Millisecond, func(context.Context) { other.Add(1) })
	waitFor(t, func() bool { return other.Load() >= 5 && panics.Load() == 1 })
	if err := s.Close(); err != nil { // returns: every sampler stopped
		t.Fatal(err)
	}
	if panics.Load() != 1 {
		t.Errorf("a panicking sampler ran %d times", panics.Load())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30 s")
		}
		time.Sleep(time.Millisecond)
	}
}
