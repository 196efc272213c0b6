package httpc

import (
	"io"
	"time"
)

// Header is one request header field an exchange sends.
type Header struct{ Name, Value string }

// MaxHeaders is the number of header fields a Request can carry.
const MaxHeaders = 8

// Request is one request to a container. Nothing reads Body once Do
// returned.
type Request struct {
	// BaseURL is the container's root URL, such as "http://172.18.0.3:8080"
	// (plain http only).
	BaseURL string
	// Method and Path (under BaseURL, starting with "/") form the request
	// line.
	Method, Path string
	// Header holds the fields sent besides Host and Content-Length, which
	// Do sets itself (as it does Connection and Transfer-Encoding, which
	// cannot be set here). An entry with an empty Name is not used. (An
	// array, not a slice: a slice's array would go to the heap with Body,
	// one allocation per call.)
	Header [MaxHeaders]Header
	// Body is sent with its Content-Length (never chunked).
	Body []byte
	// Stream, when not nil, takes a 2xx answer's body as it comes off the
	// connection instead of Do reading it into memory.
	Stream Streamer
}

// Streamer takes the body of a 2xx answer as it arrives (see
// Request.Stream).
type Streamer interface {
	// Stream is called on Do's goroutine once the head of a 2xx answer was
	// read, with the body as it comes off the connection; it returns once
	// it has read body to its end (io.EOF), or with the error that stopped
	// it, which then ends the exchange (the connection is closed).
	// Timeout still bounds the exchange: Deadline says when it ends.
	Stream(h StreamHead, body io.Reader) error
}

// StreamHead is what is known of a streamed answer before its body.
type StreamHead struct {
	// ContentType and CustomAttributes are the answer's Content-Type and
	// X-Amzn-SageMaker-Custom-Attributes, "" when it set none.
	ContentType, CustomAttributes string
	// Deadline is when the exchange's time limit ends.
	Deadline time.Time
}
