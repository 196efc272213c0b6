package smserve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// Sentinel causes carried by *Error values that the negotiation and body helpers return.
var (
	ErrUnsupportedMediaType = errors.New("unsupported media type")
	ErrNotAcceptable        = errors.New("not acceptable")
	ErrBodyTooLarge         = errors.New("request body too large")
	ErrNotReady             = errors.New("model not loaded")
)

// Error is a failure with an HTTP status and a message meant for the caller. Handlers return it; WriteError
// turns it into a response.
type Error struct {
	// Status is the HTTP status code to answer with.
	Status int
	// Message is the text put in the {"error": …} body.
	Message string
	// Err is the underlying cause, if any (for errors.Is / errors.As).
	Err error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error with the given status; %w in format sets its cause.
func Errorf(status int, format string, a ...any) error {
	err := fmt.Errorf(format, a...)
	return &Error{Status: status, Message: err.Error(), Err: errors.Unwrap(err)}
}

// StatusOf returns the HTTP status an error maps to: an *Error's Status, 413 for an exceeded
// http.MaxBytesReader, 500 for anything else.
func StatusOf(err error) int {
	var he *Error
	if errors.As(err, &he) {
		return he.Status
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusInternalServerError
}

// HandlerFunc is an http.Handler that returns its failure instead of writing it. A handler that has already
// written its response must return nil.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// ServeHTTP calls f and, on error, answers with WriteError.
func (f HandlerFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := f(w, r); err != nil {
		WriteError(w, err)
	}
}

type errorBody struct {
	Error string `json:"error"`
}

// WriteError answers with StatusOf(err) and the JSON body {"error": err.Error()}. This is the only place
// where the example containers turn errors into responses.
func WriteError(w http.ResponseWriter, err error) {
	WriteJSON(w, StatusOf(err), errorBody{Error: err.Error()})
}

// WriteJSON answers with status and v encoded as application/json, with a Content-Length. If v cannot be
// encoded it answers 500 instead.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{Error: "encode response: " + err.Error()})
	}
	b = append(b, '\n')
	Write(w, status, "application/json", b)
}

// Write answers with status, Content-Type ct and body b, setting Content-Length.
func Write(w http.ResponseWriter, status int, ct string, b []byte) {
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b) // the client is gone if this fails; nothing left to tell it
}
