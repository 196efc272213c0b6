package host

import (
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// invokeEndpoint is InvokeEndpoint: POST /endpoints/{EndpointName}/invocations
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html).
func (s *Server) invokeEndpoint(c echo.Context) error {
	start := time.Now()
	r := c.Request()
	w := c.Response()
	reqID := s.ids.next()
	// The answer's usual headers share one backing array: one allocation
	// where a Set each makes four. Keys are canonical (validate.go).
	hv := new(answerHeaders)
	hv.set(w.Header(), 0, hdrRequestID, reqID)
	name := c.Param("name")
	h := r.Header
	variant, container := header(h, hdrTargetVariant), header(h, hdrTargetContainer)
	fail := func(api *apierr.Error) {
		s.logFailedInvocation(reqID, name, variant, container, api, time.Since(start))
		apierr.Write(w, api)
	}

	adm, api := s.admitInvocation(w, r, name, h, authz.ActionInvokeEndpoint)
	if api != nil {
		fail(api)
		return nil
	}
	e, route := adm.e, adm.route
	tk := e.capturer.Load().Sample() // data capture (datacapture.go)
	defer adm.rb.release()
	body := adm.rb.bytes()
	if tm := header(h, hdrTargetModel); tm != "" {
		if !e.multiModel.Load() {
			fail(apierr.Validation("Endpoint %s is not a multi-model endpoint and does not support target model header.", name))
			return nil
		}
		if api := validateTargetModel(tm); api != nil {
			fail(api)
			return nil
		}
	}
	if api := unsupportedHeaders(h); api != nil {
		fail(api)
		return nil
	}

	req := pipelineRequest(h, body)
	req.Adapter = adm.adapter // an adapter inference component (host/components/adapters.go)
	if err := s.sessions.Begin(e.name, adm.component, header(h, hdrSessionID), false, &req); err != nil {
		fail(s.toAPIError(name, reqID, err))
		return nil
	}
	resp, err := s.invoker.Invoke(r.Context(), route, &req)
	if err != nil {
		s.sessions.Failed(e.name, adm.component, &req, err)
		reached, ctr := failedIn(err)
		if reached != "" {
			variant = reached
			if ctr != "" {
				container = ctr
			}
		}
		// Only a variant the call reached counts it: a TargetVariant that
		// names none (or a shadow variant) is the caller's word, and must
		// make no series.
		s.series.Record(e.name, reached, start, false)
		if reached != "" {
			s.metrics.ObserveInvocation(e.name, reached, time.Since(start), 0, err)
			s.metrics.ObserveComponent(adm.component, time.Since(start), 0, err)
		}
		if r.Context().Err() != nil {
			// The client hung up; nobody reads an answer. Record it in the
			// log at debug level only: it is the client's choice.
			s.log.Debug().Str("endpoint", name).Str("request_id", reqID).Msg("client went away")
			return nil
		}
		api := s.toAPIError(name, reqID, err)
		s.log.Debug().Str("endpoint", name).Str("variant", variant).Str("request_id", reqID).Err(err).
			AnErr("cause", errors.Unwrap(err)).Msg("invocation failed (detail)")
		fail(api)
		mirrorFailed(s.mirror, route, &req, err, false)
		return nil
	}
	defer resp.Release()
	rh := w.Header()
	ct := resp.ContentType
	if ct == "" {
		ct = defaultContentType // never let net/http sniff one
	}
	hv.set(rh, 1, hdrContentType, ct)
	hv.set(rh, 2, hdrInvokedVariant, resp.Variant)
	if resp.CustomAttributes != "" {
		rh.Set(hdrCustomAttributes, resp.CustomAttributes)
	}
	if newID, closedID := s.sessions.End(e.name, adm.component, &req, resp); newID != "" || closedID != "" {
		setSessionHeaders(rh, newID, closedID)
	}
	hv.set(rh, 3, "Content-Length", strconv.Itoa(len(resp.Body)))
	// Labelled with the endpoint's own spelling: names match case-insensitively,
	// and a caller's spellings must not make series of their own.
	took := time.Since(start)
	s.metrics.ObserveInvocation(e.name, resp.Variant, took, resp.ModelLatency, nil)
	s.metrics.ObserveComponent(adm.component, took, resp.ModelLatency, nil)
	s.series.Record(e.name, resp.Variant, start, true)
	w.WriteHeader(http.StatusOK)
	w.Write(resp.Body)
	captured(tk, resp.Variant, req.InferenceID, start, &req, resp.Body, resp.ContentType)
	s.mirror.Offer(route, resp.Variant, &req, false) // shadow variants: after the answer, never delaying it
	return nil
}

// mirrorFailed offers a failed call to the route's shadow variants when
// it reached the production variant's container (a ModelError): a shadow
// sees the requests its production variant sees, answered or not.
func mirrorFailed(m *pipeline.Mirror, route *pipeline.Route, req *pipeline.Request, err error, streamed bool) {
	if me := (*pipeline.ModelError)(nil); errors.As(err, &me) && me.Variant != "" {
		m.Offer(route, me.Variant, req, streamed)
	}
}

// admitInvocation holds the checks that InvokeEndpoint and
// InvokeEndpointWithResponseStream share, in their order: the headers (h,
// with the model's Accept in Accept), the body's announced size, the
// caller's authorization for action, the body, and an endpoint that serves.
// On success the caller releases rb; on failure it is already released.
// admission is an invocation admitted by admitInvocation: the endpoint,
// the route the call takes, its body (released by the caller), and the
// adapter inference component it names ("" for none).
type admission struct {
	e       *Endpoint
	route   *pipeline.Route
	rb      requestBody
	adapter string
	// component is the inference component called, in its own spelling
	// ("" for none), for its metrics.
	component string
}

func (s *Server) admitInvocation(w http.ResponseWriter, r *http.Request, name string, h http.Header, action string) (admission, *apierr.Error) {
	if api := validateInvokeHeaders(name, h); api != nil {
		return admission{}, api
	}
	// The body: refused from its announced length when it is too big, and
	// read with a cap when the length is not announced. A caller who cannot
	// be authorized is refused before the body is read, where the headers
	// tell (contracts: SigV4 signs the headers; unsigned callers are known
	// from the headers alone).
	if r.ContentLength > MaxPayload {
		return admission{}, payloadTooLarge(r.ContentLength)
	}
	resource := s.arn(spec.KindEndpoint, name)
	keys := authz.InvokeContext(h)
	authorized, api := s.gate.preAuthorize(r.Context(), r, action, resource, keys)
	if api != nil {
		return admission{}, api
	}
	rb, api := s.readBody(w, r, MaxPayload, payloadTooLarge)
	if api != nil {
		return admission{}, api
	}
	refuse := func(api *apierr.Error) (admission, *apierr.Error) {
		rb.release()
		return admission{}, api
	}
	if !authorized {
		if api := s.gate.authorize(r.Context(), r, rb.bytes(), action, resource, keys); api != nil {
			return refuse(api)
		}
	}
	e, route, api := servingRoute(s, name, header(h, hdrTargetVariant))
	if api != nil {
		return refuse(api)
	}
	route, component, isAdapter, api := s.componentRoute(e, route, h) // inference components (components.Manager.Route)
	if api != nil {
		return refuse(api)
	}
	adm := admission{e: e, route: route, rb: rb, component: component}
	if isAdapter {
		adm.adapter = component
	}
	return adm, nil
}

// servingRoute is the route a synchronous call to endpoint name takes
// (InvokeEndpoint, the response stream, a bidirectional stream): the
// endpoint exists, is not asynchronous and serves, with a deployment's
// traffic split applied for targetVariant.
func servingRoute(s *Server, name, targetVariant string) (*Endpoint, *pipeline.Route, *apierr.Error) {
	e := s.reg.get(name)
	if e == nil {
		return nil, nil, apierr.Validation("Endpoint %s of account %s not found.", name, s.cfg.Account)
	}
	// An asynchronous endpoint takes InvokeEndpointAsync only: SageMaker
	// refuses a synchronous call to it with a ValidationError (its exact
	// wording is not published; this one says what to do instead).
	if e.async.Load() {
		return nil, nil, apierr.Validation("Endpoint %s of account %s is an asynchronous endpoint (its endpoint configuration has AsyncInferenceConfig): invoke it with InvokeEndpointAsync.", name, s.cfg.Account)
	}
	// An endpoint serves while it has a route: InService, and also while an
	// update brings up its next generation (as SageMaker keeps serving).
	route := e.route.Load()
	if route == nil {
		return nil, nil, apierr.Validation("Endpoint %s of account %s is not InService: its status is %s.", name, s.cfg.Account, e.Status())
	}
	if sp := e.split.Load(); sp != nil { // a deployment shifts traffic
		route = pickFleet(sp, route, targetVariant)
	}
	return e, route, nil
}

// pipelineRequest is the container call that an invocation's headers and
// body describe (InvokeEndpoint and InvokeEndpointWithResponseStream, whose
// Accept the caller has already moved to the Accept header).
func pipelineRequest(h http.Header, body []byte) pipeline.Request {
	ct := header(h, hdrContentType)
	if ct == "" {
		ct = defaultContentType
	}
	return pipeline.Request{
		Body:                    body,
		ContentType:             ct,
		Accept:                  header(h, hdrAccept),
		CustomAttributes:        header(h, hdrCustomAttributes),
		TargetContainerHostname: header(h, hdrTargetContainer),
		TargetVariant:           header(h, hdrTargetVariant),
		InferenceID:             header(h, hdrInferenceID),
		TargetModel:             header(h, hdrTargetModel),
		PrefixAwareID:           header(h, hdrPrefixAwareID),
	}
}

// answerHeaders holds the values of InvokeEndpoint's usual answer headers.
type answerHeaders [4]string

// set sets h's canonical key to the one value v, held in slot i.
func (a *answerHeaders) set(h http.Header, i int, key, v string) {
	a[i] = v
	h[key] = a[i : i+1 : i+1]
}

// setSessionHeaders relays the stateful session a container opened or
// closed (NewSessionId, ClosedSessionId).
func setSessionHeaders(rh http.Header, newID, closedID string) {
	if newID != "" {
		rh.Set(hdrNewSessionID, newID)
	}
	if closedID != "" {
		rh.Set(hdrClosedSessionID, closedID)
	}
}

// failedIn names the variant an error happened in, if one was picked, and
// the container, when one is known.
func failedIn(err error) (variant, container string) {
	var m *pipeline.ModelError
	var u *pipeline.UnavailableError
	switch {
	case errors.As(err, &m):
		return m.Variant, m.Container
	case errors.As(err, &u):
		return u.Variant, u.Container
	}
	return "", ""
}

// unsupportedHeaders refuses InvokeEndpoint features mce does not have, rather
// than silently ignoring them.
func unsupportedHeaders(h http.Header) *apierr.Error {
	switch {
	case header(h, hdrEnableExplain) != "":
		return apierr.Validation("EnableExplanations needs a SageMaker Clarify explainer, which mce does not run.")
	}
	return nil
}

var componentHeaderRe = regexp.MustCompile(`^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?$`)

// componentRoute is the route an invocation of e takes: e's own, or for an
// endpoint that hosts inference components, the named component's
// (components.Manager.Route), with that component's own name and whether
// it is an adapter.
func (s *Server) componentRoute(e *Endpoint, route *pipeline.Route, h http.Header) (r *pipeline.Route, component string, adapter bool, api *apierr.Error) {
	name := header(h, hdrInferenceComp)
	if !e.record().Plan.HostsComponents() {
		if name != "" {
			return nil, "", false, apierr.Validation("Inference Component Name header is not allowed for endpoints to which you dont plan to deploy inference components. Please remove the Inference Component Name header and try again.")
		}
		return route, "", false, nil
	}
	if name == "" {
		api := apierr.Validation("Inference Component Name header is required for endpoints to which you plan to deploy inference components. Please include Inference Component Name header or consider using SageMaker models.")
		api.ErrorCode = "INFERENCE_COMPONENT_NAME_MISSING" // as SageMaker's body carries it
		return nil, "", false, api
	}
	if len(name) > 63 || !componentHeaderRe.MatchString(name) {
		return nil, "", false, apierr.Validation("1 validation error detected: Value '%s' at 'inferenceComponentName' failed to satisfy constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9]([\\-a-zA-Z0-9]*[a-zA-Z0-9])?$", name)
	}
	return s.ics.Route(e.name, name)
}
