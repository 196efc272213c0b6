package host

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/bidistream"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// BidiOptions are the HTTP/2 listener's (mce serve --bidi-listen).
type BidiOptions struct {
	bidistream.Options
	// MaxStreams bounds the streams open at once across the listener; past
	// it a stream is refused with ServiceUnavailableError. Zero means 1000.
	MaxStreams int
}

// BidiHandler serves InvokeEndpointWithBidirectionalStream, the one
// operation of SageMaker's HTTP/2 runtime service
// (POST /endpoints/{EndpointName}/invocations-bidirectional-stream), for s:
// authenticated with the request's and each event's SigV4 signature,
// authorized as sagemaker:InvokeEndpoint on the endpoint, routed to a ready
// instance as InvokeEndpoint routes (TargetVariant, weights, the routing
// strategy), and bridged to its container's WebSocket (host/bidistream).
func BidiHandler(s *Server, o BidiOptions) http.Handler {
	if o.MaxStreams <= 0 {
		o.MaxStreams = 1000
	}
	slots := make(chan struct{}, o.MaxStreams)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/endpoints/")
		if ok {
			name, ok = strings.CutSuffix(name, "/invocations-bidirectional-stream")
		}
		if !ok || strings.Contains(name, "/") {
			(&bidistream.Error{Status: http.StatusNotFound, Type: "UnknownOperationException",
				Message: "This listener serves InvokeEndpointWithBidirectionalStream only: POST /endpoints/{EndpointName}/invocations-bidirectional-stream."}).Write(w)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			(&bidistream.Error{Status: http.StatusMethodNotAllowed, Type: "InputValidationError", Message: "InvokeEndpointWithBidirectionalStream is a POST."}).Write(w)
			return
		}
		req, berr := bidistream.Check(name, r.Header)
		if berr != nil {
			berr.Write(w)
			return
		}
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		default:
			(&bidistream.Error{Status: http.StatusServiceUnavailable, Type: "ServiceUnavailableError",
				Message: "mce has as many bidirectional streams open as it allows; try again later."}).Write(w)
			return
		}
		open, api := authenticateStream(s, r, name)
		if api != nil {
			restJSONError(api).Write(w)
			return
		}
		hold, berr := holdForStream(s, name, req.TargetVariant)
		if berr != nil {
			berr.Write(w)
			return
		}
		defer hold.Release()
		cs := hold.Instance.Containers()
		if len(cs) != 1 {
			(&bidistream.Error{Status: http.StatusBadRequest, Type: "InputValidationError",
				Message: "Endpoint " + name + " runs a model of " + strconv.Itoa(len(cs)) + " containers: a bidirectional stream goes to a model of one container."}).Write(w)
			return
		}
		start := time.Now()
		res := bidistream.Serve(w, r, open, bidistream.Target{BaseURL: cs[0].BaseURL(), Variant: hold.Variant, Path: req.Path, Query: req.Query},
			o.Options, s.log)
		ev := s.log.Info()
		if res.Err != nil {
			ev = s.log.Warn().Err(res.Err)
		}
		ev.Str("endpoint", name).Str("variant", hold.Variant).Str("container", cs[0].Hostname()).
			Int64("parts_in", res.PartsIn).Int64("parts_out", res.PartsOut).Int64("bytes_in", res.BytesIn).Int64("bytes_out", res.BytesOut).
			Dur("duration", time.Since(start)).Msg("bidirectional stream ended")
	})
}

// authenticateStream authenticates a bidirectional stream and authorizes it
// as sagemaker:InvokeEndpoint on the endpoint; the Opener checks each event
// of the body.
func authenticateStream(s *Server, r *http.Request, name string) (bidistream.Opener, *apierr.Error) {
	var v *authz.EventVerifier
	p := authz.Principal{Anonymous: true}
	if s.gate.enabled() {
		var err error
		if p, v, err = s.gate.az.AuthenticateEventStream(r); err != nil {
			return nil, authError(err)
		}
	}
	if api := s.gate.decide(r.Context(), r, p, authz.ActionInvokeEndpoint, s.arn(spec.KindEndpoint, name), authz.InvokeContext(r.Header)); api != nil {
		return nil, api
	}
	return v.Open, nil
}

// holdForStream finds the endpoint and holds a ready instance of it for a
// stream, as admitInvocation admits an InvokeEndpoint.
func holdForStream(s *Server, name, variant string) (*pipeline.Hold, *bidistream.Error) {
	invalid := func(msg string) *bidistream.Error {
		return &bidistream.Error{Status: http.StatusBadRequest, Type: "InputValidationError", Message: msg}
	}
	e := s.reg.get(name)
	switch {
	case e == nil:
		return nil, invalid("Endpoint " + name + " of account " + s.cfg.Account + " not found.")
	case e.async.Load():
		return nil, invalid("Endpoint " + name + " of account " + s.cfg.Account + " is an asynchronous endpoint: invoke it with InvokeEndpointAsync.")
	case e.record().Plan.HostsComponents():
		return nil, invalid("Endpoint " + name + " hosts inference components; a bidirectional stream goes to an endpoint's own model.")
	}
	route := e.route.Load()
	if route == nil {
		return nil, invalid("Endpoint " + name + " of account " + s.cfg.Account + " is not InService: its status is " + string(e.Status()) + ".")
	}
	if sp := e.split.Load(); sp != nil { // a deployment shifts traffic
		route = pickFleet(sp, route, variant)
	}
	hold, err := route.Acquire(variant)
	var ve *pipeline.ValidationError
	switch {
	case errors.As(err, &ve):
		return nil, invalid(ve.Message)
	case err != nil:
		return nil, &bidistream.Error{Status: http.StatusServiceUnavailable, Type: "ServiceUnavailableError", Message: err.Error()}
	}
	return hold, nil
}

// restJSONError is a SageMaker error in the HTTP/2 service's shape.
func restJSONError(api *apierr.Error) *bidistream.Error {
	typ := api.Code
	if typ == apierr.CodeValidation {
		typ = "InputValidationError"
	}
	return &bidistream.Error{Status: api.Status, Type: typ, Message: api.Message}
}
