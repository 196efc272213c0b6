package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mce-run/mce/containers/mme"
)

// loadBuckets span 1 ms to 5 min: model downloads, extractions and loads
// take from milliseconds (a cached file, a tiny model) to minutes.
var loadBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Multi-model metrics (CloudWatch: https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html). The times are
// histograms in seconds per endpoint and variant, as CloudWatch has them;
// ModelCacheHit (1 or 0 per call, whose Sum is the hits and SampleCount the
// calls) is two counters; evictions are counted per container. What is
// loaded and cached now (LoadedModelCount and the cache's size) is read at
// scrape time by the state collector.
type mmeMetrics struct {
	wait, download, load, unload *prometheus.HistogramVec
	hits, requests               *prometheus.CounterVec
	evictions                    *prometheus.CounterVec
}

func newMMEMetrics(reg *prometheus.Registry) *mmeMetrics {
	hist := func(name, help string) *prometheus.HistogramVec {
		return newHistogramVec(name, help, loadBuckets, labelsEV)
	}
	m := &mmeMetrics{
		wait: hist("model_loading_wait_seconds",
			"Time a request whose model was not loaded waited for its download and load (CloudWatch ModelLoadingWaitTime, in microseconds there)."),
		download: hist("model_downloading_seconds",
			"Time to download and extract one model artifact (CloudWatch ModelDownloadingTime, in microseconds there)."),
		load: hist("model_loading_seconds",
			"Time one successful load call to the container took (CloudWatch ModelLoadingTime, in microseconds there)."),
		unload: hist("model_unloading_seconds",
			"Time one unload call to the container took (CloudWatch ModelUnloadingTime, in microseconds there)."),
		hits: newCounterVec("model_cache_hits_total",
			"Multi-model requests whose model was already loaded (CloudWatch ModelCacheHit: its Sum).", labelsEV),
		requests: newCounterVec("model_cache_requests_total",
			"Multi-model requests, hit or miss (CloudWatch ModelCacheHit: its SampleCount).", labelsEV),
		evictions: newCounterVec("model_evictions_total",
			"Models unloaded from a container to free memory for another model; idle unloads are not counted (no CloudWatch counterpart).", labelsEVC),
	}
	reg.MustRegister(m.wait, m.download, m.load, m.unload, m.hits, m.requests, m.evictions)
	return m
}

// MultiModelObserver returns the metrics sink of one multi-model container
// (one per Cache and one per Manager): what an engine that is a
// containers.MultiModelObservable is given.
func (m *Metrics) MultiModelObserver(endpoint, variant, container string) mme.Observer {
	mm := m.mme
	o := &mmeObserver{
		wait: mm.wait.WithLabelValues(endpoint, variant), download: mm.download.WithLabelValues(endpoint, variant),
		load: mm.load.WithLabelValues(endpoint, variant), unload: mm.unload.WithLabelValues(endpoint, variant),
		hits: mm.hits.WithLabelValues(endpoint, variant), requests: mm.requests.WithLabelValues(endpoint, variant),
		evictions: mm.evictions.WithLabelValues(endpoint, variant, container),
	}
	if m.sink != nil {
		return mme.Tee{o, m.sink.MultiModelObserver(endpoint, variant, container)}
	}
	return o
}

// mmeObserver holds its metric children, looked up once: the cache hit is
// counted on every call.
type mmeObserver struct {
	wait, download, load, unload prometheus.Observer
	hits, requests, evictions    prometheus.Counter
}

func (o *mmeObserver) ModelLoadingWaitTime(d time.Duration) { o.wait.Observe(d.Seconds()) }
func (o *mmeObserver) ModelDownloadingTime(d time.Duration) { o.download.Observe(d.Seconds()) }
func (o *mmeObserver) ModelLoadingTime(d time.Duration)     { o.load.Observe(d.Seconds()) }
func (o *mmeObserver) ModelUnloadingTime(d time.Duration)   { o.unload.Observe(d.Seconds()) }
func (o *mmeObserver) ModelEvicted()                        { o.evictions.Inc() }
func (o *mmeObserver) ModelCacheHit(hit bool) {
	o.requests.Inc()
	if hit {
		o.hits.Inc()
	}
}

// LoadedModelCount is not kept here: mce_loaded_models is read from the
// containers at scrape time (StateCollector), so that it disappears with
// its endpoint instead of staying at its last value.
func (o *mmeObserver) LoadedModelCount(int) {}

var _ mme.Observer = (*mmeObserver)(nil)
