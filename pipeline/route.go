package pipeline

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Container is one running model container as the pipeline needs to see it.
// Implementations must be safe for concurrent use; Hostname and BaseURL must
// not change over the container's life (a restarted container with a new
// address is a new Container in a new Instance).
type Container interface {
	// Hostname is the ContainerHostname (the DNS name on the endpoint's
	// network), used by Direct invocation and in error messages.
	Hostname() string
	// BaseURL is the container's root URL without a trailing path, such as
	// "http://172.18.0.3:8080"; the pipeline POSTs to BaseURL()+"/invocations".
	BaseURL() string
	// Ready reports whether the container passes its health checks now. It is
	// called on every invocation and must be cheap (an atomic load).
	Ready() bool
}

// Mode is how an endpoint's containers are invoked
// (InferenceExecutionConfig.Mode).
type Mode int

const (
	// Serial passes the request through every container in order
	// (https://docs.aws.amazon.com/sagemaker/latest/dg/inference-pipelines.html). It is the zero value.
	Serial Mode = iota
	// Direct sends the request only to the container named by
	// TargetContainerHostname (https://docs.aws.amazon.com/sagemaker/latest/dg/multi-container-direct.html).
	Direct
)

// String returns SageMaker's spelling of the mode.
func (m Mode) String() string {
	switch m {
	case Serial:
		return "Serial"
	case Direct:
		return "Direct"
	default:
		return "Mode(" + strconv.Itoa(int(m)) + ")"
	}
}

// Instance is one copy of a variant's container set, in invocation order. It
// counts its outstanding requests for least-outstanding selection. An
// Instance is safe for concurrent use; its container set is fixed at
// NewInstance.
type Instance struct {
	containers []Container
	hosts      []string
	// key names the instance for stateful sessions and prefix-aware
	// routing: its containers' base URLs; keyHash is its hash.
	key         string
	keyHash     uint64
	outstanding atomic.Int64
	// suspectUntil (unix nanoseconds) is set when a call to one of the
	// instance's containers broke at the transport (no connection, or no
	// answer): until then the instance is chosen only when no other ready
	// one is left, so traffic moves off a copy that is dying before the
	// engine's event says so (passive health), without ever taking the
	// last copy out of routing.
	suspectUntil atomic.Int64
}

// suspectFor is how long a transport failure keeps an instance behind the
// others: longer than the engine takes to report a crash.
const suspectFor = 2 * time.Second

// suspect marks the instance as failing at the transport since now.
func (in *Instance) suspect(now time.Time) { in.suspectUntil.Store(now.Add(suspectFor).UnixNano()) }

// NewInstance returns an instance made of cs, in order. The slice is copied
// and each container's hostname is read once.
func NewInstance(cs []Container) *Instance {
	in := &Instance{containers: slices.Clone(cs), hosts: make([]string, len(cs))}
	urls := make([]string, len(cs))
	for i, c := range in.containers {
		in.hosts[i] = c.Hostname()
		urls[i] = c.BaseURL()
	}
	in.key = strings.Join(urls, " ")
	in.keyHash = hashString(in.key)
	return in
}

// Key names the instance: its containers' base URLs, space-separated. Two
// instances with the same key reach the same containers, so a session
// opened on one is served by the other (an instance rebuilt after mce
// adopted its containers).
func (in *Instance) Key() string { return in.key }

// Containers returns a copy of the instance's containers, in order.
func (in *Instance) Containers() []Container { return slices.Clone(in.containers) }

// Outstanding returns the number of invocations currently using the instance.
func (in *Instance) Outstanding() int64 { return in.outstanding.Load() }

// index returns the position of the container named host, or -1.
func (in *Instance) index(host string) int {
	for i, h := range in.hosts {
		if h == host {
			return i
		}
	}
	return -1
}

// readyFor reports whether the instance can serve a call: container idx for
// Direct, or every container when idx is negative (Serial).
func (in *Instance) readyFor(idx int) bool {
	if idx >= 0 {
		return in.containers[idx].Ready()
	}
	if len(in.containers) == 0 {
		return false
	}
	for _, c := range in.containers {
		if !c.Ready() {
			return false
		}
	}
	return true
}

// Variant is a production or shadow variant: a name, a routing weight and
// the instances that serve it. Weight and instances can be replaced at any time
// (scaling, restarts, UpdateEndpointWeightsAndCapacities) while invocations
// run; it is safe for concurrent use and the invocation path takes no locks.
type Variant struct {
	name     string
	weight   atomic.Uint64 // math.Float64bits of a finite weight ≥ 0
	insts    atomic.Pointer[[]*Instance]
	strategy atomic.Int32 // a Strategy
	// prefix is PrefixAware's configuration: PrefixLength in the low 32
	// bits, ConcurrencyThreshold in the high (SetPrefixAware).
	prefix atomic.Uint64
	// mirrored counts the copies a shadow variant holds (Mirror): sent
	// or waiting to be, their bodies held.
	mirrored atomic.Int32
}

// Strategy is how a variant spreads calls over its ready instances
// (ProductionVariant RoutingConfig.RoutingStrategy,
// https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ProductionVariantRoutingConfig.html).
type Strategy int32

const (
	// LeastOutstanding sends a call to the instance with the fewest calls
	// in flight, ties broken at random (LEAST_OUTSTANDING_REQUESTS,
	// SageMaker's default). It is the zero value.
	LeastOutstanding Strategy = iota
	// Random sends a call to any ready instance with the same chance,
	// whatever its load (RANDOM).
	Random
	// PrefixAware sends calls whose first PrefixLength bytes (and
	// PrefixAwareId) agree to one instance, chosen by rendezvous hashing,
	// unless that instance has ConcurrencyThreshold calls in flight: then
	// to the least loaded (PREFIX_AWARE, prefix.go).
	PrefixAware
)

// StrategyOf returns the Strategy that SageMaker's RoutingStrategy names:
// Random for "RANDOM", LeastOutstanding for anything else ("" included).
func StrategyOf(s string) Strategy {
	switch s {
	case "RANDOM":
		return Random
	case "PREFIX_AWARE":
		return PrefixAware
	}
	return LeastOutstanding
}

// String returns SageMaker's spelling of the strategy.
func (s Strategy) String() string {
	switch s {
	case LeastOutstanding:
		return "LEAST_OUTSTANDING_REQUESTS"
	case Random:
		return "RANDOM"
	case PrefixAware:
		return "PREFIX_AWARE"
	default:
		return "Strategy(" + strconv.Itoa(int(s)) + ")"
	}
}

// NewVariant returns a variant named name with the given weight and instances
// (see SetWeight and SetInstances).
func NewVariant(name string, weight float64, insts []*Instance) *Variant {
	v := &Variant{name: name}
	v.SetWeight(weight)
	v.SetInstances(insts)
	return v
}

// Name returns the variant's name (VariantName).
func (v *Variant) Name() string { return v.name }

// Weight returns the variant's current routing weight.
func (v *Variant) Weight() float64 { return math.Float64frombits(v.weight.Load()) }

// SetWeight replaces the routing weight. A negative, NaN or infinite weight
// is stored as 0: the variant then receives only requests that name it with
// TargetVariant.
func (v *Variant) SetWeight(w float64) {
	if !(w > 0) || math.IsInf(w, 1) {
		w = 0
	}
	v.weight.Store(math.Float64bits(w))
}

// Strategy returns how the variant chooses an instance for a call.
func (v *Variant) Strategy() Strategy { return Strategy(v.strategy.Load()) }

// SetStrategy changes how the variant chooses an instance; calls already
// routed are not moved.
func (v *Variant) SetStrategy(s Strategy) { v.strategy.Store(int32(s)) }

// Instances returns the current instances. The slice is shared and must not
// be modified.
func (v *Variant) Instances() []*Instance {
	if p := v.insts.Load(); p != nil {
		return *p
	}
	return nil
}

// SetInstances replaces the variant's instances (the slice is copied).
// Invocations already running finish on the instances they picked.
func (v *Variant) SetInstances(insts []*Instance) {
	s := slices.Clone(insts)
	v.insts.Store(&s)
}

// Route is how one endpoint is invoked: its name, its mode and its variants.
// Endpoint and Mode are set by NewRoute and must not be changed afterwards
// (changing the mode takes a new endpoint configuration,
// https://docs.aws.amazon.com/sagemaker/latest/dg/multi-container-direct.html, hence a new
// Route); the variants can be replaced at any time with SetVariants. A Route
// is safe for concurrent use.
type Route struct {
	Endpoint string
	Mode     Mode
	variants atomic.Pointer[[]*Variant]
	shadows  atomic.Pointer[[]*Variant] // nil or non-empty (shadow.go)
}

// NewRoute returns the route of endpoint in mode with the variants vs.
func NewRoute(endpoint string, mode Mode, vs []*Variant) *Route {
	r := &Route{Endpoint: endpoint, Mode: mode}
	r.SetVariants(vs)
	return r
}

// Variants returns the current variants (none for a nil Route: an endpoint
// out of service). The slice is shared and must not be modified.
func (r *Route) Variants() []*Variant {
	if r == nil {
		return nil
	}
	if p := r.variants.Load(); p != nil {
		return *p
	}
	return nil
}

// SetVariants replaces the route's variants (the slice is copied), as
// UpdateEndpoint does. Invocations already running keep the variant they
// picked.
func (r *Route) SetVariants(vs []*Variant) {
	s := slices.Clone(vs)
	r.variants.Store(&s)
}
