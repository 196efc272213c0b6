package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/mce-run/mce/pipeline/httpc"
)

// Sink receives the streamed answer of InvokeStream. Its methods are called
// on the invoking goroutine, one at a time: Begin once, when the last
// container answered 2xx, then Write for every piece of the body as it comes
// off the connection. Write should pass p on (and flush it) before it
// returns: the next read from the container waits for it, which is how a
// slow client slows the container down instead of filling memory. An error
// from either ends the call: the container's connection is closed.
type Sink interface {
	Begin(StreamHead) error
	// Write is given a piece of the body; p is valid only during the call.
	Write(p []byte) error
}

// StreamHead is what is known of a streamed answer before its body.
type StreamHead struct {
	// ContentType is the last container's response Content-Type ("" when it
	// set none).
	ContentType string
	// CustomAttributes is the last container's
	// X-Amzn-SageMaker-Custom-Attributes, "" when it set none.
	CustomAttributes string
	// Variant is the production variant serving the call; Container the
	// hostname of the container whose answer is streamed.
	Variant, Container string
	// Deadline is when the streamed call's time limit (Options.Timeout,
	// or the caller's deadline when sooner) ends: the whole stream, its
	// delivery to the caller included, must be over by then.
	Deadline time.Time
}

// StreamResult is a streamed invocation that ended: the whole body reached
// the sink.
type StreamResult struct {
	Variant, Container string
	// ModelLatency is the time spent inside container calls, the stream's
	// whole length included.
	ModelLatency time.Duration
}

// Error codes of a StreamError: SageMaker's ModelStreamError codes
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointWithResponseStream.html).
const (
	StreamBroken                = "StreamBroken"
	ModelInvocationTimeExceeded = "ModelInvocationTimeExceeded"
)

// StreamError is a failure of the streamed container after its answer
// began: the host can no longer answer an HTTP error and reports it as a
// ModelStreamError event instead. Code is StreamBroken (the connection
// failed or the answer was malformed) or ModelInvocationTimeExceeded (the
// time limit expired before the answer ended). It unwraps to the
// ModelError an unstreamed call would have produced, with
// OriginalStatusCode the 2xx the container had sent.
type StreamError struct {
	Code    string
	Message string
	Model   *ModelError
}

func (e *StreamError) Error() string { return e.Message }

// Unwrap returns the ModelError behind the stream's end.
func (e *StreamError) Unwrap() error { return e.Model }

// ErrSink wraps the error a Sink returned: the client could not take the
// answer. The container call was cut.
var ErrSink = errors.New("pipeline: the stream's sink failed")

// streamBuf is the size of the pieces read from a streaming container: the
// most one stream holds in memory at once, and the largest PayloadPart.
const streamBuf = 16 << 10

var streamBufs = sync.Pool{New: func() any { b := make([]byte, streamBuf); return &b }}

// streamSink adapts a Sink to the HTTP client's Streamer, for one call.
type streamSink struct {
	sink    Sink
	head    StreamHead
	started bool
	werr    error // the error the Sink returned
}

var _ httpc.Streamer = (*streamSink)(nil)

func (s *streamSink) begun() bool { return s != nil && s.started }

// Stream hands the 2xx body b to the sink as it arrives.
func (s *streamSink) Stream(h httpc.StreamHead, b io.Reader) error {
	s.head.ContentType, s.head.CustomAttributes, s.head.Deadline = h.ContentType, h.CustomAttributes, h.Deadline
	s.started = true
	if err := s.sink.Begin(s.head); err != nil {
		s.werr = err
		return fmt.Errorf("%w: %w", ErrSink, err)
	}
	bp := streamBufs.Get().(*[]byte)
	defer streamBufs.Put(bp)
	buf := *bp
	for {
		n, err := b.Read(buf)
		if n > 0 {
			if werr := s.sink.Write(buf[:n]); werr != nil {
				s.werr = werr
				return fmt.Errorf("%w: %w", ErrSink, werr)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// InvokeStream is Invoke with the last container's answer streamed: earlier
// containers of a Serial chain are called as Invoke calls them, and the
// last one's 2xx body goes to sink piece by piece as it arrives, never held
// whole (at most 16 KiB of it at once), with no cap on its length. Options.Timeout bounds
// the last call from its start to the end of its body. Errors before
// sink.Begin are Invoke's; after it, a *StreamError when the container
// failed, ErrSink (wrapped) when the sink did, or ctx's error (wrapped)
// when the caller went away. A multi-model container cannot be streamed
// (there is no TargetModel): a ValidationError.
func (iv *Invoker) InvokeStream(ctx context.Context, r *Route, req *Request, sink Sink) (*StreamResult, error) {
	if req.TargetModel != "" {
		return nil, &ValidationError{Endpoint: r.Endpoint, Message: "TargetModel is not accepted by a streamed invocation."}
	}
	resp, err := iv.invoke(ctx, r, req, sink)
	if err != nil {
		return nil, err
	}
	defer resp.Release()
	return &StreamResult{Variant: resp.Variant, Container: resp.Container, ModelLatency: resp.ModelLatency}, nil
}

// hopStream calls the last container of a streamed invocation.
func (iv *Invoker) hopStream(ctx context.Context, c Container, body []byte, h hopHeaders, out *buffer, s *streamSink) (httpc.Result, error) {
	if _, ok := c.(MultiModel); ok {
		return httpc.Result{}, &ValidationError{Message: "Container " + c.Hostname() +
			" is a multi-model container: it needs a TargetModel, which a streamed invocation does not have."}
	}
	req := httpc.Request{BaseURL: c.BaseURL(), Method: http.MethodPost, Path: "/invocations", Body: body, Stream: s}
	h.forward(&req.Header, false)
	return iv.do(ctx, &req, out), nil
}

// streamError turns the failure of a streamed call whose answer had begun
// into what InvokeStream returns.
func (iv *Invoker) streamError(r *Route, v *Variant, host string, res httpc.Result, s *streamSink) error {
	if s.werr != nil {
		return fmt.Errorf("pipeline: invoke endpoint %q, container %q: %w: %w", r.Endpoint, host, ErrSink, s.werr)
	}
	if res.Outcome == httpc.Canceled {
		return fmt.Errorf("pipeline: invoke endpoint %q, container %q: %w", r.Endpoint, host, res.Err)
	}
	if res.Outcome == httpc.Timeout {
		me := receivedError(r.Endpoint, v.name, host, res.Status, "Container "+host+
			" did not finish its streamed response within the invocation time limit.", res.Err)
		return &StreamError{Code: ModelInvocationTimeExceeded, Model: me,
			Message: "Your invocation timed out while container " + host + " of endpoint " + r.Endpoint +
				" was streaming its response: it must finish within " + iv.timeout.String() + "."}
	}
	me := receivedError(r.Endpoint, v.name, host, res.Status, "The connection to container "+host+
		" broke while it was streaming its response.", res.Err)
	return &StreamError{Code: StreamBroken, Model: me,
		Message: "The response stream from container " + host + " of endpoint " + r.Endpoint +
			" broke before it ended (the container closed the connection or sent a malformed response). See the mce log for more information."}
}
