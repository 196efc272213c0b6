package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// streamMetrics are the metrics of InvokeEndpointWithResponseStream beyond
// those it shares with InvokeEndpoint (ObserveInvocation).
type streamMetrics struct {
	// ttfb is the time from a streamed invocation's arrival to its first
	// PayloadPart written to the client, in seconds (Prometheus's unit).
	ttfb *prometheus.HistogramVec
}

func newStreamMetrics(reg prometheus.Registerer) *streamMetrics {
	m := &streamMetrics{
		ttfb: newHistogramVec("time_to_first_byte_seconds",
			"Time from the arrival of an InvokeEndpointWithResponseStream call to its first PayloadPart sent to the client.",
			prometheus.ExponentialBuckets(0.001, 2, 17), // 1 ms to about 66 s
			labelsEV),
	}
	reg.MustRegister(m.ttfb)
	return m
}

// ObserveFirstByte records the time to first byte of one streamed call.
func (m *Metrics) ObserveFirstByte(endpoint, variant string, d time.Duration) {
	m.stream.ttfb.WithLabelValues(endpoint, variant).Observe(d.Seconds())
}
