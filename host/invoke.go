package host

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// bodyPool recycles request-body buffers between invocations.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

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
	// read with a cap when the length is not announced.
	if r.ContentLength > MaxPayload {
		writeError(w, payloadTooLarge(r.ContentLength))
		return nil
	}
	bp := bodyPool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 1<<20 { // keep small buffers only
			*bp = (*bp)[:0]
			bodyPool.Put(bp)
		}
	}()
	body, err := readBody(r.Body, (*bp)[:0], MaxPayload)
	*bp = body[:0]
	if err != nil {
		if errors.Is(err, errTooLarge) {
			writeError(w, payloadTooLarge(-1))
		} else {
			writeError(w, validationError("Could not read the request body: %v", err))
		}
		return nil
	}

	if api := s.authorize(r.Context(), r, body, "sagemaker:InvokeEndpoint",
		s.arn(spec.KindEndpoint, name), authz.InvokeContext(h)); api != nil {
		writeError(w, api)
		return nil
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
	if header(h, hdrTargetModel) != "" && !e.multiModel.Load() {
		writeError(w, validationError("Endpoint %s is not a multi-model endpoint and does not support target model header.", name))
		return nil
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
		api := s.toAPIError(name, err)
		s.log.Debug().Str("endpoint", name).Str("variant", variant).Str("request_id", reqID).Err(err).Msg("invocation failed")
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

var errTooLarge = errors.New("body too large")

// readBody appends r to buf up to limit bytes; one byte more is errTooLarge.
func readBody(r io.Reader, buf []byte, limit int) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			if len(buf) > limit {
				return buf, errTooLarge
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), limit+1)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return buf, errTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

func payloadTooLarge(n int64) *APIError {
	msg := "The request body exceeds the maximum of 6291456 bytes (6 MiB)."
	if n > 0 {
		msg = "The request body of " + strconv.FormatInt(n, 10) + " bytes exceeds the maximum of 6291456 bytes (6 MiB)."
	}
	return &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodeValidation, Message: msg}
}
