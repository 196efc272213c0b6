package httpc

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"
)

const (
	// maxIdlePerContainer bounds the idle keep-alive connections kept per
	// container: enough for the 200 concurrent clients of the
	// benchmark (bench/README.md) to find one each. A connection returned to a full pool is
	// closed.
	maxIdlePerContainer = 256
	// idleTimeout is how long an idle connection is kept.
	idleTimeout = 90 * time.Second
	// keepAlivePeriod is the TCP keep-alive probe period of connections.
	keepAlivePeriod = 30 * time.Second
)

// target is the way to one container: where to dial, what to put in the
// request line and Host, and a pool of idle keep-alive connections of its
// own, so that one slow or dead container cannot starve the others.
type target struct {
	addr        string // host:port to dial
	host        string // the Host header
	prefix      string // path of the base URL without a trailing "/"
	dialTimeout time.Duration
	staleCheck  time.Duration // Options.StaleCheckAfter

	mu      sync.Mutex
	idle    []*conn // LIFO: the most recently used last; idleAt ascends
	closed  bool    // forgotten: connections given back are closed
	reaper  *time.Timer
	reaping bool // reaper is armed
}

// conn is one HTTP/1.1 connection to a container, used by one exchange at a
// time.
type conn struct {
	nc     net.Conn
	t      *target
	idleAt time.Time // when it was put back in the pool
	// lastCT is the last Content-Type the container sent on this
	// connection, shared with the next answer that sends the same.
	lastCT string
	body   body   // the body reader of the exchange in progress
	cut    func() // abort, bound once (context.AfterFunc takes a func)
}

// abort makes every blocked and later read and write of c fail at once: the
// caller went away.
func (c *conn) abort() { _ = c.nc.SetDeadline(aLongTimeAgo) }

// aLongTimeAgo is a deadline in the past: I/O fails at once.
var aLongTimeAgo = time.Unix(1, 0)

// newTarget builds the target for a container base URL. Only plain http is
// supported: containers are local, on the endpoint's network.
func newTarget(base string, dialTimeout time.Duration) (*target, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("httpc: container base URL %q: %w", base, err)
	}
	if u.Scheme == "https" {
		return nil, fmt.Errorf("httpc: container base URL %q: https is not supported, containers are called over plain http", base)
	}
	if u.Scheme != "http" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("httpc: container base URL %q: want http://host:port", base)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	prefix := strings.TrimSuffix(u.EscapedPath(), "/")
	if !validRequestTarget(prefix) {
		return nil, fmt.Errorf("httpc: container base URL %q: invalid path", base)
	}
	return &target{addr: addr, host: u.Host, prefix: prefix, dialTimeout: dialTimeout}, nil
}

// target returns the pooled target for base, creating it on first use.
func (cl *Client) target(base string) (*target, error) {
	if t, ok := cl.targets.Load(base); ok {
		return t.(*target), nil
	}
	t, err := newTarget(base, cl.dialTimeout)
	if err != nil {
		return nil, err
	}
	t.staleCheck = cl.staleCheck
	if prev, loaded := cl.targets.LoadOrStore(base, t); loaded {
		return prev.(*target), nil // t never dialled: nothing to close
	}
	return t, nil
}

// dial opens a new connection, bounded by the dial timeout, by deadline
// (the exchange's) and by ctx.
func (t *target) dial(ctx context.Context, deadline time.Time) (*conn, error) {
	d := net.Dialer{Timeout: t.dialTimeout, Deadline: deadline, KeepAlive: keepAlivePeriod}
	nc, err := d.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	c := &conn{nc: nc, t: t}
	c.cut = c.abort
	return c, nil
}

// get takes the most recently used idle connection, or returns nil when
// there is none. Connections idle for longer than idleTimeout are closed,
// and one idle for longer than Options.StaleCheckAfter is checked first.
func (t *target) get(now time.Time) *conn {
	for {
		t.mu.Lock()
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			return nil
		}
		c := t.idle[n-1]
		t.idle[n-1] = nil
		t.idle = t.idle[:n-1]
		idle := now.Sub(c.idleAt)
		var expired []*conn
		if idle >= idleTimeout {
			// Every connection below it is older still.
			expired = append(expired, t.idle...)
			clear(t.idle)
			t.idle = t.idle[:0]
		}
		t.mu.Unlock()
		if idle >= idleTimeout {
			c.nc.Close()
			for _, x := range expired {
				x.nc.Close()
			}
			return nil
		}
		if idle > t.staleCheck && !alive(c.nc) {
			c.nc.Close()
			continue
		}
		return c
	}
}

// put gives c back to the pool, or closes it when the pool is full or the
// target was forgotten.
func (t *target) put(c *conn, now time.Time) {
	t.mu.Lock()
	if t.closed || len(t.idle) >= maxIdlePerContainer {
		t.mu.Unlock()
		c.nc.Close()
		return
	}
	c.idleAt = now
	t.idle = append(t.idle, c)
	if !t.reaping {
		t.reaping = true
		if t.reaper == nil {
			t.reaper = time.AfterFunc(idleTimeout, t.reap)
		} else {
			t.reaper.Reset(idleTimeout)
		}
	}
	t.mu.Unlock()
}

// reap closes the connections idle for idleTimeout, and runs again when the
// oldest of the others expires.
func (t *target) reap() {
	now := time.Now()
	t.mu.Lock()
	i := 0
	for i < len(t.idle) && now.Sub(t.idle[i].idleAt) >= idleTimeout {
		i++
	}
	expired := append([]*conn(nil), t.idle[:i]...)
	rest := copy(t.idle, t.idle[i:])
	clear(t.idle[rest:])
	t.idle = t.idle[:rest]
	if len(t.idle) > 0 && !t.closed {
		t.reaper.Reset(idleTimeout - now.Sub(t.idle[0].idleAt))
	} else {
		t.reaping = false
	}
	t.mu.Unlock()
	for _, c := range expired {
		c.nc.Close()
	}
}

// closeIdle closes every idle connection and makes put close the
// connections of calls still in flight.
func (t *target) closeIdle() {
	t.mu.Lock()
	t.closed = true
	idle := t.idle
	t.idle = nil
	if t.reaper != nil {
		t.reaper.Stop()
		t.reaping = false
	}
	t.mu.Unlock()
	for _, c := range idle {
		c.nc.Close()
	}
}

// Forget drops the connection pool of the container at baseURL (it was
// stopped or replaced) and closes its idle connections. Calls in flight to
// it finish normally; their connections are closed afterwards. Safe for
// concurrent use.
func (cl *Client) Forget(baseURL string) {
	if t, ok := cl.targets.LoadAndDelete(baseURL); ok {
		t.(*target).closeIdle()
	}
}

// Close closes the idle connections of every container and forgets them.
// Calls in flight finish normally, and the Client stays usable: later calls
// dial again. Safe for concurrent use.
func (cl *Client) Close() {
	cl.targets.Range(func(k, t any) bool {
		cl.targets.Delete(k)
		t.(*target).closeIdle()
		return true
	})
}
