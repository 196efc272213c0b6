package bidistream

import (
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Backend is what the handler needs of the host: who may stream to an
// endpoint, and where a stream goes.
type Backend interface {
	// Authorize authenticates r and authorizes it on endpoint; the Opener
	// checks each message of its body.
	Authorize(r *http.Request, endpoint string) (Opener, *Error)
	// Place holds a ready instance of endpoint (of variant, when named) for
	// a stream; release gives it back.
	Place(endpoint string, req Request) (t Target, release func(), err *Error)
}

// HandlerOptions bound the listener.
type HandlerOptions struct {
	Options
	// MaxStreams bounds the streams open at once; past it a stream is
	// refused with ServiceUnavailableError. Zero means 1000.
	MaxStreams int
}

// Handler serves InvokeEndpointWithBidirectionalStream
// (POST /endpoints/{EndpointName}/invocations-bidirectional-stream), the one
// operation of SageMaker's HTTP/2 runtime service, for b.
func Handler(b Backend, o HandlerOptions, log zerolog.Logger) http.Handler {
	if o.MaxStreams <= 0 {
		o.MaxStreams = 1000
	}
	slots := make(chan struct{}, o.MaxStreams)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/endpoints/")
		if ok {
			name, ok = strings.CutSuffix(name, "/invocations-bidirectional-stream")
		}
		if !ok || strings.Contains(name, "/") {
			(&Error{Status: http.StatusNotFound, Type: "UnknownOperationException",
				Message: "This listener serves InvokeEndpointWithBidirectionalStream only: POST /endpoints/{EndpointName}/invocations-bidirectional-stream."}).Write(w)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			(&Error{Status: http.StatusMethodNotAllowed, Type: "InputValidationError", Message: "InvokeEndpointWithBidirectionalStream is a POST."}).Write(w)
			return
		}
		req, berr := Check(name, r.Header)
		if berr != nil {
			berr.Write(w)
			return
		}
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		default:
			(&Error{Status: http.StatusServiceUnavailable, Type: "ServiceUnavailableError",
				Message: "mce has as many bidirectional streams open as it allows; try again later."}).Write(w)
			return
		}
		open, berr := b.Authorize(r, name)
		if berr != nil {
			berr.Write(w)
			return
		}
		t, release, berr := b.Place(name, req)
		if berr != nil {
			berr.Write(w)
			return
		}
		defer release()
		start := time.Now()
		res := Serve(w, r, open, t, o.Options, log)
		ev := log.Info()
		if res.Err != nil {
			ev = log.Warn().Err(res.Err)
		}
		ev.Str("endpoint", name).Str("variant", t.Variant).Str("container", t.Container).
			Int64("parts_in", res.PartsIn).Int64("parts_out", res.PartsOut).Int64("bytes_in", res.BytesIn).Int64("bytes_out", res.BytesOut).
			Dur("duration", time.Since(start)).Msg("bidirectional stream ended")
	})
}
