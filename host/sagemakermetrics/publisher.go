// Package sagemakermetrics publishes the metrics SageMaker publishes to
// CloudWatch — their names, namespaces, dimensions and units — from what
// mce measures: each invocation a variant or an inference component
// served, the multi-model loads and cache hits, the containers' resource
// use, the asynchronous queues' backlog and the calls in flight. It writes
// them to a cloudwatch.Service, where GetMetricStatistics, GetMetricData
// and ListMetrics read them.
//
// It owns: the catalogue (catalogue.go: every metric, its namespace,
// dimensions, unit and resolution), the handles on the series of each
// endpoint's variants and components, and the samplers of the gauges.
//
// It must not touch: the wire of CloudWatch (host/cloudwatch), the
// Prometheus series (host/metrics, which hands each call on to Invocation),
// or any endpoint's state: what it samples comes through Sources.
//
// Concurrency: a Publisher is safe for concurrent use. An invocation costs
// one read-locked map lookup and a handful of handle observations; nothing
// is allocated once a variant's handles exist.
package sagemakermetrics

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/host/cloudwatch"
	"github.com/mce-run/mce/pipeline"
)

// VariantLoad is a variant as the samplers see it: its instances and the
// calls in flight on them.
type VariantLoad struct {
	Endpoint, Variant string
	Instances         int
	InFlight          int64
}

// ComponentLoad is an inference component as the samplers see it.
type ComponentLoad struct {
	Endpoint, Variant, Component string
	// Copies are the copies that serve; InFlight the calls on them.
	Copies   int
	InFlight int64
	// CPUCores, MemoryMiB and GPUs are what one copy reserved
	// (ComputeResourceRequirements); zero when not asked for.
	CPUCores  float64
	MemoryMiB int
	GPUs      int
}

// Backlog is an asynchronous endpoint's queue.
type Backlog struct {
	Endpoint  string
	Size      int // requests queued or running
	Instances int
	Oldest    time.Duration // age of the oldest request queued or running
}

// Sources are what the samplers read. Every field may be nil.
type Sources struct {
	// Variants lists the production and shadow variants that serve now.
	Variants func() []VariantLoad
	// Components lists the inference components.
	Components func() []ComponentLoad
	// Backlogs lists the asynchronous endpoints' queues.
	Backlogs func() []Backlog
	// Usage is the engine's resource use, when it reports it: its disk
	// and GPU figures are read here; the containers' own figures come in
	// through ObserveUsage, from the sample host's metrics take anyway.
	Usage containers.UsageSource
}

// Options configure a Publisher.
type Options struct {
	// Service is where the datapoints go. Required.
	Service *cloudwatch.Service
	// Sources feed the gauges.
	Sources Sources
	// BacklogEvery is how often the asynchronous backlogs are sampled.
	// Default 10 s (each sample is a datapoint of its minute).
	BacklogEvery time.Duration
	// ConcurrencyEvery is how often the calls in flight are sampled
	// (ConcurrentRequestsPerModel, ConcurrentRequestsPerCopy, published at
	// SageMaker's high resolution of 10 s). Default 1 s.
	ConcurrencyEvery time.Duration
	// Logger receives the series limit's warnings.
	Logger zerolog.Logger
	// Now is the clock (tests, benchmarks). Default the Service's (AWS time).
	Now func() time.Time
}

// Publisher turns mce's observations into SageMaker's CloudWatch metrics.
type Publisher struct {
	svc *cloudwatch.Service
	src Sources
	log zerolog.Logger
	now func() time.Time

	mu         sync.RWMutex
	variants   map[[2]string]*variantSeries
	components map[string]*componentSeries
	mmeCounts  map[[2]string]map[string]*atomic.Int64 // per variant, per container: loaded models

	refusedLogged atomic.Bool
	stops         []func()
}

// New starts a Publisher and its samplers; Close stops the samplers.
func New(o Options) (*Publisher, error) {
	if o.Service == nil {
		return nil, errors.New("sagemakermetrics: Options.Service is required")
	}
	if o.BacklogEvery <= 0 {
		o.BacklogEvery = 10 * time.Second
	}
	if o.ConcurrencyEvery <= 0 {
		o.ConcurrencyEvery = time.Second
	}
	if o.Now == nil {
		o.Now = o.Service.Now // AWS time, compressed or not
	}
	p := &Publisher{svc: o.Service, src: o.Sources, log: o.Logger, now: o.Now,
		variants: map[[2]string]*variantSeries{}, components: map[string]*componentSeries{},
		mmeCounts: map[[2]string]map[string]*atomic.Int64{}}
	p.stops = append(p.stops,
		o.Service.AddSampler(o.ConcurrencyEvery, func(context.Context) { p.sampleConcurrency(p.now()) }),
		o.Service.AddSampler(o.BacklogEvery, func(context.Context) { p.sampleBacklogs(p.now()) }),
		o.Service.AddSampler(time.Minute, func(context.Context) { p.sampleLoadedModels(p.now()) }),
	)
	return p, nil
}

// Close stops the samplers. The Service is the caller's to close.
func (p *Publisher) Close() {
	for _, stop := range p.stops {
		stop()
	}
}

// series resolves one handle, logging once when the store's series limit
// refuses it (the handle still works: it drops what it is told).
func (p *Publisher) series(m metric, dims []cloudwatch.Dimension) *cloudwatch.Series {
	h, err := p.svc.Series(m.namespace, m.name, dims, m.unit, m.resolution)
	if err != nil && p.refusedLogged.CompareAndSwap(false, true) {
		p.log.Warn().Err(err).Str("metric", m.name).Msg("sagemakermetrics: a metric series was refused; later refusals are counted by the store only")
	}
	return h
}

// lazySeries is a handle resolved on its first value: a variant that is
// never multi-model, or whose engine reports no resource use, takes no
// room among the store's series (Options.MaxSeries) for those metrics.
type lazySeries struct {
	p    *Publisher
	m    metric
	dims []cloudwatch.Dimension
	once sync.Once
	h    *cloudwatch.Series
}

func (p *Publisher) lazy(m metric, dims []cloudwatch.Dimension) *lazySeries {
	return &lazySeries{p: p, m: m, dims: dims}
}

// ObserveAt resolves the handle once, then records v at t.
func (l *lazySeries) ObserveAt(t time.Time, v float64) {
	l.once.Do(func() { l.h = l.p.series(l.m, l.dims) })
	l.h.ObserveAt(t, v)
}

// variantSeries are one variant's invocation and multi-model handles.
type variantSeries struct {
	invocations, perInstance, err4xx, err5xx, modelErrors *lazySeries
	modelLatency, overheadLatency                         *lazySeries
	concurrent                                            *lazySeries
	mmeWait, mmeLoad, mmeUnload, mmeDownload, mmeHit      *lazySeries
	loadedModels                                          *lazySeries
	cpu, memory, gpu, gpuMemory, disk                     *lazySeries
	// instances is the variant's instance count, refreshed by the
	// concurrency sampler (InvocationsPerInstance sends 1/instances).
	instances atomic.Int64
}

func variantDims(endpoint, variant string) []cloudwatch.Dimension {
	return []cloudwatch.Dimension{{Name: "EndpointName", Value: endpoint}, {Name: "VariantName", Value: variant}}
}

func (p *Publisher) variant(endpoint, variant string) *variantSeries {
	k := [2]string{endpoint, variant}
	p.mu.RLock()
	v := p.variants[k]
	p.mu.RUnlock()
	if v != nil {
		return v
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if v = p.variants[k]; v != nil {
		return v
	}
	d := variantDims(endpoint, variant)
	v = &variantSeries{
		invocations: p.lazy(mInvocations, d), perInstance: p.lazy(mInvocationsPerInstance, d),
		err4xx: p.lazy(mInvocation4XX, d), err5xx: p.lazy(mInvocation5XX, d), modelErrors: p.lazy(mModelErrors, d),
		modelLatency: p.lazy(mModelLatency, d), overheadLatency: p.lazy(mOverheadLatency, d),
		concurrent: p.lazy(mConcurrentPerModel, d),
		mmeWait:    p.lazy(mModelLoadingWaitTime, d), mmeLoad: p.lazy(mModelLoadingTime, d),
		mmeUnload: p.lazy(mModelUnloadingTime, d), mmeDownload: p.lazy(mModelDownloadingTime, d),
		mmeHit: p.lazy(mModelCacheHit, d), loadedModels: p.lazy(mLoadedModelCount, d),
		cpu: p.lazy(mCPU, d), memory: p.lazy(mMemory, d), gpu: p.lazy(mGPU, d),
		gpuMemory: p.lazy(mGPUMemory, d), disk: p.lazy(mDisk, d),
	}
	v.instances.Store(1)
	p.variants[k] = v
	return v
}

// invocation is what one call adds to a set of invocation series.
type invocationSeries struct {
	invocations, err4xx, err5xx, modelErrors, modelLatency, overheadLatency *lazySeries
}

func observeCall(s invocationSeries, end time.Time, total, model time.Duration, err error) {
	s.invocations.ObserveAt(end, 1)
	var e4, e5, em float64
	if err != nil {
		var me *pipeline.ModelError
		if errors.As(err, &me) {
			em = 1
			switch st := me.OriginalStatusCode; {
			case st >= 500:
				e5 = 1
			case st >= 400:
				e4 = 1
			}
		}
		// Otherwise the call failed before a container answered (no
		// ready instance): not the model's error, as in host/metrics.
	}
	s.err4xx.ObserveAt(end, e4)
	s.err5xx.ObserveAt(end, e5)
	s.modelErrors.ObserveAt(end, em)
	if err == nil {
		s.modelLatency.ObserveAt(end, micros(model))
		s.overheadLatency.ObserveAt(end, micros(max(total-model, 0)))
	}
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// Invocation records one call that reached a variant (production or
// shadow) of endpoint: total is the time mce took, model the time the
// containers took (zero when err is not nil). It has host/metrics'
// ObserveInvocation's signature, which hands every call on to it.
func (p *Publisher) Invocation(endpoint, variant string, total, model time.Duration, err error) {
	if variant == "" {
		return
	}
	end := p.now()
	v := p.variant(endpoint, variant)
	observeCall(invocationSeries{v.invocations, v.err4xx, v.err5xx, v.modelErrors, v.modelLatency, v.overheadLatency}, end, total, model, err)
	v.perInstance.ObserveAt(end, 1/float64(max(v.instances.Load(), 1)))
}

// componentSeries are one inference component's handles.
type componentSeries struct {
	invocations, err4xx, err5xx, modelErrors, modelLatency, overheadLatency *lazySeries
	concurrent, noCapacity, perCopy                                         *lazySeries
	// copies is the component's copy count, refreshed by the concurrency
	// sampler (InvocationsPerCopy sends 1/copies).
	copies                      atomic.Int64
	cpu, memory, gpu, gpuMemory *lazySeries
}

func (p *Publisher) component(name string) *componentSeries {
	p.mu.RLock()
	c := p.components[name]
	p.mu.RUnlock()
	if c != nil {
		return c
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c = p.components[name]; c != nil {
		return c
	}
	d := []cloudwatch.Dimension{{Name: "InferenceComponentName", Value: name}}
	c = &componentSeries{
		invocations: p.lazy(mInvocations, d), err4xx: p.lazy(mInvocation4XX, d), err5xx: p.lazy(mInvocation5XX, d),
		modelErrors: p.lazy(mModelErrors, d), modelLatency: p.lazy(mModelLatency, d),
		overheadLatency: p.lazy(mOverheadLatency, d), concurrent: p.lazy(mConcurrentPerCopy, d),
		noCapacity: p.lazy(mNoCapacity, d), perCopy: p.lazy(mInvocationsPerCopy, d),
		cpu: p.lazy(mCPUNormalized, d), memory: p.lazy(mMemoryNormalized, d),
		gpu: p.lazy(mGPUNormalized, d), gpuMemory: p.lazy(mGPUMemoryNormalized, d),
	}
	c.copies.Store(1)
	p.components[name] = c
	return c
}

// ComponentInvocation records one call to an inference component (by its
// own spelling), besides the Invocation of its endpoint's variant.
func (p *Publisher) ComponentInvocation(component string, total, model time.Duration, err error) {
	if component == "" {
		return
	}
	c := p.component(component)
	end := p.now()
	observeCall(invocationSeries{c.invocations, c.err4xx, c.err5xx, c.modelErrors, c.modelLatency, c.overheadLatency}, end, total, model, err)
	c.perCopy.ObserveAt(end, 1/float64(max(c.copies.Load(), 1)))
}

// NoCapacityInvocation records one call refused because the inference
// component (by its own spelling) had no copy to take it, as SageMaker's
// NoCapacityInvocationFailures counts them.
func (p *Publisher) NoCapacityInvocation(component string) {
	if component == "" {
		return
	}
	p.component(component).noCapacity.ObserveAt(p.now(), 1)
}

// Forget drops the handles of an endpoint's variants and components (the
// endpoint is gone). What was recorded stays, as CloudWatch keeps a
// deleted endpoint's metrics until they expire.
func (p *Publisher) Forget(endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.variants {
		if k[0] == endpoint {
			delete(p.variants, k)
		}
	}
	for k := range p.mmeCounts {
		if k[0] == endpoint {
			delete(p.mmeCounts, k)
		}
	}
}

// MultiModelObserver returns the multi-model observer of one container of
// a variant: ModelLoadingWaitTime, ModelLoadingTime, ModelUnloadingTime,
// ModelDownloadingTime (microseconds), ModelCacheHit (1 or 0 a call) and
// the container's share of LoadedModelCount.
func (p *Publisher) MultiModelObserver(endpoint, variant, container string) mme.Observer {
	k := [2]string{endpoint, variant}
	p.mu.Lock()
	m := p.mmeCounts[k]
	if m == nil {
		m = map[string]*atomic.Int64{}
		p.mmeCounts[k] = m
	}
	n := m[container]
	if n == nil {
		n = new(atomic.Int64)
		m[container] = n
	}
	p.mu.Unlock()
	// The handles are resolved once here: ModelCacheHit comes on every
	// call. They stay valid when the publisher's map lets them go.
	return &mmeObserver{p: p, endpoint: endpoint, variant: variant, loaded: n, vs: p.variant(endpoint, variant)}
}

type mmeObserver struct {
	p                 *Publisher
	endpoint, variant string
	loaded            *atomic.Int64
	vs                *variantSeries
}

func (o *mmeObserver) v() *variantSeries { return o.vs }

func (o *mmeObserver) ModelLoadingWaitTime(d time.Duration) {
	o.v().mmeWait.ObserveAt(o.p.now(), micros(d))
}
func (o *mmeObserver) ModelDownloadingTime(d time.Duration) {
	o.v().mmeDownload.ObserveAt(o.p.now(), micros(d))
}
func (o *mmeObserver) ModelLoadingTime(d time.Duration) {
	o.v().mmeLoad.ObserveAt(o.p.now(), micros(d))
}
func (o *mmeObserver) ModelUnloadingTime(d time.Duration) {
	o.v().mmeUnload.ObserveAt(o.p.now(), micros(d))
}
func (o *mmeObserver) ModelEvicted() {}
func (o *mmeObserver) ModelCacheHit(hit bool) {
	v := 0.0
	if hit {
		v = 1
	}
	o.v().mmeHit.ObserveAt(o.p.now(), v)
}

// LoadedModelCount stores the container's count and publishes the
// variant's total at once (the minute sampler publishes it again while it
// does not change, so every minute has a datapoint).
func (o *mmeObserver) LoadedModelCount(n int) {
	o.loaded.Store(int64(n))
	o.v().loadedModels.ObserveAt(o.p.now(), float64(o.p.loadedModels([2]string{o.endpoint, o.variant})))
}

func (p *Publisher) loadedModels(k [2]string) int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var sum int64
	for _, n := range p.mmeCounts[k] {
		sum += n.Load()
	}
	return sum
}

var _ mme.Observer = (*mmeObserver)(nil)
