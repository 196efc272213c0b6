// Package background runs the work of a long-lived component that outlives
// the request that started it (a launch, an update, a reconcile, a
// dispatch loop): every goroutine belongs to one Group, whose context Stop
// cancels and whose goroutines Stop waits for. A panic in such work is
// recovered, logged with its stack at error level and handed to the work's
// own report (so that the endpoint or component it hit can be marked
// Failed) instead of ending the process: one operation that goes wrong
// fails only what it worked on.
//
// It owns no state of its callers and starts nothing by itself.
package background

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/rs/zerolog"
)

// Group is a set of background goroutines sharing one lifetime. The zero
// value is not usable: make one with New. It is safe for concurrent use.
type Group struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	log    zerolog.Logger
}

// New makes a Group whose context is a child of parent (cancelled by Stop).
func New(parent context.Context, log zerolog.Logger) *Group {
	g := &Group{log: log}
	g.ctx, g.cancel = context.WithCancel(parent)
	return g
}

// Context is the Group's lifetime: done once Stop is called.
func (g *Group) Context() context.Context { return g.ctx }

// Go runs fn in a goroutine of the Group; a panic in it is logged.
func (g *Group) Go(fn func()) { g.GoOr(fn, nil) }

// GoOr is Go that also hands a panic's value to failed (when not nil), to
// report it on what fn worked on; a panic in failed is logged too.
func (g *Group) GoOr(fn func(), failed func(v any)) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if failed == nil {
				g.LogPanic(v)
				return
			}
			defer func() {
				if v := recover(); v != nil { // reporting it went wrong too
					g.LogPanic(v)
				}
			}()
			failed(v)
		}()
		fn()
	}()
}

// LogPanic logs a recovered panic's value and stack at error level, with
// the resource it hit (key, value pairs).
func (g *Group) LogPanic(v any, kv ...string) {
	ev := g.log.Error().Str("panic", fmt.Sprint(v)).Str("stack", string(debug.Stack()))
	for i := 0; i+1 < len(kv); i += 2 {
		ev = ev.Str(kv[i], kv[i+1])
	}
	ev.Msg("internal error recovered in background work; mce keeps serving")
}

// Stop cancels the Group's context and waits for its goroutines to return.
func (g *Group) Stop() {
	g.cancel()
	g.wg.Wait()
}

// Cancel cancels the Group's context without waiting (Wait waits).
func (g *Group) Cancel() { g.cancel() }

// Wait waits for the Group's goroutines to return.
func (g *Group) Wait() { g.wg.Wait() }
