package host

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/async"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/internal/wire"
	"github.com/mce-run/mce/pipeline"
)

// Async request headers, in the canonical form the header map holds.
var (
	hdrAsyncContentType    = http.CanonicalHeaderKey(wire.HeaderStreamContentType)
	hdrAsyncAccept         = http.CanonicalHeaderKey(wire.HeaderStreamAccept)
	hdrAsyncInputLocation  = http.CanonicalHeaderKey(wire.HeaderAsyncInputLocation)
	hdrAsyncOutputExt      = http.CanonicalHeaderKey(wire.HeaderAsyncOutputPathExt)
	hdrAsyncFilename       = http.CanonicalHeaderKey(wire.HeaderAsyncFilename)
	hdrAsyncTTL            = http.CanonicalHeaderKey(wire.HeaderAsyncRequestTTL)
	hdrAsyncTimeout        = http.CanonicalHeaderKey(wire.HeaderAsyncInvocationTime)
	hdrAsyncOutputLocation = wire.HeaderAsyncOutputLocation
	hdrAsyncFailure        = wire.HeaderAsyncFailure
)

// invokeEndpointAsync is InvokeEndpointAsync: POST
// /endpoints/{EndpointName}/async-invocations (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointAsync.html).
func (s *Server) invokeEndpointAsync(c echo.Context) error {
	r := c.Request()
	w := c.Response()
	reqID := s.ids.next()
	w.Header().Set(hdrRequestID, reqID)
	name := c.Param("name")
	h := r.Header
	if api := validateAsyncHeaders(name, h); api != nil {
		apierr.Write(w, api)
		return nil
	}
	resource := s.arn(spec.KindEndpoint, name)
	keys := authz.InvokeContext(h)
	authorized, api := s.gate.preAuthorize(r.Context(), r, authz.ActionInvokeEndpointAsync, resource, keys)
	if api != nil {
		apierr.Write(w, api)
		return nil
	}
	// The inline Body (2026-06): at most async.MaxInline bytes.
	rb, api := s.readBody(w, r, async.MaxInline, func(n int64) *apierr.Error {
		return apierr.Validation("1 validation error detected: Value at 'body' failed to satisfy constraint: Member must have length less than or equal to %d", async.MaxInline)
	})
	if api != nil {
		apierr.Write(w, api)
		return nil
	}
	defer rb.release()
	body := rb.bytes()
	// The principal is needed beyond the endpoint's decision: the input
	// object is authorized for it too.
	principal, api := s.gate.authenticate(r, body)
	if api == nil && !authorized {
		api = s.gate.decide(r.Context(), r, principal, authz.ActionInvokeEndpointAsync, resource, keys)
	}
	if api != nil {
		apierr.Write(w, api)
		return nil
	}
	input := header(h, hdrAsyncInputLocation)
	switch {
	case len(body) > 0 && input != "":
		apierr.Write(w, apierr.Validation("Body and InputLocation are mutually exclusive: send the payload inline (at most %d bytes) or in S3, not both.", async.MaxInline))
		return nil
	case len(body) == 0 && input == "":
		apierr.Write(w, apierr.Validation("Either InputLocation (the S3 URI, s3://bucket/key, of the request payload) or an inline Body (at most %d bytes) is required.", async.MaxInline))
		return nil
	}
	e := s.reg.get(name)
	if e == nil || e.deleting.Load() {
		apierr.Write(w, apierr.Validation("Endpoint %s of account %s not found.", name, s.cfg.Account))
		return nil
	}
	plan := e.record().Plan
	if plan.Async == nil {
		apierr.Write(w, apierr.Validation("Endpoint %s is not an asynchronous endpoint: its endpoint configuration has no AsyncInferenceConfig. Use InvokeEndpoint.", name))
		return nil
	}
	if st := e.Status(); st == spec.StatusFailed {
		apierr.Write(w, apierr.Validation("Endpoint %s of account %s is not InService: its status is %s.", name, s.cfg.Account, st))
		return nil
	}
	if s.cfg.AsyncObjects == nil {
		apierr.Write(w, &apierr.Error{Status: http.StatusServiceUnavailable, Code: apierr.CodeServiceUnavail,
			Message: "mce has no S3 access for asynchronous inference."})
		return nil
	}
	if input != "" {
		if api := checkAsyncInput(s, r, principal, input); api != nil {
			apierr.Write(w, api)
			return nil
		}
	}
	if n, ok := s.async.Reserve(); !ok {
		apierr.Write(w, &apierr.Error{Status: http.StatusServiceUnavailable, Code: apierr.CodeServiceUnavail, Message: fmt.Sprintf(
			"mce's asynchronous queue is full: %d requests are queued or running (mce serve --async-max-backlog). Try again later.", n)})
		return nil
	}
	queued := false
	defer func() {
		if !queued {
			s.async.Release()
		}
	}()
	ttl, timeout := async.DefaultTTL, async.DefaultTimeout
	if v := header(h, hdrAsyncTTL); v != "" {
		n, _ := strconv.Atoi(v) // validated
		ttl = time.Duration(n) * time.Second
	}
	if v := header(h, hdrAsyncTimeout); v != "" {
		n, _ := strconv.Atoi(v)
		timeout = time.Duration(n) * time.Second
	}
	key := uuid.NewString()
	id := header(h, hdrInferenceID)
	if id == "" {
		id = key
	}
	dir := ""
	if ext := strings.Trim(header(h, hdrAsyncOutputExt), "/"); ext != "" {
		dir = "/" + ext
	}
	outName := id + ".out"
	if fn := header(h, hdrAsyncFilename); fn != "" {
		outName = fn
	}
	rec := async.Record{
		Key: key, Endpoint: e.name, InferenceID: id, Input: input, Body: body,
		Output:      plan.Async.OutputPath + dir + "/" + outName,
		Failure:     plan.Async.FailurePath + dir + "/" + id + "-error.out",
		ContentType: header(h, hdrAsyncContentType), Accept: header(h, hdrAsyncAccept),
		CustomAttributes: header(h, hdrCustomAttributes),
		Accepted:         time.Now(), TTL: ttl, Timeout: timeout,
	}
	for _, out := range []string{rec.Output, rec.Failure} {
		if wire.S3KeyRefused(out) != "" || !s.async.OutputAllowed(out) {
			apierr.Write(w, apierr.Validation("The S3 output paths of endpoint %s (%s) are outside the S3 prefixes mce may write asynchronous results to (mce serve --async-output-prefix).",
				e.name, apierr.Truncate(out, 256)))
			return nil
		}
	}
	// Durable before the answer: once the caller hears 202, the request
	// survives anything short of losing the state directory.
	if err := s.async.Accept(rec); errors.Is(err, async.ErrInlineFull) {
		apierr.Write(w, &apierr.Error{Status: http.StatusServiceUnavailable, Code: apierr.CodeServiceUnavail,
			Message: "mce's asynchronous queue holds as many inline inputs as its memory budget allows (mce serve --async-memory). Try again later, or send the payload with InputLocation."})
		return nil
	} else if err != nil {
		apierr.Write(w, s.internalError(reqID, err))
		return nil
	}
	queued = true
	w.Header().Set(hdrAsyncOutputLocation, rec.Output)
	w.Header().Set(hdrAsyncFailure, rec.Failure)
	return c.JSON(http.StatusAccepted, map[string]string{"InferenceId": id})
}

// checkAsyncInput checks an InputLocation before the request is accepted.
func checkAsyncInput(s *Server, r *http.Request, principal authz.Principal, input string) *apierr.Error {
	if !strings.HasPrefix(input, "s3://") {
		return apierr.Validation("mce reads InputLocation from s3:// URIs only; %q is not one.", apierr.Truncate(input, 128))
	}
	if b, k, _ := strings.Cut(strings.TrimPrefix(input, "s3://"), "/"); b == "" || k == "" {
		return apierr.Validation("InputLocation %q needs a bucket and an object key (s3://bucket/key).", apierr.Truncate(input, 128))
	}
	if wire.S3KeyRefused(input) != "" {
		return apierr.Validation("InputLocation %q names an S3 key with an empty, . or .. path segment; mce refuses it.", apierr.Truncate(input, 128))
	}
	// mce reads the input with its own S3 credentials, for whoever calls:
	// the caller must be allowed to read it, and it must lie where the
	// operator lets asynchronous inputs come from. Neither check looks at
	// S3, so the answer says nothing of whether the object exists.
	if api := s.async.InputScope(input); api != nil {
		return api
	}
	if api := s.gate.decide(r.Context(), r, principal, actionS3GetObject, s3ObjectARN(input), nil); api != nil {
		return api
	}
	return nil
}

var asyncRules = []headerRule{
	{header: hdrAsyncContentType, member: "contentType", max: 1024, ascii: true},
	{header: hdrAsyncAccept, member: "accept", max: 1024, ascii: true},
	{header: hdrCustomAttributes, member: "customAttributes", max: 1024, ascii: true},
	{header: hdrInferenceID, member: "inferenceId", min: 1, max: 64, pattern: printPattern, shown: printPatternText},
	{header: hdrAsyncInputLocation, member: "inputLocation", min: 1, max: 1024, pattern: inputLocationPattern, shown: inputLocationText},
	{header: hdrAsyncOutputExt, member: "s3OutputPathExtension", min: 1, max: 1024, pattern: printPattern, shown: printPatternText},
	{header: hdrAsyncFilename, member: "filename", min: 1, max: 1024, pattern: printPattern, shown: printPatternText},
}

const inputLocationText = wire.S3URIPattern

var inputLocationPattern = regexp.MustCompile(inputLocationText)

// validateAsyncHeaders checks InvokeEndpointAsync's headers, all problems at
// once, in SageMaker's wording.
func validateAsyncHeaders(endpoint string, h http.Header) *apierr.Error {
	if api := validateHeaderRules(endpoint, h, asyncRules); api != nil {
		return api
	}
	// These name S3 objects under the endpoint's output paths: no segment
	// may step out of them.
	for _, r := range []struct{ header, member string }{
		{hdrInferenceID, "InferenceId"}, {hdrAsyncOutputExt, "S3OutputPathExtension"}, {hdrAsyncFilename, "Filename"},
	} {
		v := header(h, r.header)
		if r.header == hdrAsyncOutputExt {
			v = strings.Trim(v, "/") // a folder: its slashes at either end go
		}
		if v == "" {
			continue
		}
		for _, seg := range strings.Split(v, "/") {
			if seg == "." || seg == ".." || seg == "" {
				return apierr.Validation("%s %q names an S3 key with an empty, . or .. path segment; mce refuses it.", r.member, apierr.Truncate(v, 128))
			}
		}
	}
	for _, r := range []struct {
		header, member string
		lo, hi         int
	}{
		{hdrAsyncTTL, "requestTTLSeconds", 60, 21600},
		{hdrAsyncTimeout, "invocationTimeoutSeconds", 1, 3600},
	} {
		v := header(h, r.header)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			return apierr.Validation("1 validation error detected: %s", constraint(v, r.member, "Member must be an integer"))
		case n < r.lo:
			return apierr.Validation("1 validation error detected: %s", constraint(v, r.member, fmt.Sprintf("Member must have value greater than or equal to %d", r.lo)))
		case n > r.hi:
			return apierr.Validation("1 validation error detected: %s", constraint(v, r.member, fmt.Sprintf("Member must have value less than or equal to %d", r.hi)))
		}
	}
	for _, hd := range []string{hdrTargetModel, hdrTargetVariant, hdrTargetContainer, hdrInferenceComp, hdrSessionID, hdrEnableExplain} {
		if header(h, hd) != "" {
			return apierr.Validation("InvokeEndpointAsync does not take the %s header.", hd)
		}
	}
	return nil
}

// asyncConfigOf shows an endpoint's async settings as DescribeEndpoint does.
func asyncConfigOf(p *containers.AsyncPlan) *spec.AsyncInferenceConfig {
	if p == nil {
		return nil
	}
	n := int32(p.MaxConcurrentPerInstance)
	return &spec.AsyncInferenceConfig{
		ClientConfig: &spec.AsyncInferenceClientConfig{MaxConcurrentInvocationsPerInstance: &n},
		OutputConfig: &spec.AsyncInferenceOutputConfig{S3OutputPath: p.OutputPath, S3FailurePath: p.FailurePath},
	}
}

// newAsyncQueue makes the server's asynchronous queue from its
// configuration; the queue reaches the server only through asyncPeer.
func newAsyncQueue(s *Server) *async.Queue {
	cfg := s.cfg
	return async.NewQueue(async.Options{
		Store: cfg.Store, Objects: cfg.AsyncObjects, Endpoints: asyncPeer{s}, Outcomes: asyncPeer{s}, Observer: s.metrics,
		MaxPayload: cfg.AsyncMaxPayload, Memory: cfg.AsyncMemory, MaxBacklog: cfg.AsyncMaxBacklog,
		InputPrefixes: cfg.AsyncInputPrefixes, OutputPrefixes: cfg.AsyncOutputPrefixes,
		Background: s.bg, Registerer: s.metrics.Registry(), Logger: cfg.Logger,
	})
}

// asyncPeer is what the asynchronous queue sees of the server: its
// endpoints (async.Endpoints), its metrics and error mapping (async.Outcomes).
type asyncPeer struct{ s *Server }

var (
	_ async.Endpoints = asyncPeer{}
	_ async.Outcomes  = asyncPeer{}
)

func (p asyncPeer) AsyncTarget(name string) (async.Target, bool) {
	e := p.s.reg.get(name)
	if e == nil {
		return async.Target{}, false
	}
	if e.deleting.Load() {
		return async.Target{Deleting: true}, true
	}
	return async.Target{Route: e.route.Load(), Plan: e.record().Plan.Async}, true
}

// Invoked counts an asynchronous invocation as InvokeEndpoint's are
// counted: a failure only once a variant was picked, the status page's
// series only for answers.
func (p asyncPeer) Invoked(endpoint string, start time.Time, resp *pipeline.Response, err error) {
	if err != nil {
		if variant, _ := failedIn(err); variant != "" {
			p.s.metrics.ObserveInvocation(endpoint, variant, time.Since(start), 0, err)
		}
		return
	}
	p.s.metrics.ObserveInvocation(endpoint, resp.Variant, time.Since(start), resp.ModelLatency, nil)
	p.s.series.Record(endpoint, resp.Variant, start, true)
}

func (p asyncPeer) Failure(endpoint, key string, err error) *apierr.Error {
	return p.s.toAPIError(endpoint, key, err)
}
