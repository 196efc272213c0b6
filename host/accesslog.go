package host

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/internal/wire"
)

// AccessLog writes one JSON line per request to the API listener (mce serve
// --access-log). Requests never wait for the writer: lines go through a
// buffer of AccessLogBuffer lines to a goroutine that writes them, and when
// the buffer is full (the disk or the reader of stdout is slower than the
// requests) lines are dropped and counted; the next line written after
// drops is {"time":…,"dropped":N}.
//
// A line:
//
//	{"time":"2026-11-24T05:02:04.123456Z","request_id":"…","remote":"127.0.0.1:51234",
//	 "method":"POST","path":"/endpoints/ab-test/invocations","operation":"InvokeEndpoint",
//	 "endpoint":"ab-test","status":200,"bytes_in":17,"bytes_out":17,"duration_ms":2.481}
//
// operation is the control-plane target (e.g. "SageMaker.CreateEndpoint"),
// "InvokeEndpoint" (or its async and streaming siblings), or
// "logs:FilterLogEvents" (mce logs), else empty; endpoint is the
// endpoint of a runtime or logs call; resource the ARN a control-plane call
// acted on (when it got that far); time is when the request arrived.
type AccessLog struct {
	lines   chan []byte
	w       io.Writer
	dropped atomic.Int64
	done    chan struct{}
	mu      sync.RWMutex // held for reading while a line is handed over
	closed  bool
}

// AccessLogBuffer is how many lines wait for the writer before lines are
// dropped.
const AccessLogBuffer = 4096

// NewAccessLog starts writing access lines to w. Close it to flush.
func NewAccessLog(w io.Writer) *AccessLog {
	l := &AccessLog{lines: make(chan []byte, AccessLogBuffer), w: w, done: make(chan struct{})}
	go l.run()
	return l
}

func (l *AccessLog) run() {
	defer close(l.done)
	for line := range l.lines {
		l.reportDropped()
		l.w.Write(line)
	}
	l.reportDropped() // drops at the very end are told too
}

// reportDropped writes {"time":…,"dropped":N} when lines were dropped since
// the last report.
func (l *AccessLog) reportDropped() {
	if n := l.dropped.Swap(0); n > 0 {
		b, _ := json.Marshal(struct {
			Time    time.Time `json:"time"`
			Dropped int64     `json:"dropped"`
		}{time.Now().UTC(), n})
		l.w.Write(append(b, '\n'))
	}
}

// Dropped is how many lines were dropped (and not yet reported in the log).
func (l *AccessLog) Dropped() int64 { return l.dropped.Load() }

// Close writes the lines buffered and stops the writer; later requests are
// not logged. It does not close the underlying writer.
func (l *AccessLog) Close() {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.lines)
	}
	l.mu.Unlock()
	<-l.done
}

// add hands a line to the writer without waiting.
func (l *AccessLog) add(line []byte) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return
	}
	select {
	case l.lines <- line:
	default:
		l.dropped.Add(1)
	}
}

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
			s.cfg.AccessLog.add(append(b, '\n'))
		}
		return nil
	}
}
