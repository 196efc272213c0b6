package host

import (
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// UnreadBodyGrace is how long the rest of a request body that nobody read
// may still take to arrive once the answer is decided. A request refused
// before its body (authentication, validation, an unknown endpoint or
// operation) is answered with Connection: close, and net/http then reads
// up to 256 KiB of the unread body before it closes the connection; with no
// deadline, a caller trickling that body would hold the connection for as
// long as it likes.
const UnreadBodyGrace = time.Second

// bodyWatch notes whether a request's body was read to its end.
type bodyWatch struct {
	io.ReadCloser
	left int64 // bytes announced and not yet read; -1 when unknown
	done bool
}

func (b *bodyWatch) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left >= 0 {
		b.left -= int64(n)
		if b.left <= 0 {
			b.done = true
		}
	}
	if err == io.EOF {
		b.done = true
	}
	return n, err
}

// boundUnreadBody makes every answer given before its request's body was
// read to the end close the connection, and bounds the reading of the rest
// of that body to UnreadBodyGrace: a refusal never waits for a body nobody
// needs. It applies to every handler and to the router's own errors, since
// the answer is caught as its header is written. Where the server already
// does the same (the API listener's loop, host/dataplane, serving with
// UnreadBodyGrace), it stands aside: three allocations per call saved.
func (s *Server) boundUnreadBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			return next(c)
		}
		if b, ok := c.Response().Writer.(interface{ BoundsUnreadBody() bool }); ok && b.BoundsUnreadBody() {
			return next(c)
		}
		orig := r.Body
		b := &bodyWatch{ReadCloser: orig, left: r.ContentLength}
		r.Body = b
		w := c.Response()
		w.Before(func() {
			if b.done {
				return
			}
			w.Header().Set("Connection", "close")
			_ = http.NewResponseController(w.Writer).SetReadDeadline(time.Now().Add(UnreadBodyGrace))
		})
		err := next(c)
		r.Body = orig // net/http looks at its own body type once the handler is done
		return err
	}
}
