package host

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

	"golang.org/x/sync/semaphore"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
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
	DefaultAsyncTTL     = 6 * time.Hour
	DefaultAsyncTimeout = 15 * time.Minute
	maxAsyncTimeout     = 3600 * time.Second
	// MaxAsyncPayload is SageMaker's 1 GB cap on an asynchronous input.
	MaxAsyncPayload = 1 << 30
	// DefaultAsyncPayload is mce's default cap on an asynchronous input and
	// answer, both held in memory while a request runs.
	DefaultAsyncPayload = 64 << 20
	// DefaultAsyncMemory is the most bytes of asynchronous inputs held in
	// memory by all requests together.
	DefaultAsyncMemory = 512 << 20
	// DefaultAsyncBacklog is the most asynchronous requests queued or
	// running at once, all endpoints together: each holds a few hundred
	// bytes in memory and in the state database.
	DefaultAsyncBacklog = 100000
	// asyncPoll is how often a queue looks again when nothing woke it:
	// an endpoint coming into service, a TTL expiring.
	asyncPoll = 250 * time.Millisecond
	// metaRequest is the S3 user metadata naming the request an answer is
	// for.
	metaRequest = "mce-request"
)

// asyncRecord is one accepted request, durable until it is answered.
type asyncRecord struct {
	Key              string // unique per request; the store key
	Endpoint         string
	InferenceID      string
	Input            string // s3://…
	Output           string // s3://…, fixed at acceptance
	Failure          string
	ContentType      string `json:",omitempty"`
	Accept           string `json:",omitempty"`
	CustomAttributes string `json:",omitempty"`
	Accepted         time.Time
	TTL              time.Duration
	Timeout          time.Duration
}

// asyncItem is a queued request; recovered marks one read back from the
// store after a restart, which may have been answered already.
type asyncItem struct {
	rec       asyncRecord
	recovered bool
	variant   string // the variant it runs on, once started
}

// asyncQueue is one endpoint's backlog: pending in acceptance order, and
// the requests in flight.
type asyncQueue struct {
	name    string
	wake    chan struct{}
	pending []*asyncItem
	running map[string]*asyncItem
	// instances is the endpoint's running instances at the last
	// dispatch, for the metrics.
	instances int
}

// asyncQueues holds every endpoint's queue.
type asyncQueues struct {
	mu     sync.Mutex
	queues map[string]*asyncQueue // by lower-cased endpoint name
	// reserved counts backlog slots taken by requests being accepted (their
	// store write under way), so that the backlog cap holds however many
	// callers arrive at once.
	reserved int
	memory   *semaphore.Weighted
	// held is the bytes of inputs and answers held by running requests,
	// measured (len of what is held), and peak its highest value: what the
	// memory budget bounds.
	held, peak atomic.Int64
}

func (s *Server) asyncInit() {
	s.async.queues = map[string]*asyncQueue{}
	s.async.memory = semaphore.NewWeighted(s.cfg.AsyncMemory)
	s.asyncMetrics = newAsyncMetrics(s.metrics.reg, s)
	s.asyncInvoker = pipeline.NewInvoker(pipeline.Options{
		Timeout:    maxAsyncTimeout, // each request's own deadline governs
		MaxPayload: int(s.cfg.AsyncMaxPayload),
		Observer:   s.metrics,
	})
}

// enqueue adds an item to its endpoint's queue, starting the queue's
// dispatcher on first use.
func (s *Server) enqueue(it *asyncItem) { s.enqueueItem(it, false) }

// enqueueItem is enqueue; reserved says the item takes over a backlog slot
// that reserveBacklog took for it.
func (s *Server) enqueueItem(it *asyncItem, reserved bool) {
	k := strings.ToLower(it.rec.Endpoint)
	s.async.mu.Lock()
	if reserved {
		s.async.reserved--
	}
	q := s.async.queues[k]
	if q == nil {
		q = &asyncQueue{name: it.rec.Endpoint, wake: make(chan struct{}, 1), running: map[string]*asyncItem{}}
		s.async.queues[k] = q
		s.bg.Go(func() { s.dispatchLoop(q) })
	}
	q.pending = append(q.pending, it)
	s.async.mu.Unlock()
	q.poke()
}

func (q *asyncQueue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (s *Server) dispatchLoop(q *asyncQueue) {
	t := time.NewTicker(asyncPoll)
	defer t.Stop()
	for {
		full := false
		select {
		case <-s.ctx.Done():
			return
		case <-q.wake:
		case <-t.C:
			full = true
		}
		s.async.mu.Lock()
		mine := s.async.queues[strings.ToLower(q.name)] == q
		s.async.mu.Unlock()
		if !mine {
			return // the endpoint was deleted
		}
		s.dispatch(q, full)
	}
}

// dispatch starts what the endpoint has capacity for, and settles what can
// no longer run: requests past their TTL, and every request of an endpoint
// that is gone.
func (s *Server) dispatch(q *asyncQueue, full bool) {
	e := s.reg.get(q.name)
	var route *pipeline.Route
	var plan containers.EndpointPlan
	if e != nil && !e.deleting.Load() {
		route = e.route.Load()
		plan = e.record().Plan
	}
	// Room per variant: MaxConcurrentInvocationsPerInstance for each of
	// its running instances, less what it has in flight.
	var variants []*pipeline.Variant
	room := map[string]int{}
	instances := 0
	if route != nil {
		per := spec.DefaultAsyncConcurrency
		if plan.Async != nil {
			per = plan.Async.MaxConcurrentPerInstance
		}
		for _, v := range route.Variants() {
			n := len(v.Instances())
			instances += n
			room[v.Name()] = per * n
			variants = append(variants, v)
		}
	}
	now := time.Now()
	var start, settle []*asyncItem
	var reasons []*apierr.Error
	s.async.mu.Lock()
	q.instances = instances
	for _, it := range q.running {
		room[it.variant]--
	}
	// A wake-up looks at the head of the queue only, until it finds no
	// room; the ticker's pass looks at every request, for TTLs. So a
	// completion decides about few requests however long the backlog
	// (the rest is only moved, one copy of the slice's pointers).
	keep := q.pending[:0]
	blocked := false
	for i, it := range q.pending {
		if blocked && !full {
			keep = append(keep, q.pending[i:]...)
			break
		}
		switch {
		case e == nil || e.deleting.Load():
			settle, reasons = append(settle, it), append(reasons, deletedFailure(it.rec))
		case plan.Async == nil && route != nil:
			settle, reasons = append(settle, it), append(reasons, apierr.Validation(
				"Endpoint %s is no longer an asynchronous endpoint (its configuration has no AsyncInferenceConfig); inference request %s did not run.", it.rec.Endpoint, it.rec.InferenceID))
		case now.Sub(it.rec.Accepted) > it.rec.TTL:
			settle, reasons = append(settle, it), append(reasons, expiredFailure(it.rec))
		case blocked:
			keep = append(keep, it)
		default:
			if v := pickAsyncVariant(variants, room); v != "" {
				room[v]--
				it.variant = v
				q.running[it.rec.Key] = it
				start = append(start, it)
			} else {
				blocked = true
				keep = append(keep, it)
			}
		}
	}
	clear(q.pending[len(keep):])
	q.pending = keep
	if e == nil && len(q.pending) == 0 && len(q.running) == 0 && len(start) == 0 && s.async.queues[strings.ToLower(q.name)] == q {
		delete(s.async.queues, strings.ToLower(q.name)) // its loop ends
	}
	s.async.mu.Unlock()
	for i, it := range settle {
		s.bg.Go(func() { s.settleFailure(q, it, reasons[i]) })
	}
	for _, it := range start {
		s.bg.Go(func() { s.runAsync(q, it, route) })
	}
}

// pickAsyncVariant chooses a variant with room, at random by weight among
// those of positive weight (as InvokeEndpoint's routing does); "" when none
// has room.
func pickAsyncVariant(variants []*pipeline.Variant, room map[string]int) string {
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
func deletedFailure(r asyncRecord) *apierr.Error {
	return apierr.Validation("Endpoint %s was deleted before inference request %s ran.", r.Endpoint, r.InferenceID)
}

// expiredFailure is the failure of a request that waited past its TTL: the
// endpoint had no capacity for it in time.
func expiredFailure(r asyncRecord) *apierr.Error {
	return &apierr.Error{Status: http.StatusServiceUnavailable, Code: apierr.CodeServiceUnavail, Message: fmt.Sprintf(
		"Inference request %s expired: it waited longer than its RequestTTLSeconds (%d s) in the queue of endpoint %s without being processed.",
		r.InferenceID, int(r.TTL/time.Second), r.Endpoint)}
}

// done removes a request from the queue's in-flight set and lets the queue
// start the next one.
func (s *Server) done(q *asyncQueue, it *asyncItem) {
	s.async.mu.Lock()
	delete(q.running, it.rec.Key)
	s.async.mu.Unlock()
	q.poke()
}

// settleFailure writes a request's failure without having run it.
func (s *Server) settleFailure(q *asyncQueue, it *asyncItem, fail *apierr.Error) {
	if it.recovered && s.alreadyAnswered(it) {
		return
	}
	s.finishAsync(it, "", nil, fail)
}

// runAsync runs one request: input from S3, the endpoint's pipeline, the
// answer to S3.
func (s *Server) runAsync(q *asyncQueue, it *asyncItem, route *pipeline.Route) {
	defer s.done(q, it)
	if it.recovered && s.alreadyAnswered(it) {
		return
	}
	rec := it.rec
	start := time.Now()
	// Checked when the request was accepted; again here for a request
	// accepted before a restart with narrower --async-input-prefix.
	if api := s.asyncInputScope(rec.Input); api != nil {
		s.finishAsync(it, "", nil, api)
		return
	}
	in, fail := s.readAsyncInput(rec, answerBuffers(route, it.variant))
	if fail != nil {
		if s.ctx.Err() != nil {
			return // mce is stopping: the request stays queued for the next start
		}
		s.finishAsync(it, "", nil, fail)
		return
	}
	defer in.lease.release()
	ctx, cancel := context.WithTimeout(s.ctx, rec.Timeout)
	defer cancel()
	req := pipeline.Request{Body: in.body, ContentType: asyncContentType(rec.ContentType, in.contentType), Accept: rec.Accept,
		CustomAttributes: rec.CustomAttributes, InferenceID: rec.InferenceID, TargetVariant: it.variant}
	resp, err := s.asyncInvoker.Invoke(ctx, route, &req)
	inputHeld := int64(cap(in.body))
	in.body, req.Body = nil, nil // not needed any more
	if err != nil {
		s.async.unhold(inputHeld)
		if s.ctx.Err() != nil {
			return // mce is stopping: the request stays queued for the next start
		}
		// The connection's deadline is the context's, and may fire a hair
		// before the context notices.
		if deadline, _ := ctx.Deadline(); ctx.Err() != nil || !time.Now().Before(deadline) {
			err = fmt.Errorf("%w: %w", errAsyncTimeout, err)
		}
		variant, _ := failedIn(err)
		if variant != "" {
			s.metrics.observeInvocation(rec.Endpoint, variant, time.Since(start), 0, err)
		}
		s.finishAsync(it, "", nil, s.asyncFailure(rec, err))
		return
	}
	defer resp.Release()
	// From here on only the answer is held: the lease shrinks to it.
	answerHeld := int64(cap(resp.Body))
	s.async.hold(answerHeld)
	s.async.unhold(inputHeld)
	defer s.async.unhold(answerHeld)
	in.lease.shrink(answerHeld)
	s.metrics.observeInvocation(rec.Endpoint, resp.Variant, time.Since(start), resp.ModelLatency, nil)
	s.series.record(rec.Endpoint, resp.Variant, start, true)
	ct := resp.ContentType
	if ct == "" {
		ct = defaultContentType
	}
	s.finishAsync(it, ct, resp.Body, nil)
}

// asyncContentType is the Content-Type an asynchronous input goes to the
// container with: the call's ContentType; without one, the Content-Type the
// input object was stored with (the SageMaker Python SDK's AsyncPredictor
// sets it on the object and sends none with the call); without that,
// application/octet-stream. S3's own default for an object stored without a
// type, binary/octet-stream, counts as none.
func asyncContentType(call, object string) string {
	switch {
	case call != "":
		return call
	case object != "" && !strings.EqualFold(object, "binary/octet-stream"):
		return object
	}
	return defaultContentType
}

var errAsyncTimeout = errors.New("invocation timeout")

// asyncFailure is what a failed invocation writes to the failure location:
// the error InvokeEndpoint would have answered.
func (s *Server) asyncFailure(rec asyncRecord, err error) *apierr.Error {
	if errors.Is(err, errAsyncTimeout) {
		return &apierr.Error{Status: http.StatusFailedDependency, Code: apierr.CodeModelError, Message: fmt.Sprintf(
			"Inference request %s exceeded its InvocationTimeoutSeconds (%d s): endpoint %s did not answer in time.",
			rec.InferenceID, int(rec.Timeout/time.Second), rec.Endpoint)}
	}
	return s.toAPIError(rec.Endpoint, rec.Key, err)
}

// asyncLease is a running request's share of the asynchronous memory
// budget (Config.AsyncMemory).
type asyncLease struct {
	sem *semaphore.Weighted
	n   int64
}

// shrink gives back all but to bytes of the lease.
func (l *asyncLease) shrink(to int64) {
	if to < l.n {
		l.sem.Release(l.n - to)
		l.n = to
	}
}

func (l *asyncLease) release() { l.shrink(0) }

// hold and unhold count bytes held by running requests (asyncQueues.held).
func (q *asyncQueues) hold(n int64) {
	v := q.held.Add(n)
	for {
		p := q.peak.Load()
		if v <= p || q.peak.CompareAndSwap(p, v) {
			return
		}
	}
}

func (q *asyncQueues) unhold(n int64) { q.held.Add(-n) }

// answerBuffers is how many bodies of up to AsyncMaxPayload bytes the
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

// reserveBacklog takes a backlog slot for a request being accepted, if the
// backlog (requests queued, running, or being accepted) is under
// AsyncMaxBacklog; n is the backlog it saw. The slot passes to the queue
// with enqueueItem(…, true), or goes back with releaseBacklog. Checking and
// taking under one lock keeps the cap exact however many callers arrive at
// once.
func (s *Server) reserveBacklog() (n int, ok bool) {
	s.async.mu.Lock()
	defer s.async.mu.Unlock()
	n = s.async.reserved
	for _, q := range s.async.queues {
		n += len(q.pending) + len(q.running)
	}
	if n >= s.cfg.AsyncMaxBacklog {
		return n, false
	}
	s.async.reserved++
	return n, true
}

func (s *Server) releaseBacklog() {
	s.async.mu.Lock()
	s.async.reserved--
	s.async.mu.Unlock()
}
