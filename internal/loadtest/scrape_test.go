package loadtest

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeMetrics serves mce-shaped metrics whose counters grow by one step a
// scrape: each step adds 10 calls of 4 ms model latency and 1 ms overhead
// and 1 cache hit in 2 requests, and one more model loaded. Another
// endpoint's series must be ignored.
type fakeMetrics struct {
	mu   sync.Mutex
	step int
}

func (f *fakeMetrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.step++
	n := float64(f.step)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, `# TYPE mce_build_info gauge
mce_build_info{version="test"} 1
# TYPE mce_invocations_total counter
mce_invocations_total{endpoint="ep",variant="a"} %[1]g
mce_invocations_total{endpoint="other",variant="a"} 999
# TYPE mce_model_latency_seconds histogram
mce_model_latency_seconds_bucket{endpoint="ep",variant="a",le="+Inf"} %[1]g
mce_model_latency_seconds_sum{endpoint="ep",variant="a"} %[2]g
mce_model_latency_seconds_count{endpoint="ep",variant="a"} %[1]g
mce_model_latency_seconds_bucket{endpoint="other",variant="a",le="+Inf"} 5
mce_model_latency_seconds_sum{endpoint="other",variant="a"} 500
mce_model_latency_seconds_count{endpoint="other",variant="a"} 5
# TYPE mce_overhead_latency_seconds histogram
mce_overhead_latency_seconds_bucket{endpoint="ep",variant="a",le="+Inf"} %[1]g
mce_overhead_latency_seconds_sum{endpoint="ep",variant="a"} %[3]g
mce_overhead_latency_seconds_count{endpoint="ep",variant="a"} %[1]g
# TYPE mce_model_cache_hits_total counter
mce_model_cache_hits_total{endpoint="ep",variant="a"} %[4]g
# TYPE mce_model_cache_requests_total counter
mce_model_cache_requests_total{endpoint="ep",variant="a"} %[5]g
# TYPE mce_loaded_models gauge
mce_loaded_models{endpoint="ep",variant="a",container="c1"} %[6]g
mce_loaded_models{endpoint="ep",variant="a",container="c2"} 1
mce_loaded_models{endpoint="other",variant="a",container="c"} 50
# TYPE mce_container_cpu_utilization_ratio gauge
mce_container_cpu_utilization_ratio{endpoint="ep",variant="a",container="c1"} 0.5
mce_container_cpu_utilization_ratio{endpoint="ep",variant="a",container="c2"} 0.25
# TYPE mce_container_memory_utilization_ratio gauge
mce_container_memory_utilization_ratio{endpoint="ep",variant="a",container="c1"} 0.2
mce_container_memory_utilization_ratio{endpoint="ep",variant="a",container="c2"} 0.4
# TYPE mce_aws_clock_offset_seconds gauge
mce_aws_clock_offset_seconds %[7]g
# TYPE mce_variant_desired_instances gauge
mce_variant_desired_instances{endpoint="ep",variant="a"} 3
mce_variant_desired_instances{endpoint="ep",variant="b"} 1
mce_variant_desired_instances{endpoint="other",variant="a"} 7
# TYPE mce_container_ready gauge
mce_container_ready{endpoint="ep",variant="a",container="c1"} 3
mce_container_ready{endpoint="ep",variant="a",container="c2"} 2
mce_container_ready{endpoint="ep",variant="b",container="c1"} 1
mce_container_ready{endpoint="other",variant="a",container="c1"} 7
# TYPE mce_inference_component_desired_copies gauge
mce_inference_component_desired_copies{endpoint="other",variant="a",inference_component="ic"} 4
# TYPE mce_inference_component_current_copies gauge
mce_inference_component_current_copies{endpoint="other",variant="a",inference_component="ic"} 2
`, 10*n, 10*n*0.004, 10*n*0.001, n, 2*n, n, 60*n)
}

func TestScraper(t *testing.T) {
	srv := httptest.NewServer(&fakeMetrics{})
	defer srv.Close()
	if err := ProbeMetrics(context.Background(), srv.URL); err != nil {
		t.Fatal(err)
	}
	s := NewScraper(srv.URL, "ep", MinScrapeInterval)
	start := time.Now()
	s.Start(context.Background(), start)
	time.Sleep(3 * MinScrapeInterval)
	m := s.Stop()
	if m.Scrapes < 3 || m.Failures != 0 || len(m.Samples) != m.Scrapes {
		t.Fatalf("scrapes %d failures %d samples %d (%s)", m.Scrapes, m.Failures, len(m.Samples), m.LastError)
	}
	if m.Samples[0].ModelLatencyMS != nil {
		t.Error("the first sample has no window")
	}
	for i, smp := range m.Samples[1:] {
		if smp.ModelLatencyMS == nil || math.Abs(*smp.ModelLatencyMS-4) > 1e-6 || math.Abs(*smp.OverheadLatencyMS-1) > 1e-6 {
			t.Errorf("sample %d: latency %v overhead %v", i+1, smp.ModelLatencyMS, smp.OverheadLatencyMS)
		}
		// a scrape cancelled by Stop still counted a step on the server:
		// a window may span several steps
		steps := smp.Invocations / 10
		if smp.CacheHitRatio == nil || *smp.CacheHitRatio != 0.5 || steps < 1 || steps != math.Trunc(steps) ||
			smp.LoadedModels-m.Samples[i].LoadedModels != steps {
			t.Errorf("sample %d: hit ratio %v invocations %v loaded %v after %v", i+1, smp.CacheHitRatio, smp.Invocations, smp.LoadedModels, m.Samples[i].LoadedModels)
		}
		if smp.CPU != 0.75 || smp.Memory != 0.4 {
			t.Errorf("sample %d: cpu %v memory %v", i+1, smp.CPU, smp.Memory)
		}
		// Variant a wants 3 and has 2 whole instances (c2 is ready on 2
		// only), b has its one; the other endpoint's copies are not ep's.
		if smp.DesiredInstances != 4 || smp.Instances != 3 || smp.DesiredCopies != 0 || smp.Copies != 0 {
			t.Errorf("sample %d: instances %v of %v wanted, copies %v of %v", i+1, smp.Instances, smp.DesiredInstances, smp.Copies, smp.DesiredCopies)
		}
	}
	// The clock's offset grows by 60 s a step: the first scrape saw step 2.
	if m.ClockOffsetFirst == nil || *m.ClockOffsetFirst != 120 || m.ClockOffsetLast == nil || *m.ClockOffsetLast <= 120 {
		t.Errorf("clock offsets %v .. %v", m.ClockOffsetFirst, m.ClockOffsetLast)
	}
	last := m.Samples[len(m.Samples)-1]
	// step 1 was the probe's, so the first sample saw step 2; c2 holds one model
	if m.Samples[0].LoadedModels != 3 {
		t.Errorf("first sample: %v models loaded", m.Samples[0].LoadedModels)
	}
	sm := m.stage(start, start, time.Now())
	if sm == nil || math.Abs(sm.ModelLatencyMS-4) > 1e-6 || sm.LoadedModelsMax != last.LoadedModels || sm.CacheHitRatio != 0.5 {
		t.Errorf("stage %+v", sm)
	}
	var b strings.Builder
	if err := m.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(b.String(), "\n"); lines != len(m.Samples)+1 {
		t.Errorf("%d CSV lines for %d samples", lines, len(m.Samples))
	}
}

func TestScraperHostileServers(t *testing.T) {
	cases := map[string]http.HandlerFunc{
		"not mce": func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "up 1") },
		"garbage": func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "{{{not metrics") },
		"500":     func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", 500) },
		"huge": func(w http.ResponseWriter, r *http.Request) {
			line := strings.Repeat("#", 1<<20) + "\n"
			for range 20 {
				if _, err := fmt.Fprint(w, line); err != nil {
					return
				}
			}
		},
		"slow": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			begin := time.Now()
			if err := ProbeMetrics(context.Background(), srv.URL); err == nil {
				t.Error("accepted as mce's metrics")
			}
			if time.Since(begin) > 5*time.Second {
				t.Errorf("probe took %v", time.Since(begin))
			}
			if name == "not mce" || name == "slow" {
				return
			}
			s := NewScraper(srv.URL, "ep", MinScrapeInterval)
			s.Start(context.Background(), time.Now())
			m := s.Stop()
			if m.Failures == 0 || m.LastError == "" || len(m.Samples) != 0 {
				t.Errorf("failures %d (%q), samples %d", m.Failures, m.LastError, len(m.Samples))
			}
		})
	}
}
