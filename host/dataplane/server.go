// Package dataplane serves mce's API listener: a loop per connection that
// answers the calls of the hot path (InvokeEndpoint) itself, and hands each
// connection whose request it does not take to net/http's server for good.
//
// Why not net/http for everything: measured side by side (docs/performance.md),
// net/http's server machinery costs a relay about 10–14 µs of CPU per call
// beyond a loop per connection on the same parser, which is the difference
// between about 1.2× nginx's CPU per call and about 2×. The costs it adds
// are per request: a background read of the connection with its goroutine
// wake-ups, three deadline changes, a context and a response header clone.
// The loop keeps net/http's header writer (http.Header.WriteSubset) and its
// answer rules, mirrored from net/http's server (response.go), so that a
// client sees the same bytes either way; a differential test holds the two
// to that. It reads the heads it takes with its own reader (head.go), which
// gives the handler the request http.ReadRequest would, and leaves any head
// it does not read exactly so to http.ReadRequest; a fuzz test holds the
// two readers to that.
//
// The loop takes a request only when its head is plain: the request line
// matches Server.Fast, HTTP/1.1, one Host, a Content-Length, no
// Transfer-Encoding, Expect or Upgrade, and the whole head within the
// connection's 4 KiB read buffer. Anything else (a control-plane call, a
// response stream, a chunked body, a 100-continue, a large head) goes to
// net/http with not a byte consumed: everything net/http does for those
// stays as it was.
package dataplane

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultWatchAfter is Server.WatchAfter's default.
const DefaultWatchAfter = 20 * time.Millisecond

// Server serves one listener: plain requests that Fast takes on its own
// loop, every other connection through HTTP.
type Server struct {
	// HTTP serves the connections handed to it, and holds what both share:
	// Handler, ConnContext, ReadHeaderTimeout, IdleTimeout, ErrorLog and
	// the shutdown hooks. Its Serve is called by this Server's.
	HTTP *http.Server
	// Fast reports whether the loop answers a request with this request
	// line (method, target and version, without the CRLF). It must only
	// take a route whose handler needs nothing but the ResponseWriter's
	// Header, Write, WriteHeader, Flush and read deadlines (no Hijack, no
	// full duplex).
	Fast func(requestLine []byte) bool
	// WatchAfter is how long a call's handler runs, after its body was
	// read, before the connection is watched for the client going away
	// (which cancels the request's context). Shorter calls never pay for
	// the watch; longer ones pay two goroutine wake-ups, nothing beside
	// their own time. Zero means DefaultWatchAfter.
	WatchAfter time.Duration
	// UnreadBodyGrace, when not zero, bounds a body nobody needs: an
	// answer whose header is written before the request's body was read to
	// its end says Connection: close, and the rest of the body has this
	// long to arrive (the read deadline) before the connection closes.
	// Without it, the loop does as net/http does (drains up to 256 KiB
	// unbounded in time). A handler can tell the loop does it from the
	// ResponseWriter's BoundsUnreadBody.
	UnreadBodyGrace time.Duration

	mu       sync.Mutex
	ln       net.Listener
	conns    map[*conn]struct{}
	handed   *handedListener
	shutting atomic.Bool
}

// Serve accepts connections on ln until Shutdown or Close, which make it
// return http.ErrServerClosed.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.shutting.Load() {
		s.mu.Unlock()
		ln.Close()
		return http.ErrServerClosed
	}
	s.ln = ln
	s.conns = make(map[*conn]struct{})
	s.handed = newHandedListener(ln.Addr())
	h := s.handed
	s.mu.Unlock()
	go s.HTTP.Serve(h) // it returns when Shutdown or Close closes h

	base := context.WithValue(context.Background(), http.ServerContextKey, s.HTTP)
	var delay time.Duration // as net/http: back off on temporary accept errors
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.shutting.Load() {
				return http.ErrServerClosed
			}
			if temporary(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.logf("dataplane: accept error: %v; retrying in %v", err, delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		c := s.newConn(base, nc)
		if !s.track(c, true) {
			nc.Close()
			continue
		}
		go c.serve()
	}
}

// temporary says whether an accept error is one to retry, as net/http
// retries EMFILE and the like.
func temporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// track adds (or removes) c from the connections Shutdown waits for; it
// refuses to add once shutting down.
func (s *Server) track(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.shutting.Load() {
			return false
		}
		s.conns[c] = struct{}{}
		return true
	}
	delete(s.conns, c)
	return true
}

// Shutdown stops accepting, closes idle connections, and waits for the
// calls in flight on both sides (the loop's and net/http's) to finish, or
// for ctx. It runs HTTP's shutdown hooks, as http.Server.Shutdown does.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop()
	err := s.HTTP.Shutdown(ctx) // closes the handed listener, runs the hooks, drains net/http's side
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.closeIdle() == 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Close closes the listener and every connection at once.
func (s *Server) Close() error {
	s.stop()
	s.mu.Lock()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	return s.HTTP.Close()
}

func (s *Server) stop() {
	s.mu.Lock()
	s.shutting.Store(true)
	ln := s.ln
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
}

// closeIdle closes the loop's idle connections and says how many remain
// (busy ones).
func (s *Server) closeIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		if c.state.CompareAndSwap(stateIdle, stateClosed) {
			c.nc.Close()
			continue
		}
		n++
	}
	return n
}

func (s *Server) watchAfter() time.Duration {
	if s.WatchAfter > 0 {
		return s.WatchAfter
	}
	return DefaultWatchAfter
}

func (s *Server) logf(format string, args ...any) {
	if l := s.HTTP.ErrorLog; l != nil {
		l.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// handOver gives nc, with what the loop read of it but did not consume,
// to net/http.
func (s *Server) handOver(hc *handedConn) {
	if !s.handed.push(hc) {
		hc.Close()
	}
}

// handedListener is the listener net/http serves: it accepts the
// connections the loop hands over.
type handedListener struct {
	addr   net.Addr
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newHandedListener(addr net.Addr) *handedListener {
	return &handedListener{addr: addr, ch: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *handedListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.closed:
		return false
	}
}

func (l *handedListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *handedListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *handedListener) Addr() net.Addr { return l.addr }

// InvokeEndpointLine is the Fast of mce's API listener: InvokeEndpoint's
// request line, POST /endpoints/{EndpointName}/invocations HTTP/1.1, with
// a name SageMaker's pattern allows (letters, digits and hyphens, at most
// 63) and no query. Everything else, the response stream included, is
// net/http's.
func InvokeEndpointLine(line []byte) bool {
	const prefix, suffix = "POST /endpoints/", "/invocations HTTP/1.1"
	if len(line) < len(prefix)+1+len(suffix) || string(line[:len(prefix)]) != prefix ||
		string(line[len(line)-len(suffix):]) != suffix {
		return false
	}
	name := line[len(prefix) : len(line)-len(suffix)]
	if len(name) > 63 {
		return false
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
