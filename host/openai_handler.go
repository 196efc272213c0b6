package host

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/capture"
	"github.com/mce-run/mce/host/openai"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// openaiRoutes serves SageMaker's OpenAI-compatible route on e
// (host/openai): every path under /endpoints/{name}/openai/ and
// /endpoints/{name}/inference-components/{ic}/openai/, so that a path or
// method the route does not serve is refused in OpenAI's shape too.
func openaiRoutes(s *Server, e *echo.Echo) {
	h := openai.Handler(openaiBackend{s}, s.log)
	serve := func(c echo.Context, component string) error {
		c.Response().Header().Set(hdrRequestID, s.ids.next())
		h(c.Response(), c.Request(), c.Param("name"), component, "/"+c.Param("*"))
		return nil
	}
	e.Any("/endpoints/:name/openai/*", func(c echo.Context) error { return serve(c, "") })
	e.Any("/endpoints/:name/inference-components/:ic/openai/*", func(c echo.Context) error { return serve(c, c.Param("ic")) })
}

// openaiBackend is what host/openai needs of the host: bearer tokens,
// policies, the body's limits, and invocations as InvokeEndpoint makes
// them (routing, metrics, data capture, shadow copies).
type openaiBackend struct{ s *Server }

// Admit authenticates the bearer token and asks the policies for both
// actions SageMaker requires of the route's callers,
// sagemaker:CallWithBearerToken and sagemaker:InvokeEndpoint, on the
// endpoint.
func (b openaiBackend) Admit(r *http.Request, endpoint, component string) *openai.Error {
	s := b.s
	// SageMaker refuses the header on this route whatever its value: the
	// component is named in the URL.
	if header(r.Header, hdrInferenceComp) != "" {
		return openai.Errorf(http.StatusBadRequest, apierr.CodeValidation, "The OpenAI-compatible route names the inference component in its URL (/endpoints/"+endpoint+"/inference-components/NAME/openai/v1/chat/completions), not in the X-Amzn-SageMaker-Inference-Component header.")
	}
	if api := validateInvokeHeaders(endpoint, r.Header); api != nil { // the name, and the target headers as InvokeEndpoint takes them
		return openaiError(api)
	}
	if !s.gate.enabled() {
		return nil
	}
	p, err := s.gate.az.AuthenticateBearer(r)
	if err != nil {
		return openaiError(authError(err))
	}
	resource := s.arn(spec.KindEndpoint, endpoint)
	keys := authz.InvokeContext(r.Header) // the target headers' condition keys, as for InvokeEndpoint
	for _, action := range []string{authz.ActionCallWithBearerToken, authz.ActionInvokeEndpoint} {
		if api := s.gate.decide(r.Context(), r, p, action, resource, keys); api != nil {
			return openaiError(api)
		}
	}
	return nil
}

func (b openaiBackend) Body(w http.ResponseWriter, r *http.Request) ([]byte, func(), *openai.Error) {
	if r.ContentLength > MaxPayload {
		return nil, nil, openaiError(payloadTooLarge(r.ContentLength))
	}
	rb, api := b.s.readBody(w, r, MaxPayload, payloadTooLarge)
	if api != nil {
		return nil, nil, openaiError(api)
	}
	return rb.bytes(), rb.release, nil
}

// Complete routes the call as InvokeEndpoint routes it (servingRoute, the
// component's route, and InvokeEndpoint's TargetVariant and
// TargetContainerHostname headers when the caller sends them: an A/B test
// of Direct containers) and sends the body to the container's /invocations
// as application/json: the AWS containers that serve this route (vLLM,
// SGLang, LMI) take an OpenAI request there.
func (b openaiBackend) Complete(ctx context.Context, req openai.Request, out *openai.Answer) *openai.Error {
	s := b.s
	start := time.Now()
	reqID := out.Header().Get(hdrRequestID)
	if header(req.Header, hdrTargetModel) != "" {
		return openai.Errorf(http.StatusBadRequest, apierr.CodeValidation, "TargetModel is not a parameter of the OpenAI-compatible route.")
	}
	variant, container := header(req.Header, hdrTargetVariant), header(req.Header, hdrTargetContainer)
	e, route, api := servingRoute(s, req.Endpoint, variant)
	if api != nil {
		return openaiError(api)
	}
	hosts := e.record().Plan.HostsComponents()
	switch {
	case hosts && req.Component == "":
		return openai.Errorf(http.StatusBadRequest, apierr.CodeValidation, "Endpoint "+req.Endpoint+" hosts inference components: name one in the URL, /endpoints/"+req.Endpoint+"/inference-components/NAME/openai/v1/chat/completions.")
	case !hosts && req.Component != "":
		return openai.Errorf(http.StatusBadRequest, apierr.CodeValidation, "Endpoint "+req.Endpoint+" hosts no inference components: call /endpoints/"+req.Endpoint+"/openai/v1/chat/completions.")
	case e.multiModel.Load():
		return openai.Errorf(http.StatusBadRequest, apierr.CodeValidation, "Endpoint "+req.Endpoint+" is a multi-model endpoint: the OpenAI-compatible route has no TargetModel to choose a model with. Use InvokeEndpoint.")
	}
	h := http.Header{}
	if req.Component != "" {
		h.Set(hdrInferenceComp, req.Component)
	}
	route, component, isAdapter, api := s.componentRoute(e, route, h)
	if api != nil {
		return openaiError(api)
	}
	preq := pipeline.Request{Body: req.Body, ContentType: "application/json", Accept: req.Accept,
		TargetVariant: variant, TargetContainerHostname: container}
	if isAdapter {
		preq.Adapter = component
	}
	tk := e.capturer.Load().Sample()
	fail := func(variant string, err error) *openai.Error {
		if variant == "" {
			variant, _ = failedIn(err)
		}
		s.series.Record(e.name, variant, start, false)
		if variant != "" {
			s.metrics.ObserveInvocation(e.name, variant, time.Since(start), 0, err)
			s.metrics.ObserveComponent(component, time.Since(start), 0, err)
		}
		mirrorFailed(s.mirror, route, &preq, err, req.Stream)
		var se *pipeline.StreamError
		if errors.As(err, &se) {
			return openai.Errorf(http.StatusFailedDependency, "ModelStreamError", se.Message)
		}
		api := s.toAPIError(req.Endpoint, reqID, err)
		if ctx.Err() == nil {
			_, container := failedIn(err)
			s.logFailedInvocation(reqID, req.Endpoint, variant, container, api, time.Since(start))
		}
		return openaiError(api)
	}
	if !req.Stream {
		resp, err := s.invoker.Invoke(ctx, route, &preq)
		if err != nil {
			return fail("", err)
		}
		defer resp.Release()
		out.Header().Set(hdrInvokedVariant, resp.Variant)
		out.Whole(resp.ContentType, resp.Body)
		s.metrics.ObserveInvocation(e.name, resp.Variant, time.Since(start), resp.ModelLatency, nil)
		s.metrics.ObserveComponent(component, time.Since(start), resp.ModelLatency, nil)
		s.series.Record(e.name, resp.Variant, start, true)
		captured(tk, resp.Variant, "", start, &preq, resp.Body, resp.ContentType)
		s.mirror.Offer(route, resp.Variant, &preq, false)
		return nil
	}
	sink := &openaiSink{out: out, tee: tk.Tee()}
	res, err := s.invoker.InvokeStream(ctx, route, &preq, sink)
	if err != nil {
		return fail(sink.head.Variant, err)
	}
	sink.tee.Record(capture.Call{Variant: res.Variant, Time: start, Input: req.Body, InputContentType: preq.ContentType, OutputContentType: sink.head.ContentType})
	s.metrics.ObserveInvocation(e.name, res.Variant, time.Since(start), res.ModelLatency, nil)
	s.metrics.ObserveComponent(component, time.Since(start), res.ModelLatency, nil)
	s.series.Record(e.name, res.Variant, start, true)
	s.mirror.Offer(route, res.Variant, &preq, true)
	return nil
}

// openaiSink relays a streamed container answer to the caller as it comes
// (pipeline.Sink).
type openaiSink struct {
	out  *openai.Answer
	tee  *capture.Tee
	head pipeline.StreamHead
}

func (k *openaiSink) Begin(h pipeline.StreamHead) error {
	k.head = h
	k.out.Header().Set(hdrInvokedVariant, h.Variant)
	return k.out.Begin(h.ContentType, h.Deadline)
}

func (k *openaiSink) Write(p []byte) error {
	if err := k.out.Write(p); err != nil {
		return err
	}
	k.tee.Write(p)
	return nil
}

// openaiError is a SageMaker error in OpenAI's envelope. A container's
// error keeps the container's status, so that OpenAI's clients retry what
// the container says may be retried (429, 5xx) and nothing else; its
// message is SageMaker's, quoting the container's body.
func openaiError(api *apierr.Error) *openai.Error {
	status := api.Status
	if api.Code == apierr.CodeModelError && api.OriginalStatusCode != nil && *api.OriginalStatusCode >= 400 && *api.OriginalStatusCode < 600 {
		status = *api.OriginalStatusCode
	}
	return openai.Errorf(status, api.Code, api.Message)
}
