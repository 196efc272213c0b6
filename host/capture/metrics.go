package capture

import (
	"github.com/prometheus/client_golang/prometheus"
)

// dropReason says why a record was not written.
type dropReason int

const (
	reasonBufferFull dropReason = iota // the buffer held Options.MaxBufferBytes (or MaxQueuedRecords)
	reasonTooLarge                     // a payload over Options.MaxPayloadBytes
	reasonClosed                       // sampled while the writer was closing
	reasonShutdown                     // buffered, but Close's deadline came before it was written
	numReasons
)

var reasonNames = [numReasons]string{"buffer_full", "too_large", "closed", "shutdown"}

// dropCounters are one endpoint and variant's dropped-record counters, one
// per reason.
type dropCounters [numReasons]prometheus.Counter

// metrics are the writer's Prometheus series, named as mce's others are
// (docs/metrics.md): namespace mce, counters ending in _total, labels
// endpoint and variant.
type metrics struct {
	captured     *prometheus.CounterVec
	written      *prometheus.CounterVec
	dropped      *prometheus.CounterVec
	objects      *prometheus.CounterVec
	uploadErrors *prometheus.CounterVec
	buffered     prometheus.GaugeFunc
	limit        prometheus.Gauge
}

func newMetrics(used func() float64, limit int64) *metrics {
	lbl := []string{"endpoint", "variant"}
	m := &metrics{
		captured: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mce", Subsystem: "data_capture", Name: "records_total",
			Help: "Sampled calls accepted into the data capture buffer."}, lbl),
		written: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mce", Subsystem: "data_capture", Name: "records_written_total",
			Help: "Captured records written to S3."}, lbl),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mce", Subsystem: "data_capture", Name: "records_dropped_total",
			Help: "Sampled calls not written: reason buffer_full (the buffer was full), too_large (a payload over the limit), closed (sampled while mce stopped), shutdown (still buffered when the shutdown's deadline came)."},
			append(lbl, "reason")),
		objects: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mce", Subsystem: "data_capture", Name: "objects_written_total",
			Help: "Capture files (.jsonl objects) written to S3."}, lbl),
		uploadErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mce", Subsystem: "data_capture", Name: "upload_errors_total",
			Help: "Failed attempts to write a capture file; it is tried again, with backoff."}, lbl),
		buffered: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "mce", Subsystem: "data_capture", Name: "buffered_bytes",
			Help: "Bytes of captured records held until they are written (payloads and a fixed overhead per record)."}, used),
		limit: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "mce", Subsystem: "data_capture", Name: "buffer_limit_bytes",
			Help: "The most bytes of captured records held; beyond it sampled calls are dropped (reason buffer_full)."}),
	}
	m.limit.Set(float64(limit))
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.captured, m.written, m.dropped, m.objects, m.uploadErrors, m.buffered, m.limit}
}

func (m *metrics) dropCounters(endpoint, variant string) *dropCounters {
	var d dropCounters
	for r := range numReasons {
		d[r] = m.dropped.WithLabelValues(endpoint, variant, reasonNames[r])
	}
	return &d
}

// Describe and Collect make the Writer a prometheus.Collector: host
// registers it beside its own metrics.
func (w *Writer) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range w.metrics.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (w *Writer) Collect(ch chan<- prometheus.Metric) {
	for _, c := range w.metrics.collectors() {
		c.Collect(ch)
	}
}

var _ prometheus.Collector = (*Writer)(nil)

// ForgetEndpoint removes a deleted endpoint's series. Records of it still
// buffered are written, and count again.
func (w *Writer) ForgetEndpoint(endpoint string) {
	match := prometheus.Labels{"endpoint": endpoint}
	for _, v := range []*prometheus.CounterVec{w.metrics.captured, w.metrics.written, w.metrics.dropped, w.metrics.objects, w.metrics.uploadErrors} {
		v.DeletePartialMatch(match)
	}
}
