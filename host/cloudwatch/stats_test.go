package cloudwatch

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestStatisticSetsAreExact: Sum, Minimum, Maximum, SampleCount and
// Average of a period are those of the values told, to the last bit the
// order of addition allows, whether the period is still open, closed and on
// disk, or summed from several stored periods.
func TestStatisticSetsAreExact(t *testing.T) {
	cases := []struct {
		name   string
		values []float64
	}{
		{"one", []float64{42}},
		{"integers", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"zeros", []float64{0, 0, 0}},
		{"negative and positive", []float64{-5, 3.5, -0.25, 100}},
		{"tiny and huge", []float64{1e-12, 1e12, 3}},
		{"same value", []float64{7.5, 7.5, 7.5, 7.5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock(t0.Add(5 * time.Second))
			s := openTest(t, t.TempDir(), c, nil)
			h := mustSeries(t, s, "AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard)
			// Spread over three minutes, each closed and written as the
			// next one starts (what the flusher does every second).
			var sum float64
			for i, v := range tc.values {
				c.Set(t0.Add(time.Duration(i*3/len(tc.values))*time.Minute + 5*time.Second))
				s.Flush()
				h.Observe(v)
				sum += v
			}
			want := map[string]float64{
				"Sum": sum, "Minimum": slices.Min(tc.values), "Maximum": slices.Max(tc.values),
				"SampleCount": float64(len(tc.values)), "Average": sum / float64(len(tc.values)),
			}
			check := func(when string) {
				out := okJSON(t, s, "GetMetricStatistics", gms(t0, t0.Add(3*time.Minute), 180, []string{"Sum", "Minimum", "Maximum", "SampleCount", "Average"}, nil))
				dps := datapoints(t, out)
				if len(dps) != 1 {
					t.Fatalf("%s: %d datapoints, want 1: %v", when, len(dps), dps)
				}
				for k, w := range want {
					got, _ := dps[0][k].(float64)
					if math.Abs(got-w) > 1e-9*math.Max(1, math.Abs(w)) {
						t.Errorf("%s: %s = %v, want %v", when, k, got, w)
					}
				}
				if dps[0]["Unit"] != "Microseconds" {
					t.Errorf("%s: Unit %v", when, dps[0]["Unit"])
				}
				if ts := dps[0]["Timestamp"].(float64); ts != float64(t0.Unix()) {
					t.Errorf("%s: Timestamp %v, want %d", when, ts, t0.Unix())
				}
			}
			check("open periods")
			c.Set(t0.Add(10 * time.Minute))
			s.Flush()
			if st := s.Stats(); st.RecordsWritten == 0 {
				t.Fatalf("nothing written: %+v", st)
			}
			check("periods on disk")
		})
	}
}

// TestPercentilesWithinTheSketchError: every percentile is within 1 % of
// the value of that rank in the sorted sample (rank q·(n−1), the lower
// one), for several distributions, p0 and p100 exactly; merged from
// several stored minutes as well as from one open one.
func TestPercentilesWithinTheSketchError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := map[string]func(i int) float64{
		"uniform 1..1000 µs": func(int) float64 { return 1 + rng.Float64()*999 },
		"lognormal latency":  func(int) float64 { return math.Exp(8 + 1.5*rng.NormFloat64()) },
		"two values":         func(i int) float64 { return []float64{10, 5000}[i%2] },
		"constant":           func(int) float64 { return 123.456 },
		"with zeros":         func(i int) float64 { return float64(i % 5) },
	}
	pcts := []string{"p0", "p1", "p10", "p50", "p90", "p99", "p99.9", "p100"}
	for name, g := range gen {
		for _, n := range []int{1, 7, 1000, 20000} {
			c := newClock(t0)
			s := openTest(t, t.TempDir(), c, nil)
			h := mustSeries(t, s, "AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard)
			values := make([]float64, n)
			for i := range values {
				values[i] = g(i)
				c.Set(t0.Add(time.Duration(i*5/n)*time.Minute + time.Second))
				s.Flush()
				h.Observe(values[i])
			}
			sorted := slices.Clone(values)
			slices.Sort(sorted)
			check := func(when string) {
				out := okJSON(t, s, "GetMetricStatistics", gms(t0, t0.Add(5*time.Minute), 300, nil, pcts))
				dps := datapoints(t, out)
				if len(dps) != 1 {
					t.Fatalf("%s n=%d %s: %d datapoints", name, n, when, len(dps))
				}
				ext := dps[0]["ExtendedStatistics"].(map[string]any)
				for _, p := range pcts {
					st, _ := parsePercentile(p)
					truth := sorted[int(st.pct/100*float64(n-1))]
					got := ext[p].(float64)
					tol := sketchAccuracy * math.Abs(truth)
					if p == "p0" || p == "p100" {
						tol = 0
					}
					if math.Abs(got-truth) > tol+1e-12 {
						t.Errorf("%s n=%d %s: %s = %v, truth %v (±%v)", name, n, when, p, got, truth, tol)
					}
				}
			}
			check("open")
			c.Set(t0.Add(time.Hour))
			s.Flush()
			check("stored")
		}
	}
}

// TestPercentilesAbsentWithNegativeValues: as CloudWatch, no percentile for
// a period that holds a negative value; the other periods keep theirs.
func TestPercentilesAbsentWithNegativeValues(t *testing.T) {
	c := newClock(t0)
	s := openTest(t, t.TempDir(), c, nil)
	h := mustSeries(t, s, "AWS/SageMaker", "ModelLatency", epDims, "None", Standard)
	h.Observe(-1)
	h.Observe(5)
	c.Set(t0.Add(time.Minute))
	h.Observe(5)
	out := okJSON(t, s, "GetMetricStatistics", gms(t0, t0.Add(2*time.Minute), 60, nil, []string{"p50"}))
	dps := datapoints(t, out)
	if len(dps) != 2 {
		t.Fatalf("%d datapoints", len(dps))
	}
	if _, ok := dps[0]["ExtendedStatistics"]; ok {
		t.Errorf("a percentile of a period with a negative value: %v", dps[0])
	}
	if ext, _ := dps[1]["ExtendedStatistics"].(map[string]any); ext["p50"] != 5.0 {
		t.Errorf("the other period's p50: %v", dps[1])
	}
}

// TestUnitFilterAndPerUnitDatapoints: without Unit every unit of the
// metric answers its own datapoints; with Unit only that unit's; a unit
// with no data answers none.
func TestUnitFilterAndPerUnitDatapoints(t *testing.T) {
	c := newClock(t0)
	s := openTest(t, t.TempDir(), c, nil)
	mustSeries(t, s, "AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard).Observe(10)
	mustSeries(t, s, "AWS/SageMaker", "ModelLatency", epDims, "Milliseconds", Standard).Observe(3)
	in := gms(t0, t0.Add(time.Minute), 60, []string{"Sum"}, nil)
	if dps := datapoints(t, okJSON(t, s, "GetMetricStatistics", in)); len(dps) != 2 {
		t.Errorf("no Unit: %v, want a datapoint per unit", dps)
	}
	in["Unit"] = "Milliseconds"
	dps := datapoints(t, okJSON(t, s, "GetMetricStatistics", in))
	if len(dps) != 1 || dps[0]["Sum"] != 3.0 || dps[0]["Unit"] != "Milliseconds" {
		t.Errorf("Unit Milliseconds: %v", dps)
	}
	in["Unit"] = "Seconds"
	if dps := datapoints(t, okJSON(t, s, "GetMetricStatistics", in)); len(dps) != 0 {
		t.Errorf("Unit Seconds: %v, want none", dps)
	}
	// Dimensions name the metric exactly: a subset is another metric.
	in = gms(t0, t0.Add(time.Minute), 60, []string{"Sum"}, nil)
	in["Dimensions"] = []map[string]string{{"Name": "EndpointName", "Value": "ep"}}
	if dps := datapoints(t, okJSON(t, s, "GetMetricStatistics", in)); len(dps) != 0 {
		t.Errorf("a subset of the dimensions: %v, want none", dps)
	}
}

// TestHighResolutionSeries: a 10-second series answers 10-second periods;
// asked per minute, its six datapoints sum into one.
func TestHighResolutionSeries(t *testing.T) {
	c := newClock(t0)
	s := openTest(t, t.TempDir(), c, nil)
	h := mustSeries(t, s, "AWS/SageMaker", "ModelLatency", epDims, "Count", HighResolution)
	for i := range 6 {
		c.Set(t0.Add(time.Duration(i*10+1) * time.Second))
		s.Flush()
		h.Observe(float64(i + 1))
	}
	if dps := datapoints(t, okJSON(t, s, "GetMetricStatistics", gms(t0, t0.Add(time.Minute), 10, []string{"Sum"}, nil))); len(dps) != 6 {
		t.Errorf("Period 10: %d datapoints, want 6", len(dps))
	}
	c.Set(t0.Add(2 * time.Minute))
	s.Flush()
	dps := datapoints(t, okJSON(t, s, "GetMetricStatistics", gms(t0, t0.Add(time.Minute), 60, []string{"Sum"}, nil)))
	if len(dps) != 1 || dps[0]["Sum"] != 21.0 {
		t.Errorf("Period 60: %v, want one datapoint of Sum 21", dps)
	}
}
