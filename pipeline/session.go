package pipeline

import "context"

// callPinned is callVariant for a call of a stateful session
// (https://docs.aws.amazon.com/sagemaker/latest/dg/stateful-sessions.html):
// it goes to the instance whose Key is req.SessionInstance, or nowhere. The
// lookup is a scan of the variant's few instances; calls without a session
// never come here. An instance that is there but not ready is an
// UnavailableError (the session is kept); one no longer there is a
// SessionGoneError.
func (iv *Invoker) callPinned(ctx context.Context, r *Route, v *Variant, insts []*Instance, req *Request, sink Sink) (*Response, error) {
	direct := r.Mode == Direct
	for _, in := range insts {
		if in.key != req.SessionInstance {
			continue
		}
		idx := -1
		if direct {
			if idx = in.index(req.TargetContainerHostname); idx < 0 {
				return nil, &ValidationError{Endpoint: r.Endpoint, Message: "Container hostname " + req.TargetContainerHostname +
					" is not a container of endpoint " + r.Endpoint + " (variant " + v.name + ")."}
			}
		}
		if !in.readyFor(idx) { // a blip of its health: the session stays, the call waits for the client's retry
			return nil, &UnavailableError{Endpoint: r.Endpoint, Variant: v.name, Container: hostIf(direct, req.TargetContainerHostname),
				Message: "The instance of variant " + v.name + " of endpoint " + r.Endpoint + " that holds session " + req.SessionID + " is not ready; try again."}
		}
		return iv.run(ctx, r, v, insts, in, idx, req, sink)
	}
	return nil, &SessionGoneError{
		ValidationError: ValidationError{Endpoint: r.Endpoint, Message: "Session " + req.SessionID +
			" of endpoint " + r.Endpoint + " is no longer available: the instance that held it (variant " + v.name +
			") stopped. Start a new session with NEW_SESSION."},
		Variant: v.name,
		Session: req.SessionID,
	}
}
