package metrics

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/pipeline"
)

// Metrics follow Prometheus' conventions: names in the mce_ namespace,
// counters ending in _total, durations in seconds as histograms, shares as
// ratios. Each stands for one of SageMaker's CloudWatch metrics
// (https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html);
// docs/metrics.md lists them with their CloudWatch counterparts and
// the PromQL that computes CloudWatch's statistics from them.
//
// Labels are the CloudWatch dimensions: endpoint (EndpointName), variant
// (VariantName), container (ContainerName). No metric of the invocation path
// has a model label: TargetModel is chosen by the caller, so a label would let
// any caller create series without bound (SageMaker has no per-model metrics
// either). Only mce_model_loaded names models, those loaded now, evaluated at
// scrape time, so its series are bounded by what the containers hold.
const (
	namespace    = "mce"
	lblEndpoint  = "endpoint"
	lblVariant   = "variant"
	lblContainer = "container"
	lblModel     = "model"
	lblStatus    = "status"
)

// latencyBuckets span 100 µs to 60 s (SageMaker's limit on a call) in
// 1-2.5-5 steps: mce's own overhead is well under a millisecond, models take
// milliseconds to seconds.
var latencyBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
}

// Metrics holds the registry every mce series is in and the per-call
// series. Create it with New; it is safe for concurrent use.
type Metrics struct {
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

	mme    *mmeMetrics
	stream *streamMetrics
	shadow *shadowMetrics

	mu         sync.RWMutex
	variants   map[[2]string]*variantMetrics
	containers map[[3]string]*containerMetrics

	// sink is told every call and multi-model event too (SetSink).
	sink Sink
}

// Sink is a second destination of the per-call observations: SageMaker's
// CloudWatch metrics (host/sagemakermetrics) beside the Prometheus series.
type Sink interface {
	Invocation(endpoint, variant string, total, model time.Duration, err error)
	ComponentInvocation(component string, total, model time.Duration, err error)
	NoCapacityInvocation(component string)
	MultiModelObserver(endpoint, variant, container string) mme.Observer
	Forget(endpoint string)
}

// SetSink makes s a second destination of every observation. Call it
// before the first one.
func (m *Metrics) SetSink(s Sink) { m.sink = s }

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

func (m *Metrics) variant(endpoint, variant string) *variantMetrics {
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

func (m *Metrics) container(endpoint, variant, container string) *containerMetrics {
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

var (
	labelsEV  = []string{lblEndpoint, lblVariant}
	labelsEVC = []string{lblEndpoint, lblVariant, lblContainer}
)

func newCounterVec(name, help string, labels []string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

func newHistogramVec(name, help string, buckets []float64, labels []string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
}

// newDesc describes a metric read at scrape time (the state and usage
// collectors).
func newDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
}

// New registers the per-call, multi-model and streaming series, and Go's
// runtime and process collectors, in a registry of their own. The
// collectors that read the host (state, usage, components, build info) are
// registered by the host, with what they read.
func New() *Metrics {
	ev, evc := labelsEV, labelsEVC
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		invocations: newCounterVec("invocations_total",
			"InvokeEndpoint requests sent to a variant (CloudWatch Invocations).", ev),
		invocation4xx: newCounterVec("invocation_4xx_errors_total",
			"InvokeEndpoint requests where the model returned a 4xx status (CloudWatch Invocation4XXErrors).", ev),
		invocation5xx: newCounterVec("invocation_5xx_errors_total",
			"InvokeEndpoint requests where the model returned a 5xx status (CloudWatch Invocation5XXErrors).", ev),
		invocationModel: newCounterVec("invocation_model_errors_total",
			"InvokeEndpoint requests that ended in a ModelError: non-2xx, timeout, connection failure, oversize payload (CloudWatch InvocationModelErrors).", ev),
		modelLatency: newHistogramVec("model_latency_seconds",
			"Time inside the model containers of a successful call; for a chain, all containers together (CloudWatch ModelLatency, in microseconds there).", latencyBuckets, ev),
		overheadLatency: newHistogramVec("overhead_latency_seconds",
			"Time mce added to a successful call: total minus model latency (CloudWatch OverheadLatency, in microseconds there).", latencyBuckets, ev),
		containerLatency: newHistogramVec("container_latency_seconds",
			"Time one container took to answer (CloudWatch ContainerLatency, in microseconds there).", latencyBuckets, evc),
		containerInvocations: newCounterVec("container_invocations_total",
			"Requests sent to one container (CloudWatch Invocations with the ContainerName dimension).", evc),
		container4xx: newCounterVec("container_invocation_4xx_errors_total",
			"4xx answers of one container (CloudWatch Invocation4XXErrors with the ContainerName dimension).", evc),
		container5xx: newCounterVec("container_invocation_5xx_errors_total",
			"5xx answers of one container (CloudWatch Invocation5XXErrors with the ContainerName dimension).", evc),
	}
	m.reg.MustRegister(m.invocations, m.invocation4xx, m.invocation5xx, m.invocationModel,
		m.modelLatency, m.overheadLatency, m.containerLatency,
		m.containerInvocations, m.container4xx, m.container5xx,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.mme = newMMEMetrics(m.reg)
	m.stream = newStreamMetrics(m.reg)
	m.shadow = newShadowMetrics(m.reg)
	return m
}

// Registry holds every series of the host: the collectors that read the
// host's state register here, and the metrics endpoint serves it.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Forget drops a deleted endpoint's series: they would stay in every scrape,
// and creating and deleting endpoints under new names would add series
// without bound. The state metrics go by themselves (read at scrape time).
func (m *Metrics) Forget(endpoint string) {
	m.mu.Lock()
	for k := range m.variants {
		if k[0] == endpoint {
			delete(m.variants, k)
		}
	}
	for k := range m.containers {
		if k[0] == endpoint {
			delete(m.containers, k)
		}
	}
	m.mu.Unlock()
	if m.sink != nil {
		m.sink.Forget(endpoint)
	}
	match := prometheus.Labels{lblEndpoint: endpoint}
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{
		m.invocations, m.invocation4xx, m.invocation5xx, m.invocationModel,
		m.modelLatency, m.overheadLatency, m.containerLatency,
		m.containerInvocations, m.container4xx, m.container5xx,
		m.mme.wait, m.mme.download, m.mme.load, m.mme.unload, m.mme.hits, m.mme.requests, m.mme.evictions,
		m.stream.ttfb, m.shadow.dropped,
	} {
		v.DeletePartialMatch(match)
	}
}

// ObserveContainer implements pipeline.Observer: one container call.
func (m *Metrics) ObserveContainer(endpoint, variant, container string, d time.Duration, status int, err error) {
	c := m.container(endpoint, variant, container)
	c.invocations.Inc()
	switch {
	case status >= 500:
		c.c5xx.Inc()
	case status >= 400:
		c.c4xx.Inc()
	}
	if status > 0 {
		c.latency.Observe(d.Seconds())
	}
}

var _ pipeline.Observer = (*Metrics)(nil)

// ObserveComponent records one call to an inference component, besides
// the ObserveInvocation of its endpoint's variant: the Prometheus series
// count it under the variant; the sink publishes it per component.
func (m *Metrics) ObserveComponent(component string, total, model time.Duration, err error) {
	if m.sink != nil {
		m.sink.ComponentInvocation(component, total, model, err)
	}
}

// ObserveNoCapacity records one call refused because the inference
// component had no copy to take it; only the sink publishes it.
func (m *Metrics) ObserveNoCapacity(component string) {
	if m.sink != nil {
		m.sink.NoCapacityInvocation(component)
	}
}

// ObserveInvocation records one InvokeEndpoint that reached a variant.
func (m *Metrics) ObserveInvocation(endpoint, variant string, total, model time.Duration, err error) {
	if m.sink != nil {
		m.sink.Invocation(endpoint, variant, total, model, err)
	}
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
	v.model.Observe(model.Seconds())
	v.overhead.Observe(max(total-model, 0).Seconds())
}
