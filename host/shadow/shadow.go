// Package shadow is what host does with the copies that shadow variants
// (CreateEndpointConfig's ShadowProductionVariants) receive: package
// pipeline samples and sends them (pipeline.Mirror) and tells an Observer
// how each ended; this package turns that into what a production call
// gets — its shadow variant's per-variant series (the same observation
// point as production calls, so every consumer of it, Prometheus and the
// CloudWatch metrics alike, sees the shadow under its own VariantName),
// the status page's record, and data capture — and counts and logs
// (rate-limited) the copies dropped at the mirror's bounds.
//
// It owns no goroutine and no state beyond its drop counters; it knows
// nothing of HTTP, endpoints' lifecycles or the engines. docs/shadow-variants.md
// describes the behaviour for users.
package shadow

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/pipeline"
)

// DefaultDropLogInterval is how often at most a line says copies were
// dropped.
const DefaultDropLogInterval = time.Minute

// Options are what an Observer feeds. Every func may be nil.
type Options struct {
	// Invocation records one shadow call as a call of its variant, as
	// host/metrics' ObserveInvocation records a production call: total is
	// the shadow's whole call, model the time inside its containers, err
	// nil for a 2xx answer.
	Invocation func(endpoint, variant string, total, model time.Duration, err error)
	// Dropped counts one copy the shadow did not get (host/metrics'
	// ShadowDropped), reason a pipeline.DropReason.
	Dropped func(endpoint, variant, reason string)
	// Record feeds the status page's recorder, as a production call does.
	Record func(endpoint, variant string, start time.Time, ok bool)
	// Answered is handed every copy the shadow answered with a 2xx, at the
	// point where the production path hands its answered calls to data
	// capture: the capture of a shadow's request and answer, under its
	// own VariantName. The call and its Response are valid only while
	// Answered runs; it must copy what it keeps and not block.
	Answered func(c *pipeline.ShadowCall)
	// Log takes the shadow's failures (debug) and the rate-limited lines
	// about dropped copies (warn).
	Log zerolog.Logger
	// DropLogInterval spaces the lines about dropped copies; default
	// DefaultDropLogInterval.
	DropLogInterval time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Observer implements pipeline.ShadowObserver. It is safe for concurrent
// use.
type Observer struct {
	o        Options
	pending  atomic.Int64 // drops since the last line
	lastLine atomic.Int64 // unix nanoseconds of the last line
}

var _ pipeline.ShadowObserver = (*Observer)(nil)

// New returns an Observer feeding what o gives.
func New(o Options) *Observer {
	if o.DropLogInterval <= 0 {
		o.DropLogInterval = DefaultDropLogInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Observer{o: o}
}

// ObserveShadow records one copy's outcome. A copy cut because mce is
// stopping (its context cancelled) is not a call of the shadow and is not
// recorded.
func (ob *Observer) ObserveShadow(c *pipeline.ShadowCall) {
	if errors.Is(c.Err, context.Canceled) {
		return
	}
	var model time.Duration
	if c.Response != nil {
		model = c.Response.ModelLatency
	}
	if f := ob.o.Invocation; f != nil {
		f(c.Endpoint, c.Variant, c.Latency, model, c.Err)
	}
	if f := ob.o.Record; f != nil {
		f(c.Endpoint, c.Variant, c.Start, c.Err == nil)
	}
	if c.Err != nil {
		ob.o.Log.Debug().Str("endpoint", c.Endpoint).Str("variant", c.Variant).Err(c.Err).
			Dur("latency_ms", c.Latency).Msg("shadow variant failed a copy of a production request (not seen by the caller)")
		return
	}
	if f := ob.o.Answered; f != nil {
		f(c)
	}
}

// DroppedShadow counts a dropped copy and says so in the log, at most once
// per DropLogInterval (with how many were dropped since the last line).
func (ob *Observer) DroppedShadow(endpoint, variant string, reason pipeline.DropReason) {
	if f := ob.o.Dropped; f != nil {
		f(endpoint, variant, string(reason))
	}
	ob.pending.Add(1)
	now := ob.o.Now().UnixNano()
	last := ob.lastLine.Load()
	if now-last < int64(ob.o.DropLogInterval) || !ob.lastLine.CompareAndSwap(last, now) {
		return
	}
	ob.o.Log.Warn().Str("endpoint", endpoint).Str("variant", variant).Str("reason", string(reason)).
		Int64("dropped", ob.pending.Swap(0)).
		Msg("shadow variant copies dropped: the shadow is slower than its production variant or silent, or mce is stopping (mce_shadow_copies_dropped_total counts them); production answers are not affected")
}
