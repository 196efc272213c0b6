package host

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mce-run/mce/containers/mme"
)

// Multi-model metrics, SageMaker's names (contracts doc §6): latencies in
// microseconds with EndpointName and VariantName; ModelCacheHit as a
// histogram of 0/1 so that _sum is the hits and _count the calls (CloudWatch's
// Sum and SampleCount); LoadedModelCount per container.
type mmeMetrics struct {
	wait, download, load, unload *prometheus.HistogramVec
	hit                          *prometheus.HistogramVec
	loaded                       *prometheus.GaugeVec
}

func newMMEMetrics(reg *prometheus.Registry) *mmeMetrics {
	ev := []string{dimEndpoint, dimVariant}
	hist := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets}, ev)
	}
	m := &mmeMetrics{
		wait:     hist("ModelLoadingWaitTime", "Time a request waited for its model to be downloaded and loaded, in microseconds."),
		download: hist("ModelDownloadingTime", "Time to download and extract a model artifact, in microseconds."),
		load:     hist("ModelLoadingTime", "Time the container's load call took, in microseconds."),
		unload:   hist("ModelUnloadingTime", "Time the container's unload call took, in microseconds."),
		hit: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ModelCacheHit",
			Help: "1 for a request whose model was already loaded, else 0 (_sum: hits, _count: requests).", Buckets: []float64{0.5}}, ev),
		loaded: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "LoadedModelCount",
			Help: "Models loaded in the multi-model containers."}, []string{dimEndpoint, dimVariant, dimContainer}),
	}
	reg.MustRegister(m.wait, m.download, m.load, m.unload, m.hit, m.loaded)
	return m
}

// MultiModelObserver returns the metrics sink of one multi-model container
// (one per Cache and one per Manager; each tracks its own loaded count).
func (s *Server) MultiModelObserver(endpoint, variant, container string) mme.Observer {
	m := s.metrics.mme
	return &mmeObserver{
		wait: m.wait.WithLabelValues(endpoint, variant), download: m.download.WithLabelValues(endpoint, variant),
		load: m.load.WithLabelValues(endpoint, variant), unload: m.unload.WithLabelValues(endpoint, variant),
		hit: m.hit.WithLabelValues(endpoint, variant), loaded: m.loaded.WithLabelValues(endpoint, variant, container),
	}
}

// mmeObserver holds its metric children, looked up once: ModelCacheHit is
// observed on every call.
type mmeObserver struct {
	wait, download, load, unload, hit prometheus.Observer
	loaded                            prometheus.Gauge
	mu                                sync.Mutex
	count                             int
}

func (o *mmeObserver) ModelLoadingWaitTime(d time.Duration) { o.wait.Observe(micros(d)) }
func (o *mmeObserver) ModelDownloadingTime(d time.Duration) { o.download.Observe(micros(d)) }
func (o *mmeObserver) ModelLoadingTime(d time.Duration)     { o.load.Observe(micros(d)) }
func (o *mmeObserver) ModelUnloadingTime(d time.Duration)   { o.unload.Observe(micros(d)) }
func (o *mmeObserver) ModelCacheHit(hit bool) {
	v := 0.0
	if hit {
		v = 1
	}
	o.hit.Observe(v)
}

// LoadedModelCount gets this manager's absolute count; the gauge sums the
// copies of a container, so it moves by the difference.
func (o *mmeObserver) LoadedModelCount(n int) {
	o.mu.Lock()
	delta := n - o.count
	o.count = n
	o.mu.Unlock()
	o.loaded.Add(float64(delta))
}

var _ mme.Observer = (*mmeObserver)(nil)
