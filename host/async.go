package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"golang.org/x/sync/semaphore"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/wire"
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

// Async request headers, in the canonical form the header map holds.
var (
	hdrAsyncContentType    = http.CanonicalHeaderKey(wire.HeaderStreamContentType)
	hdrAsyncAccept         = http.CanonicalHeaderKey(wire.HeaderStreamAccept)
	hdrAsyncInputLocation  = http.CanonicalHeaderKey(wire.HeaderAsyncInputLocation)
	hdrAsyncOutputExt      = http.CanonicalHeaderKey(wire.HeaderAsyncOutputPathExt)
	hdrAsyncFilename       = http.CanonicalHeaderKey(wire.HeaderAsyncFilename)
	hdrAsyncTTL            = http.CanonicalHeaderKey(wire.HeaderAsyncRequestTTL)
	hdrAsyncTimeout        = http.CanonicalHeaderKey(wire.HeaderAsyncInvocationTime)
	hdrAsyncOutputLocation = wire.HeaderAsyncOutputLocation
	hdrAsyncFailure        = wire.HeaderAsyncFailure
)

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

// ObjectStore is the S3 access asynchronous inference needs;
// *artifact.Fetcher implements it with mce's S3 settings. Missing objects are
// errors wrapping artifact.ErrNotFound.
type ObjectStore interface {
	OpenObject(ctx context.Context, url string) (io.ReadCloser, artifact.ObjectInfo, error)
	PutObject(ctx context.Context, url string, body []byte, contentType string, meta map[string]string) error
	ObjectMetadata(ctx context.Context, url string) (map[string]string, error)
}

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
		s.background(func() { s.dispatchLoop(q) })
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
	var plan spec.EndpointPlan
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
	var reasons []*APIError
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
			settle, reasons = append(settle, it), append(reasons, validationError(
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
		s.background(func() { s.settleFailure(q, it, reasons[i]) })
	}
	for _, it := range start {
		s.background(func() { s.runAsync(q, it, route) })
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
func deletedFailure(r asyncRecord) *APIError {
	return validationError("Endpoint %s was deleted before inference request %s ran.", r.Endpoint, r.InferenceID)
}

// expiredFailure is the failure of a request that waited past its TTL: the
// endpoint had no capacity for it in time.
func expiredFailure(r asyncRecord) *APIError {
	return &APIError{Status: http.StatusServiceUnavailable, Code: CodeServiceUnavail, Message: fmt.Sprintf(
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
func (s *Server) settleFailure(q *asyncQueue, it *asyncItem, fail *APIError) {
	if it.recovered && s.alreadyAnswered(it) {
		return
	}
	s.finishAsync(it, "", nil, fail)
}

// alreadyAnswered reports whether a recovered request's answer or failure
// is already in S3 (mce died between writing it and marking the request
// done); if so it marks the request done.
func (s *Server) alreadyAnswered(it *asyncItem) bool {
	for _, url := range []string{it.rec.Output, it.rec.Failure} {
		if !s.asyncOutputAllowed(url) {
			continue
		}
		meta, err := s.cfg.AsyncObjects.ObjectMetadata(s.ctx, url)
		if err == nil && meta[metaRequest] == it.rec.Key {
			s.forget(it)
			s.log.Info().Str("endpoint", it.rec.Endpoint).Str("inference_id", it.rec.InferenceID).Str("request", it.rec.Key).
				Str("location", url).Msg("async request was answered before the restart")
			return true
		}
	}
	return false
}

// forget marks a request done in the store.
func (s *Server) forget(it *asyncItem) {
	if err := s.store.DeleteBatched(store.AsyncRequests, it.rec.Key); err != nil {
		s.log.Error().Err(err).Str("request", it.rec.Key).Msg("could not mark the async request done; it will be answered again after a restart")
	}
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
func (s *Server) asyncFailure(rec asyncRecord, err error) *APIError {
	if errors.Is(err, errAsyncTimeout) {
		return &APIError{Status: http.StatusFailedDependency, Code: CodeModelError, Message: fmt.Sprintf(
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

// asyncInput is a request's input, read whole, and the memory lease that
// covers it and the answers still to come.
type asyncInput struct {
	body        []byte
	contentType string // the object's
	lease       asyncLease
}

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

// readAsyncInput reads the input object whole, within the size cap, after
// reserving memory from the budget for it and for answers bodies of up to
// the cap each (the answer's size is not known before it arrives); fail
// says why it could not.
func (s *Server) readAsyncInput(rec asyncRecord, answers int64) (in asyncInput, fail *APIError) {
	rc, info, err := s.cfg.AsyncObjects.OpenObject(s.ctx, rec.Input)
	if err != nil {
		if errors.Is(err, artifact.ErrNotFound) {
			return in, validationError("Could not read the input of inference request %s: there is no object at InputLocation %s.", rec.InferenceID, rec.Input)
		}
		return in, validationError("Could not read the input of inference request %s from InputLocation %s: %s", rec.InferenceID, rec.Input, redactPaths(err.Error()))
	}
	defer rc.Close()
	limit := s.cfg.AsyncMaxPayload
	size := info.Size
	if size > limit {
		return in, validationError("The input of inference request %s at %s is %d bytes, more than mce's limit of %d bytes (mce serve --async-max-payload).",
			rec.InferenceID, rec.Input, size, limit)
	}
	want := size
	if want < 0 {
		want = limit
	}
	// One request always fits: a chain's reservation may exceed the
	// budget, and then takes all of it.
	want = min(want+answers*limit, s.cfg.AsyncMemory)
	if err := s.async.memory.Acquire(s.ctx, want); err != nil {
		return in, &APIError{Status: http.StatusServiceUnavailable, Code: CodeServiceUnavail, Message: "mce is stopping."}
	}
	in.lease = asyncLease{sem: s.async.memory, n: want}
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("more than %d bytes", limit)
	}
	if err != nil {
		in.lease.release()
		return asyncInput{}, validationError("Could not read the input of inference request %s from InputLocation %s: %s", rec.InferenceID, rec.Input, redactPaths(err.Error()))
	}
	s.async.hold(int64(cap(b)))
	in.body, in.contentType = b, info.ContentType
	return in, nil
}

// finishAsync writes the answer (fail == nil) or the failure, then marks the
// request done. A failure is written as the JSON error body InvokeEndpoint
// would have answered ({"__type": …, "Message": …}, application/json), so
// that clients that deserialize it as JSON — the SageMaker Python SDK's
// AsyncInferenceResponse with a JSONDeserializer — get its message. A
// failed write leaves the request queued: it is tried again, in this run or
// the next.
func (s *Server) finishAsync(it *asyncItem, contentType string, body []byte, fail *APIError) {
	rec := it.rec
	url, outcome := rec.Output, "answered"
	if fail != nil {
		url, outcome, body, contentType = rec.Failure, "failed", errorJSON(fail), "application/json"
	}
	if !s.asyncOutputAllowed(url) {
		// Accepted before a restart with narrower --async-output-prefix.
		s.log.Error().Str("endpoint", rec.Endpoint).Str("request", rec.Key).Str("location", url).
			Msg("async result not written: its location is outside --async-output-prefix; the request is dropped")
		s.forget(it)
		s.asyncMetrics.completed.WithLabelValues(rec.Endpoint, "dropped").Inc()
		return
	}
	meta := map[string]string{metaRequest: rec.Key, "inference-id": sanitizeMeta(rec.InferenceID)}
	err := s.cfg.AsyncObjects.PutObject(s.ctx, url, body, contentType, meta)
	if err != nil {
		if s.ctx.Err() != nil {
			return
		}
		s.log.Error().Err(err).Str("endpoint", rec.Endpoint).Str("request", rec.Key).Str("location", url).
			Msg("could not write the async result; the request stays queued and runs again")
		s.asyncMetrics.writeErrors.WithLabelValues(rec.Endpoint).Inc()
		select { // do not spin on a store that is down; Close does not wait for it
		case <-time.After(time.Second):
		case <-s.ctx.Done():
			return // the request stays queued for the next start
		}
		s.enqueue(&asyncItem{rec: rec, recovered: true})
		return
	}
	s.forget(it)
	s.asyncMetrics.completed.WithLabelValues(rec.Endpoint, outcome).Inc()
	ev := s.log.Info()
	if fail != nil {
		ev = ev.Str("why", fail.Message)
	}
	ev.Str("endpoint", rec.Endpoint).Str("inference_id", rec.InferenceID).Str("request", rec.Key).
		Str("location", url).Msg("async request " + outcome)
}

// sanitizeMeta keeps S3 user metadata to printable ASCII.
func sanitizeMeta(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r > '~' {
			return '_'
		}
		return r
	}, s)
}

// recoverAsync queues again every request the store holds, oldest first.
// Call it after the endpoints are back in the registry.
func (s *Server) recoverAsync() error {
	var recs []asyncRecord
	if err := store.List(s.store, store.AsyncRequests, func(r asyncRecord) error { recs = append(recs, r); return nil }); err != nil {
		return fmt.Errorf("read queued async requests from the state: %w", err)
	}
	sort.Slice(recs, func(i, j int) bool {
		if !recs[i].Accepted.Equal(recs[j].Accepted) {
			return recs[i].Accepted.Before(recs[j].Accepted)
		}
		return recs[i].Key < recs[j].Key
	})
	if len(recs) > 0 && s.cfg.AsyncObjects == nil {
		return fmt.Errorf("the state holds %d queued async requests, but mce has no S3 access to answer them", len(recs))
	}
	for _, r := range recs {
		s.enqueue(&asyncItem{rec: r, recovered: true})
	}
	if len(recs) > 0 {
		s.log.Info().Int("requests", len(recs)).Msg("async requests queued again after a restart")
	}
	return nil
}

// invokeEndpointAsync is InvokeEndpointAsync: POST
// /endpoints/{EndpointName}/async-invocations (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointAsync.html).
func (s *Server) invokeEndpointAsync(c echo.Context) error {
	r := c.Request()
	w := c.Response()
	reqID := s.ids.next()
	w.Header().Set(hdrRequestID, reqID)
	name := c.Param("name")
	h := r.Header
	if api := validateAsyncHeaders(name, h); api != nil {
		writeError(w, api)
		return nil
	}
	resource := s.arn(spec.KindEndpoint, name)
	keys := authz.InvokeContext(h)
	authorized, api := s.preAuthorize(r.Context(), r, authz.ActionInvokeEndpointAsync, resource, keys)
	if api != nil {
		writeError(w, api)
		return nil
	}
	// The newest API allows a small inline Body; mce reads InputLocation.
	rb, api := s.readBody(w, r, 128000, func(n int64) *APIError {
		return validationError("The inline request body of %d bytes exceeds the maximum of 128000 bytes.", n)
	})
	if api != nil {
		writeError(w, api)
		return nil
	}
	defer rb.release()
	body := rb.bytes()
	// The principal is needed beyond the endpoint's decision: the input
	// object is authorized for it too.
	principal, api := s.authenticate(r, body)
	if api == nil && !authorized {
		api = s.decide(r.Context(), r, principal, authz.ActionInvokeEndpointAsync, resource, keys)
	}
	if api != nil {
		writeError(w, api)
		return nil
	}
	input := header(h, hdrAsyncInputLocation)
	switch {
	case len(body) > 0:
		writeError(w, validationError("mce reads the input of InvokeEndpointAsync from InputLocation only; put the payload in S3 and send "+wire.HeaderAsyncInputLocation+" instead of a body."))
		return nil
	case input == "":
		writeError(w, validationError("InputLocation is required: the S3 URI (s3://bucket/key) of the request payload."))
		return nil
	}
	e := s.reg.get(name)
	if e == nil || e.deleting.Load() {
		writeError(w, validationError("Endpoint %s of account %s not found.", name, s.cfg.Account))
		return nil
	}
	plan := e.record().Plan
	if plan.Async == nil {
		writeError(w, validationError("Endpoint %s is not an asynchronous endpoint: its endpoint configuration has no AsyncInferenceConfig. Use InvokeEndpoint.", name))
		return nil
	}
	if st := e.Status(); st == StatusFailed {
		writeError(w, validationError("Endpoint %s of account %s is not InService: its status is %s.", name, s.cfg.Account, st))
		return nil
	}
	if s.cfg.AsyncObjects == nil {
		writeError(w, &APIError{Status: http.StatusServiceUnavailable, Code: CodeServiceUnavail,
			Message: "mce has no S3 access for asynchronous inference."})
		return nil
	}
	if !strings.HasPrefix(input, "s3://") {
		writeError(w, validationError("mce reads InputLocation from s3:// URIs only; %q is not one.", truncate(input, 128)))
		return nil
	}
	if b, k, _ := strings.Cut(strings.TrimPrefix(input, "s3://"), "/"); b == "" || k == "" {
		writeError(w, validationError("InputLocation %q needs a bucket and an object key (s3://bucket/key).", truncate(input, 128)))
		return nil
	}
	if dotSegment(input) {
		writeError(w, validationError("InputLocation %q names an S3 key with a . or .. path segment; mce refuses it.", truncate(input, 128)))
		return nil
	}
	// mce reads the input with its own S3 credentials, for whoever calls:
	// the caller must be allowed to read it, and it must lie where the
	// operator lets asynchronous inputs come from. Neither check looks at
	// S3, so the answer says nothing of whether the object exists.
	if api := s.asyncInputScope(input); api != nil {
		writeError(w, api)
		return nil
	}
	if api := s.decide(r.Context(), r, principal, actionS3GetObject, s3ObjectARN(input), nil); api != nil {
		writeError(w, api)
		return nil
	}
	if n, ok := s.reserveBacklog(); !ok {
		writeError(w, &APIError{Status: http.StatusServiceUnavailable, Code: CodeServiceUnavail, Message: fmt.Sprintf(
			"mce's asynchronous queue is full: %d requests are queued or running (mce serve --async-max-backlog). Try again later.", n)})
		return nil
	}
	queued := false
	defer func() {
		if !queued {
			s.releaseBacklog()
		}
	}()
	ttl, timeout := DefaultAsyncTTL, DefaultAsyncTimeout
	if v := header(h, hdrAsyncTTL); v != "" {
		n, _ := strconv.Atoi(v) // validated
		ttl = time.Duration(n) * time.Second
	}
	if v := header(h, hdrAsyncTimeout); v != "" {
		n, _ := strconv.Atoi(v)
		timeout = time.Duration(n) * time.Second
	}
	key := uuid.NewString()
	id := header(h, hdrInferenceID)
	if id == "" {
		id = key
	}
	dir := ""
	if ext := strings.Trim(header(h, hdrAsyncOutputExt), "/"); ext != "" {
		dir = "/" + ext
	}
	outName := id + ".out"
	if fn := header(h, hdrAsyncFilename); fn != "" {
		outName = fn
	}
	rec := asyncRecord{
		Key: key, Endpoint: e.name, InferenceID: id, Input: input,
		Output:      plan.Async.OutputPath + dir + "/" + outName,
		Failure:     plan.Async.FailurePath + dir + "/" + id + "-error.out",
		ContentType: header(h, hdrAsyncContentType), Accept: header(h, hdrAsyncAccept),
		CustomAttributes: header(h, hdrCustomAttributes),
		Accepted:         time.Now(), TTL: ttl, Timeout: timeout,
	}
	for _, out := range []string{rec.Output, rec.Failure} {
		if dotSegment(out) || !s.asyncOutputAllowed(out) {
			writeError(w, validationError("The S3 output paths of endpoint %s (%s) are outside the S3 prefixes mce may write asynchronous results to (mce serve --async-output-prefix).",
				e.name, truncate(out, 256)))
			return nil
		}
	}
	// Durable before the answer: once the caller hears 202, the request
	// survives anything short of losing the state directory.
	if err := s.store.PutBatched(store.AsyncRequests, key, rec); err != nil {
		writeError(w, s.internalError(reqID, err))
		return nil
	}
	s.asyncMetrics.accepted.WithLabelValues(e.name).Inc()
	s.enqueueItem(&asyncItem{rec: rec}, true)
	queued = true
	w.Header().Set(hdrAsyncOutputLocation, rec.Output)
	w.Header().Set(hdrAsyncFailure, rec.Failure)
	return c.JSON(http.StatusAccepted, map[string]string{"InferenceId": id})
}

var asyncRules = []headerRule{
	{header: hdrAsyncContentType, member: "contentType", max: 1024, ascii: true},
	{header: hdrAsyncAccept, member: "accept", max: 1024, ascii: true},
	{header: hdrCustomAttributes, member: "customAttributes", max: 1024, ascii: true},
	{header: hdrInferenceID, member: "inferenceId", min: 1, max: 64, pattern: printPattern, shown: printPatternText},
	{header: hdrAsyncInputLocation, member: "inputLocation", min: 1, max: 1024, pattern: inputLocationPattern, shown: inputLocationText},
	{header: hdrAsyncOutputExt, member: "s3OutputPathExtension", min: 1, max: 1024, pattern: printPattern, shown: printPatternText},
	{header: hdrAsyncFilename, member: "filename", min: 1, max: 1024, pattern: printPattern, shown: printPatternText},
}

const inputLocationText = wire.S3URIPattern

var inputLocationPattern = regexp.MustCompile(inputLocationText)

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

// actionS3GetObject is the IAM action a caller needs on an input object.
const actionS3GetObject = "s3:GetObject"

// s3ObjectARN is the ARN of the object at s3://bucket/key.
func s3ObjectARN(url string) string {
	return "arn:aws:s3:::" + strings.TrimPrefix(url, "s3://")
}

// dotSegment reports whether the key of s3://bucket/key has a . or ..
// segment: S3 takes such keys literally, but a file-backed S3 server may
// resolve them, stepping out of a prefix.
func dotSegment(url string) bool {
	_, key, _ := strings.Cut(strings.TrimPrefix(url, "s3://"), "/")
	for _, seg := range strings.Split(key, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// asyncInputScope refuses an InputLocation outside Config.AsyncInputPrefixes.
func (s *Server) asyncInputScope(url string) *APIError {
	if inPrefixes(url, s.cfg.AsyncInputPrefixes) && !dotSegment(url) {
		return nil
	}
	return &APIError{Status: http.StatusForbidden, Code: CodeAccessDenied, Message: fmt.Sprintf(
		"InputLocation %s is outside the S3 prefixes mce reads asynchronous inputs from (mce serve --async-input-prefix).", truncate(url, 256))}
}

// asyncOutputAllowed reports whether url lies within
// Config.AsyncOutputPrefixes.
func (s *Server) asyncOutputAllowed(url string) bool {
	return inPrefixes(url, s.cfg.AsyncOutputPrefixes)
}

// inPrefixes reports whether url starts with one of prefixes; every url
// does when there are none.
func inPrefixes(url string, prefixes []string) bool {
	if len(prefixes) == 0 {
		return true
	}
	for _, p := range prefixes {
		if strings.HasPrefix(url, p) {
			return true
		}
	}
	return false
}

// NormalizeS3Prefix checks an operator's s3://bucket[/folder] for
// --async-input-prefix and --async-output-prefix and returns it in the form
// matched: it names a folder, and gains a final slash, so that s3://data/in
// does not also match s3://data/inbox/… nor s3://data s3://data-private/….
func NormalizeS3Prefix(p string) (string, error) {
	rest, ok := strings.CutPrefix(p, "s3://")
	b, key, _ := strings.Cut(rest, "/")
	if !ok || b == "" || strings.ContainsAny(b, " \t") {
		return "", fmt.Errorf("S3 prefix %q: want s3://bucket or s3://bucket/prefix", p)
	}
	if dotSegment(p) {
		return "", fmt.Errorf("S3 prefix %q: a . or .. path segment", p)
	}
	if key != "" && !strings.HasSuffix(key, "/") {
		key += "/"
	}
	return "s3://" + b + "/" + key, nil
}

// validateAsyncHeaders checks InvokeEndpointAsync's headers, all problems at
// once, in SageMaker's wording.
func validateAsyncHeaders(endpoint string, h http.Header) *APIError {
	if api := validateHeaderRules(endpoint, h, asyncRules); api != nil {
		return api
	}
	// These name S3 objects under the endpoint's output paths: no segment
	// may step out of them.
	for _, r := range []struct{ header, member string }{
		{hdrInferenceID, "InferenceId"}, {hdrAsyncOutputExt, "S3OutputPathExtension"}, {hdrAsyncFilename, "Filename"},
	} {
		v := header(h, r.header)
		if r.header == hdrAsyncOutputExt {
			v = strings.Trim(v, "/") // a folder: its slashes at either end go
		}
		if v == "" {
			continue
		}
		for _, seg := range strings.Split(v, "/") {
			if seg == "." || seg == ".." || seg == "" {
				return validationError("%s %q names an S3 key with an empty, . or .. path segment; mce refuses it.", r.member, truncate(v, 128))
			}
		}
	}
	for _, r := range []struct {
		header, member string
		lo, hi         int
	}{
		{hdrAsyncTTL, "requestTTLSeconds", 60, 21600},
		{hdrAsyncTimeout, "invocationTimeoutSeconds", 1, 3600},
	} {
		v := header(h, r.header)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			return validationError("1 validation error detected: %s", constraint(v, r.member, "Member must be an integer"))
		case n < r.lo:
			return validationError("1 validation error detected: %s", constraint(v, r.member, fmt.Sprintf("Member must have value greater than or equal to %d", r.lo)))
		case n > r.hi:
			return validationError("1 validation error detected: %s", constraint(v, r.member, fmt.Sprintf("Member must have value less than or equal to %d", r.hi)))
		}
	}
	for _, hd := range []string{hdrTargetModel, hdrTargetVariant, hdrTargetContainer, hdrInferenceComp, hdrSessionID, hdrEnableExplain} {
		if header(h, hd) != "" {
			return validationError("InvokeEndpointAsync does not take the %s header.", hd)
		}
	}
	return nil
}

// asyncConfigOf shows an endpoint's async settings as DescribeEndpoint does.
func asyncConfigOf(p *spec.AsyncPlan) *spec.AsyncInferenceConfig {
	if p == nil {
		return nil
	}
	n := int32(p.MaxConcurrentPerInstance)
	return &spec.AsyncInferenceConfig{
		ClientConfig: &spec.AsyncInferenceClientConfig{MaxConcurrentInvocationsPerInstance: &n},
		OutputConfig: &spec.AsyncInferenceOutputConfig{S3OutputPath: p.OutputPath, S3FailurePath: p.FailurePath},
	}
}
