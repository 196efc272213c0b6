package host

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// invokeEndpoint is InvokeEndpoint: POST /endpoints/{EndpointName}/invocations
// (contracts doc §1.2–1.5).
func (s *Server) invokeEndpoint(c echo.Context) error {
	start := time.Now()
	r := c.Request()
	w := c.Response()
	reqID := s.ids.next()
	w.Header().Set(hdrRequestID, reqID)
	name := c.Param("name")
	h := r.Header

	if err := validateInvokeHeaders(name, h); err != nil {
		writeError(w, err)
		return nil
	}
	// The body: refused from its announced length when it is too big, and
	// read with a cap when the length is not announced. A caller who cannot
	// be authorized is refused before the body is read, where the headers
	// tell (contracts: SigV4 signs the headers; unsigned callers are known
	// from the headers alone).
	if r.ContentLength > MaxPayload {
		writeError(w, payloadTooLarge(r.ContentLength))
		return nil
	}
	resource := s.arn(spec.KindEndpoint, name)
	keys := authz.InvokeContext(h)
	authorized, api := s.preAuthorize(r.Context(), r, "sagemaker:InvokeEndpoint", resource, keys)
	if api != nil {
		writeError(w, api)
		return nil
	}
	rb, api := s.readBody(w, r, MaxPayload, payloadTooLarge)
	if api != nil {
		writeError(w, api)
		return nil
	}
	defer rb.release()
	body := rb.bytes()

	if !authorized {
		if api := s.authorize(r.Context(), r, body, "sagemaker:InvokeEndpoint", resource, keys); api != nil {
			writeError(w, api)
			return nil
		}
	}
	e := s.reg.get(name)
	if e == nil {
		writeError(w, validationError("Endpoint %s of account %s not found.", name, s.cfg.Account))
		return nil
	}
	// An endpoint serves while it has a route: InService, and also while an
	// update brings up its next generation (as SageMaker keeps serving).
	route := e.route.Load()
	if route == nil {
		writeError(w, validationError("Endpoint %s of account %s is not InService: its status is %s.", name, s.cfg.Account, e.Status()))
		return nil
	}
	if tm := header(h, hdrTargetModel); tm != "" {
		if !e.multiModel.Load() {
			writeError(w, validationError("Endpoint %s is not a multi-model endpoint and does not support target model header.", name))
			return nil
		}
		if api := validateTargetModel(tm); api != nil {
			writeError(w, api)
			return nil
		}
	}
	if api := unsupportedHeaders(h); api != nil {
		writeError(w, api)
		return nil
	}

	ct := header(h, hdrContentType)
	if ct == "" {
		ct = defaultContentType
	}
	req := pipeline.Request{
		Body:                    body,
		ContentType:             ct,
		Accept:                  header(h, hdrAccept),
		CustomAttributes:        header(h, hdrCustomAttributes),
		TargetContainerHostname: header(h, hdrTargetContainer),
		TargetVariant:           header(h, hdrTargetVariant),
		InferenceID:             header(h, hdrInferenceID),
		TargetModel:             header(h, hdrTargetModel),
	}
	resp, err := s.invoker.Invoke(r.Context(), route, &req)
	if err != nil {
		variant := variantOf(err)
		if variant != "" {
			s.metrics.observeInvocation(name, variant, time.Since(start), 0, err)
		}
		if r.Context().Err() != nil {
			// The client hung up; nobody reads an answer. Record it in the
			// log at debug level only: it is the client's choice.
			s.log.Debug().Str("endpoint", name).Str("request_id", reqID).Msg("client went away")
			return nil
		}
		api := s.toAPIError(name, reqID, err)
		s.log.Debug().Str("endpoint", name).Str("variant", variant).Str("request_id", reqID).Err(err).
			AnErr("cause", errors.Unwrap(err)).Msg("invocation failed")
		writeError(w, api)
		return nil
	}
	defer resp.Release()
	rh := w.Header()
	ct = resp.ContentType
	if ct == "" {
		ct = defaultContentType // never let net/http sniff one
	}
	rh.Set(hdrContentType, ct)
	rh.Set(hdrInvokedVariant, resp.Variant)
	if resp.CustomAttributes != "" {
		rh.Set(hdrCustomAttributes, resp.CustomAttributes)
	}
	rh.Set("Content-Length", strconv.Itoa(len(resp.Body)))
	s.metrics.observeInvocation(name, resp.Variant, time.Since(start), resp.ModelLatency, nil)
	w.WriteHeader(http.StatusOK)
	w.Write(resp.Body)
	return nil
}

// variantOf names the variant an error happened in, if one was picked.
func variantOf(err error) string {
	var m *pipeline.ModelError
	var u *pipeline.UnavailableError
	switch {
	case errors.As(err, &m):
		return m.Variant
	case errors.As(err, &u):
		return u.Variant
	}
	return ""
}

// unsupportedHeaders refuses InvokeEndpoint features mce does not have, rather
// than silently ignoring them.
func unsupportedHeaders(h http.Header) *APIError {
	switch {
	case header(h, hdrInferenceComp) != "":
		return validationError("Inference components (InferenceComponentName) are not supported by mce.")
	case header(h, hdrSessionID) != "":
		return validationError("Stateful sessions (SessionId) are not supported by mce.")
	case header(h, hdrEnableExplain) != "":
		return validationError("EnableExplanations needs a SageMaker Clarify explainer, which mce does not run.")
	}
	return nil
}
