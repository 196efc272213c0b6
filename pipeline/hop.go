package pipeline

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// Header names sent to containers, spelled as in the SageMaker API (header
// names are case-insensitive on the wire).
const (
	hdrContentType      = "Content-Type"
	hdrAccept           = "Accept"
	hdrCustomAttributes = "X-Amzn-SageMaker-Custom-Attributes"
	hdrInferenceID      = "X-Amzn-SageMaker-Inference-Id"
	// respCustomAttributes is the canonical form Go gives the response header.
	respCustomAttributes = "X-Amzn-Sagemaker-Custom-Attributes"
)

// errorBodyDrain bounds how much of an error body is read and thrown away so
// the connection can be reused; beyond it the connection is closed instead.
const errorBodyDrain = 64 << 10

// outcome classifies how one container call ended.
type outcome int

const (
	hopOK         outcome = iota
	hopStatus             // the container answered a status outside 2xx
	hopTooBig             // a 2xx body over the payload cap
	hopDialFailed         // no connection could be made: nothing was sent
	hopTimeout            // the per-hop timeout expired
	hopCanceled           // the caller's context is done
	hopBroken             // any other transport failure
)

// hopResult is what one container call produced. The 2xx body is in the
// buffer passed to call.
type hopResult struct {
	outcome     outcome
	status      int
	contentType string
	customAttrs string
	announced   int64  // Content-Length of the response, -1 when unknown
	errBody     string // the container's body for hopStatus, clipped
	elapsed     time.Duration
	err         error // the transport or context error
}

// hopHeaders are the client headers a call forwards.
type hopHeaders struct {
	contentType, accept, customAttrs, inferenceID string
}

// call POSTs body to c's /invocations with h under the per-hop timeout and
// reads a 2xx response into out, capped at the payload limit. It never
// returns before the transport has been cut off from body.
func (iv *Invoker) call(ctx context.Context, c Container, body []byte, h hopHeaders, out *buffer) hopResult {
	res := hopResult{announced: -1}
	t, err := iv.target(c.BaseURL())
	if err != nil {
		res.outcome, res.err = hopBroken, err
		return res
	}
	hctx, cancel := context.WithTimeout(ctx, iv.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(hctx, http.MethodPost, t.url, nil)
	if err != nil {
		res.outcome, res.err = hopBroken, err
		return res
	}
	vals := make([]string, 0, 4)
	set := func(k, v string) {
		if v != "" {
			vals = append(vals, v)
			req.Header[k] = vals[len(vals)-1:]
		}
	}
	set(hdrContentType, h.contentType)
	set(hdrAccept, h.accept)
	set(hdrCustomAttributes, h.customAttrs)
	set(hdrInferenceID, h.inferenceID)
	if len(body) > 0 {
		p := newPayload(body)
		defer p.detach()
		req.Body = &p.first
		req.GetBody = p.getBody
		req.ContentLength = int64(len(body))
	} else {
		req.Body = http.NoBody
	}

	start := time.Now()
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		res.elapsed = time.Since(start)
		res.outcome, res.err = classify(ctx, hctx, err)
		return res
	}
	res.status = resp.StatusCode
	res.announced = resp.ContentLength
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		res.contentType = first(resp.Header, hdrContentType)
		res.customAttrs = first(resp.Header, respCustomAttributes)
		tooBig, rerr := readCapped(out, resp.Body, resp.ContentLength, iv.maxPayload)
		resp.Body.Close()
		res.elapsed = time.Since(start)
		switch {
		case rerr != nil:
			res.outcome, res.err = classify(ctx, hctx, rerr)
		case tooBig:
			res.outcome = hopTooBig
		}
		return res
	}
	res.outcome = hopStatus
	if bodyAllowed(resp.StatusCode) {
		msg := make([]byte, maxOriginalMessage)
		n, _ := io.ReadFull(resp.Body, msg)
		res.errBody = clip(msg[:n])
		_, _ = io.CopyN(io.Discard, resp.Body, errorBodyDrain)
	}
	resp.Body.Close()
	res.elapsed = time.Since(start)
	return res
}

// classify sorts a transport error: the caller's context first, then the
// per-hop deadline, then failures to connect.
func classify(ctx, hctx context.Context, err error) (outcome, error) {
	if cerr := ctx.Err(); cerr != nil {
		return hopCanceled, cerr
	}
	if hctx.Err() != nil {
		return hopTimeout, err
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return hopDialFailed, err
	}
	return hopBroken, err
}

// bodyAllowed reports whether a response with status may carry a body worth
// reading (not 1xx, 204 or 304).
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// first returns the first value of the canonical header key, or "".
func first(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
