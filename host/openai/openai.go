// Package openai serves SageMaker's OpenAI-compatible route
// (https://docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-openai-compatible.html):
//
//	POST /endpoints/{EndpointName}/openai/v1/chat/completions
//	POST /endpoints/{EndpointName}/inference-components/{InferenceComponentName}/openai/v1/chat/completions
//
// A Chat Completions request goes to the endpoint (or its inference
// component) named in the URL, and the container's answer comes back as the
// container wrote it: one JSON document, or its stream (server-sent events,
// JSON lines) relayed as its bytes arrive. Callers authenticate with a bearer
// token (authz.AuthenticateBearer). What the package does is the route's
// own: the path, the method, the body's shape, the answer and OpenAI's error
// envelope; the host behind Backend authenticates, authorizes, routes and
// invokes.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/internal/wire"
)

// ChatCompletionsPath is the one OpenAI path SageMaker serves, after
// /endpoints/{EndpointName}[/inference-components/{InferenceComponentName}]/openai.
const ChatCompletionsPath = "/v1/chat/completions"

// Error is a refusal, written in OpenAI's error envelope
// ({"error": {"message", "type", "param", "code"}}), which OpenAI's clients
// read: Type is OpenAI's kind of error, Code is SageMaker's error code.
type Error struct {
	Status  int
	Type    string
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// OpenAI's error types, by the status they come with.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypePermission     = "permission_error"
	TypeNotFound       = "not_found_error"
	TypeRateLimit      = "rate_limit_error"
	TypeServer         = "server_error"
)

// TypeOf is OpenAI's error type for an HTTP status.
func TypeOf(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return TypeAuthentication
	case status == http.StatusForbidden:
		return TypePermission
	case status == http.StatusNotFound:
		return TypeNotFound
	case status == http.StatusTooManyRequests:
		return TypeRateLimit
	case status >= 500:
		return TypeServer
	}
	return TypeInvalidRequest
}

// Errorf is an Error of status with OpenAI's type for it.
func Errorf(status int, code, message string) *Error {
	return &Error{Status: status, Type: TypeOf(status), Code: code, Message: message}
}

type envelope struct {
	Error envelopeBody `json:"error"`
}

type envelopeBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// Write writes e as the whole answer.
func (e *Error) Write(w http.ResponseWriter) {
	b, _ := json.Marshal(envelope{envelopeBody{Message: e.Message, Type: e.Type, Code: e.Code}})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set(wire.HeaderErrorType, e.Code)
	w.WriteHeader(e.Status)
	w.Write(append(b, '\n'))
}

// Request is one Chat Completions call, admitted and read.
type Request struct {
	Endpoint  string
	Component string // "" for the endpoint's own model
	Body      []byte
	// Stream is the body's "stream": the caller asked for the answer as
	// it is made.
	Stream bool
	Accept string // the caller's, passed to the container
	// Header is the caller's request header, for what the host reads of
	// it beyond the body (InvokeEndpoint's target headers).
	Header http.Header
}

// Backend is what the route needs of the host.
type Backend interface {
	// Admit authenticates r (its bearer token) and authorizes the call on
	// the endpoint (and component), before the body is read.
	Admit(r *http.Request, endpoint, component string) *Error
	// Body reads r's body within the host's limits; release gives its
	// memory back.
	Body(w http.ResponseWriter, r *http.Request) (body []byte, release func(), err *Error)
	// Complete sends req to the endpoint and writes the container's answer
	// to out. An error returned before out began is written by the
	// handler; after it, out.Fail ends the stream.
	Complete(ctx context.Context, req Request, out *Answer) *Error
}

// Handler serves the route for one request: endpoint and component come from
// the URL, rest is what follows ".../openai" in it.
func Handler(b Backend, log zerolog.Logger) func(w http.ResponseWriter, r *http.Request, endpoint, component, rest string) {
	return func(w http.ResponseWriter, r *http.Request, endpoint, component, rest string) {
		if rest != ChatCompletionsPath {
			Errorf(http.StatusNotFound, "UnknownOperationException", "SageMaker's OpenAI-compatible route serves POST .../openai"+ChatCompletionsPath+" only, not .../openai"+truncate(rest, 200)+".").Write(w)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			Errorf(http.StatusMethodNotAllowed, "UnknownOperationException", "Chat completions take POST, not "+truncate(r.Method, 20)+".").Write(w)
			return
		}
		if e := b.Admit(r, endpoint, component); e != nil {
			e.Write(w)
			return
		}
		if e := checkContentType(r.Header.Values("Content-Type")); e != nil {
			e.Write(w)
			return
		}
		body, release, e := b.Body(w, r)
		if e != nil {
			e.Write(w)
			return
		}
		defer release()
		stream, e := parse(body)
		if e != nil {
			e.Write(w)
			return
		}
		out := &Answer{w: w, rc: http.NewResponseController(w)}
		req := Request{Endpoint: endpoint, Component: component, Body: body, Stream: stream, Accept: r.Header.Get("Accept"), Header: r.Header}
		if e := b.Complete(r.Context(), req, out); e != nil {
			if out.began {
				out.Fail(e)
				return
			}
			if r.Context().Err() == nil {
				e.Write(w)
			}
			log.Debug().Str("endpoint", endpoint).Str("component", component).Str("code", e.Code).Msg("chat completion refused")
		}
	}
}

// checkContentType takes JSON, or no Content-Type at all (the body must be
// JSON either way).
func checkContentType(v []string) *Error {
	if len(v) == 0 {
		return nil
	}
	mt, _, err := mime.ParseMediaType(v[0])
	if len(v) > 1 || err != nil || mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return Errorf(http.StatusUnsupportedMediaType, "ValidationError", "A chat completion's Content-Type is application/json, not "+truncate(strings.Join(v, ", "), 100)+".")
	}
	return nil
}

// parse checks that body is a JSON object and reads its "stream". The rest
// is the container's to read.
func parse(body []byte) (stream bool, e *Error) {
	t := bytes.TrimLeft(body, " \t\r\n")
	if len(t) == 0 || t[0] != '{' || !json.Valid(body) {
		return false, Errorf(http.StatusBadRequest, "ValidationError", "The body of a chat completion must be a JSON object.")
	}
	var head struct {
		Stream json.RawMessage `json:"stream"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return false, Errorf(http.StatusBadRequest, "ValidationError", "The body of a chat completion must be a JSON object.")
	}
	switch string(head.Stream) {
	case "", "null", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, Errorf(http.StatusBadRequest, "ValidationError", "'stream' must be true or false.")
}

// Answer is the caller's side of the answer: Whole for a complete one, or
// Begin, Write… for a stream. It is used by one goroutine.
type Answer struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	began bool
	// events: the stream is server-sent events (else JSON lines or bytes).
	events bool
}

// Header is the answer's header, to be set before Whole or Begin.
func (a *Answer) Header() http.Header { return a.w.Header() }

// Whole writes a complete answer.
func (a *Answer) Whole(contentType string, body []byte) {
	h := a.w.Header()
	h.Set("Content-Type", contentTypeOr(contentType))
	h.Set("Content-Length", strconv.Itoa(len(body)))
	a.w.WriteHeader(http.StatusOK)
	a.w.Write(body)
}

// Begin starts a streamed answer of the container's Content-Type; until
// deadline the caller must take each write.
func (a *Answer) Begin(contentType string, deadline time.Time) error {
	a.began = true
	ct := contentTypeOr(contentType)
	mt, _, _ := mime.ParseMediaType(ct)
	a.events = mt == "text/event-stream"
	h := a.w.Header()
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // a proxy in front must not hold the events back
	if err := a.rc.SetWriteDeadline(deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	a.w.WriteHeader(http.StatusOK)
	return a.rc.Flush()
}

// Write relays a piece of the stream as it came, at once.
func (a *Answer) Write(p []byte) error {
	if _, err := a.w.Write(p); err != nil {
		return err
	}
	return a.rc.Flush()
}

// Began reports whether the answer's head was written.
func (a *Answer) Began() bool { return a.began }

// Fail ends a stream that broke with the error, in the stream's own
// format: an event of server-sent events whose data is the error envelope
// (OpenAI's clients raise an event carrying "error", as vLLM sends one),
// else a JSON line.
func (a *Answer) Fail(e *Error) {
	b, _ := json.Marshal(envelope{envelopeBody{Message: e.Message, Type: e.Type, Code: e.Code}})
	if a.events {
		b = append(append([]byte("\n\ndata: "), b...), '\n', '\n')
	} else {
		b = append(append([]byte{'\n'}, b...), '\n')
	}
	_ = a.Write(b)
}

func contentTypeOr(ct string) string {
	if ct == "" {
		return "application/json"
	}
	return ct
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
