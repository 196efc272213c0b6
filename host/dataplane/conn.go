package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// readBufSize is the connection's read buffer: a request's head must fit
// in it to be taken by the loop (a SigV4-signed InvokeEndpoint's is about
// 1.5 KiB).
const readBufSize = 4 << 10

// The states of a connection, for Shutdown.
const (
	stateActive int32 = iota
	stateIdle
	stateClosed
)

// maxPostHandlerReadBytes is net/http's: the unread body a server reads
// and throws away after the handler to keep the connection alive.
const maxPostHandlerReadBytes = 256 << 10

// rstAvoidanceDelay is net/http's pause between half-closing a connection
// whose body was left unread and closing it.
const rstAvoidanceDelay = 500 * time.Millisecond

var aLongTimeAgo = time.Unix(1, 0)

// conn is one client connection served by the loop.
type conn struct {
	srv   *Server
	nc    net.Conn
	ctx   context.Context // the connection's: ServerContextKey, LocalAddrContextKey, ConnContext
	state atomic.Int32
	raddr string

	cr  connReader
	br  *bufio.Reader
	bw  *bufio.Writer
	res response
	bd  body
	hd  headReader
	lim limitedBody

	headLen  int // plainHead's: the head's bytes, its blank line included
	lastPOST bool
	werr     error // a write to the client failed

	// rdl is the read deadline the connection is to have, applied is the
	// one it has: a deadline is applied at the next read of the socket, so
	// a call whose head and body came in with its first read changes none
	// (net/http changes three per request, mce's body reader two more).
	rdl, applied time.Time

	// The watch for the client going away (see Server.WatchAfter).
	wmu      sync.Mutex
	wcond    sync.Cond
	wtimer   *time.Timer
	armed    bool // the timer may start a watch
	watching bool // a watch is reading the connection
	aborting bool // stopWatch cut the watch's read
	gone     bool // the watch saw the client go
	cancel   context.CancelFunc
}

func (s *Server) newConn(base context.Context, nc net.Conn) *conn {
	c := &conn{srv: s, nc: nc, raddr: nc.RemoteAddr().String()}
	ctx := context.WithValue(base, http.LocalAddrContextKey, nc.LocalAddr())
	if cc := s.HTTP.ConnContext; cc != nil {
		ctx = cc(ctx, nc)
		if ctx == nil {
			panic("ConnContext returned nil")
		}
	}
	c.ctx = ctx
	c.cr.c = c
	c.br = bufio.NewReaderSize(&c.cr, readBufSize)
	c.bw = bufio.NewWriterSize(checkedWriter{c}, 4<<10)
	c.res.c = c
	c.res.w = bufio.NewWriterSize(&c.res.cw, bufferBeforeChunkingSize)
	c.res.cw.res = &c.res
	c.wcond.L = &c.wmu
	c.wtimer = time.AfterFunc(time.Hour, c.watch)
	c.wtimer.Stop()
	return c
}

// connReader reads the connection, first giving back the byte a watch
// read (a pipelined request's first byte).
type connReader struct {
	c       *conn
	hasByte bool
	byteBuf [1]byte
}

func (r *connReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if r.hasByte {
		p[0] = r.byteBuf[0]
		r.hasByte = false
		return 1, nil
	}
	c := r.c
	if !c.rdl.Equal(c.applied) {
		if err := c.nc.SetReadDeadline(c.rdl); err != nil {
			return 0, err
		}
		c.applied = c.rdl
	}
	return c.nc.Read(p)
}

// checkedWriter writes to the connection and remembers a failure: the
// connection is not reused after one.
type checkedWriter struct{ c *conn }

func (w checkedWriter) Write(p []byte) (int, error) {
	n, err := w.c.nc.Write(p)
	if err != nil && w.c.werr == nil {
		w.c.werr = err
	}
	return n, err
}

// serve answers the connection's requests until one is not the loop's,
// which hands the connection to net/http, or the connection ends.
func (c *conn) serve() {
	handed := false
	defer func() {
		if v := recover(); v != nil && v != http.ErrAbortHandler {
			const size = 64 << 10
			buf := make([]byte, size)
			buf = buf[:runtime.Stack(buf, false)]
			c.srv.logf("http: panic serving %v: %v\n%s", c.raddr, v, buf)
		}
		c.wtimer.Stop()
		if !handed {
			c.bw.Flush()
			c.nc.Close()
		}
		c.srv.track(c, false)
	}()
	hs := c.srv.HTTP
	for {
		// Idle until the next request's first bytes, as net/http waits.
		c.state.Store(stateIdle)
		if c.srv.shutting.Load() {
			return
		}
		if d := idleTimeout(hs); d > 0 {
			c.rdl = time.Now().Add(d)
		}
		if _, err := c.br.Peek(4); err != nil {
			return
		}
		if !c.state.CompareAndSwap(stateIdle, stateActive) {
			return // Shutdown closed it
		}
		// The head's deadline and the whole request's, as net/http sets them.
		t0 := time.Now()
		var hdrDeadline, wholeDeadline time.Time
		if d := hs.ReadTimeout; d > 0 {
			wholeDeadline = t0.Add(d)
		}
		if d := readHeaderTimeout(hs); d > 0 {
			hdrDeadline = t0.Add(d)
		}
		c.rdl = hdrDeadline
		if c.lastPOST { // net/http's tolerance of old clients' CRLF after a POST body
			peek, _ := c.br.Peek(4)
			c.br.Discard(leadingCRorLF(peek))
		}
		fast, err := c.plainHead()
		if err != nil {
			if c.br.Buffered() > 0 && !isTimeout(err) {
				handed = c.handOver()
			}
			return
		}
		if !fast {
			handed = c.handOver()
			return
		}
		if !c.serveOne(hdrDeadline, wholeDeadline) {
			return
		}
	}
}

// handOver gives the connection, with the bytes read and not consumed, to
// net/http.
func (c *conn) handOver() bool {
	c.wtimer.Stop()
	if err := c.nc.SetDeadline(time.Time{}); err != nil {
		return false
	}
	c.rdl, c.applied = time.Time{}, time.Time{} // net/http sets its own from here

	c.srv.track(c, false)
	c.srv.handOver(&handedConn{Conn: c.nc, br: c.br})
	return true
}

// plainHead waits for the request's head and says whether the loop takes
// it (see the package's doc). It consumes nothing.
func (c *conn) plainHead() (bool, error) {
	lineChecked := false
	for {
		buf, _ := c.br.Peek(c.br.Buffered())
		if !lineChecked {
			if i := bytes.Index(buf, crlf); i >= 0 {
				if !c.srv.Fast(buf[:i]) {
					return false, nil
				}
				lineChecked = true
			}
		}
		if lineChecked {
			if i := bytes.Index(buf, crlfcrlf); i >= 0 {
				c.headLen = i + 4
				return plainFields(buf[bytes.Index(buf, crlf)+2 : i+2]), nil
			}
		}
		if len(buf) == c.br.Size() {
			return false, nil // a head too large for the loop: net/http's
		}
		if _, err := c.br.Peek(len(buf) + 1); err != nil {
			return false, err
		}
	}
}

var (
	crlf     = []byte("\r\n")
	crlfcrlf = []byte("\r\n\r\n")
)

// plainFields says whether header fields (each line with its CRLF) are
// ones the loop takes: exactly one Host and one Content-Length, no
// Transfer-Encoding, Expect, Upgrade or folded line.
func plainFields(fields []byte) bool {
	hosts, lengths := 0, 0
	for len(fields) > 0 {
		i := bytes.Index(fields, crlf)
		if i < 0 {
			return false
		}
		line := fields[:i]
		fields = fields[i+2:]
		if len(line) == 0 || line[0] == ' ' || line[0] == '\t' {
			return false
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return false
		}
		switch name := line[:colon]; {
		case asciiEqualFold(name, "host"):
			hosts++
		case asciiEqualFold(name, "content-length"):
			lengths++
		case asciiEqualFold(name, "transfer-encoding"), asciiEqualFold(name, "expect"), asciiEqualFold(name, "upgrade"):
			return false
		}
	}
	return hosts == 1 && lengths == 1
}

func asciiEqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

func leadingCRorLF(b []byte) int {
	n := 0
	for _, c := range b {
		if c != '\r' && c != '\n' {
			break
		}
		n++
	}
	return n
}

// serveOne reads one request whose head plainHead took, runs the handler
// and writes its answer; it says whether the connection serves another.
func (c *conn) serveOne(hdrDeadline, wholeDeadline time.Time) bool {
	hs := c.srv.HTTP
	// The request is read into read, on the stack: WithContext below makes
	// the one copy the handler gets.
	var read http.Request
	head, _ := c.br.Peek(c.headLen)
	if c.hd.read(head, &read) {
		c.br.Discard(c.headLen)
		if !httpguts.ValidHostHeader(read.Host) {
			c.badRequest("malformed Host header")
			return false
		}
		c.lim = limitedBody{br: c.br, left: read.ContentLength}
		read.Body = &c.lim
	} else if r, ok := c.readRequest(); ok {
		read = *r
	} else {
		return false
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.cancel = cancel
	req := read.WithContext(ctx)
	c.lastPOST = req.Method == http.MethodPost
	if !hdrDeadline.Equal(wholeDeadline) {
		c.rdl = wholeDeadline
	}
	if d := hs.WriteTimeout; d > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(d))
	}

	req.RemoteAddr = c.raddr
	c.bd.reset(c, req.Body, req.ContentLength)
	req.Body = &c.bd
	w := &c.res
	w.reset(req)
	if req.ContentLength == 0 {
		c.armWatch()
	}

	hs.Handler.ServeHTTP(w, req)

	w.finishRequest()
	c.stopWatch()
	if hs.WriteTimeout > 0 {
		c.nc.SetWriteDeadline(time.Time{})
	}
	cancel()
	c.cancel = nil
	if !w.shouldReuseConnection() {
		if w.requestBodyLimitHit || c.bd.closedEarly {
			c.closeWriteAndWait()
		}
		return false
	}
	return !c.gone
}

// readRequest reads a head the loop's own reader does not (see head.go)
// with net/http's parser and checks it as net/http's server does; it says
// false, having answered what net/http answers, when the connection ends.
func (c *conn) readRequest() (*http.Request, bool) {
	req, err := http.ReadRequest(c.br)
	if err != nil {
		if isTimeout(err) || errors.Is(err, io.EOF) {
			return nil, false
		}
		c.badRequest("")
		return nil, false
	}
	if req.ProtoMajor != 1 || req.ProtoMinor != 1 {
		c.badRequest("") // the loop takes HTTP/1.1 only; Fast lets nothing else through
		return nil, false
	}
	// net/http's checks of the head, with its words.
	// (plainHead saw one Host; http.ReadRequest moved it to req.Host.)
	if !httpguts.ValidHostHeader(req.Host) {
		c.badRequest("malformed Host header")
		return nil, false
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			c.badRequest("invalid header name")
			return nil, false
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				c.badRequest("invalid header value")
				return nil, false
			}
		}
	}
	return req, true
}

// badRequest answers a request the loop cannot read as net/http does, and
// the connection closes.
func (c *conn) badRequest(why string) {
	const errorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
	publicErr := "400 Bad Request"
	if why != "" {
		publicErr += ": " + why
	}
	fmt.Fprint(c.bw, "HTTP/1.1 "+publicErr+errorHeaders+publicErr)
	c.bw.Flush()
}

// closeWriteAndWait half-closes the connection and pauses before it is
// closed, as net/http does when a body was left unread.
func (c *conn) closeWriteAndWait() {
	c.bw.Flush()
	if tc, ok := c.nc.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
	time.Sleep(rstAvoidanceDelay)
}

func readHeaderTimeout(hs *http.Server) time.Duration {
	if hs.ReadHeaderTimeout != 0 {
		return hs.ReadHeaderTimeout
	}
	return hs.ReadTimeout
}

func idleTimeout(hs *http.Server) time.Duration {
	if hs.IdleTimeout != 0 {
		return hs.IdleTimeout
	}
	return hs.ReadTimeout
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// armWatch starts the timer after which the connection is watched for
// the client going away: the request's body is all read.
func (c *conn) armWatch() {
	c.wmu.Lock()
	c.armed = true
	c.wmu.Unlock()
	c.wtimer.Reset(c.srv.watchAfter())
}

// watch reads the connection while a handler runs: a read that fails
// (the client closed or reset it) cancels the request's context; a byte
// that arrives is a pipelined request's, kept for the next read.
func (c *conn) watch() {
	c.wmu.Lock()
	if !c.armed || c.watching || c.cr.hasByte || c.gone {
		// Not armed, or a late timer of an earlier arming: one watch at
		// a time, and none once it has a byte or the client left.
		c.wmu.Unlock()
		return
	}
	c.watching = true
	if !c.applied.IsZero() {
		// The watch waits as long as the call runs (net/http's background
		// read lifts the deadline too).
		c.nc.SetReadDeadline(time.Time{})
		c.applied = time.Time{}
	}
	c.wmu.Unlock()
	n, err := c.nc.Read(c.cr.byteBuf[:])
	c.wmu.Lock()
	c.watching = false
	if n == 1 {
		c.cr.hasByte = true
	}
	if err != nil && !(c.aborting && isTimeout(err)) {
		c.gone = true
		if c.cancel != nil {
			c.cancel()
		}
	}
	c.wcond.Broadcast()
	c.wmu.Unlock()
}

// stopWatch ends the watch before the connection is read again.
func (c *conn) stopWatch() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.armed = false
	c.wtimer.Stop()
	if !c.watching {
		return
	}
	c.aborting = true
	c.nc.SetReadDeadline(aLongTimeAgo)
	c.applied = aLongTimeAgo // the next read of the socket applies rdl again
	for c.watching {
		c.wcond.Wait()
	}
	c.aborting = false
}

// body is the request's body as the handler reads it: net/http's reader,
// with what net/http's server does around it (the watch starts at its
// end; a Close before the end drains at most maxPostHandlerReadBytes).
type body struct {
	c           *conn
	rc          io.ReadCloser
	left        int64 // bytes not yet read
	sawEOF      bool
	closed      bool
	closedEarly bool // closed with more unread than is drained
}

func (b *body) reset(c *conn, rc io.ReadCloser, length int64) {
	*b = body{c: c, rc: rc, left: length, sawEOF: length == 0}
}

func (b *body) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.sawEOF {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if err == io.EOF || err == nil && b.left == 0 {
		b.sawEOF = true
		b.c.armWatch()
		if n > 0 {
			return n, nil
		}
		return 0, io.EOF
	}
	return n, err
}

func (b *body) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	if b.sawEOF {
		return nil
	}
	if b.left > maxPostHandlerReadBytes {
		b.closedEarly = true
		return nil
	}
	n, err := io.CopyN(io.Discard, b.rc, maxPostHandlerReadBytes)
	if n == maxPostHandlerReadBytes {
		b.closedEarly = true
	}
	if err == io.EOF {
		err = nil
		b.sawEOF = true
	}
	return err
}

// handedConn is a connection handed to net/http: reads come first from
// what the loop read ahead.
type handedConn struct {
	net.Conn
	br *bufio.Reader
}

func (c *handedConn) Read(p []byte) (int, error) {
	if c.br != nil {
		if c.br.Buffered() > 0 {
			return c.br.Read(p)
		}
		c.br = nil
	}
	return c.Conn.Read(p)
}

// NetConn is the client's connection (for host.ConnContext's readers).
func (c *handedConn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes the connection, as net/http does before closing
// one whose body it left unread.
func (c *handedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
