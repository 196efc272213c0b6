// Package bidistream is InvokeEndpointWithBidirectionalStream (the
// "SageMaker Runtime HTTP2" service): one HTTP/2 request whose body is an
// event stream of PayloadPart events from the client, answered by an event
// stream of PayloadPart events (and ModelStreamError / InternalStreamFailure
// exceptions) from the model, bridged to the WebSocket the container serves
// at /invocations-bidirectional-stream.
//
// A UTF8 part travels as a text frame, a BINARY part as a binary frame; a
// PARTIAL part is a fragment of a message that a COMPLETE part ends, both
// ways. The package knows nothing of endpoints: host authenticates,
// authorizes and picks the container, then hands the request to Serve.
package bidistream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/internal/wire"
)

// ContainerPath is where the container serves its WebSocket.
const ContainerPath = containers.BidirectionalStreamPath

// ImageLabel marks an image whose container serves ContainerPath; `mce
// check` reports it.
const ImageLabel = containers.LabelBidirectionalStreaming

// MediaType is the Content-Type of the request and response bodies.
const MediaType = "application/vnd.amazon.eventstream"

// The limits, when Options leaves them zero.
const (
	DefaultMaxPartBytes    = 1 << 20
	DefaultMaxMessageBytes = 16 << 20
	DefaultAcceptTimeout   = 2 * time.Second
	DefaultPingInterval    = 30 * time.Second
	DefaultDrainIdle       = 10 * time.Second
)

// Options bound one stream.
type Options struct {
	// MaxPartBytes is the largest PayloadPart either way: a client's larger
	// part ends the stream with InputValidationError; a larger container
	// message is sent in parts of this size (PARTIAL, then COMPLETE).
	MaxPartBytes int
	// MaxMessageBytes is the largest WebSocket message the container may
	// send; a larger one ends the stream with ModelStreamError.
	MaxMessageBytes int64
	// AcceptTimeout is how long the container has to accept the WebSocket.
	AcceptTimeout time.Duration
	// PingInterval is how often mce pings the container; a ping left
	// unanswered for that long ends the stream with ModelStreamError.
	PingInterval time.Duration
	// DrainIdle: once the client has ended its input, the stream ends when
	// the container closes the WebSocket or sends nothing for this long.
	DrainIdle time.Duration
	// Client dials the container (nil: a plain client without proxies).
	Client *http.Client
}

func (o Options) withDefaults() Options {
	if o.MaxPartBytes <= 0 {
		o.MaxPartBytes = DefaultMaxPartBytes
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.AcceptTimeout <= 0 {
		o.AcceptTimeout = DefaultAcceptTimeout
	}
	if o.PingInterval <= 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.DrainIdle <= 0 {
		o.DrainIdle = DefaultDrainIdle
	}
	if o.Client == nil {
		o.Client = dialClient
	}
	return o
}

// dialClient dials containers when Options.Client is nil: one for every
// stream (a WebSocket takes its connection over, so there is nothing to
// pool), without proxies.
var dialClient = &http.Client{Transport: &http.Transport{Proxy: nil}}

// Target is where one stream goes.
type Target struct {
	// BaseURL is the container's root, such as "http://172.18.0.3:8080".
	BaseURL string
	// Variant is the production variant, echoed in
	// X-Amzn-Invoked-Production-Variant; Container is the container's
	// hostname, for logs.
	Variant, Container string
	// Path and Query are the request's ModelInvocationPath and
	// ModelQueryString (validated by Check): Path replaces ContainerPath.
	Path, Query string
}

// Request is what the request's headers ask for, once Check passed.
type Request struct {
	TargetVariant, Path, Query string
}

var (
	nameRe  = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9])*$`)
	pathRe  = regexp.MustCompile(`^[A-Za-z0-9\-._]+(?:/[A-Za-z0-9\-._]+)*$`)
	queryRe = regexp.MustCompile(`^[a-zA-Z0-9][A-Za-z0-9_-]*=(?:[A-Za-z0-9._~\-]|%[0-9A-Fa-f]{2})+(?:&[a-zA-Z0-9][A-Za-z0-9_-]*=(?:[A-Za-z0-9._~\-]|%[0-9A-Fa-f]{2})+)*$`)
)

// Check validates the endpoint name and the request's headers as the
// service model constrains them.
func Check(endpoint string, h http.Header) (Request, *Error) {
	var errs []string
	field := func(name, v string, max int, re *regexp.Regexp, pattern string) {
		switch {
		case len(v) > max:
			errs = append(errs, fmt.Sprintf("Value at '%s' failed to satisfy constraint: Member must have length less than or equal to %d", name, max))
		case v != "" && !re.MatchString(v):
			errs = append(errs, fmt.Sprintf("Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", v, name, pattern))
		}
	}
	if endpoint == "" {
		errs = append(errs, "Value at 'endpointName' failed to satisfy constraint: Member must not be null")
	}
	field("endpointName", endpoint, 63, nameRe, nameRe.String())
	req := Request{TargetVariant: h.Get(wire.HeaderTargetVariant), Path: h.Get(wire.HeaderModelInvocationPath), Query: h.Get(wire.HeaderModelQueryString)}
	field("targetVariant", req.TargetVariant, 63, nameRe, nameRe.String())
	field("modelInvocationPath", req.Path, 100, pathRe, pathRe.String())
	field("modelQueryString", req.Query, 2048, queryRe, queryRe.String())
	for _, seg := range strings.Split(req.Path, "/") {
		if (seg == "." || seg == "..") && len(errs) == 0 {
			errs = append(errs, fmt.Sprintf("Value '%s' at 'modelInvocationPath' failed to satisfy constraint: Member must not have '.' or '..' segments", req.Path))
		}
	}
	if len(errs) > 0 {
		msg := fmt.Sprintf("%d validation error", len(errs))
		if len(errs) > 1 {
			msg += "s"
		}
		return req, &Error{Status: http.StatusBadRequest, Type: "InputValidationError", Message: msg + " detected: " + strings.Join(errs, "; ")}
	}
	return req, nil
}

// Error is an error answered before the stream starts, in the service's
// restJson1 shape: X-Amzn-ErrorType names the type, the JSON body carries
// Message and ErrorCode (and ModelError's OriginalStatusCode).
type Error struct {
	Status             int
	Type               string // InputValidationError, ModelError, ServiceUnavailableError, InternalServerError, AccessDeniedException, …
	ErrorCode, Message string
	OriginalStatusCode int
}

func (e *Error) Error() string { return e.Type + ": " + e.Message }

// Write answers e.
func (e *Error) Write(w http.ResponseWriter) {
	body := map[string]any{"Message": e.Message, "message": e.Message}
	if e.ErrorCode != "" {
		body["ErrorCode"] = e.ErrorCode
	}
	if e.OriginalStatusCode != 0 {
		body["OriginalStatusCode"] = e.OriginalStatusCode
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(wire.HeaderErrorType, e.Type)
	w.WriteHeader(e.Status)
	w.Write(b)
}

// Opener unwraps one message of the client's stream: the event it signs
// (inner), or end for the empty message that ends the input. A nil inner
// with end false means the message is the event itself (an unsigned
// stream). authz.EventVerifier.Open is one.
type Opener func(ctx context.Context, msg eventstream.Message) (inner []byte, end bool, err error)

// Result is what one stream carried, for logs and metrics.
type Result struct {
	PartsIn, PartsOut int64
	BytesIn, BytesOut int64
	// Err is why the stream ended other than by the client's end and the
	// container's normal close; nil for a normal end.
	Err error
}

// Serve dials the container's WebSocket and bridges r's event stream to it
// until the client or the container ends the stream. Before the stream
// starts, failures are answered with an *Error (ModelError when the
// container does not accept the WebSocket in time); after, they end the
// stream with an exception event.
func Serve(w http.ResponseWriter, r *http.Request, open Opener, t Target, o Options, log zerolog.Logger) Result {
	o = o.withDefaults()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()

	conn, aerr := dial(ctx, t, o)
	if aerr != nil {
		aerr.Write(w)
		return Result{Err: aerr}
	}
	defer conn.CloseNow()
	conn.SetReadLimit(-1) // relay counts each message against MaxMessageBytes as it reads it

	w.Header().Set("Content-Type", MediaType)
	if t.Variant != "" {
		w.Header().Set(wire.HeaderInvokedVariant, t.Variant)
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	out := &sink{w: w, rc: rc, enc: eventstream.NewEncoder()}
	if err := out.flush(); err != nil {
		return Result{Err: err}
	}

	var res Result
	inputDone := make(chan struct{})
	var inErr error
	go func() {
		defer close(inputDone)
		inErr = pump(ctx, r.Body, open, conn, o, &res, out)
		if inErr != nil {
			cancel() // the output side stops too
		}
	}()
	pings := make(chan error, 1)
	go func() { pings <- ping(ctx, conn, o.PingInterval) }()

	outErr := relay(ctx, conn, o, out, &res, inputDone, pings)
	cancel()
	// The input side may be blocked reading the client's body: a read
	// deadline in the past unblocks it.
	rc.SetReadDeadline(time.Now())
	<-inputDone
	switch {
	case inErr != nil && !errors.Is(inErr, context.Canceled):
		res.Err = inErr
	case outErr != nil:
		res.Err = outErr
	}
	if res.Err == nil {
		conn.Close(websocket.StatusNormalClosure, "")
	}
	return res
}

// dial opens the container's WebSocket within the accept timeout.
func dial(ctx context.Context, t Target, o Options) (*websocket.Conn, *Error) {
	u, err := url.Parse(t.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, &Error{Status: http.StatusInternalServerError, Type: "InternalServerError", Message: "The container's address is not an http URL."}
	}
	u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	u.Path = ContainerPath
	if t.Path != "" {
		u.Path = "/" + t.Path
	}
	u.RawQuery = t.Query
	dctx, cancel := context.WithTimeout(ctx, o.AcceptTimeout)
	defer cancel()
	conn, resp, err := websocket.Dial(dctx, u.String(), &websocket.DialOptions{HTTPClient: o.Client, CompressionMode: websocket.CompressionDisabled})
	if err == nil {
		return conn, nil
	}
	e := &Error{Status: http.StatusFailedDependency, Type: "ModelError", ErrorCode: "ModelError"}
	switch {
	case resp != nil && resp.StatusCode != http.StatusSwitchingProtocols:
		e.OriginalStatusCode = resp.StatusCode
		e.Message = fmt.Sprintf("The container did not accept the bidirectional stream at %s: it answered %d instead of switching to a WebSocket. Does its image carry the label %s=true and serve that path?", u.Path, resp.StatusCode, ImageLabel)
	case errors.Is(dctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		e.Message = fmt.Sprintf("The container did not accept the bidirectional stream's WebSocket at %s within %s.", u.Path, o.AcceptTimeout)
	default:
		e.Message = fmt.Sprintf("The container did not accept the bidirectional stream's WebSocket at %s: %v", u.Path, err)
	}
	return nil, e
}

// sink writes the response's events; both directions may write (the input
// side writes the exception that ends a bad request).
type sink struct {
	mu  sync.Mutex
	w   io.Writer
	rc  *http.ResponseController
	enc *eventstream.Encoder
}

func (s *sink) flush() error { return s.rc.Flush() }

func (s *sink) part(p []byte, text, complete bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.enc.Encode(s.w, eventstream.Message{Headers: partHeaders[btoi(text)][btoi(complete)], Payload: p})
	if err == nil {
		err = s.flush()
	}
	return err
}

// partHeaders are a PayloadPart's headers, by [text][complete]: made once,
// not per part.
var partHeaders = func() (h [2][2]eventstream.Headers) {
	for t, dt := range []string{"BINARY", "UTF8"} {
		for c, cs := range []string{"PARTIAL", "COMPLETE"} {
			h[t][c] = eventstream.Headers{
				{Name: ":event-type", Value: eventstream.StringValue("PayloadPart")},
				{Name: ":content-type", Value: eventstream.StringValue("application/octet-stream")},
				{Name: ":message-type", Value: eventstream.StringValue("event")},
				{Name: "DataType", Value: eventstream.StringValue(dt)},
				{Name: "CompletionState", Value: eventstream.StringValue(cs)},
			}
		}
	}
	return h
}()

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// exception ends the stream with an exception event of type typ
// (ModelStreamError, InternalStreamFailure, or InputValidationError for
// a client's bad stream).
func (s *sink) exception(typ, code, msg string) error {
	body := map[string]string{"Message": msg}
	if code != "" {
		body["ErrorCode"] = code
	}
	b, _ := json.Marshal(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.enc.Encode(s.w, eventstream.Message{Headers: eventstream.Headers{
		{Name: ":exception-type", Value: eventstream.StringValue(typ)},
		{Name: ":content-type", Value: eventstream.StringValue("application/json")},
		{Name: ":message-type", Value: eventstream.StringValue("exception")},
	}, Payload: b})
	if err == nil {
		err = s.flush()
	}
	return err
}

// inputError is a client's bad stream: answered with InputValidationError.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

// pump reads the client's events and writes them to the container until the
// client's empty message (nil) or a failure.
func pump(ctx context.Context, body io.Reader, open Opener, conn *websocket.Conn, o Options, res *Result, out *sink) error {
	br := bufio.NewReaderSize(body, 64<<10)
	dec := eventstream.NewDecoder()
	// A signed message wraps the event: its payload is the event's
	// encoding, a little larger than the part.
	maxMsg := o.MaxPartBytes + 64<<10
	outer := make([]byte, 0, 64<<10)
	innerBuf := make([]byte, 0, 64<<10)
	var wr io.WriteCloser // the container message a PARTIAL part started
	var wrText bool
	fail := func(msg string) error {
		out.exception("InputValidationError", "InputValidation", msg)
		return &inputError{msg}
	}
	for {
		msg, err := readMessage(br, dec, outer, maxMsg)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil // the client ended its input without the empty message
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fail("The request stream is not a valid event stream: " + err.Error())
		}
		inner, end, err := open(ctx, msg)
		if err != nil {
			return fail(err.Error())
		}
		if end {
			return nil
		}
		event := msg
		if inner != nil {
			if event, err = dec.Decode(bytes.NewReader(inner), innerBuf); err != nil {
				return fail("A signed message does not carry a valid event: " + err.Error())
			}
		}
		text, complete, payload, err := payloadPart(event, o.MaxPartBytes)
		if err != nil {
			return fail(err.Error())
		}
		res.PartsIn++
		res.BytesIn += int64(len(payload))
		if wr != nil && wrText != text {
			return fail("A message's parts must all have the same DataType: a PARTIAL part started one of the other type.")
		}
		if text && complete && wr == nil && !utf8.Valid(payload) {
			return fail("A UTF8 PayloadPart must be valid UTF-8.")
		}
		if wr == nil {
			typ := websocket.MessageBinary
			if text {
				typ = websocket.MessageText
			}
			if wr, err = conn.Writer(ctx, typ); err != nil {
				return err
			}
			wrText = text
		}
		if _, err := wr.Write(payload); err != nil {
			return err
		}
		if complete {
			if err := wr.Close(); err != nil {
				return err
			}
			wr = nil
		}
	}
}

// readMessage reads one message of at most max bytes, refusing a longer one
// before reading it.
func readMessage(br *bufio.Reader, dec *eventstream.Decoder, buf []byte, max int) (eventstream.Message, error) {
	pre, err := br.Peek(4)
	if err != nil {
		if errors.Is(err, io.EOF) && len(pre) == 0 {
			return eventstream.Message{}, io.EOF
		}
		return eventstream.Message{}, fmt.Errorf("a message was cut short: %w", io.ErrUnexpectedEOF)
	}
	n := binary.BigEndian.Uint32(pre)
	if int64(n) > int64(max) {
		return eventstream.Message{}, fmt.Errorf("a message of %d bytes is larger than the %d bytes a PayloadPart may take", n, max)
	}
	m, err := dec.Decode(io.LimitReader(br, int64(n)), buf)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return m, err
}

// payloadPart reads a RequestStreamEvent: a PayloadPart event, its DataType
// (BINARY when absent) and CompletionState (COMPLETE when absent).
func payloadPart(m eventstream.Message, max int) (text, complete bool, payload []byte, err error) {
	str := func(name string) string {
		if v, ok := m.Headers.Get(name).(eventstream.StringValue); ok {
			return string(v)
		}
		return ""
	}
	if mt := str(":message-type"); mt != "event" {
		return false, false, nil, fmt.Errorf("The request stream carries a message of type %q; it may carry events only.", mt)
	}
	if et := str(":event-type"); et != "PayloadPart" {
		return false, false, nil, fmt.Errorf("The request stream carries a %q event; RequestStreamEvent has PayloadPart only.", et)
	}
	switch dt := str("DataType"); dt {
	case "UTF8":
		text = true
	case "", "BINARY":
	default:
		return false, false, nil, fmt.Errorf("Value '%s' at 'DataType' failed to satisfy constraint: Member must satisfy regular expression pattern: ^(UTF8)$|^(BINARY)$", dt)
	}
	switch cs := str("CompletionState"); cs {
	case "", "COMPLETE":
		complete = true
	case "PARTIAL":
	default:
		return false, false, nil, fmt.Errorf("Value '%s' at 'CompletionState' failed to satisfy constraint: Member must satisfy regular expression pattern: ^(PARTIAL)$|^(COMPLETE)$", cs)
	}
	if len(m.Payload) > max {
		return false, false, nil, fmt.Errorf("A PayloadPart of %d bytes is larger than the %d bytes allowed.", len(m.Payload), max)
	}
	return text, complete, m.Payload, nil
}

// relay writes the container's messages to the client as PayloadParts
// until the container closes the WebSocket, the client's input is over and
// the container stays quiet for DrainIdle, or a failure.
func relay(ctx context.Context, conn *websocket.Conn, o Options, out *sink, res *Result, inputDone <-chan struct{}, pings <-chan error) error {
	parts := make(chan part)
	readErr := make(chan error, 1)
	go func() { readErr <- readMessages(ctx, conn, o, parts) }()
	// Once the client's input is over, the quiet period runs from the
	// container's last part: each part restarts it.
	var quiet *time.Timer
	var drain <-chan time.Time
	defer func() {
		if quiet != nil {
			quiet.Stop()
		}
	}()
	for {
		select {
		case p := <-parts:
			err := out.part((*p.buf)[:p.n], p.text, p.complete)
			bufferPool(o.MaxPartBytes).Put(p.buf)
			if err != nil {
				return err
			}
			res.PartsOut++
			res.BytesOut += int64(p.n)
			if quiet != nil {
				quiet.Reset(o.DrainIdle)
			}
		case err := <-readErr:
			if errors.Is(err, errTooBig) {
				out.exception("ModelStreamError", "MessageTooBig", fmt.Sprintf("The container sent a WebSocket message larger than %d bytes.", o.MaxMessageBytes))
				conn.Close(websocket.StatusMessageTooBig, "message too big")
				return err
			}
			return closed(ctx, err, out)
		case <-inputDone:
			inputDone = nil
			quiet = time.NewTimer(o.DrainIdle)
			drain = quiet.C
		case <-drain:
			return nil // the client is done and the model has nothing more to say
		case err := <-pings:
			pings = nil
			if err != nil && ctx.Err() == nil {
				out.exception("ModelStreamError", "StreamBroken", "The container stopped answering the WebSocket's pings: "+err.Error())
				return fmt.Errorf("ping: %w", err)
			}
		}
	}
}

// part is a piece of a container message on its way to the client; its
// buffer comes from bufs and relay puts it back once written.
type part struct {
	buf            *[]byte
	n              int
	text, complete bool
}

// partBuffers pools the buffers of parts, one pool per part size: a stream
// waiting for the container holds none, a busy one at most three (one
// written, one waiting to be, one being filled).
var partBuffers sync.Map // int → *sync.Pool

func bufferPool(size int) *sync.Pool {
	if p, ok := partBuffers.Load(size); ok {
		return p.(*sync.Pool)
	}
	p, _ := partBuffers.LoadOrStore(size, &sync.Pool{New: func() any { b := make([]byte, size); return &b }})
	return p.(*sync.Pool)
}

// readMessages reads the container's messages and sends each on parts in
// pieces of at most MaxPartBytes, the last marked complete; it returns the
// read's error (errTooBig for a message past MaxMessageBytes), or ctx's.
func readMessages(ctx context.Context, conn *websocket.Conn, o Options, parts chan<- part) error {
	pool := bufferPool(o.MaxPartBytes)
	send := func(p part) error {
		select {
		case parts <- p:
			return nil
		case <-ctx.Done():
			pool.Put(p.buf)
			return ctx.Err()
		}
	}
	// next reads the message's next piece; err is io.EOF once it is over
	// (the piece may still hold its last bytes).
	next := func(r io.Reader) (part, error) {
		buf := pool.Get().(*[]byte)
		n, err := io.ReadFull(r, *buf)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		return part{buf: buf, n: n}, err
	}
	for {
		typ, r, err := conn.Reader(ctx)
		if err != nil {
			return err
		}
		var total int64
		cur, err := next(r) // sent once the piece after it tells whether it is the last
		for {
			if total += int64(cur.n); total > o.MaxMessageBytes {
				pool.Put(cur.buf)
				return errTooBig
			}
			if err != nil {
				break
			}
			var after part
			if after, err = next(r); after.n == 0 && errors.Is(err, io.EOF) {
				pool.Put(after.buf)
				break
			}
			cur.text = typ == websocket.MessageText
			if serr := send(cur); serr != nil {
				pool.Put(after.buf)
				return serr
			}
			cur = after
		}
		if !errors.Is(err, io.EOF) {
			pool.Put(cur.buf)
			return err
		}
		cur.text, cur.complete = typ == websocket.MessageText, true
		if err := send(cur); err != nil {
			return err
		}
	}
}

var errTooBig = errors.New("the container sent a message past MaxMessageBytes")

// closed ends the stream for a read that failed: a normal close is the
// model's end; any other is a ModelStreamError.
func closed(ctx context.Context, err error, out *sink) error {
	if ctx.Err() != nil {
		return nil // the client went away or the input failed: it was answered there
	}
	switch st := websocket.CloseStatus(err); st {
	case websocket.StatusNormalClosure, websocket.StatusGoingAway:
		return nil
	case -1:
		out.exception("ModelStreamError", "StreamBroken", "The connection to the container broke: "+err.Error())
	default:
		out.exception("ModelStreamError", "ModelStreamError", fmt.Sprintf("The container closed the WebSocket with status %d: %v", int(st), err))
	}
	return err
}

// ping pings the container every interval; it returns the first failure,
// or nil when ctx ends.
func ping(ctx context.Context, conn *websocket.Conn, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, every)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
}
