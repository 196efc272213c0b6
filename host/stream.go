package host

import (
	"cmp"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/labstack/echo/v4"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/capture"
	"github.com/mce-run/mce/host/metrics"
	"github.com/mce-run/mce/internal/wire"
	"github.com/mce-run/mce/pipeline"
)

// Headers of InvokeEndpointWithResponseStream that InvokeEndpoint does not
// have (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointWithResponseStream.html): the model's Accept comes as
// X-Amzn-SageMaker-Accept, and the answer's model Content-Type goes back as
// X-Amzn-SageMaker-Content-Type (Content-Type is the event stream's).
var (
	hdrStreamAccept      = http.CanonicalHeaderKey(wire.HeaderStreamAccept)
	hdrStreamContentType = http.CanonicalHeaderKey(wire.HeaderStreamContentType)
)

const eventStreamMediaType = "application/vnd.amazon.eventstream"

// invokeEndpointStream is InvokeEndpointWithResponseStream: POST
// /endpoints/{EndpointName}/invocations-response-stream (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointWithResponseStream.html).
// Validation, authorization, routing and the body's limits are
// InvokeEndpoint's (admitInvocation); the last container's answer is relayed
// as PayloadPart events as its bytes arrive. A failure before the container's answer began
// is answered as InvokeEndpoint answers it (ModelError 424 and so on); one
// after it is a ModelStreamError exception event ending the stream.
func (s *Server) invokeEndpointStream(c echo.Context) error {
	start := time.Now()
	r := c.Request()
	w := c.Response()
	reqID := s.ids.next()
	w.Header().Set(hdrRequestID, reqID)
	name := c.Param("name")

	// The model's Accept is X-Amzn-SageMaker-Accept here; a plain Accept is
	// the client's for the event stream itself. Validated as InvokeEndpoint
	// validates Accept.
	h := r.Header.Clone()
	delete(h, hdrAccept)
	if v, ok := h[hdrStreamAccept]; ok {
		h[hdrAccept] = v
		delete(h, hdrStreamAccept)
	}
	adm, api := s.admitInvocation(w, r, name, h, authz.ActionInvokeEndpointWithResponseStream)
	if api != nil {
		apierr.Write(w, api)
		return nil
	}
	e, route, rb := adm.e, adm.route, adm.rb
	defer rb.release()
	body := rb.bytes()
	// TargetModel is not a member of the operation (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointWithResponseStream.html):
	// a multi-model endpoint has no model to stream from.
	if header(h, hdrTargetModel) != "" {
		apierr.Write(w, apierr.Validation("TargetModel is not a parameter of InvokeEndpointWithResponseStream."))
		return nil
	}
	if e.multiModel.Load() {
		apierr.Write(w, apierr.Validation("Endpoint %s is a multi-model endpoint: InvokeEndpointWithResponseStream has no TargetModel to choose a model with. Use InvokeEndpoint.", name))
		return nil
	}
	if api := unsupportedHeaders(h); api != nil {
		apierr.Write(w, api)
		return nil
	}

	req := pipelineRequest(h, body) // TargetModel was refused above
	req.Adapter = adm.adapter
	if err := s.sessions.Begin(e.name, adm.component, header(h, hdrSessionID), true, &req); err != nil {
		apierr.Write(w, s.toAPIError(name, reqID, err))
		return nil
	}
	sink := &eventSink{w: w, rc: http.NewResponseController(w), start: start, timeout: s.cfg.ContainerTimeout,
		endpoint: e.name, metrics: s.metrics, conn: tcpConn(r.Context()), tee: e.capturer.Load().Sample().Tee()}
	res, err := s.invoker.InvokeStream(r.Context(), route, &req, sink)
	if err == nil {
		sink.release()
		sink.tee.Record(capture.Call{Variant: res.Variant, InferenceID: req.InferenceID, Time: start, Input: body,
			InputContentType: req.ContentType, OutputContentType: cmp.Or(sink.head.ContentType, defaultContentType)})
		s.metrics.ObserveInvocation(e.name, res.Variant, time.Since(start), res.ModelLatency, nil)
		s.metrics.ObserveComponent(adm.component, time.Since(start), res.ModelLatency, nil)
		s.series.Record(e.name, res.Variant, start, true)
		s.mirror.Offer(route, res.Variant, &req, true) // the shadow's copy is streamed too
		return nil
	}
	defer mirrorFailed(s.mirror, route, &req, err, true)
	s.sessions.Failed(e.name, adm.component, &req, err)
	variant := sink.head.Variant
	fv, container := failedIn(err)
	if variant == "" {
		variant = fv
	}
	s.series.Record(e.name, variant, start, false)
	if variant != "" {
		s.metrics.ObserveInvocation(e.name, variant, time.Since(start), 0, err)
		s.metrics.ObserveComponent(adm.component, time.Since(start), 0, err)
	}
	if r.Context().Err() != nil || errors.Is(err, pipeline.ErrSink) {
		// The client hung up, or did not take the stream within its
		// time limit; nobody reads an answer.
		s.log.Debug().Str("endpoint", name).Str("request_id", reqID).Err(err).Msg("stream client went away")
		return nil
	}
	var se *pipeline.StreamError
	if errors.As(err, &se) {
		s.log.Info().Str("event", "stream_broken").Str("endpoint", name).Str("variant", variant).Str("container", container).
			Str("request_id", reqID).Str("code", se.Code).Dur("latency_ms", time.Since(start)).Err(err).
			AnErr("cause", se.Model.Err).Msg("invocation stream broke")
		if sink.exception(se) == nil {
			sink.release()
		}
		return nil
	}
	if sink.began {
		// Cannot happen: after Begin the pipeline fails with a
		// StreamError or the caller's or sink's error. End the stream
		// with the internal failure event rather than a second head.
		s.log.Error().Str("endpoint", name).Str("request_id", reqID).Err(err).Msg("stream failed after it began")
		if sink.exceptionEvent("InternalStreamFailure", "An internal error occurred in mce (request ID "+reqID+").", "") == nil {
			sink.release()
		}
		return nil
	}
	api = s.toAPIError(name, reqID, err)
	s.log.Debug().Str("endpoint", name).Str("variant", variant).Str("request_id", reqID).Err(err).
		AnErr("cause", errors.Unwrap(err)).Msg("invocation failed (detail)")
	s.logFailedInvocation(reqID, name, variant, container, api, time.Since(start))
	apierr.Write(w, api)
	return nil
}

// eventSink writes a streamed answer as an AWS event stream: the head as
// HTTP headers, each piece of the body as one PayloadPart event, flushed at
// once. The container time limit bounds the whole stream, its delivery
// included: every write must be taken by the client before the streamed
// call's deadline (StreamHead.Deadline), so a client that reads slowly or
// not at all cannot hold the stream beyond it. (A closing exception event
// gets streamExceptionGrace more.)
type eventSink struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	enc      *eventstream.Encoder
	start    time.Time
	timeout  time.Duration
	endpoint string
	metrics  *metrics.Metrics
	head     pipeline.StreamHead
	conn     *net.TCPConn // the client's, when known (ConnContext)
	tee      *capture.Tee // the parts, for data capture (nil: not sampled)
	began    bool
	first    bool // a PayloadPart was written
}

var payloadPartHeaders = eventstream.Headers{
	{Name: ":event-type", Value: eventstream.StringValue("PayloadPart")},
	{Name: ":content-type", Value: eventstream.StringValue("application/octet-stream")},
	{Name: ":message-type", Value: eventstream.StringValue("event")},
}

func (k *eventSink) Begin(h pipeline.StreamHead) error {
	k.head, k.began = h, true
	k.enc = eventstream.NewEncoder()
	rh := k.w.Header()
	ct := h.ContentType
	if ct == "" {
		ct = defaultContentType
	}
	rh.Set("Content-Type", eventStreamMediaType)
	rh.Set(hdrStreamContentType, ct)
	rh.Set(hdrInvokedVariant, h.Variant)
	if h.CustomAttributes != "" {
		rh.Set(hdrCustomAttributes, h.CustomAttributes)
	}
	if err := k.deadline(); err != nil {
		return err
	}
	if k.conn != nil {
		// While the stream runs, a close of the connection (net/http
		// closes it when a write misses the deadline) is a reset that
		// drops what is still queued to the client, instead of a graceful
		// close that would let a slow reader take the queued events for
		// as long as it likes, far past the time limit.
		_ = k.conn.SetLinger(0)
	}
	k.w.WriteHeader(http.StatusOK)
	return k.rc.Flush()
}

func (k *eventSink) Write(p []byte) error {
	// The write deadline is the stream's, set by Begin.
	if err := k.enc.Encode(k.w, eventstream.Message{Headers: payloadPartHeaders, Payload: p}); err != nil {
		return err
	}
	if err := k.rc.Flush(); err != nil {
		return err
	}
	k.tee.Write(p)
	if !k.first {
		k.first = true
		k.metrics.ObserveFirstByte(k.endpoint, k.head.Variant, time.Since(k.start))
	}
	return nil
}

// release gives the connection back its graceful close once the stream
// ended cleanly (its last event written), so that the connection's later
// answers are not cut by a reset.
func (k *eventSink) release() {
	if k.conn != nil {
		_ = k.conn.SetLinger(-1)
	}
}

// streamExceptionGrace is the time a closing exception event gets past the
// stream's deadline: the container's time may be up, and the client still
// deserves to learn why the stream ends.
const streamExceptionGrace = time.Second

// deadline bounds the writes to the client by the stream's deadline (the
// container time limit from the start of the streamed call), or, before
// the head is known, by the time limit from now.
func (k *eventSink) deadline() error {
	d := k.head.Deadline
	if d.IsZero() {
		d = time.Now().Add(k.timeout)
	}
	return k.setDeadline(d)
}

func (k *eventSink) setDeadline(d time.Time) error {
	err := k.rc.SetWriteDeadline(d)
	if errors.Is(err, http.ErrNotSupported) {
		return nil // a writer without deadlines (tests' recorders)
	}
	return err
}

// exception ends the stream with a ModelStreamError event (
// https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointWithResponseStream.html).
func (k *eventSink) exception(se *pipeline.StreamError) error {
	return k.exceptionEvent("ModelStreamError", se.Message, se.Code)
}

// exceptionEvent ends the stream with an exception event; an error means
// the client did not take it.
func (k *eventSink) exceptionEvent(typ, msg, code string) error {
	payload, err := json.Marshal(struct {
		Message   string
		ErrorCode string `json:",omitempty"`
	}{apierr.Truncate(msg, apierr.MaxMessageLen), code})
	if err != nil {
		return err
	}
	d := time.Now()
	if k.head.Deadline.After(d) {
		d = k.head.Deadline
	}
	if err := k.setDeadline(d.Add(streamExceptionGrace)); err != nil {
		return err
	}
	if err := k.enc.Encode(k.w, eventstream.Message{Headers: eventstream.Headers{
		{Name: ":exception-type", Value: eventstream.StringValue(typ)},
		{Name: ":content-type", Value: eventstream.StringValue("application/json")},
		{Name: ":message-type", Value: eventstream.StringValue("exception")},
	}, Payload: payload}); err != nil {
		return err
	}
	return k.rc.Flush()
}
