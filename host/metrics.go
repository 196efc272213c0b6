package host

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mce-run/mce/pipeline"
)

// Metric and label names are SageMaker's CloudWatch metric names and
// dimensions (contracts doc §6), so dashboards translate one to one: a
// histogram's _sum is CloudWatch's Sum and its _count is SampleCount.
// Latencies are in microseconds, as SageMaker reports them.
const (
	dimEndpoint  = "EndpointName"
	dimVariant   = "VariantName"
	dimContainer = "ContainerName"
)

// latencyBuckets span 50 µs to about 100 s.
var latencyBuckets = prometheus.ExponentialBuckets(50, 2.5, 17)

type metrics struct {
	reg *prometheus.Registry

	invocations      *prometheus.CounterVec
	invocation4xx    *prometheus.CounterVec
	invocation5xx    *prometheus.CounterVec
	invocationModel  *prometheus.CounterVec
	modelLatency     *prometheus.HistogramVec
	overheadLatency  *prometheus.HistogramVec
	containerLatency *prometheus.HistogramVec
	// Per-container copies of the invocation counts, as multi-container
	// endpoints report them with the ContainerName dimension.
	containerInvocations *prometheus.CounterVec
	container4xx         *prometheus.CounterVec
	container5xx         *prometheus.CounterVec

	mme *mmeMetrics
}

func newMetrics() *metrics {
	ev := []string{dimEndpoint, dimVariant}
	evc := []string{dimEndpoint, dimVariant, dimContainer}
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	hist := func(name, help string, labels []string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets}, labels)
	}
	m := &metrics{
		reg:                  prometheus.NewRegistry(),
		invocations:          counter("Invocations", "InvokeEndpoint requests sent to the model.", ev),
		invocation4xx:        counter("Invocation4XXErrors", "InvokeEndpoint requests where the model returned a 4xx status.", ev),
		invocation5xx:        counter("Invocation5XXErrors", "InvokeEndpoint requests where the model returned a 5xx status.", ev),
		invocationModel:      counter("InvocationModelErrors", "InvokeEndpoint requests that ended in a ModelError (non-2xx, timeout, connection failure, oversize payload).", ev),
		modelLatency:         hist("ModelLatency", "Time inside the model containers, in microseconds (a pipeline: all containers together).", ev),
		overheadLatency:      hist("OverheadLatency", "Time mce added to a request (total minus ModelLatency), in microseconds.", ev),
		containerLatency:     hist("ContainerLatency", "Time one container took to answer, in microseconds.", evc),
		containerInvocations: counter("ContainerInvocations", "Requests sent to one container (SageMaker: Invocations with the ContainerName dimension).", evc),
		container4xx:         counter("ContainerInvocation4XXErrors", "4xx answers of one container (SageMaker: Invocation4XXErrors with ContainerName).", evc),
		container5xx:         counter("ContainerInvocation5XXErrors", "5xx answers of one container (SageMaker: Invocation5XXErrors with ContainerName).", evc),
	}
	m.reg.MustRegister(m.invocations, m.invocation4xx, m.invocation5xx, m.invocationModel,
		m.modelLatency, m.overheadLatency, m.containerLatency,
		m.containerInvocations, m.container4xx, m.container5xx,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.mme = newMMEMetrics(m.reg)
	return m
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// ObserveContainer implements pipeline.Observer: one container call.
func (m *metrics) ObserveContainer(endpoint, variant, container string, d time.Duration, status int, err error) {
	m.containerInvocations.WithLabelValues(endpoint, variant, container).Inc()
	switch {
	case status >= 500:
		m.container5xx.WithLabelValues(endpoint, variant, container).Inc()
	case status >= 400:
		m.container4xx.WithLabelValues(endpoint, variant, container).Inc()
	}
	if status > 0 {
		m.containerLatency.WithLabelValues(endpoint, variant, container).Observe(micros(d))
	}
}

var _ pipeline.Observer = (*metrics)(nil)

// observeInvocation records one InvokeEndpoint that reached a variant.
func (m *metrics) observeInvocation(endpoint, variant string, total, model time.Duration, err error) {
	m.invocations.WithLabelValues(endpoint, variant).Inc()
	var mErr *pipeline.ModelError
	if errors.As(err, &mErr) {
		m.invocationModel.WithLabelValues(endpoint, variant).Inc()
		switch s := mErr.OriginalStatusCode; {
		case s >= 500:
			m.invocation5xx.WithLabelValues(endpoint, variant).Inc()
		case s >= 400:
			m.invocation4xx.WithLabelValues(endpoint, variant).Inc()
		}
		return
	}
	if err != nil {
		return
	}
	m.modelLatency.WithLabelValues(endpoint, variant).Observe(micros(model))
	m.overheadLatency.WithLabelValues(endpoint, variant).Observe(micros(max(total-model, 0)))
}
