package cloudwatch

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// The cost the invocation path pays per value, on the real clock: one
// handle from one goroutine, one handle from all of them (every call of a
// variant), and a handle per goroutine (many variants).

func benchService(b *testing.B) *Service {
	b.Helper()
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func BenchmarkSeriesObserve(b *testing.B) {
	s := benchService(b)
	h := mustSeries(b, s, "AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard)
	h.Observe(1) // the sketch exists
	b.ReportAllocs()
	b.ResetTimer()
	v := 1.0
	for range b.N {
		h.Observe(v)
		v += 17
		if v > 1e6 {
			v = 1
		}
	}
}

// BenchmarkSeriesObserveAt is the form the invocation path uses: the time
// is the end of the call it has measured already.
func BenchmarkSeriesObserveAt(b *testing.B) {
	s := benchService(b)
	h := mustSeries(b, s, "AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard)
	now := time.Now()
	h.ObserveAt(now, 1)
	b.ReportAllocs()
	b.ResetTimer()
	v := 1.0
	for range b.N {
		h.ObserveAt(now, v)
		v += 17
		if v > 1e6 {
			v = 1
		}
	}
}

func BenchmarkSeriesObserveParallel(b *testing.B) {
	s := benchService(b)
	h := mustSeries(b, s, "AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard)
	h.Observe(1)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		v := 1.0
		for pb.Next() {
			h.Observe(v)
			v += 17
			if v > 1e6 {
				v = 1
			}
		}
	})
}

func BenchmarkSeriesObserveParallelPerSeries(b *testing.B) {
	s := benchService(b)
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		h := mustSeries(b, s, "AWS/SageMaker", "ModelLatency",
			[]Dimension{{"EndpointName", "ep"}, {"VariantName", fmt.Sprint("v", n.Add(1))}}, "Microseconds", Standard)
		h.Observe(1)
		v := 1.0
		for pb.Next() {
			h.Observe(v)
			v += 17
			if v > 1e6 {
				v = 1
			}
		}
	})
}

// BenchmarkServiceObserveByName is the slow path: the series looked up by
// name per call.
func BenchmarkServiceObserveByName(b *testing.B) {
	s := benchService(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s.Observe("AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard, 5)
	}
}

// BenchmarkDayOfDatapoints stores a day of one-minute datapoints for
// `series` series (a few latency-like values each minute, so each sketch
// has several buckets) and reports the disk and heap it takes and the
// time of a day-long GetMetricStatistics (1,440 datapoints read from disk)
// with and without percentiles. The series count is the endpoints ×
// variants × metrics of a deployment: 100 endpoints × 10 variants × 4
// latency and count metrics is 4,000.
func BenchmarkDayOfDatapoints(b *testing.B) {
	for _, n := range []int{1000, 4000} {
		b.Run(fmt.Sprintf("series=%d", n), func(b *testing.B) {
			for range b.N {
				dayOfDatapoints(b, n)
			}
		})
	}
}

func dayOfDatapoints(b *testing.B, n int) {
	c := newClock(t0)
	s := openTest(b, b.TempDir(), c, func(o *Options) { o.MaxSeries = n + 10; o.MaxDiskBytes = 4 << 30 })
	hs := make([]*Series, n)
	for i := range hs {
		hs[i] = mustSeries(b, s, "AWS/SageMaker", "ModelLatency",
			[]Dimension{{"EndpointName", fmt.Sprint("ep", i/10)}, {"VariantName", fmt.Sprint("v", i%10)}}, "Microseconds", Standard)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for m := range 1440 {
		c.Set(t0.Add(time.Duration(m)*time.Minute + time.Second))
		s.Flush()
		for _, h := range hs {
			for range 3 {
				h.Observe(math.Exp(7 + rng.NormFloat64()))
			}
		}
	}
	c.Set(t0.Add(24*time.Hour + time.Minute))
	s.Flush()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := s.Stats()
	b.ReportMetric(float64(st.DiskBytes)/(1<<20), "disk-MiB")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(st.DiskBytes)/float64(st.RecordsWritten), "bytes/datapoint")
	in := map[string]any{
		"Namespace": "AWS/SageMaker", "MetricName": "ModelLatency",
		"Dimensions": []map[string]string{{"Name": "EndpointName", "Value": "ep0"}, {"Name": "VariantName", "Value": "v0"}},
		"StartTime":  t0.Unix(), "EndTime": t0.Add(24 * time.Hour).Unix(), "Period": 60, "Statistics": []string{"Sum", "Average"},
	}
	start := time.Now()
	if got := len(datapoints(b, okJSON(b, s, "GetMetricStatistics", in))); got != 1440 {
		b.Fatalf("%d datapoints", got)
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000, "day-query-ms")
	delete(in, "Statistics")
	in["ExtendedStatistics"] = []string{"p50", "p99"}
	start = time.Now()
	okJSON(b, s, "GetMetricStatistics", in)
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000, "day-p99-query-ms")
}

// BenchmarkEvaluateAlarms is one evaluation of 5,000 alarms (the limit),
// every 10 s in mce: on metrics without datapoints, and on 1,000 busy
// series (an endpoint's errors each, ten minutes of datapoints), five
// alarms a series. What it costs is one ns/op per evaluation round.
func BenchmarkEvaluateAlarms(b *testing.B) {
	for _, busy := range []bool{false, true} {
		b.Run(fmt.Sprintf("busy=%v", busy), func(b *testing.B) {
			c := newClock(t0)
			s := openTest(b, b.TempDir(), c, func(o *Options) { o.AlarmInterval = time.Hour; o.MaxSeries = 2000 })
			if busy {
				hs := make([]*Series, 1000)
				for i := range hs {
					hs[i] = mustSeries(b, s, "AWS/SageMaker", "Invocation5XXErrors",
						[]Dimension{{"EndpointName", fmt.Sprint("ep", i)}, {"VariantName", "v1"}}, "Count", Standard)
				}
				for m := range 10 {
					c.Set(t0.Add(time.Duration(m)*time.Minute + time.Second))
					s.Flush()
					for i, h := range hs {
						h.Observe(float64(i % 3))
					}
				}
			}
			for i := range defaultMaxAlarms {
				in := alarmIn(fmt.Sprintf("a%05d", i), func(m map[string]any) {
					m["Dimensions"] = []map[string]string{{"Name": "EndpointName", "Value": fmt.Sprint("ep", i%1000)}, {"Name": "VariantName", "Value": "v1"}}
					m["EvaluationPeriods"], m["DatapointsToAlarm"] = 3, 2
				})
				if _, e := s.putMetricAlarm(mustPut(in)); e != nil {
					b.Fatal(e)
				}
			}
			s.EvaluateAlarms() // the first round writes the state changes
			alarming := 0
			for _, a := range s.Alarms() {
				if a.StateValue == StateAlarm {
					alarming++
				}
			}
			if busy != (alarming > 0) {
				b.Fatalf("busy=%v: %d alarms in ALARM after the first round", busy, alarming)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				s.EvaluateAlarms()
			}
		})
	}
}
