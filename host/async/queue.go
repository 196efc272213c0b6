package async

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"golang.org/x/sync/semaphore"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/background"
	"github.com/mce-run/mce/pipeline"
)

// Asynchronous inference (InvokeEndpointAsync,
// https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointAsync.html).
//
// Durability: a request is written to the state store (one fsynced bbolt
// transaction) before the caller hears 202, and leaves it only after its
// answer or its failure is in S3 (write, then mark). A restart re-queues
// what the store holds. A request that was being processed when mce died is
// answered again unless its answer is already in S3: the object names are
// fixed when the request is accepted and carry the request's key in their
// metadata, so a recovered request first looks there and, finding its own
// answer, only marks itself done. Every accepted request thus ends as one
// object, at its OutputLocation or its FailureLocation.

// Limits of InvokeEndpointAsync (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointAsync.html).
const (
	DefaultTTL     = 6 * time.Hour
	DefaultTimeout = 15 * time.Minute
	maxTimeout     = 3600 * time.Second
	// PayloadLimit is SageMaker's 1 GB cap on an asynchronous input.
	PayloadLimit = 1 << 30
	// DefaultPayload is mce's default cap on an asynchronous input and
	// answer, both held in memory while a request runs.
	DefaultPayload = 64 << 20
	// DefaultMemory is the most bytes of asynchronous inputs held in
	// memory by all requests together.
	DefaultMemory = 512 << 20
	// DefaultBacklog is the most asynchronous requests queued or
	// running at once, all endpoints together: each holds a few hundred
	// bytes in memory and in the state database.
	DefaultBacklog = 100000
	// pollEvery is how often a queue looks again when nothing woke it:
	// an endpoint coming into service, a TTL expiring.
	pollEvery = 250 * time.Millisecond
	// MetaRequest is the S3 user metadata naming the request an answer is
	// for.
	MetaRequest = "mce-request"
	// defaultInputType is the Content-Type of an input that has none
	// (InvokeEndpoint's default too).
	defaultInputType = "application/octet-stream"
)

// Options configure a Queue. Store, Endpoints and Background are required;
// every other zero value is usable and means what its comment says.
type Options struct {
	// Store keeps each accepted request (store.AsyncRequests) until its
	// answer or failure is in S3.
	Store *store.Store
	// Objects reads the inputs and writes the answers and failures; nil
	// means no S3 access: Recover fails when the store holds requests,
	// and the caller must refuse requests before Accept.
	Objects ObjectStore
	// Endpoints finds the endpoint a request is for, by name.
	Endpoints Endpoints
	// Outcomes hears of every invocation and says how a failed one reads;
	// nil records nothing and writes an *apierr.Error as it is, any other
	// error as a generic InternalFailure.
	Outcomes Outcomes
	// Observer is told of every container call the queue makes (per-hop
	// metrics); nil: none.
	Observer pipeline.Observer
	// MaxPayload caps an input and its answer, each held in memory while
	// the request runs; default DefaultPayload, at most PayloadLimit.
	MaxPayload int64
	// Memory is the most bytes of inputs and answers held in memory
	// together: a request reserves its input's size plus MaxPayload for
	// its answer (twice that in a chain of containers) before it runs, and
	// keeps only its answer's size once the answer is in. Default
	// DefaultMemory, and never less than twice MaxPayload (one input and
	// its answer at the cap).
	Memory int64
	// MaxBacklog is the most requests queued or running, all endpoints
	// together (Reserve refuses beyond it); default DefaultBacklog.
	MaxBacklog int
	// InputPrefixes, when not empty, are the only S3 locations (in
	// NormalizeS3Prefix's form) an input may be read from (InputScope).
	InputPrefixes []string
	// OutputPrefixes, when not empty, are the only S3 locations answers
	// and failures are written to (OutputAllowed).
	OutputPrefixes []string
	// Background runs the dispatch loops and the requests; its context is
	// the queue's lifetime: once it is cancelled, requests in flight stop
	// and stay queued for the next start.
	Background *background.Group
	// Registerer gets the queue's metrics (metrics.go); nil: they are
	// kept but not registered.
	Registerer prometheus.Registerer
	Logger     zerolog.Logger
}

// Endpoints finds the endpoint a request is for.
type Endpoints interface {
	// AsyncTarget returns what the endpoint named name (in any case)
	// serves with now; found is false when there is no such endpoint.
	AsyncTarget(name string) (t Target, found bool)
}

// Target is an endpoint as the queue dispatches to it.
type Target struct {
	// Deleting is true while the endpoint is being deleted: its requests
	// fail.
	Deleting bool
	// Route reaches the endpoint's running instances; nil while none runs
	// (its requests wait, within their TTL).
	Route *pipeline.Route
	// Plan is the endpoint's AsyncInferenceConfig; nil when it has none
	// (its requests fail once it runs).
	Plan *containers.AsyncPlan
}

// Outcomes is what the queue tells of the requests it runs.
type Outcomes interface {
	// Invoked records one invocation that started at start: resp when it
	// answered, err (wrapping the pipeline's typed errors) when it failed.
	Invoked(endpoint string, start time.Time, resp *pipeline.Response, err error)
	// Answered hands over a request that answered: its input (as sent to
	// the container, with its Content-Type) and the answer, before the
	// queue lets go of them (data capture copies what it keeps). It must
	// not block, nor keep input or resp.
	Answered(rec Record, input []byte, inputType string, resp *pipeline.Response)
	// Failure is the error InvokeEndpoint would have answered for err,
	// written to the request's failure location; key names the request
	// in mce's log.
	Failure(endpoint, key string, err error) *apierr.Error
}

// Record is one accepted request, durable until it is answered.
type Record struct {
	Key         string // unique per request; the store key
	Endpoint    string
	InferenceID string
	Input       string // s3://…; "" for an inline Body
	// Body is an inline input (InvokeEndpointAsync's Body, at most
	// MaxInline bytes), kept in the store only: the queue's copy of the
	// record drops it (InlineSize says it has one) and run reads it back.
	Body             []byte `json:",omitempty"`
	InlineSize       int    `json:",omitempty"`
	Output           string // s3://…, fixed at acceptance
	Failure          string
	ContentType      string `json:",omitempty"`
	Accept           string `json:",omitempty"`
	CustomAttributes string `json:",omitempty"`
	Accepted         time.Time
	TTL              time.Duration
	Timeout          time.Duration
}

// CheckRecord implements store.Checker: a record without the fields it is
// served by decodes but cannot be used, so store.List moves it to
// quarantine (with an error in the log) instead of letting it stop mce or
// fail later.
func (r *Record) CheckRecord() error {
	if r.Key == "" || r.Endpoint == "" || r.Input == "" && r.InlineSize == 0 || r.Output == "" {
		return errors.New("the async request record lacks its Key, Endpoint, Input or Output")
	}
	if r.InlineSize != len(r.Body) && r.Body != nil || r.Input != "" && r.InlineSize != 0 {
		return errors.New("the async request record's inline body does not match its size, or it has an InputLocation too")
	}
	return nil
}

var _ store.Checker = (*Record)(nil)

// item is a queued request; recovered marks one read back from the
// store after a restart, which may have been answered already.
type item struct {
	rec       Record
	recovered bool
	variant   string // the variant it runs on, once started
}

// endpointQueue is one endpoint's backlog: pending in acceptance order, and
// the requests in flight.
type endpointQueue struct {
	name    string
	wake    chan struct{}
	pending []*item
	running map[string]*item
	// instances is the endpoint's running instances at the last
	// dispatch, for the metrics.
	instances int
}

// Queue holds every endpoint's asynchronous requests, runs them as their
// endpoints have room, and writes their answers and failures to S3. Make
// one with NewQueue; it is safe for concurrent use.
type Queue struct {
	o        Options
	ctx      context.Context // o.Background's
	log      zerolog.Logger
	outcomes Outcomes
	// invoker calls containers with each request's own deadline and the
	// queue's payload cap.
	invoker *pipeline.Invoker
	metrics *queueMetrics

	mu     sync.Mutex
	queues map[string]*endpointQueue // by lower-cased endpoint name
	// reserved counts backlog slots taken by requests being accepted (their
	// store write under way), so that the backlog cap holds however many
	// callers arrive at once.
	reserved int
	memory   *semaphore.Weighted
	// held is the bytes of inputs and answers held by running requests,
	// measured (len of what is held), and peak its highest value: what the
	// memory budget bounds.
	held, peak atomic.Int64
	// inline is the bytes of inline inputs of the requests queued or
	// running (in the store; bounded by Options.Memory).
	inline atomic.Int64
}

// NewQueue makes a Queue; it starts a dispatch loop per endpoint on the
// endpoint's first request.
func NewQueue(o Options) *Queue {
	if o.MaxPayload <= 0 {
		o.MaxPayload = DefaultPayload
	}
	o.MaxPayload = min(o.MaxPayload, PayloadLimit)
	if o.Memory <= 0 {
		o.Memory = DefaultMemory
	}
	o.Memory = max(o.Memory, 2*o.MaxPayload) // one input and its answer always fit
	if o.MaxBacklog <= 0 {
		o.MaxBacklog = DefaultBacklog
	}
	q := &Queue{o: o, ctx: o.Background.Context(), log: o.Logger, outcomes: o.Outcomes,
		queues: map[string]*endpointQueue{}, memory: semaphore.NewWeighted(o.Memory)}
	if q.outcomes == nil {
		q.outcomes = noOutcomes{}
	}
	q.metrics = newQueueMetrics(o.Registerer, q)
	q.invoker = pipeline.NewInvoker(pipeline.Options{
		Timeout:    maxTimeout, // each request's own deadline governs
		MaxPayload: int(o.MaxPayload),
		Observer:   o.Observer,
	})
	return q
}

// Forget drops pooled connections to a container base URL that moved.
func (q *Queue) Forget(baseURL string) { q.invoker.Forget(baseURL) }

// Close closes the queue's connections to containers. Cancel the
// Background group's context and wait for it first.
func (q *Queue) Close() { q.invoker.Close() }

// Memory is the bytes of inputs and answers running requests hold now,
// and the most they held at once.
func (q *Queue) Memory() (held, peak int64) { return q.held.Load(), q.peak.Load() }

// noOutcomes is Outcomes when Options has none.
type noOutcomes struct{}

func (noOutcomes) Invoked(string, time.Time, *pipeline.Response, error) {}

func (noOutcomes) Answered(Record, []byte, string, *pipeline.Response) {}

func (noOutcomes) Failure(endpoint, key string, err error) *apierr.Error {
	var api *apierr.Error
	if errors.As(err, &api) {
		return api
	}
	return &apierr.Error{Status: http.StatusInternalServerError, Code: apierr.CodeInternalFailure, Cause: err,
		Message: "An internal error occurred in mce (request " + key + ")."}
}

// Accept makes rec durable and queues it, taking over the backlog slot
// Reserve took for it. Once it returns nil the request survives anything
// short of losing the state directory; on error the slot is still the
// caller's to Release.
func (q *Queue) Accept(rec Record) error {
	if rec.InlineSize = len(rec.Body); rec.InlineSize > 0 {
		if n := q.inline.Add(int64(rec.InlineSize)); n > q.o.Memory {
			q.inline.Add(-int64(rec.InlineSize))
			return ErrInlineFull
		}
	}
	if err := q.o.Store.PutBatched(store.AsyncRequests, rec.Key, rec); err != nil {
		q.inline.Add(-int64(rec.InlineSize))
		return err
	}
	q.metrics.accepted.WithLabelValues(rec.Endpoint).Inc()
	rec.Body = nil // in the store; run reads it back
	q.enqueueItem(&item{rec: rec}, true)
	return nil
}

// MaxInline is the largest inline input InvokeEndpointAsync takes
// (its Body member).
const MaxInline = 128000

// ErrInlineFull is Accept's answer when the inline inputs queued already
// hold Options.Memory bytes (in the state database; each is read into
// memory only to run): the caller answers 503, as for a full backlog.
var ErrInlineFull = errors.New("the inline inputs queued fill mce's asynchronous memory budget")

// enqueue adds an item to its endpoint's queue, starting the queue's
// dispatcher on first use.
func (q *Queue) enqueue(it *item) { q.enqueueItem(it, false) }

// enqueueItem is enqueue; reserved says the item takes over a backlog slot
// that Reserve took for it.
func (q *Queue) enqueueItem(it *item, reserved bool) {
	k := strings.ToLower(it.rec.Endpoint)
	q.mu.Lock()
	if reserved {
		q.reserved--
	}
	eq := q.queues[k]
	if eq == nil {
		eq = &endpointQueue{name: it.rec.Endpoint, wake: make(chan struct{}, 1), running: map[string]*item{}}
		q.queues[k] = eq
		q.o.Background.Go(func() { q.dispatchLoop(eq) })
	}
	eq.pending = append(eq.pending, it)
	q.mu.Unlock()
	eq.poke()
}

func (eq *endpointQueue) poke() {
	select {
	case eq.wake <- struct{}{}:
	default:
	}
}

func (q *Queue) dispatchLoop(eq *endpointQueue) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		full := false
		select {
		case <-q.ctx.Done():
			return
		case <-eq.wake:
		case <-t.C:
			full = true
		}
		q.mu.Lock()
		mine := q.queues[strings.ToLower(eq.name)] == eq
		q.mu.Unlock()
		if !mine {
			return // the endpoint was deleted
		}
		q.dispatch(eq, full)
	}
}

// dispatch starts what the endpoint has capacity for, and settles what can
// no longer run: requests past their TTL, and every request of an endpoint
// that is gone.
func (q *Queue) dispatch(eq *endpointQueue, full bool) {
	target, found := q.o.Endpoints.AsyncTarget(eq.name)
	gone := !found || target.Deleting
	var route *pipeline.Route
	var plan *containers.AsyncPlan
	if !gone {
		route, plan = target.Route, target.Plan
	}
	// Room per variant: MaxConcurrentInvocationsPerInstance for each of
	// its running instances, less what it has in flight.
	var variants []*pipeline.Variant
	room := map[string]int{}
	instances := 0
	if route != nil {
		per := spec.DefaultAsyncConcurrency
		if plan != nil {
			per = plan.MaxConcurrentPerInstance
		}
		for _, v := range route.Variants() {
			n := len(v.Instances())
			instances += n
			room[v.Name()] = per * n
			variants = append(variants, v)
		}
	}
	now := time.Now()
	var start, settle []*item
	var reasons []*apierr.Error
	q.mu.Lock()
	eq.instances = instances
	for _, it := range eq.running {
		room[it.variant]--
	}
	// A wake-up looks at the head of the queue only, until it finds no
	// room; the ticker's pass looks at every request, for TTLs. So a
	// completion decides about few requests however long the backlog
	// (the rest is only moved, one copy of the slice's pointers).
	keep := eq.pending[:0]
	blocked := false
	for i, it := range eq.pending {
		if blocked && !full {
			keep = append(keep, eq.pending[i:]...)
			break
		}
		switch {
		case gone:
			settle, reasons = append(settle, it), append(reasons, deletedFailure(it.rec))
		case plan == nil && route != nil:
			settle, reasons = append(settle, it), append(reasons, apierr.Validation(
				"Endpoint %s is no longer an asynchronous endpoint (its configuration has no AsyncInferenceConfig); inference request %s did not run.", it.rec.Endpoint, it.rec.InferenceID))
		case now.Sub(it.rec.Accepted) > it.rec.TTL:
			settle, reasons = append(settle, it), append(reasons, expiredFailure(it.rec))
		case blocked:
			keep = append(keep, it)
		default:
			if v := pickVariant(variants, room); v != "" {
				room[v]--
				it.variant = v
				eq.running[it.rec.Key] = it
				start = append(start, it)
			} else {
				blocked = true
				keep = append(keep, it)
			}
		}
	}
	clear(eq.pending[len(keep):])
	eq.pending = keep
	if !found && len(eq.pending) == 0 && len(eq.running) == 0 && len(start) == 0 && q.queues[strings.ToLower(eq.name)] == eq {
		delete(q.queues, strings.ToLower(eq.name)) // its loop ends
	}
	q.mu.Unlock()
	for i, it := range settle {
		q.o.Background.Go(func() { q.settleFailure(eq, it, reasons[i]) })
	}
	for _, it := range start {
		q.o.Background.Go(func() { q.run(eq, it, route) })
	}
}

// pickVariant chooses a variant with room, at random by weight among
// those of positive weight (as InvokeEndpoint's routing does); "" when none
// has room.
func pickVariant(variants []*pipeline.Variant, room map[string]int) string {
	total := 0.0
	for _, v := range variants {
		if room[v.Name()] > 0 && v.Weight() > 0 {
			total += v.Weight()
		}
	}
	if total == 0 {
		return ""
	}
	x := rand.Float64() * total
	last := ""
	for _, v := range variants {
		if room[v.Name()] > 0 && v.Weight() > 0 {
			last = v.Name()
			if x -= v.Weight(); x < 0 {
				return last
			}
		}
	}
	return last
}

// deletedFailure is the failure of a request whose endpoint was deleted
// before it ran.
func deletedFailure(r Record) *apierr.Error {
	return apierr.Validation("Endpoint %s was deleted before inference request %s ran.", r.Endpoint, r.InferenceID)
}

// expiredFailure is the failure of a request that waited past its TTL: the
// endpoint had no capacity for it in time.
func expiredFailure(r Record) *apierr.Error {
	return &apierr.Error{Status: http.StatusServiceUnavailable, Code: apierr.CodeServiceUnavail, Message: fmt.Sprintf(
		"Inference request %s expired: it waited longer than its RequestTTLSeconds (%d s) in the queue of endpoint %s without being processed.",
		r.InferenceID, int(r.TTL/time.Second), r.Endpoint)}
}

// done removes a request from the queue's in-flight set and lets the queue
// start the next one.
func (q *Queue) done(eq *endpointQueue, it *item) {
	q.mu.Lock()
	delete(eq.running, it.rec.Key)
	q.mu.Unlock()
	eq.poke()
}

// settleFailure writes a request's failure without having run it.
func (q *Queue) settleFailure(eq *endpointQueue, it *item, fail *apierr.Error) {
	if it.recovered && q.alreadyAnswered(it) {
		return
	}
	q.finish(it, "", nil, fail)
}

// run runs one request: input from S3, the endpoint's pipeline, the
// answer to S3.
func (q *Queue) run(eq *endpointQueue, it *item, route *pipeline.Route) {
	defer q.done(eq, it)
	if it.recovered && q.alreadyAnswered(it) {
		return
	}
	rec := it.rec
	start := time.Now()
	// Checked when the request was accepted; again here for a request
	// accepted before a restart with narrower --async-input-prefix.
	if api := q.InputScope(rec.Input); rec.InlineSize == 0 && api != nil {
		q.finish(it, "", nil, api)
		return
	}
	in, fail := q.input(rec, answerBuffers(route, it.variant))
	if fail != nil {
		if q.ctx.Err() != nil {
			return // mce is stopping: the request stays queued for the next start
		}
		q.finish(it, "", nil, fail)
		return
	}
	defer in.lease.release()
	ctx, cancel := context.WithTimeout(q.ctx, rec.Timeout)
	defer cancel()
	req := pipeline.Request{Body: in.body, ContentType: inputContentType(rec.ContentType, in.contentType), Accept: rec.Accept,
		CustomAttributes: rec.CustomAttributes, InferenceID: rec.InferenceID, TargetVariant: it.variant}
	resp, err := q.invoker.Invoke(ctx, route, &req)
	if err == nil {
		q.outcomes.Answered(rec, req.Body, req.ContentType, resp)
	}
	inputHeld := int64(cap(in.body))
	in.body, req.Body = nil, nil // not needed any more
	if err != nil {
		q.unhold(inputHeld)
		if q.ctx.Err() != nil {
			return // mce is stopping: the request stays queued for the next start
		}
		// The connection's deadline is the context's, and may fire a hair
		// before the context notices.
		if deadline, _ := ctx.Deadline(); ctx.Err() != nil || !time.Now().Before(deadline) {
			err = fmt.Errorf("%w: %w", errTimeout, err)
		}
		q.outcomes.Invoked(rec.Endpoint, start, nil, err)
		q.finish(it, "", nil, q.failure(rec, err))
		return
	}
	defer resp.Release()
	// From here on only the answer is held: the lease shrinks to it.
	answerHeld := int64(cap(resp.Body))
	q.hold(answerHeld)
	q.unhold(inputHeld)
	defer q.unhold(answerHeld)
	in.lease.shrink(answerHeld)
	q.outcomes.Invoked(rec.Endpoint, start, resp, nil)
	ct := resp.ContentType
	if ct == "" {
		ct = defaultInputType
	}
	q.finish(it, ct, resp.Body, nil)
}

// inputContentType is the Content-Type an asynchronous input goes to the
// container with: the call's ContentType; without one, the Content-Type the
// input object was stored with (the SageMaker Python SDK's AsyncPredictor
// sets it on the object and sends none with the call); without that,
// application/octet-stream. S3's own default for an object stored without a
// type, binary/octet-stream, counts as none.
func inputContentType(call, object string) string {
	switch {
	case call != "":
		return call
	case object != "" && !strings.EqualFold(object, "binary/octet-stream"):
		return object
	}
	return defaultInputType
}

var errTimeout = errors.New("invocation timeout")

// failure is what a failed invocation writes to the failure location:
// the error InvokeEndpoint would have answered.
func (q *Queue) failure(rec Record, err error) *apierr.Error {
	if errors.Is(err, errTimeout) {
		return &apierr.Error{Status: http.StatusFailedDependency, Code: apierr.CodeModelError, Message: fmt.Sprintf(
			"Inference request %s exceeded its InvocationTimeoutSeconds (%d s): endpoint %s did not answer in time.",
			rec.InferenceID, int(rec.Timeout/time.Second), rec.Endpoint)}
	}
	return q.outcomes.Failure(rec.Endpoint, rec.Key, err)
}

// lease is a running request's share of the memory budget
// (Options.Memory).
type lease struct {
	sem *semaphore.Weighted
	n   int64
}

// shrink gives back all but to bytes of the lease.
func (l *lease) shrink(to int64) {
	if to < l.n {
		l.sem.Release(l.n - to)
		l.n = to
	}
}

func (l *lease) release() { l.shrink(0) }

// hold and unhold count bytes held by running requests (Queue.held).
func (q *Queue) hold(n int64) {
	v := q.held.Add(n)
	for {
		p := q.peak.Load()
		if v <= p || q.peak.CompareAndSwap(p, v) {
			return
		}
	}
}

func (q *Queue) unhold(n int64) { q.held.Add(-n) }

// answerBuffers is how many bodies of up to MaxPayload bytes the
// pipeline holds at once beside the input while a request runs on variant:
// the answer, and in a chain of containers the previous container's answer
// too.
func answerBuffers(route *pipeline.Route, variant string) int64 {
	if route == nil {
		return 1
	}
	for _, v := range route.Variants() {
		if v.Name() != variant {
			continue
		}
		if insts := v.Instances(); len(insts) > 0 && len(insts[0].Containers()) > 1 {
			return 2
		}
	}
	return 1
}

// Reserve takes a backlog slot for a request being accepted, if the
// backlog (requests queued, running, or being accepted) is under
// MaxBacklog; n is the backlog it saw. The slot passes to the queue
// with Accept, or goes back with Release. Checking and taking under one
// lock keeps the cap exact however many callers arrive at once.
func (q *Queue) Reserve() (n int, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n = q.reserved
	for _, eq := range q.queues {
		n += len(eq.pending) + len(eq.running)
	}
	if n >= q.o.MaxBacklog {
		return n, false
	}
	q.reserved++
	return n, true
}

// Release gives back a slot Reserve took for a request that was not
// accepted.
func (q *Queue) Release() {
	q.mu.Lock()
	q.reserved--
	q.mu.Unlock()
}

// EndpointGone settles the queued requests of a deleted endpoint at
// their failure locations and drops its queue (requests in flight finish on
// their own).
func (q *Queue) EndpointGone(name string) {
	k := strings.ToLower(name)
	q.mu.Lock()
	eq := q.queues[k]
	var pending []*item
	if eq != nil {
		pending = eq.pending
		eq.pending = nil
		if len(eq.running) == 0 {
			delete(q.queues, k)
		}
	}
	q.mu.Unlock()
	for _, it := range pending {
		q.o.Background.Go(func() { q.settleFailure(eq, it, deletedFailure(it.rec)) })
	}
	q.metrics.forget(name)
}
