package httpc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

// rawServer is a loopback TCP server whose connections a test drives byte by
// byte, to send answers net/http's server would not.
type rawServer struct {
	url      string
	accepted atomic.Int64 // connections accepted
	requests atomic.Int64 // requests read whole
}

// startRaw serves every connection with serve, on its own goroutine, until
// the test ends.
func startRaw(t *testing.T, serve func(rs *rawServer, c net.Conn, br *bufio.Reader)) *rawServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rs := &rawServer{url: "http://" + l.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			rs.accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(rs, c, bufio.NewReader(c))
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return rs
}

// readReq reads one request and its body from br, counting it; nil when the
// connection ended.
func (rs *rawServer) readReq(br *bufio.Reader) *http.Request {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	rs.requests.Add(1)
	return req
}

// answering serves each request on a connection with the bytes answer
// returns for it (n counts the requests on this connection from 1); when
// answer returns close, the connection is closed after the answer.
func answering(answer func(n int, req *http.Request) (resp string, close bool)) func(*rawServer, net.Conn, *bufio.Reader) {
	return func(rs *rawServer, c net.Conn, br *bufio.Reader) {
		for n := 1; ; n++ {
			req := rs.readReq(br)
			if req == nil {
				return
			}
			resp, closeAfter := answer(n, req)
			if _, err := io.WriteString(c, resp); err != nil || closeAfter {
				return
			}
		}
	}
}

// testMaxBody is the body cap of the clients newClient returns.
const testMaxBody = 6 << 20

// newClient returns a client with a generous timeout, closed when the test
// ends.
func newClient(t testing.TB) *Client {
	cl := New(Options{Timeout: time.Minute, DialTimeout: time.Second, MaxBody: testMaxBody})
	t.Cleanup(cl.Close)
	return cl
}

// post POSTs body to url's /invocations.
func post(cl *Client, ctx context.Context, url, body string) Result {
	return cl.Do(ctx, &Request{BaseURL: url, Method: http.MethodPost, Path: "/invocations", Body: []byte(body)}, nil)
}

const okHello = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"

func TestResponseFraming(t *testing.T) {
	tests := []struct {
		name      string
		answer    string
		close     bool // the server closes after answering
		wantBody  string
		wantCT    string
		wantConns int64 // connections for three calls
	}{
		{"content-length keep-alive", okHello, false, "hello", "text/plain", 1},
		{"chunked with trailer", "HTTP/1.1 200 OK\r\nContent-Type: a/b\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"3\r\nhel\r\n2;ext=1\r\nlo\r\n0\r\nX-Trailer: t\r\n\r\n", false, "hello", "a/b", 1},
		{"chunked, header names in odd case", "HTTP/1.1 200 OK\r\ncOnTeNt-TyPe: a/b\r\ntransfer-ENCODING: Chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", false, "hello", "a/b", 1},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n\r\nhello", true, "hello", "", 3},
		{"connection close among tokens", "HTTP/1.1 200 OK\r\nConnection: foo, Close\r\nContent-Length: 5\r\n\r\nhello", true, "hello", "", 3},
		{"HTTP/1.0 with length", "HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello", true, "hello", "", 3},
		{"HTTP/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\nhello", false, "hello", "", 1},
		{"HTTP/1.0 until EOF", "HTTP/1.0 200 OK\r\nContent-Type: x/y\r\n\r\nhello", true, "hello", "x/y", 3},
		{"HTTP/1.1 until EOF", "HTTP/1.1 200 OK\r\n\r\nhello", true, "hello", "", 3},
		{"HTTP/1.0 ignores Transfer-Encoding", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello", true, "hello", "", 3},
		{"100 Continue first", "HTTP/1.1 100 Continue\r\n\r\n" + okHello, false, "hello", "text/plain", 1},
		{"several 1xx first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + okHello, false, "hello", "text/plain", 1},
		{"bare LF line ends", "HTTP/1.1 200 OK\nContent-Length: 5\n\nhello", false, "hello", "", 1},
		{"no reason phrase", "HTTP/1.1 200\r\nContent-Length: 5\r\n\r\nhello", false, "hello", "", 1},
		{"equal duplicate lengths", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", false, "hello", "", 1},
		{"length and chunked: chunked wins, not reused", "HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", false, "hello", "", 3},
		{"204 has no body", "HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n", false, "", "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startRaw(t, answering(func(int, *http.Request) (string, bool) { return tt.answer, tt.close }))
			cl := newClient(t)
			for i := range 3 {
				res := post(cl, context.Background(), srv.url, "x")
				if res.Outcome != OK {
					t.Fatalf("call %d: outcome %v, %v", i, res.Outcome, res.Err)
				}
				if string(res.Body) != tt.wantBody || res.ContentType != tt.wantCT {
					t.Errorf("call %d: body %q, Content-Type %q; want %q, %q", i, res.Body, res.ContentType, tt.wantBody, tt.wantCT)
				}
			}
			if got := srv.accepted.Load(); got != tt.wantConns {
				t.Errorf("%d connections for 3 calls, want %d", got, tt.wantConns)
			}
			if got := srv.requests.Load(); got != 3 {
				t.Errorf("server read %d requests, want 3", got)
			}
		})
	}
}

func TestMalformedResponses(t *testing.T) {
	tests := []struct{ name, answer string }{
		{"not HTTP", "SSH-2.0-OpenSSH\r\n\r\n"},
		{"HTTP/2 status line", "HTTP/2 200 OK\r\n\r\n"},
		{"two-digit status", "HTTP/1.1 20 OK\r\n\r\n"},
		{"status not digits", "HTTP/1.1 2x0 OK\r\n\r\n"},
		{"no space after status", "HTTP/1.1 200OK\r\n\r\n"},
		{"oversized header", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", maxHeaderBytes) + "\r\n\r\n"},
		{"many header lines", "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: b\r\n", maxHeaderBytes/8+1) + "\r\n"},
		{"1xx headers count against the cap", strings.Repeat("HTTP/1.1 100 Continue\r\nX-Pad: "+strings.Repeat("p", 1000)+"\r\n\r\n", 70) + okHello},
		{"CR inside a value", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\rX-Injected: 1\r\nContent-Length: 5\r\n\r\nhello"},
		{"NUL in custom attributes", "HTTP/1.1 200 OK\r\nX-Amzn-SageMaker-Custom-Attributes: a\x00b\r\nContent-Length: 5\r\n\r\nhello"},
		{"space before colon", "HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello"},
		{"obsolete line folding", "HTTP/1.1 200 OK\r\nContent-Type: a\r\n b\r\nContent-Length: 5\r\n\r\nhello"},
		{"line without colon", "HTTP/1.1 200 OK\r\nnonsense\r\n\r\n"},
		{"conflicting lengths", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"},
		{"negative length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nhello"},
		{"gzip transfer coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"},
		{"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"},
		{"closed in the head", "HTTP/1.1 200 OK\r\nContent-Len"},
		{"closed mid-body", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello"},
		{"closed mid-chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nhello"},
		{"closed before the last chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startRaw(t, answering(func(int, *http.Request) (string, bool) { return tt.answer, true }))
			res := post(newClient(t), context.Background(), srv.url, "x")
			if res.Outcome != Broken || res.Err == nil {
				t.Fatalf("outcome %v, error %v, body %q; want Broken with an error", res.Outcome, res.Err, res.Body)
			}
			if got := srv.requests.Load(); got != 1 {
				t.Errorf("server read %d requests, want 1 (no retry)", got)
			}
		})
	}
}

// TestStaleConnectionRetried: a container that closes idle keep-alive
// connections. A request written on one before the close was noticed fails
// before any answer byte; it is sent once more on a new connection.
func TestStaleConnectionRetried(t *testing.T) {
	for _, check := range []bool{false, true} {
		name := "written to the closed connection"
		if check {
			name = "dropped by the idle check"
		}
		t.Run(name, func(t *testing.T) {
			// Each connection serves one request, keep-alive, then
			// closes shortly after (as an idle timeout would).
			srv := startRaw(t, func(rs *rawServer, c net.Conn, br *bufio.Reader) {
				if rs.readReq(br) == nil {
					return
				}
				_, _ = io.WriteString(c, okHello)
				time.Sleep(20 * time.Millisecond)
			})
			cl := newClient(t)
			if check {
				cl = New(Options{Timeout: time.Minute, DialTimeout: time.Second, MaxBody: testMaxBody, StaleCheckAfter: -1})
				t.Cleanup(cl.Close)
			}
			for i := range 3 {
				if res := post(cl, context.Background(), srv.url, "x"); res.Outcome != OK {
					t.Fatalf("call %d: outcome %v, %v", i, res.Outcome, res.Err)
				}
				time.Sleep(100 * time.Millisecond) // the server closes meanwhile
			}
			if got := srv.requests.Load(); got != 3 {
				t.Errorf("server read %d requests, want 3", got)
			}
			if got := srv.accepted.Load(); got != 3 {
				t.Errorf("%d connections, want 3", got)
			}
		})
	}
}

// TestStaleRetryOnlyOnce: a container that reads a request on a reused
// connection and drops it without answering gets the request once more, on
// a new connection, and no more.
func TestStaleRetryOnlyOnce(t *testing.T) {
	var first atomic.Bool
	first.Store(true)
	srv := startRaw(t, func(rs *rawServer, c net.Conn, br *bufio.Reader) {
		for rs.readReq(br) != nil {
			if !first.Swap(false) {
				return // read it, answer nothing
			}
			_, _ = io.WriteString(c, okHello)
		}
	})
	cl := newClient(t)
	if res := post(cl, context.Background(), srv.url, "x"); res.Outcome != OK {
		t.Fatalf("outcome %v, %v", res.Outcome, res.Err)
	}
	if res := post(cl, context.Background(), srv.url, "x"); res.Outcome != Broken || res.Status != 0 {
		t.Fatalf("outcome %v, status %d, %v; want Broken with no status", res.Outcome, res.Status, res.Err)
	}
	if got := srv.requests.Load(); got != 3 {
		t.Errorf("server read %d requests, want 3: the first, the second and its one retry", got)
	}
}

// TestNoRetryMidBody: a container that starts answering on a reused
// connection and closes mid-body is not called again.
func TestNoRetryMidBody(t *testing.T) {
	srv := startRaw(t, answering(func(n int, _ *http.Request) (string, bool) {
		if n == 1 {
			return okHello, false
		}
		return "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial", true
	}))
	cl := newClient(t)
	if res := post(cl, context.Background(), srv.url, "x"); res.Outcome != OK {
		t.Fatalf("outcome %v, %v", res.Outcome, res.Err)
	}
	if res := post(cl, context.Background(), srv.url, "x"); res.Outcome != Broken || !errors.Is(res.Err, io.ErrUnexpectedEOF) {
		t.Fatalf("outcome %v, %v; want Broken with io.ErrUnexpectedEOF", res.Outcome, res.Err)
	}
	if got := srv.requests.Load(); got != 2 {
		t.Errorf("server read %d requests, want 2 (no retry)", got)
	}
}

// TestCancelMidResponse: the client going away while the container sends
// its body cuts the connection at once.
func TestCancelMidResponse(t *testing.T) {
	sent := make(chan struct{})
	closed := make(chan struct{})
	srv := startRaw(t, func(rs *rawServer, c net.Conn, br *bufio.Reader) {
		if rs.readReq(br) == nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nsome of it")
		close(sent)
		if _, err := br.ReadByte(); err != nil { // blocks until mce closes
			close(closed)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-sent
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	if res := post(newClient(t), ctx, srv.url, "x"); res.Outcome != Canceled || !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("outcome %v, %v; want Canceled with context.Canceled", res.Outcome, res.Err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Do took %v after the cancel", d)
	}
	waitFor(t, closed, "the container to see the connection closed")
}

// TestCallerDeadline: a caller's deadline earlier than Timeout is the
// caller's: Canceled with the context error, not Timeout.
func TestCallerDeadline(t *testing.T) {
	srv := startRaw(t, func(rs *rawServer, _ net.Conn, br *bufio.Reader) {
		rs.readReq(br)
		_, _ = br.ReadByte()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if res := post(newClient(t), ctx, srv.url, "x"); res.Outcome != Canceled || !errors.Is(res.Err, context.DeadlineExceeded) {
		t.Fatalf("outcome %v, %v; want Canceled with context.DeadlineExceeded", res.Outcome, res.Err)
	}
}

func TestPoolReuse(t *testing.T) {
	counting := func(n *atomic.Int64) func(net.Conn, http.ConnState) {
		return func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				n.Add(1)
			}
		}
	}
	var conns atomic.Int64
	srv := startServerWith(t, echo("", "text/plain"), counting(&conns))
	cl := newClient(t)
	for range 20 {
		if res := post(cl, context.Background(), srv.URL, "x"); res.Outcome != OK {
			t.Fatalf("outcome %v, %v", res.Outcome, res.Err)
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("20 sequential calls used %d connections, want 1", got)
	}

	const parallel = 8
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for range 10 {
				if res := post(cl, context.Background(), srv.URL, "y"); res.Outcome != OK {
					t.Errorf("outcome %v, %v", res.Outcome, res.Err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := conns.Load(); got > parallel {
		t.Errorf("%d concurrent callers used %d connections", parallel, got)
	}
	before := conns.Load()
	for range 10 {
		if res := post(cl, context.Background(), srv.URL, "z"); res.Outcome != OK {
			t.Fatalf("outcome %v, %v", res.Outcome, res.Err)
		}
	}
	if got := conns.Load(); got != before {
		t.Errorf("sequential calls after the burst dialled %d new connections", got-before)
	}
	// Error answers with a small body keep the connection too.
	var badConns atomic.Int64
	bad := startServerWith(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		http.Error(w, "no", http.StatusBadRequest)
	}, counting(&badConns))
	for range 5 {
		if res := post(cl, context.Background(), bad.URL, "x"); res.Outcome != Status || res.Status != http.StatusBadRequest {
			t.Fatalf("outcome %v, status %d, %v; want Status 400", res.Outcome, res.Status, res.Err)
		}
	}
	if got := badConns.Load(); got != 1 {
		t.Errorf("5 calls answered 400 used %d connections, want 1", got)
	}
}

func TestLargeBodies(t *testing.T) {
	var conns atomic.Int64
	srv := startServerWith(t, echo("!", "application/octet-stream"), func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	})
	cl := newClient(t)
	for _, n := range []int{syncWriteMax - 200, syncWriteMax + 1, 1 << 20, testMaxBody - 1} {
		body := bytes.Repeat([]byte("q"), n)
		res := cl.Do(context.Background(), &Request{BaseURL: srv.URL, Method: http.MethodPost, Path: "/invocations", Body: body}, nil)
		if res.Outcome != OK {
			t.Fatalf("%d bytes: outcome %v, %v", n, res.Outcome, res.Err)
		}
		if len(res.Body) != n+1 || !bytes.Equal(res.Body[:n], body) {
			t.Errorf("%d bytes: echoed %d bytes", n, len(res.Body))
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("%d connections, want 1: a request written by its own goroutine keeps the connection", got)
	}
}

// TestRequestHeaders: Do sends any path and header fields (a multi-model
// hop POSTs to /models/<id>/invoke with X-Amzn-SageMaker-Target-Model),
// and refuses what could inject into the request.
func TestRequestHeaders(t *testing.T) {
	got := make(chan *http.Request, 1)
	srv := startRaw(t, answering(func(_ int, req *http.Request) (string, bool) {
		got <- req
		return "HTTP/1.1 200 OK\r\nX-Amzn-SageMaker-Custom-Attributes: out=1\r\nContent-Length: 2\r\n\r\nok", false
	}))
	cl := newClient(t)
	res := cl.Do(context.Background(), &Request{BaseURL: srv.url + "/", Method: http.MethodPost, Path: "/models/m-1/invoke",
		Header: [MaxHeaders]Header{{"X-Amzn-SageMaker-Target-Model", "m-1.tar.gz"}, {}, {"Content-Type", "text/csv"}}, Body: []byte("a,b")}, nil)
	if res.Outcome != OK || res.Status != 200 || string(res.Body) != "ok" || res.CustomAttributes != "out=1" {
		t.Fatalf("result %+v, body %q", res, res.Body)
	}
	req := <-got
	if req.URL.Path != "/models/m-1/invoke" || req.Header.Get("X-Amzn-SageMaker-Target-Model") != "m-1.tar.gz" ||
		req.Header.Get("Content-Type") != "text/csv" || req.ContentLength != 3 || req.Host != strings.TrimPrefix(srv.url, "http://") {
		t.Errorf("container got %s %s Host %q, header %v, length %d", req.Method, req.URL, req.Host, req.Header, req.ContentLength)
	}
	if len(req.TransferEncoding) != 0 {
		t.Errorf("request sent with Transfer-Encoding %v", req.TransferEncoding)
	}

	for _, tt := range []struct {
		name         string
		method, path string
		hdrs         [MaxHeaders]Header
	}{
		{"CRLF in a value", "POST", "/invocations", [MaxHeaders]Header{{"Accept", "a\r\nX-Evil: 1"}}},
		{"bad name", "POST", "/invocations", [MaxHeaders]Header{{"Bad Name", "v"}}},
		{"framing header", "POST", "/invocations", [MaxHeaders]Header{{"content-length", "0"}}},
		{"empty value of a bad name", "POST", "/invocations", [MaxHeaders]Header{{"X:", ""}}},
		{"bad path", "POST", "/a b", [MaxHeaders]Header{}},
		{"relative path", "POST", "invocations", [MaxHeaders]Header{}},
		{"bad method", "PO ST", "/invocations", [MaxHeaders]Header{}},
	} {
		before := srv.requests.Load()
		res := cl.Do(context.Background(), &Request{BaseURL: srv.url, Method: tt.method, Path: tt.path, Header: tt.hdrs}, nil)
		if res.Outcome != Broken || res.Err == nil {
			t.Errorf("%s: outcome %v err %v, want Broken", tt.name, res.Outcome, res.Err)
		}
		if srv.requests.Load() != before {
			t.Errorf("%s: the request was sent", tt.name)
		}
	}
}

func TestBaseURLs(t *testing.T) {
	for base, want := range map[string]string{
		"https://10.0.0.1:8443": "https is not supported",
		"ftp://10.0.0.1":        "want http://host:port",
		"http://":               "want http://host:port",
		"http://u:p@h:1":        "want http://host:port",
	} {
		if _, err := newTarget(base, time.Second); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("newTarget(%q) = %v, want an error with %q", base, err, want)
		}
	}
	tg, err := newTarget("http://h/prefix/", time.Second)
	if err != nil || tg.addr != "h:80" || tg.host != "h" || tg.prefix != "/prefix" {
		t.Errorf("newTarget = %+v, %v", tg, err)
	}
}

// pipeConn is one end of a net.Pipe, counting its Close calls.
type pipeConn struct {
	net.Conn
	closed *atomic.Int64
}

func (p pipeConn) Close() error { p.closed.Add(1); return p.Conn.Close() }

func TestPoolBoundsAndIdleTimeout(t *testing.T) {
	tg, err := newTarget("http://h:1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var closed atomic.Int64
	mk := func() *conn {
		a, b := net.Pipe()
		t.Cleanup(func() { b.Close() })
		return &conn{nc: pipeConn{a, &closed}, t: tg}
	}
	now := time.Now()
	var put []*conn
	for i := range maxIdlePerContainer + 3 {
		c := mk()
		put = append(put, c)
		tg.put(c, now.Add(time.Duration(i)*time.Millisecond))
	}
	if n := len(tg.idle); n != maxIdlePerContainer || closed.Load() != 3 {
		t.Fatalf("%d idle, %d closed; want %d and 3", n, closed.Load(), maxIdlePerContainer)
	}
	if c := tg.get(now.Add(time.Second)); c != put[maxIdlePerContainer-1] {
		t.Error("get did not take the most recently used connection")
	}

	// The reaper closes what has been idle for idleTimeout.
	tg.mu.Lock()
	for i, c := range tg.idle {
		if i < 10 {
			c.idleAt = now.Add(-idleTimeout - time.Second)
		}
	}
	tg.mu.Unlock()
	before := closed.Load()
	tg.reap()
	if got := closed.Load() - before; got != 10 || len(tg.idle) != maxIdlePerContainer-11 {
		t.Errorf("reap closed %d (%d left), want 10", got, len(tg.idle))
	}
	// A connection found expired by get is closed, with all older ones.
	tg.mu.Lock()
	tg.idle[len(tg.idle)-1].idleAt = now.Add(-2 * idleTimeout)
	tg.mu.Unlock()
	if c := tg.get(now); c != nil {
		t.Error("get returned an expired connection")
	}
	if len(tg.idle) != 0 {
		t.Errorf("%d idle connections left after an expired one", len(tg.idle))
	}
	// A closed target closes what is given back.
	tg.put(mk(), now)
	tg.closeIdle()
	before = closed.Load()
	tg.put(mk(), now)
	if closed.Load() != before+1 || len(tg.idle) != 0 {
		t.Error("a forgotten target pooled a connection")
	}
}

// FuzzReadResponse feeds arbitrary bytes to the response reader: it must not
// panic, must not read beyond its caps, and what it accepts must be clean.
// Where net/http also reads the answer whole, both must agree.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		okHello,
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.0 200 OK\r\n\r\nuntil eof",
		"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\nConnection: close\r\n\r\nboom",
		"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX-Amzn-SageMaker-Custom-Attributes: a=1\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n" + strings.Repeat("z", 200),
	} {
		f.Add([]byte(s))
	}
	const limit = 100
	f.Fuzz(func(t *testing.T, data []byte) {
		cr := &countingReader{r: bytes.NewReader(data)}
		br := bufio.NewReaderSize(cr, readBufSize)
		out := &buffer{}
		rsp, err := readResponse(br, http.MethodPost, limit, out, "text/plain", &body{})
		// Head and trailer caps, the body caps, the chunk framing the
		// chunked reader tolerates (6 bytes per 1-byte chunk, 16 KiB of
		// extensions) and one buffer of read-ahead.
		bound := int64(2*maxHeaderBytes + 16<<10 + 6*(limit+1+MaxErrorBody+errorBodyDrain) + readBufSize)
		if cr.n > bound {
			t.Fatalf("read %d bytes of %d, over the bound %d", cr.n, len(data), bound)
		}
		if err != nil {
			return
		}
		if rsp.status < 100 || rsp.status > 999 || !rsp.gotBytes {
			t.Fatalf("status %d accepted", rsp.status)
		}
		if !validValue(rsp.contentType) || !validValue(rsp.customAttrs) {
			t.Fatalf("control characters accepted: %q %q", rsp.contentType, rsp.customAttrs)
		}
		if len(rsp.errBody) > MaxErrorBody || !utf8.ValidString(rsp.errBody) {
			t.Fatalf("error body %q", rsp.errBody)
		}
		if len(out.b) > limit+1 || (!rsp.tooBig && len(out.b) > limit) {
			t.Fatalf("%d bytes of body kept with a limit of %d", len(out.b), limit)
		}

		// net/http's reader, where it reads the same answer whole.
		if rsp.tooBig || rsp.status < 200 || bytes.HasPrefix(data, []byte("HTTP/1.1 1")) || bytes.HasPrefix(data, []byte("HTTP/1.0 1")) {
			return
		}
		hr, herr := http.ReadResponse(bufio.NewReader(bytes.NewReader(data)), &http.Request{Method: http.MethodPost})
		if herr != nil {
			return
		}
		hbody, herr := io.ReadAll(io.LimitReader(hr.Body, 1<<20))
		hr.Body.Close()
		if herr != nil {
			return
		}
		if hr.StatusCode != rsp.status {
			t.Fatalf("status %d, net/http %d", rsp.status, hr.StatusCode)
		}
		if rsp.status >= 200 && rsp.status < 300 && !bytes.Equal(hbody, out.b) {
			t.Fatalf("body %q, net/http %q", out.b, hbody)
		}
		if ct := hr.Header.Get("Content-Type"); rsp.status < 300 && ct != rsp.contentType {
			t.Fatalf("Content-Type %q, net/http %q", rsp.contentType, ct)
		}
	})
}
