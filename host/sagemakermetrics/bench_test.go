package sagemakermetrics

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/mce-run/mce/host/cloudwatch"
)

// BenchmarkInvocation is what a call pays for SageMaker's CloudWatch
// metrics on the hot path (host/metrics hands it every call): one
// read-locked lookup of the variant's handles and eight observations.
func BenchmarkInvocation(b *testing.B) {
	c := newClock(t0)
	p, _ := open(b, c, Sources{}, nil)
	p.Invocation("ep", "A", time.Millisecond, time.Millisecond, nil)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p.Invocation("ep", "A", 3*time.Millisecond, 2*time.Millisecond, nil)
	}
}

// BenchmarkInvocationParallel: the same from every goroutine, spread over
// 20 variants.
func BenchmarkInvocationParallel(b *testing.B) {
	c := newClock(t0)
	p, _ := open(b, c, Sources{}, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			p.Invocation("ep", fmt.Sprint("v", i%20), 3*time.Millisecond, 2*time.Millisecond, nil)
			i++
		}
	})
}

// BenchmarkDayOf1000Variants is the store's bound for 100 endpoints × 10
// variants × 24 h: every minute, three calls to each variant through the
// publisher (nine invocation series a variant) and a concurrency sample
// every 10 s; then the heap, the disk, and a day-long query.
func BenchmarkDayOf1000Variants(b *testing.B) {
	for range b.N {
		c := newClock(t0)
		var loads []VariantLoad
		for e := range 100 {
			for v := range 10 {
				loads = append(loads, VariantLoad{Endpoint: fmt.Sprint("endpoint-", e), Variant: fmt.Sprint("variant-", v), Instances: 2, InFlight: int64(v)})
			}
		}
		p, svc := open(b, c, Sources{Variants: func() []VariantLoad { return loads }}, func(o *cloudwatch.Options) { o.MaxDiskBytes = 8 << 30 })
		rng := rand.New(rand.NewPCG(1, 2))
		start := time.Now()
		for m := range 1440 {
			for s := range 6 {
				c.Set(t0.Add(time.Duration(m)*time.Minute + time.Duration(s)*10*time.Second + time.Second))
				p.sampleConcurrency(c.Now())
				if s == 0 {
					svc.Flush()
					for _, l := range loads {
						for range 3 {
							model := time.Duration(math.Exp(8+rng.NormFloat64()*0.5)) * time.Microsecond
							p.Invocation(l.Endpoint, l.Variant, model+300*time.Microsecond, model, nil)
						}
					}
				}
			}
		}
		c.Set(t0.Add(24*time.Hour + time.Minute))
		svc.Flush()
		b.ReportMetric(time.Since(start).Seconds(), "fill-s")
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		st := svc.Stats()
		b.ReportMetric(float64(st.Series), "series")
		b.ReportMetric(float64(st.DiskBytes)/(1<<20), "disk-MiB")
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
		q := time.Now()
		dps, err := svc.Statistics(NamespaceInvocations, "ModelLatency", variantDims("endpoint-0", "variant-0"), "", t0, t0.Add(24*time.Hour), 60, "Sum", "p99")
		if err != nil || len(dps) != 1440 {
			b.Fatalf("a day of ModelLatency: %d datapoints, %v", len(dps), err)
		}
		b.ReportMetric(float64(time.Since(q).Microseconds())/1000, "day-query-ms")
	}
}
