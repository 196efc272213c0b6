package metrics

import "github.com/prometheus/client_golang/prometheus"

// shadowMetrics are the series of shadow variants beyond those they share
// with every variant (a shadow's answers count in ObserveInvocation under
// its own variant label, as SageMaker's CloudWatch metrics count them).
type shadowMetrics struct {
	// dropped counts the sampled copies a shadow variant did not get,
	// by reason (pipeline.DropReason): in_flight, memory, closed.
	dropped *prometheus.CounterVec
}

func newShadowMetrics(reg prometheus.Registerer) *shadowMetrics {
	m := &shadowMetrics{
		dropped: newCounterVec("shadow_copies_dropped_total",
			"Sampled copies of production requests that a shadow variant did not get, by reason: in_flight (it held as many copies as it may), memory (the copies held together reached their bound), closed (mce was stopping). No CloudWatch counterpart.",
			[]string{lblEndpoint, lblVariant, "reason"}),
	}
	reg.MustRegister(m.dropped)
	return m
}

// ShadowDropped counts one copy the shadow variant did not get.
func (m *Metrics) ShadowDropped(endpoint, variant, reason string) {
	m.shadow.dropped.WithLabelValues(endpoint, variant, reason).Inc()
}
