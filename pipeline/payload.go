package pipeline

import (
	"errors"
	"io"
	"sync"
)

// buffer is a pooled body buffer. Pools hold *buffer so that Get and Put do
// not allocate.
type buffer struct{ b []byte }

// minBuffer is the capacity a fresh buffer starts with when the body length
// is not announced.
const minBuffer = 4 << 10

// errPayloadReleased is what a request body reads once the invocation it
// belongs to has finished. Go's transport may go on writing a request body
// after RoundTrip returned (the container answered early, or the call was
// cancelled); the buffer is then back in a pool or with the host, so the
// late writer must not see it.
var errPayloadReleased = errors.New("pipeline: request payload released")

// payload is a request body over a byte slice that can be detached: after
// detach returns, no reader touches the slice again. That lets the pipeline
// recycle intermediate buffers and lets the host reuse Request.Body as soon
// as Invoke returns, even while the transport's write loop lingers.
type payload struct {
	mu       sync.Mutex
	data     []byte
	detached bool
	first    payloadReader
}

// newPayload returns a payload over data with its first reader ready.
func newPayload(data []byte) *payload {
	p := &payload{data: data}
	p.first.p = p
	return p
}

// getBody is http.Request.GetBody: a fresh reader from the start, used by
// the transport to replay a request on a new connection when a reused one
// failed before anything was written.
func (p *payload) getBody() (io.ReadCloser, error) {
	return &payloadReader{p: p}, nil
}

// detach cuts every reader off the data.
func (p *payload) detach() {
	p.mu.Lock()
	p.detached = true
	p.data = nil
	p.mu.Unlock()
}

// payloadReader reads a payload from its own offset.
type payloadReader struct {
	p   *payload
	off int
}

func (r *payloadReader) Read(b []byte) (int, error) {
	p := r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.detached {
		return 0, errPayloadReleased
	}
	if r.off >= len(p.data) {
		return 0, io.EOF
	}
	n := copy(b, p.data[r.off:])
	r.off += n
	return n, nil
}

func (r *payloadReader) Close() error { return nil }

// readCapped reads r into dst, keeping at most limit bytes. announced is the
// Content-Length (-1 when unknown). It reports tooBig when the body is longer
// than limit; it then stops reading (at most limit+1 bytes are read).
func readCapped(dst *buffer, r io.Reader, announced int64, limit int) (tooBig bool, err error) {
	if announced > int64(limit) {
		return true, nil
	}
	if announced >= 0 {
		n := int(announced)
		if cap(dst.b) < n {
			dst.b = make([]byte, n)
		}
		dst.b = dst.b[:n]
		if _, err := io.ReadFull(r, dst.b); err != nil {
			return false, err
		}
		return false, nil
	}
	b := dst.b[:0]
	for {
		if len(b) > limit {
			dst.b = b
			return true, nil
		}
		if len(b) == cap(b) {
			grown := make([]byte, len(b), min(max(2*cap(b), minBuffer), limit+1))
			copy(grown, b)
			b = grown
		}
		m, rerr := r.Read(b[len(b):min(cap(b), limit+1)])
		b = b[:len(b)+m]
		if rerr == io.EOF {
			dst.b = b
			return len(b) > limit, nil
		}
		if rerr != nil {
			dst.b = b
			return false, rerr
		}
	}
}
