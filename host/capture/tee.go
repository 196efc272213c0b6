package capture

// Tee gathers a streamed answer (InvokeEndpointWithResponseStream's
// payload parts) for Record, as the parts go to the caller. It keeps at
// most Options.MaxPayloadBytes: a longer answer is not captured (counted as
// too_large by Record). A nil *Tee, which an unsampled call's Ticket.Tee
// returns, does nothing. A Tee is one call's: it is not safe for
// concurrent use.
type Tee struct {
	t    Ticket
	buf  []byte
	over bool
}

// Tee returns the call's Tee, or nil when the call is not captured.
func (t Ticket) Tee() *Tee {
	if t.c == nil {
		return nil
	}
	return &Tee{t: t}
}

// Write keeps a copy of p, when the answer is captured and still within the
// limit. It never fails.
func (x *Tee) Write(p []byte) {
	if x == nil || !x.t.p.output || x.over {
		return
	}
	if int64(len(x.buf)+len(p)) > x.t.c.w.opts.MaxPayloadBytes {
		x.over, x.buf = true, nil
		return
	}
	x.buf = append(x.buf, p...)
}

// Record records the call (Ticket.Record) with what Write kept as its
// Output, or drops it (too_large) when the answer went past the limit.
func (x *Tee) Record(call Call) {
	if x == nil {
		return
	}
	if x.over {
		x.t.c.drop(call.Variant, reasonTooLarge)
		return
	}
	call.Output = x.buf
	x.t.Record(call)
}
