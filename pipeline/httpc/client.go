package httpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"
)

// Options configure a Client. Every field must be above zero.
type Options struct {
	// Timeout bounds one exchange: connecting, sending, and reading the
	// whole answer (a streamed body included). A sooner deadline of the
	// exchange's context takes precedence.
	Timeout time.Duration
	// DialTimeout bounds establishing a connection.
	DialTimeout time.Duration
	// MaxBody caps a 2xx body read into memory; a longer one is not read
	// (Outcome TooBig). A streamed body has no cap.
	MaxBody int
	// StaleCheckAfter: a pooled connection idle for longer than this is
	// checked (a non-blocking peek, one system call) before it carries a
	// request, so that one the container closed in the meantime (its
	// keep-alive timeout) is dropped rather than written to. 0 means
	// DefaultStaleCheckAfter; a negative value checks every reused
	// connection.
	StaleCheckAfter time.Duration
}

// DefaultStaleCheckAfter is Options.StaleCheckAfter's default: a connection
// reused within a second is not checked (the hot path makes no extra
// system call), one idle for longer is.
const DefaultStaleCheckAfter = time.Second

// Client calls containers over HTTP/1.1, with a pool of keep-alive
// connections per container base URL. It is safe for concurrent use.
type Client struct {
	timeout     time.Duration
	dialTimeout time.Duration
	maxBody     int
	staleCheck  time.Duration
	targets     sync.Map // base URL → *target
}

// New returns a Client configured by o. It panics when Timeout, DialTimeout
// or MaxBody is not above zero: that is a programming error.
func New(o Options) *Client {
	if o.Timeout <= 0 || o.DialTimeout <= 0 || o.MaxBody <= 0 {
		panic(fmt.Sprintf("httpc: invalid options %+v", o))
	}
	if o.StaleCheckAfter == 0 {
		o.StaleCheckAfter = DefaultStaleCheckAfter
	}
	return &Client{timeout: o.Timeout, dialTimeout: o.DialTimeout, maxBody: o.MaxBody, staleCheck: max(o.StaleCheckAfter, 0)}
}

// syncWriteMax: a request up to this size (head and body) is written with
// one write on the calling goroutine before the answer is read; socket
// buffers take it whole even when the container does not read it. A larger
// one is written by a goroutine of its own while the answer is read, so a
// container that answers before reading all of it cannot deadlock the
// exchange.
const syncWriteMax = 32 << 10

// writeGrace is how long a request writer still running when the whole
// answer has come back may take to finish before it is stopped (and the
// connection closed).
const writeGrace = 20 * time.Millisecond

// readBufSize is the size of the pooled response readers.
const readBufSize = 4 << 10

var (
	readers   = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufSize) }}
	writeBufs = sync.Pool{New: func() any { return &buffer{b: make([]byte, 0, 1<<10)} }}
)

// Do sends req to the container at req.BaseURL (the request line, the
// header fields, then the body with its Content-Length) and reads the
// answer, all on the calling goroutine, over a pooled keep-alive connection
// or a new one. A 2xx body is read into dst's array (grown when it is too
// small), capped at MaxBody, or handed to req.Stream. Timeout and ctx bound
// everything; when ctx is done the connection is cut at once, which the
// container sees as its request cancelled. A request on a reused connection
// that fails before any byte of an answer came back (the container closed
// the idle connection as the request went out) is sent once more on a new
// connection; nothing else is retried here. Do never returns while
// anything still reads req.Body.
func (cl *Client) Do(ctx context.Context, req *Request, dst []byte) Result {
	out := buffer{b: dst}
	res := cl.exchange(ctx, req.BaseURL, req.Method, req.Path, req.Header[:], req.Body, &out, req.Stream)
	res.Body = out.b
	return res
}

// exchange is Do, with the 2xx body going to out, or to sink when sink is
// not nil (see readResponseTo). The request is sent again on the
// idle-close race only while nothing reached the sink.
func (cl *Client) exchange(ctx context.Context, baseURL, method, path string, hdrs []Header, body []byte, out *buffer, sink Streamer) Result {
	res := Result{Length: -1}
	t, err := cl.target(baseURL)
	if err != nil {
		res.Outcome, res.Err = Broken, err
		return res
	}
	wb := writeBufs.Get().(*buffer)
	defer func() {
		if cap(wb.b) <= 2*syncWriteMax {
			writeBufs.Put(wb)
		}
	}()
	wb.b, err = appendRequest(wb.b[:0], t, method, path, hdrs, len(body))
	if err != nil {
		res.Outcome, res.Err = Broken, err
		return res
	}
	req, rest := wb.b, body
	if len(req)+len(body) <= syncWriteMax {
		wb.b = append(wb.b, body...)
		req, rest = wb.b, nil
	}

	start := time.Now()
	deadline, byCtx := start.Add(cl.timeout), false
	if d, ok := ctx.Deadline(); ok && !d.After(deadline) {
		deadline, byCtx = d, true
	}
	c := t.get(start)
	reused := c != nil
	for {
		if c == nil {
			if c, err = t.dial(ctx, deadline); err != nil {
				res.Elapsed = time.Since(start)
				res.Outcome, res.Err = classify(ctx, err, deadline, byCtx)
				return res
			}
		}
		rsp, err := cl.roundTrip(ctx, c, deadline, req, rest, method, out, sink)
		if err != nil && reused && !rsp.gotBytes && !rsp.streamed && ctx.Err() == nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			// The idle-close race: the container closed the pooled
			// connection while the request went out.
			c, reused = nil, false
			out.b = out.b[:0]
			continue
		}
		res.Elapsed = time.Since(start)
		res.Status = rsp.status
		res.ContentType = rsp.contentType
		res.CustomAttributes = rsp.customAttrs
		res.NewSessionID, res.ClosedSessionID = rsp.newSession, rsp.closedSession
		res.Length = rsp.announced
		res.ErrBody = rsp.errBody
		switch {
		case err != nil:
			res.Outcome, res.Err = classify(ctx, err, deadline, byCtx)
		case rsp.status < 200 || rsp.status >= 300:
			res.Outcome = Status
		case rsp.tooBig:
			res.Outcome = TooBig
		}
		return res
	}
}

// roundTrip writes req (and rest, when the body did not fit in req) on c and
// reads the answer. It then gives c back to the pool when the exchange ended
// cleanly and the container keeps the connection alive, and closes it
// otherwise.
func (cl *Client) roundTrip(ctx context.Context, c *conn, deadline time.Time, req, rest []byte, method string, out *buffer, sink Streamer) (response, error) {
	if err := c.nc.SetDeadline(deadline); err != nil {
		c.nc.Close()
		return response{announced: -1}, err
	}
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, c.cut)
	}

	var werr error
	var wdone chan error
	if rest == nil {
		_, werr = c.nc.Write(req)
	} else {
		wdone = make(chan error, 1)
		go func() {
			bufs := net.Buffers{req, rest}
			_, err := bufs.WriteTo(c.nc)
			wdone <- err
		}()
	}
	// Even when the write failed, an answer may be there: a container may
	// answer (413, say) and close without reading the whole request.
	br := readers.Get().(*bufio.Reader)
	br.Reset(c.nc)
	rsp, err := readResponseTo(br, method, cl.maxBody, out, c.lastCT, &c.body, deadline, sink)
	c.body = body{}
	br.Reset(nil)
	readers.Put(br)
	if wdone != nil {
		select {
		case werr = <-wdone:
		default:
			// The answer (or a failure) came before the writer was
			// done. Nothing may read the body once the call returns:
			// stop the writer and wait for it. After a whole answer on
			// a connection worth keeping, the writer is most likely
			// finishing (the container read the request): it gets a
			// moment, and the connection is kept if it succeeds.
			cut := aLongTimeAgo
			if err == nil && rsp.reusable {
				cut = time.Now().Add(writeGrace)
			}
			_ = c.nc.SetWriteDeadline(cut)
			werr = <-wdone
		}
	}
	if err != nil && werr != nil && !rsp.gotBytes {
		err = werr // says more: the request did not go out
	}
	if stop != nil && !stop() {
		rsp.reusable = false // ctx is done: c's deadline is being cut
	}
	if err == nil && werr == nil && rsp.reusable {
		if rsp.contentType != "" {
			c.lastCT = rsp.contentType
		}
		c.t.put(c, time.Now())
	} else {
		c.nc.Close()
	}
	return rsp, err
}

// appendRequest appends the request line and header section to b. Names
// and values are checked: no field can be injected into the request.
func appendRequest(b []byte, t *target, method, path string, hdrs []Header, bodyLen int) ([]byte, error) {
	if !validToken(method) {
		return b, fmt.Errorf("httpc: invalid request method %q", method)
	}
	if len(path) == 0 || path[0] != '/' || !validRequestTarget(path) {
		return b, fmt.Errorf("httpc: invalid request path %q", path)
	}
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, t.prefix...)
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, t.host...)
	b = append(b, "\r\n"...)
	for _, h := range hdrs {
		if h.Name == "" {
			continue
		}
		if !validToken(h.Name) || framingHeader(h.Name) {
			return b, fmt.Errorf("httpc: invalid request header name %q", h.Name)
		}
		if !validValue(h.Value) {
			return b, fmt.Errorf("httpc: invalid value for request header %q", h.Name)
		}
		b = append(b, h.Name...)
		b = append(b, ": "...)
		b = append(b, h.Value...)
		b = append(b, "\r\n"...)
	}
	if bodyLen > 0 || (method != "GET" && method != "HEAD") {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(bodyLen), 10)
		b = append(b, "\r\n"...)
	}
	return append(b, "\r\n"...), nil
}

// framingHeader reports whether name is a field Do sets itself.
func framingHeader(name string) bool {
	switch len(name) {
	case len("host"):
		return equalFold(name, "host")
	case len("connection"):
		return equalFold(name, "connection")
	case len("content-length"):
		return equalFold(name, "content-length")
	case len("transfer-encoding"):
		return equalFold(name, "transfer-encoding")
	}
	return false
}

// validRequestTarget reports whether s can go in a request line as is:
// visible ASCII only (an URL path is escaped).
func validRequestTarget(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '#' {
			return false
		}
	}
	return true
}

// classify sorts a failed exchange: the caller's context first (also when
// its deadline, earlier than Timeout's, is what cut the connection), then
// failures to connect, then Timeout.
func classify(ctx context.Context, err error, deadline time.Time, byCtx bool) (Outcome, error) {
	if cerr := ctx.Err(); cerr != nil {
		return Canceled, cerr
	}
	expired := !time.Now().Before(deadline)
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" && !expired {
		return DialFailed, err
	}
	if expired || errors.Is(err, os.ErrDeadlineExceeded) {
		if byCtx {
			return Canceled, context.DeadlineExceeded
		}
		return Timeout, err
	}
	return Broken, err
}
