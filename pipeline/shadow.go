package pipeline

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Shadow variants (CreateEndpointConfig's ShadowProductionVariants,
// https://docs.aws.amazon.com/sagemaker/latest/dg/model-shadow-deployment.html)
// receive a sampled copy of the production variant's requests; their
// answers are never returned to the caller. A Route keeps them apart from
// its production variants: Invoke never picks one by weight, and a
// TargetVariant that names one is a ValidationError. A Mirror sends the
// copies, each on a goroutine of its own, after the production call
// returned, under bounds that keep a slow, failing or silent shadow from
// touching the production call or holding memory without limit.

// SetShadows replaces the route's shadow variants (the slice is copied;
// none clears them). Copies already sent finish on the variant they went
// to.
func (r *Route) SetShadows(vs []*Variant) {
	if len(vs) == 0 {
		r.shadows.Store(nil)
		return
	}
	s := slices.Clone(vs)
	r.shadows.Store(&s)
}

// Shadows returns the route's shadow variants (none for a nil Route). The
// slice is shared and must not be modified.
func (r *Route) Shadows() []*Variant {
	if r == nil {
		return nil
	}
	if p := r.shadows.Load(); p != nil {
		return *p
	}
	return nil
}

// shadow returns the shadow variant named name, or nil.
func (r *Route) shadow(name string) *Variant {
	for _, v := range r.Shadows() {
		if v.name == name {
			return v
		}
	}
	return nil
}

// Variant returns the production or shadow variant named name, or nil.
func (r *Route) Variant(name string) *Variant {
	for _, v := range r.Variants() {
		if v.name == name {
			return v
		}
	}
	return r.shadow(name)
}

// ShadowShare is the share of the production variant's requests that a
// shadow variant receives, from their weights (InitialVariantWeight, then
// UpdateEndpointWeightsAndCapacities' DesiredWeight): the shadow's weight
// over the production variant's, at most 1. A shadow of weight 0 receives
// nothing; a shadow of positive weight beside a production variant of
// weight 0 receives every request that production variant serves (those
// that name it with TargetVariant).
func ShadowShare(production, shadow float64) float64 {
	switch {
	case !(shadow > 0):
		return 0
	case !(production > 0) || shadow >= production:
		return 1
	}
	return shadow / production
}

// Defaults for MirrorOptions.
const (
	// DefaultShadowInFlight is how many copies one shadow variant may hold
	// at once: about the concurrency of a busy production variant, so
	// that a shadow as fast as its production variant drops nothing.
	DefaultShadowInFlight = 64
	// DefaultShadowMemory bounds the request bodies that all copies hold
	// together.
	DefaultShadowMemory = 64 << 20
)

// DropReason says why a sampled copy was not sent.
type DropReason string

// Reasons a copy is dropped.
const (
	// DropBusy: the shadow variant already holds MirrorOptions.MaxInFlight
	// copies (it is slower than its production variant, or silent).
	DropBusy DropReason = "in_flight"
	// DropMemory: the bodies held would pass MirrorOptions.MaxBytes.
	DropMemory DropReason = "memory"
	// DropClosed: the Mirror is closed.
	DropClosed DropReason = "closed"
)

// ShadowCall is one copy sent to a shadow variant, and how it ended.
type ShadowCall struct {
	// Endpoint and Variant name the endpoint and the shadow variant.
	Endpoint, Variant string
	// Request is the copy sent: the production request with its own body.
	Request *Request
	// Response is the shadow's answer, nil when Err is set. Its Body is
	// empty for a streamed call (the stream is read and discarded; its
	// length is StreamedBytes).
	Response *Response
	// Streamed is set for a copy of InvokeEndpointWithResponseStream: the
	// shadow was called as a stream too.
	Streamed      bool
	StreamedBytes int64
	// Start is when the copy was sent, Latency how long the shadow took,
	// its whole answer included.
	Start   time.Time
	Latency time.Duration
	// Err is the call's error (a *ModelError, *UnavailableError, … as
	// Invoke returns them), nil on success.
	Err error
}

// ShadowObserver is told what becomes of the copies. Its methods are
// called concurrently: ObserveShadow on the copy's goroutine once the
// shadow's answer is read (the ShadowCall and its Response are valid only
// during the call), DroppedShadow on the production call's goroutine, so
// it must be fast and must not block.
type ShadowObserver interface {
	ObserveShadow(c *ShadowCall)
	DroppedShadow(endpoint, variant string, reason DropReason)
}

// MirrorOptions configure a Mirror. The zero value is usable: every zero
// field takes its default.
type MirrorOptions struct {
	// MaxInFlight bounds the copies one shadow variant holds at once (sent
	// and not answered yet); a copy sampled beyond it is dropped
	// (DropBusy). Default DefaultShadowInFlight.
	MaxInFlight int
	// MaxBytes bounds the request bodies that all copies hold together; a
	// copy that would pass it is dropped (DropMemory). Default
	// DefaultShadowMemory. The answers are read as every answer is (at most
	// Options.MaxPayload each, one per copy in flight).
	MaxBytes int64
	// Observer, if not nil, is told of every copy's outcome and every drop.
	Observer ShadowObserver
	// Context is the copies' lifetime: its end cuts the calls in flight.
	// Default context.Background(). Each container call is bounded by
	// Options.Timeout as a production call is.
	Context context.Context
	// Go runs a copy's call: default a plain goroutine. A host gives its
	// background group, which recovers a panic and logs it.
	Go func(func())
	// Sample returns a number in [0, 1) for each sampling decision; a
	// request is copied when it is below the shadow's share. Default
	// math/rand/v2's Float64. Tests give a fixed sequence.
	Sample func() float64
}

// Mirror sends sampled copies of production calls to their route's shadow
// variants (Offer). It is safe for concurrent use; make one with
// Invoker.NewMirror. A nil *Mirror mirrors nothing.
type Mirror struct {
	iv          *Invoker
	maxInFlight int32
	maxBytes    int64
	obs         ShadowObserver
	ctx         context.Context
	goFn        func(func())
	sample      func() float64

	held   atomic.Int64 // body bytes held by copies
	mu     sync.RWMutex // closed, and wg.Add against Close's Wait
	closed bool
	wg     sync.WaitGroup
}

// NewMirror returns a Mirror whose copies travel through iv (its
// timeouts, payload cap, connection pools and Observer).
func (iv *Invoker) NewMirror(o MirrorOptions) *Mirror {
	m := &Mirror{iv: iv, maxInFlight: int32(o.MaxInFlight), maxBytes: o.MaxBytes, obs: o.Observer,
		ctx: o.Context, goFn: o.Go, sample: o.Sample}
	if m.maxInFlight <= 0 {
		m.maxInFlight = DefaultShadowInFlight
	}
	if m.maxBytes <= 0 {
		m.maxBytes = DefaultShadowMemory
	}
	if m.ctx == nil {
		m.ctx = context.Background()
	}
	if m.goFn == nil {
		m.goFn = func(fn func()) { go fn() }
	}
	if m.sample == nil {
		m.sample = rand.Float64
	}
	return m
}

// Offer mirrors one call of r that production variant served answered (or
// failed in its container: a *ModelError): each shadow variant of r takes
// a copy of req with the chance ShadowShare gives. It returns at once: a
// sampled copy is made (its body copied, so the caller may reuse req as
// soon as Offer returns) and sent on a goroutine of its own, or dropped
// when its shadow variant or the Mirror is at its bound. streamed sends
// the copy as InvokeStream sends a call, its answer discarded as it
// arrives. A route without shadow variants costs one atomic load.
func (m *Mirror) Offer(r *Route, served string, req *Request, streamed bool) {
	if m == nil {
		return
	}
	if p := r.shadows.Load(); p != nil {
		m.offer(r, *p, served, req, streamed)
	}
}

func (m *Mirror) offer(r *Route, shadows []*Variant, served string, req *Request, streamed bool) {
	var prod *Variant
	for _, v := range r.Variants() {
		if v.name == served {
			prod = v
			break
		}
	}
	if prod == nil {
		return // not a production variant of r (a route replaced meanwhile)
	}
	for _, sh := range shadows {
		share := ShadowShare(prod.Weight(), sh.Weight())
		if share <= 0 || (share < 1 && m.sample() >= share) {
			continue
		}
		m.send(r, sh, req, streamed)
	}
}

// send copies req and starts its call to sh, within the bounds.
func (m *Mirror) send(r *Route, sh *Variant, req *Request, streamed bool) {
	if sh.mirrored.Add(1) > m.maxInFlight {
		sh.mirrored.Add(-1)
		m.dropped(r, sh, DropBusy)
		return
	}
	n := int64(len(req.Body))
	if m.held.Add(n) > m.maxBytes {
		m.held.Add(-n)
		sh.mirrored.Add(-1)
		m.dropped(r, sh, DropMemory)
		return
	}
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		m.held.Add(-n)
		sh.mirrored.Add(-1)
		m.dropped(r, sh, DropClosed)
		return
	}
	m.wg.Add(1)
	m.mu.RUnlock()
	c := *req
	c.Body = bytes.Clone(req.Body)
	c.TargetVariant = "" // the copy goes to sh, whatever the caller named
	// A stateful session lives on a production instance: the shadow's
	// copy carries neither its id nor its pin.
	c.SessionID, c.SessionInstance = "", ""
	m.goFn(func() { m.call(r, sh, &c, streamed) })
}

// call sends one copy and tells the observer how it went.
func (m *Mirror) call(r *Route, sh *Variant, req *Request, streamed bool) {
	defer func() {
		m.held.Add(-int64(len(req.Body)))
		sh.mirrored.Add(-1)
		m.wg.Done()
	}()
	c := ShadowCall{Endpoint: r.Endpoint, Variant: sh.name, Request: req, Streamed: streamed, Start: time.Now()}
	var sink *discardSink
	if streamed {
		sink = &discardSink{}
		c.Response, c.Err = m.iv.callVariant(m.ctx, r, sh, req, sink)
		c.StreamedBytes = sink.n
	} else {
		c.Response, c.Err = m.iv.callVariant(m.ctx, r, sh, req, nil)
	}
	c.Latency = time.Since(c.Start)
	defer c.Response.Release()
	if m.obs != nil {
		m.obs.ObserveShadow(&c)
	}
}

func (m *Mirror) dropped(r *Route, sh *Variant, why DropReason) {
	if m.obs != nil {
		m.obs.DroppedShadow(r.Endpoint, sh.name, why)
	}
}

// InFlight returns the copies the shadow variant v holds now.
func (v *Variant) InFlight() int { return int(v.mirrored.Load()) }

// Close stops taking copies (later ones are dropped, DropClosed) and waits
// for those in flight: end MirrorOptions.Context first to cut them short.
func (m *Mirror) Close() {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.wg.Wait()
}

// discardSink reads a streamed shadow answer and throws it away, counting
// its bytes: a stream of any length holds at most one piece in memory.
type discardSink struct{ n int64 }

func (d *discardSink) Begin(StreamHead) error { return nil }

func (d *discardSink) Write(p []byte) error {
	d.n += int64(len(p))
	return nil
}
