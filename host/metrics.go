package host

import (
	"errors"
	"sync"
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

	mu         sync.RWMutex
	variants   map[[2]string]*variantMetrics
	containers map[[3]string]*containerMetrics
}

// variantMetrics and containerMetrics are the children of the vectors for
// one label set, looked up once and kept: WithLabelValues hashes its labels
// on every call, which showed in the hot path's profile.
type variantMetrics struct {
	invocations, inv4xx, inv5xx, invModel prometheus.Counter
	model, overhead                       prometheus.Observer
}

type containerMetrics struct {
	invocations, c4xx, c5xx prometheus.Counter
	latency                 prometheus.Observer
}

func (m *metrics) variant(endpoint, variant string) *variantMetrics {
	k := [2]string{endpoint, variant}
	m.mu.RLock()
	v := m.variants[k]
	m.mu.RUnlock()
	if v != nil {
		return v
	}
	v = &variantMetrics{
		invocations: m.invocations.WithLabelValues(endpoint, variant),
		inv4xx:      m.invocation4xx.WithLabelValues(endpoint, variant),
		inv5xx:      m.invocation5xx.WithLabelValues(endpoint, variant),
		invModel:    m.invocationModel.WithLabelValues(endpoint, variant),
		model:       m.modelLatency.WithLabelValues(endpoint, variant),
		overhead:    m.overheadLatency.WithLabelValues(endpoint, variant),
	}
	m.mu.Lock()
	if m.variants == nil {
		m.variants = map[[2]string]*variantMetrics{}
	}
	m.variants[k] = v
	m.mu.Unlock()
	return v
}

func (m *metrics) container(endpoint, variant, container string) *containerMetrics {
	k := [3]string{endpoint, variant, container}
	m.mu.RLock()
	c := m.containers[k]
	m.mu.RUnlock()
	if c != nil {
		return c
	}
	c = &containerMetrics{
		invocations: m.containerInvocations.WithLabelValues(endpoint, variant, container),
		c4xx:        m.container4xx.WithLabelValues(endpoint, variant, container),
		c5xx:        m.container5xx.WithLabelValues(endpoint, variant, container),
		latency:     m.containerLatency.WithLabelValues(endpoint, variant, container),
	}
	m.mu.Lock()
	if m.containers == nil {
		m.containers = map[[3]string]*containerMetrics{}
	}
	m.containers[k] = c
	m.mu.Unlock()
	return c
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
	c := m.container(endpoint, variant, container)
	c.invocations.Inc()
	switch {
	case status >= 500:
		c.c5xx.Inc()
	case status >= 400:
		c.c4xx.Inc()
	}
	if status > 0 {
		c.latency.Observe(micros(d))
	}
}

var _ pipeline.Observer = (*metrics)(nil)

// observeInvocation records one InvokeEndpoint that reached a variant.
func (m *metrics) observeInvocation(endpoint, variant string, total, model time.Duration, err error) {
	v := m.variant(endpoint, variant)
	v.invocations.Inc()
	if err != nil {
		var mErr *pipeline.ModelError
		if errors.As(err, &mErr) {
			v.invModel.Inc()
			switch s := mErr.OriginalStatusCode; {
			case s >= 500:
				v.inv5xx.Inc()
			case s >= 400:
				v.inv4xx.Inc()
			}
		}
		return
	}
	v.model.Observe(micros(model))
	v.overhead.Observe(micros(max(total-model, 0)))
}
