package host

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/bidistream"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// BidiHandler serves InvokeEndpointWithBidirectionalStream for s
// (host/bidistream; mce serve --bidi-listen): authenticated with the
// request's and each event's SigV4 signature, authorized as
// sagemaker:InvokeEndpoint on the endpoint, routed to a ready instance as
// InvokeEndpoint routes (TargetVariant, weights, the routing strategy).
func BidiHandler(s *Server, o bidistream.HandlerOptions) http.Handler {
	return bidistream.Handler(bidiBackend{s}, o, s.log)
}

// bidiBackend is what bidistream needs of the host.
type bidiBackend struct{ s *Server }

func (b bidiBackend) Authorize(r *http.Request, name string) (bidistream.Opener, *bidistream.Error) {
	s := b.s
	var v *authz.EventVerifier
	p := authz.Principal{Anonymous: true}
	if s.gate.enabled() {
		var err error
		if p, v, err = s.gate.az.AuthenticateEventStream(r); err != nil {
			return nil, restJSONError(authError(err))
		}
	}
	if api := s.gate.decide(r.Context(), r, p, authz.ActionInvokeEndpoint, s.arn(spec.KindEndpoint, name), authz.InvokeContext(r.Header)); api != nil {
		return nil, restJSONError(api)
	}
	return v.Open, nil
}

// Place finds the endpoint (servingRoute, as InvokeEndpoint does) and
// holds a ready instance of it.
func (b bidiBackend) Place(name string, req bidistream.Request) (bidistream.Target, func(), *bidistream.Error) {
	s := b.s
	invalid := func(msg string) (bidistream.Target, func(), *bidistream.Error) {
		return bidistream.Target{}, nil, &bidistream.Error{Status: http.StatusBadRequest, Type: "InputValidationError", Message: msg}
	}
	e, route, api := servingRoute(s, name, req.TargetVariant)
	if api != nil {
		return bidistream.Target{}, nil, restJSONError(api)
	}
	if e.record().Plan.HostsComponents() {
		return invalid("Endpoint " + name + " hosts inference components; a bidirectional stream goes to an endpoint's own model.")
	}
	hold, err := route.Acquire(req.TargetVariant)
	var ve *pipeline.ValidationError
	switch {
	case errors.As(err, &ve):
		return invalid(ve.Message)
	case err != nil:
		return bidistream.Target{}, nil, &bidistream.Error{Status: http.StatusServiceUnavailable, Type: "ServiceUnavailableError", Message: err.Error()}
	}
	cs := hold.Instance.Containers()
	if len(cs) != 1 {
		hold.Release()
		return invalid("Endpoint " + name + " runs a model of " + strconv.Itoa(len(cs)) + " containers: a bidirectional stream goes to a model of one container.")
	}
	if bc, ok := cs[0].(containers.BidirectionalCapable); ok && !bc.BidirectionalStreaming() {
		hold.Release()
		return invalid("The container of endpoint " + name + " does not take bidirectional streams: its image lacks the label " +
			containers.LabelBidirectionalStreaming + "=true (`mce check IMAGE` shows what the image honours).")
	}
	return bidistream.Target{BaseURL: cs[0].BaseURL(), Variant: hold.Variant, Container: cs[0].Hostname(), Path: req.Path, Query: req.Query}, hold.Release, nil
}

// restJSONError is a SageMaker error in the HTTP/2 service's shape.
func restJSONError(api *apierr.Error) *bidistream.Error {
	typ := api.Code
	if typ == apierr.CodeValidation {
		typ = "InputValidationError"
	}
	return &bidistream.Error{Status: api.Status, Type: typ, Message: api.Message}
}
