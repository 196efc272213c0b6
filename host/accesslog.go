package host

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/internal/wire"
)

// accessEntry is one access line, filled in as the request goes.
type accessEntry struct {
	Time      time.Time `json:"time"`
	RequestID string    `json:"request_id"`
	Remote    string    `json:"remote"`
	Method    string    `json:"method"`
	Path      string    `json:"path"`
	Operation string    `json:"operation,omitempty"`
	Endpoint  string    `json:"endpoint,omitempty"`
	Resource  string    `json:"resource,omitempty"`
	Status    int       `json:"status"`
	BytesIn   int64     `json:"bytes_in"`
	BytesOut  int64     `json:"bytes_out"`
	Duration  float64   `json:"duration_ms"`
}

const accessKey = "mce.access"

// accessOf is the request's access entry, or nil when no access log is kept.
func accessOf(c echo.Context) *accessEntry {
	e, _ := c.Get(accessKey).(*accessEntry)
	return e
}

// countingBody counts the bytes a handler reads from the request body.
type countingBody struct {
	io.ReadCloser
	n atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// accessLogger is the middleware that records each request.
func (s *Server) accessLogger(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		e := &accessEntry{Time: time.Now().UTC(), Remote: r.RemoteAddr, Method: r.Method, Path: apierr.Printable(r.URL.Path)}
		if t := r.Header.Get(wire.HeaderAmzTarget); t != "" {
			e.Operation = apierr.Printable(t)
		}
		body := &countingBody{ReadCloser: r.Body}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = body
		}
		c.Set(accessKey, e)
		err := next(c)
		if err != nil {
			c.Error(err) // so that the status logged is the one written
		}
		w := c.Response()
		e.RequestID = w.Header().Get(hdrRequestID)
		e.Status = w.Status
		if !w.Committed {
			e.Status = 0
		}
		e.BytesIn, e.BytesOut = body.n.Load(), w.Size
		e.Duration = float64(time.Since(e.Time).Microseconds()) / 1000
		if e.Operation == "" {
			switch c.Path() {
			case "/endpoints/:name/invocations":
				e.Operation = "InvokeEndpoint"
			case "/endpoints/:name/invocations-response-stream":
				e.Operation = "InvokeEndpointWithResponseStream"
			case "/endpoints/:name/async-invocations":
				e.Operation = "InvokeEndpointAsync"
			}
		}
		if e.Endpoint == "" && strings.HasPrefix(r.URL.Path, "/endpoints/") {
			e.Endpoint = apierr.Printable(c.Param("name"))
		}
		b, merr := json.Marshal(e)
		if merr == nil {
			s.cfg.AccessLog.Add(append(b, '\n'))
		}
		return nil
	}
}
