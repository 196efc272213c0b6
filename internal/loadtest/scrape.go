package loadtest

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Bounds on scraping: a scrape reads at most maxScrapeBytes and waits at most
// its interval (up to 2 s); a run keeps at most maxMetricSamples samples.
const (
	maxScrapeBytes   = 16 << 20
	maxMetricSamples = 100000
	// MinScrapeInterval is the shortest interval a Scraper accepts.
	MinScrapeInterval = 250 * time.Millisecond
)

// MetricSample is one scrape of mce's metrics for the endpoint, summed over
// its variants and containers. Window figures are over the time since the
// previous scrape; absent (nil) when no call finished in the window.
type MetricSample struct {
	T                 float64  `json:"t_s"`
	Invocations       float64  `json:"invocations"`
	ModelLatencyMS    *float64 `json:"model_latency_ms,omitempty"`
	OverheadLatencyMS *float64 `json:"overhead_latency_ms,omitempty"`
	LoadedModels      float64  `json:"loaded_models"`
	CacheHitRatio     *float64 `json:"cache_hit_ratio,omitempty"`
	ModelLoadingWait  *float64 `json:"model_loading_wait_ms,omitempty"`
	InFlight          float64  `json:"inflight"`
	CPU               float64  `json:"cpu_cores"`
	Memory            float64  `json:"memory_ratio"`
	GPU               float64  `json:"gpu_utilization"`
	GPUMemory         float64  `json:"gpu_memory_utilization"`
	// Capacity, for a run that drives autoscaling: the instances the
	// endpoint's variants want and have ready, and its inference
	// components' copies wanted and running.
	DesiredInstances float64 `json:"desired_instances"`
	Instances        float64 `json:"instances"`
	DesiredCopies    float64 `json:"desired_copies"`
	Copies           float64 `json:"copies"`

	d rawDelta
}

// rawDelta is the change of the counters in a sample's window.
type rawDelta struct {
	modelSum, modelCount, overSum, overCount, hits, cacheReqs, waitSum, waitCount float64
}

// Metrics is what a Scraper collected.
type Metrics struct {
	URL        string         `json:"url"`
	IntervalMS float64        `json:"interval_ms"`
	Scrapes    int            `json:"scrapes"`
	Failures   int            `json:"failures"`
	LastError  string         `json:"last_error,omitempty"`
	Dropped    int            `json:"dropped_samples,omitempty"`
	Samples    []MetricSample `json:"samples"`
	// ClockOffsetFirst and ClockOffsetLast are mce_aws_clock_offset_seconds
	// at the first and the last scrape: how far mce's AWS time ran ahead of
	// the wall clock (mce serve --time-compression); absent without it.
	ClockOffsetFirst *float64 `json:"aws_clock_offset_first_s,omitempty"`
	ClockOffsetLast  *float64 `json:"aws_clock_offset_last_s,omitempty"`
}

// StageMetrics are mce's figures over one stage.
type StageMetrics struct {
	Invocations       float64 `json:"invocations"`
	ModelLatencyMS    float64 `json:"model_latency_ms"`
	OverheadLatencyMS float64 `json:"overhead_latency_ms"`
	LoadedModelsMax   float64 `json:"loaded_models_max"`
	CacheHitRatio     float64 `json:"cache_hit_ratio"`
	ModelLoadingWait  float64 `json:"model_loading_wait_ms"`
	CPUMax            float64 `json:"cpu_cores_max"`
	MemoryMax         float64 `json:"memory_ratio_max"`
	GPUMax            float64 `json:"gpu_utilization_max"`
}

// Scraper reads mce's Prometheus metrics for one endpoint at an interval
// during a run. Start and Stop are called once each, from one goroutine.
type Scraper struct {
	url, endpoint string
	interval      time.Duration
	client        *http.Client

	mu     sync.Mutex
	m      Metrics
	prev   rawTotals
	have   bool
	start  time.Time
	cancel context.CancelFunc
	done   chan struct{}
}

// NewScraper returns a scraper of url (mce's /metrics) for endpoint.
func NewScraper(url, endpoint string, interval time.Duration) *Scraper {
	if interval < MinScrapeInterval {
		interval = MinScrapeInterval
	}
	timeout := min(interval, 2*time.Second)
	return &Scraper{url: url, endpoint: endpoint, interval: interval, client: &http.Client{Timeout: timeout},
		m: Metrics{URL: url, IntervalMS: msOf(interval)}}
}

// ProbeMetrics reports whether url serves mce's metrics.
func ProbeMetrics(ctx context.Context, url string) error {
	fams, err := fetchMetrics(ctx, &http.Client{Timeout: 2 * time.Second}, url)
	if err != nil {
		return err
	}
	if _, ok := fams["mce_build_info"]; !ok {
		return fmt.Errorf("%s serves no mce_build_info: not mce's metrics", url)
	}
	return nil
}

// Start scrapes once at once, then every interval until ctx ends or Stop.
func (s *Scraper) Start(ctx context.Context, start time.Time) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.start = start
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(s.interval)
		defer t.Stop()
		for {
			s.scrape(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends scraping, takes a last sample and returns what was collected.
func (s *Scraper) Stop() *Metrics {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.client.Timeout)
	defer cancel()
	s.scrape(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.m
	return &m
}

func fetchMetrics(ctx context.Context, client *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxScrapeBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxScrapeBytes {
		return nil, fmt.Errorf("GET %s: over %d MiB of metrics", url, maxScrapeBytes>>20)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(bytes.NewReader(b))
}

// rawTotals are the cumulative values a sample's window figures come from.
type rawTotals struct {
	modelSum, modelCount, overSum, overCount, hits, cacheReqs, waitSum, waitCount, invocations float64
}

func (s *Scraper) scrape(ctx context.Context) {
	at := time.Now()
	fams, err := fetchMetrics(ctx, s.client, s.url)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return
		}
		s.m.Failures++
		s.m.LastError = err.Error()
		return
	}
	s.m.Scrapes++
	if f := fams["mce_aws_clock_offset_seconds"]; f != nil && len(f.GetMetric()) == 1 {
		v := valueOf(f.GetMetric()[0])
		if s.m.ClockOffsetFirst == nil {
			s.m.ClockOffsetFirst = &v
		}
		s.m.ClockOffsetLast = &v
	}
	sum := func(name string) float64 { return sumFamily(fams[name], s.endpoint, valueOf) }
	maxOf := func(name string) float64 { return maxFamily(fams[name], s.endpoint) }
	cur := rawTotals{
		modelSum: sumFamily(fams["mce_model_latency_seconds"], s.endpoint, histSum), modelCount: sumFamily(fams["mce_model_latency_seconds"], s.endpoint, histCount),
		overSum: sumFamily(fams["mce_overhead_latency_seconds"], s.endpoint, histSum), overCount: sumFamily(fams["mce_overhead_latency_seconds"], s.endpoint, histCount),
		waitSum: sumFamily(fams["mce_model_loading_wait_seconds"], s.endpoint, histSum), waitCount: sumFamily(fams["mce_model_loading_wait_seconds"], s.endpoint, histCount),
		hits: sum("mce_model_cache_hits_total"), cacheReqs: sum("mce_model_cache_requests_total"), invocations: sum("mce_invocations_total"),
	}
	smp := MetricSample{
		T:            at.Sub(s.start).Seconds(),
		LoadedModels: sum("mce_loaded_models"),
		InFlight:     sum("mce_inflight_requests"),
		CPU:          sum("mce_container_cpu_utilization_ratio"),
		Memory:       maxOf("mce_container_memory_utilization_ratio"),
		GPU:          sum("mce_gpu_utilization_ratio"),
		GPUMemory:    sum("mce_gpu_memory_utilization_ratio"),
		// A variant's instances are those all its containers have ready.
		DesiredInstances: sum("mce_variant_desired_instances"),
		Instances:        sumOfVariants(fams["mce_container_ready"], s.endpoint),
		DesiredCopies:    sum("mce_inference_component_desired_copies"),
		Copies:           sum("mce_inference_component_current_copies"),
	}
	if s.have {
		p := s.prev
		smp.d = rawDelta{cur.modelSum - p.modelSum, cur.modelCount - p.modelCount, cur.overSum - p.overSum, cur.overCount - p.overCount,
			cur.hits - p.hits, cur.cacheReqs - p.cacheReqs, cur.waitSum - p.waitSum, cur.waitCount - p.waitCount}
		smp.Invocations = max(0, cur.invocations-p.invocations)
		smp.ModelLatencyMS = ratioMS(smp.d.modelSum, smp.d.modelCount)
		smp.OverheadLatencyMS = ratioMS(smp.d.overSum, smp.d.overCount)
		smp.ModelLoadingWait = ratioMS(smp.d.waitSum, smp.d.waitCount)
		if smp.d.cacheReqs > 0 {
			r := smp.d.hits / smp.d.cacheReqs
			smp.CacheHitRatio = &r
		}
	}
	s.prev, s.have = cur, true
	if len(s.m.Samples) >= maxMetricSamples {
		s.m.Dropped++
		return
	}
	s.m.Samples = append(s.m.Samples, smp)
}

func ratioMS(sum, count float64) *float64 {
	if count <= 0 {
		return nil
	}
	v := sum / count * 1000
	return &v
}

func valueOf(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

func histSum(m *dto.Metric) float64   { return m.GetHistogram().GetSampleSum() }
func histCount(m *dto.Metric) float64 { return float64(m.GetHistogram().GetSampleCount()) }

func forEndpoint(m *dto.Metric, endpoint string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == "endpoint" {
			return l.GetValue() == endpoint
		}
	}
	return false
}

func sumFamily(f *dto.MetricFamily, endpoint string, v func(*dto.Metric) float64) float64 {
	var t float64
	for _, m := range f.GetMetric() {
		if forEndpoint(m, endpoint) {
			t += v(m)
		}
	}
	return t
}

// sumOfVariants sums, over the endpoint's variants, the least value of
// each variant's series (mce_container_ready: an instance serves once
// every container of the variant is ready).
func sumOfVariants(f *dto.MetricFamily, endpoint string) float64 {
	least := map[string]float64{}
	for _, m := range f.GetMetric() {
		if !forEndpoint(m, endpoint) {
			continue
		}
		variant := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "variant" {
				variant = l.GetValue()
			}
		}
		if v, ok := least[variant]; !ok || valueOf(m) < v {
			least[variant] = valueOf(m)
		}
	}
	var t float64
	for _, v := range least {
		t += v
	}
	return t
}

func maxFamily(f *dto.MetricFamily, endpoint string) float64 {
	var t float64
	for _, m := range f.GetMetric() {
		if forEndpoint(m, endpoint) {
			t = max(t, valueOf(m))
		}
	}
	return t
}

// stage sums the samples taken while a stage ran.
func (m *Metrics) stage(runStart, from, to time.Time) *StageMetrics {
	lo, hi := from.Sub(runStart).Seconds(), to.Sub(runStart).Seconds()
	var d rawDelta
	sm := &StageMetrics{}
	n := 0
	for _, s := range m.Samples {
		if s.T <= lo || s.T > hi+m.IntervalMS/2000 {
			continue
		}
		n++
		d.modelSum += s.d.modelSum
		d.modelCount += s.d.modelCount
		d.overSum += s.d.overSum
		d.overCount += s.d.overCount
		d.hits += s.d.hits
		d.cacheReqs += s.d.cacheReqs
		d.waitSum += s.d.waitSum
		d.waitCount += s.d.waitCount
		sm.Invocations += s.Invocations
		sm.LoadedModelsMax = max(sm.LoadedModelsMax, s.LoadedModels)
		sm.CPUMax = max(sm.CPUMax, s.CPU)
		sm.MemoryMax = max(sm.MemoryMax, s.Memory)
		sm.GPUMax = max(sm.GPUMax, s.GPU)
	}
	if n == 0 {
		return nil
	}
	if v := ratioMS(d.modelSum, d.modelCount); v != nil {
		sm.ModelLatencyMS = *v
	}
	if v := ratioMS(d.overSum, d.overCount); v != nil {
		sm.OverheadLatencyMS = *v
	}
	if v := ratioMS(d.waitSum, d.waitCount); v != nil {
		sm.ModelLoadingWait = *v
	}
	if d.cacheReqs > 0 {
		sm.CacheHitRatio = d.hits / d.cacheReqs
	}
	return sm
}

// MetricsCSVHeader is the header of metrics.csv.
var MetricsCSVHeader = []string{"t_s", "invocations", "model_latency_ms", "overhead_latency_ms", "loaded_models", "cache_hit_ratio",
	"model_loading_wait_ms", "inflight", "cpu_cores", "memory_ratio", "gpu_utilization", "gpu_memory_utilization",
	"desired_instances", "instances", "desired_copies", "copies"}

// WriteCSV writes one row per sample; window figures without calls are
// empty.
func (m *Metrics) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(MetricsCSVHeader)
	opt := func(v *float64) string {
		if v == nil {
			return ""
		}
		return f3(*v)
	}
	for _, s := range m.Samples {
		cw.Write([]string{f3(s.T), strconv.FormatFloat(s.Invocations, 'f', -1, 64), opt(s.ModelLatencyMS), opt(s.OverheadLatencyMS),
			f3(s.LoadedModels), opt(s.CacheHitRatio), opt(s.ModelLoadingWait), f3(s.InFlight), f3(s.CPU), f3(s.Memory), f3(s.GPU), f3(s.GPUMemory),
			f3(s.DesiredInstances), f3(s.Instances), f3(s.DesiredCopies), f3(s.Copies)})
	}
	cw.Flush()
	return cw.Error()
}
