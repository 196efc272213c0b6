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
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// loopServed counts the requests the loop answered (the handler sees its
// own ResponseWriter): a case meant for the loop that net/http answered
// would compare equal and prove nothing.
var loopServed atomic.Int64

// handler writes the answers whose bytes the differential test compares;
// the path picks the case.
func handler(w http.ResponseWriter, r *http.Request) {
	if _, ok := w.(*response); ok {
		loopServed.Add(1)
	}
	read := func() []byte { b, _ := io.ReadAll(r.Body); return b }
	switch r.URL.Path {
	case "/request": // the request as the handler sees it
		b, err := io.ReadAll(r.Body)
		keys := make([]string, 0, len(r.Header))
		for k := range r.Header {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(w, "%s %q %q %+v %s %d.%d close=%v length=%d te=%q trailer=%v body=%q err=%v\n", r.Method, r.RequestURI,
			r.Host, *r.URL, r.Proto, r.ProtoMajor, r.ProtoMinor, r.Close, r.ContentLength, r.TransferEncoding, r.Trailer, b, err)
		for _, k := range keys {
			fmt.Fprintf(w, "%s=%q\n", k, r.Header[k])
		}
	case "/ok-cl": // what InvokeEndpoint writes on success
		b := read()
		h := w.Header()
		h.Set("X-Amzn-Requestid", "r-1")
		h.Set("Content-Type", "application/octet-stream")
		h.Set("X-Amzn-Invoked-Production-Variant", "AllTraffic")
		h.Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(http.StatusOK)
		w.Write(b)
	case "/ok-nocl": // sniffed type, computed length
		read()
		io.WriteString(w, "<html>hello</html>")
	case "/big-nocl": // chunked
		read()
		for i := range 3 {
			w.Write(bytes.Repeat([]byte{'a' + byte(i)}, 3000))
		}
	case "/big-cl":
		read()
		b := bytes.Repeat([]byte("z"), 1<<20)
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	case "/json-err": // what apierr.Write writes
		read()
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Header().Set("X-Amzn-Errortype", "ValidationError")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"__type":"ValidationError","message":"no"}`))
	case "/conn-close":
		read()
		w.Header().Set("Connection", "close")
		w.Write([]byte("bye"))
	case "/no-read": // the body is left for the server
		w.Write([]byte("unread"))
	case "/no-content":
		read()
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNoContent)
		if _, err := w.Write([]byte("x")); !errors.Is(err, http.ErrBodyNotAllowed) {
			panic("a 204 took a body")
		}
	case "/header-after":
		read()
		w.Header().Set("A", "1")
		w.WriteHeader(http.StatusAccepted)
		w.Header().Set("B", "2") // too late: not sent
		w.Write([]byte("ok"))
	case "/once": // its header must not outlive its answer (the loop reuses the map)
		read()
		w.Header().Set("X-Once", "1")
		w.Write([]byte("once"))
	case "/bad-cl":
		read()
		w.Header().Set("Content-Length", "abc")
		w.Header().Set("X-Case", "bad length")
		w.WriteHeader(http.StatusOK)
		w.Header().Set("X-Late", "1") // too late: not sent
		w.Write([]byte("ok"))
	case "/twice":
		read()
		w.WriteHeader(http.StatusCreated)
		w.WriteHeader(http.StatusConflict)
	case "/flush":
		read()
		w.Write([]byte("first"))
		w.(http.Flusher).Flush()
		w.Write([]byte("second"))
	case "/over-cl":
		read()
		w.Header().Set("Content-Length", "5")
		if _, err := w.Write([]byte("0123456789")); !errors.Is(err, http.ErrContentLength) {
			panic("wrote past Content-Length")
		}
	case "/under-cl":
		read()
		w.Header().Set("Content-Length", "10")
		w.Write([]byte("01234"))
	case "/abort":
		read()
		panic(http.ErrAbortHandler)
	case "/deadline": // what mce's body reader does
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
			panic(err)
		}
		b := read()
		rc.SetReadDeadline(time.Time{})
		w.Write(b)
	default:
		read()
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, r.Method+" "+r.URL.String()+" "+r.Header.Get("X-Case"))
	}
}

// fast takes POSTs of HTTP/1.1 to any path but /slow... (as mce takes
// InvokeEndpoint only).
func fast(line []byte) bool {
	return bytes.HasPrefix(line, []byte("POST /")) && bytes.HasSuffix(line, []byte(" HTTP/1.1")) &&
		!bytes.HasPrefix(line, []byte("POST /handed"))
}

// servers starts the handler behind net/http alone and behind the loop,
// with mce's timeouts.
func servers(t *testing.T, h http.Handler) (plain, loop string, dp *Server) {
	t.Helper()
	mk := func() *http.Server {
		return &http.Server{Handler: h, ReadHeaderTimeout: 2 * time.Second, IdleTimeout: 10 * time.Second,
			MaxHeaderBytes: 64 << 10, ErrorLog: nil}
	}
	l1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := mk()
	go hs.Serve(l1)
	dp = &Server{HTTP: mk(), Fast: fast, WatchAfter: 5 * time.Millisecond}
	served := make(chan error, 1)
	go func() { served <- dp.Serve(l2) }()
	t.Cleanup(func() {
		hs.Close()
		dp.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return l1.Addr().String(), l2.Addr().String(), dp
}

// exchange writes raw to addr, half-closes, and reads everything back.
func exchange(t *testing.T, addr, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("read: %v (got %q)", err, b)
	}
	return dateRe.ReplaceAllString(string(b), "Date: D\r\n")
}

var dateRe = regexp.MustCompile(`Date: [^\r]*\r\n`)

func post(path, body string, extra ...string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n" +
		strings.Join(extra, "") + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// TestSameBytesAsNetHTTP sends the same bytes to the handler behind
// net/http and behind the loop and wants the same bytes back, for every
// kind of answer mce's handlers write and for requests the loop must hand
// over or refuse.
func TestSameBytesAsNetHTTP(t *testing.T) {
	plain, loop, _ := servers(t, http.HandlerFunc(handler))
	big := strings.Repeat("b", 300<<10)
	cases := []struct {
		name, raw string
		onLoop    int64 // requests the loop must have answered itself
	}{
		{"success", post("/ok-cl", strings.Repeat("x", 64)), 1},
		{"empty body", post("/ok-cl", ""), 1},
		{"sniffed type and computed length", post("/ok-nocl", "x"), 1},
		{"chunked answer", post("/big-nocl", "x"), 1},
		{"large answer with a length", post("/big-cl", "x"), 1},
		{"error", post("/json-err", "{}"), 1},
		{"handler closes", post("/conn-close", "x") + post("/ok-cl", "never"), 1},
		{"client closes", post("/ok-cl", "x", "Connection: close\r\n") + post("/ok-cl", "never"), 1},
		{"the request as the handler sees it", post("/request", "abc", "amz-sdk-invocation-id: 1\r\nX-A: 1\r\nx-a:\t2 \r\nConnection: keep-alive\r\nX-E:\r\n"), 1},
		{"the request net/http's parser reads", post("/request", "abc", "Pragma: no-cache\r\nX-A: 1\r\n"), 1},
		{"keys as boto3 writes them", post("/ok-cl", "x", "amz-sdk-invocation-id: 1\r\nx-amz-date: 2\r\n") + post("/ok-cl", "y"), 2},
		{"a head net/http's parser reads (Pragma)", post("/ok-cl", "x", "Pragma: no-cache\r\n") + post("/ok-cl", "y"), 2},
		{"client closes, any case", post("/ok-cl", "x", "connection: Keep-Alive, CLOSE\r\n"), 1},
		{"small body left unread", post("/no-read", "abc") + post("/ok-cl", "next"), 2},
		{"large body left unread", post("/no-read", big) + post("/ok-cl", "never"), 1},
		{"no content", post("/no-content", "x"), 1},
		{"header after WriteHeader", post("/header-after", "x"), 1},
		{"WriteHeader twice", post("/twice", "x"), 1},
		{"a header, then none", post("/once", "x") + post("/ok-nocl", "y") + post("/header-after", "z"), 3},
		{"a bad length from the handler", post("/bad-cl", "x"), 1},
		{"flush", post("/flush", "x"), 1},
		{"past the length", post("/over-cl", "x") + post("/ok-cl", "next"), 1},
		{"short of the length", post("/under-cl", "x") + post("/ok-cl", "never"), 1},
		{"aborted", post("/abort", "x"), 1},
		{"read deadline", post("/deadline", "body"), 1},
		{"keep-alive, three calls", post("/ok-cl", "1") + post("/ok-cl", "22") + post("/json-err", "3"), 3},
		{"CRLF after a POST body", post("/ok-cl", "1") + "\r\n" + post("/ok-cl", "2"), 2},
		{"handed: another route", post("/handed", "x"), 0},
		{"handed after one call", post("/ok-cl", "1") + post("/handed", "2") + post("/ok-cl", "3"), 1},
		{"handed: GET", "GET /ok-cl HTTP/1.1\r\nHost: x\r\n\r\n", 0},
		{"handed: HTTP/1.0", "POST /ok-cl HTTP/1.0\r\nContent-Length: 1\r\n\r\nx", 0},
		{"handed: chunked body", "POST /ok-cl HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n", 0},
		{"handed: 100-continue", post("/ok-cl", "x", "Expect: 100-continue\r\n"), 0},
		{"handed: no Host", "POST /ok-cl HTTP/1.1\r\nContent-Length: 1\r\n\r\nx", 0},
		{"handed: two Hosts", post("/ok-cl", "x", "Host: y\r\n"), 0},
		{"handed: two lengths", post("/ok-cl", "x", "Content-Length: 1\r\n"), 0},
		{"handed: a folded line", post("/ok-cl", "x", "X-Case: a\r\n b\r\n"), 0},
		{"handed: a line without a colon", post("/ok-cl", "x", "X-Case\r\n"), 0},
		{"handed: a head over 4 KiB", post("/ok-cl", "x", "X-Case: "+strings.Repeat("h", 5000)+"\r\n"), 0},
		{"handed: a head over MaxHeaderBytes", post("/ok-cl", "x", "X-Case: "+strings.Repeat("h", 80<<10)+"\r\n"), 0},
		{"refused: bad length", "POST /ok-cl HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 0},
		{"refused: negative length", "POST /ok-cl HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 0},
		{"refused: bad header value", post("/ok-cl", "x", "X-Case: a\x01b\r\n"), 0},
		{"refused: bad header name", post("/ok-cl", "x", "X(Case): a\r\n"), 0},
		{"refused: bad Host", "POST /ok-cl HTTP/1.1\r\nHost: a b\r\nContent-Length: 0\r\n\r\n", 0},
		{"partial head, then EOF", "POST /ok-cl HTTP/1.1\r\nHost: x\r\nContent-", 0},
		{"partial body, then EOF", "POST /ok-cl HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := exchange(t, plain, tc.raw)
			before := loopServed.Load()
			got := exchange(t, loop, tc.raw)
			if got != want {
				t.Errorf("the loop answered\n%q\nnet/http answered\n%q", clip(got), clip(want))
			}
			if n := loopServed.Load() - before; n != tc.onLoop {
				t.Errorf("the loop answered %d requests, want %d", n, tc.onLoop)
			}
		})
	}
}

func clip(s string) string {
	if len(s) > 600 {
		return s[:300] + "…" + s[len(s)-300:]
	}
	return s
}

// TestClientGoneCancels: a client that leaves during a long call cancels
// the request's context, as net/http's background read does.
func TestClientGoneCancels(t *testing.T) {
	cancelled := make(chan time.Duration, 1)
	_, loop, _ := servers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		start := time.Now()
		select {
		case <-r.Context().Done():
			cancelled <- time.Since(start)
		case <-time.After(5 * time.Second):
			cancelled <- -1
		}
	}))
	c, err := net.Dial("tcp", loop)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, post("/wait", "x"))
	time.Sleep(50 * time.Millisecond)
	c.Close()
	select {
	case d := <-cancelled:
		if d < 0 {
			t.Fatal("the handler's context was not cancelled when the client left")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not run")
	}
}

// TestPipelinedDuringWatch: the next request's first byte, read by the
// watch while a long call runs, is not lost, and the context of the call
// is not cancelled by it.
func TestPipelinedDuringWatch(t *testing.T) {
	var calls atomic.Int64
	_, loop, _ := servers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if calls.Add(1) == 1 {
			time.Sleep(100 * time.Millisecond) // the watch starts after 5 ms
			if r.Context().Err() != nil {
				panic("cancelled by a pipelined request")
			}
		}
		w.Write(b)
	}))
	c, err := net.Dial("tcp", loop)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, post("/a", "first")+post("/b", "second")) // and the connection stays open
	br := bufio.NewReader(c)
	for _, want := range []string{"first", "second"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %q: %v", want, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != want {
			t.Fatalf("answer %d %q, want %q", resp.StatusCode, b, want)
		}
	}
}

// TestShutdown: idle connections are closed, a call in flight finishes
// (with Connection: close, as net/http says it), and Shutdown waits for it.
func TestShutdown(t *testing.T) {
	started := make(chan struct{})
	_, loop, dp := servers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		if r.URL.Path == "/slow" {
			close(started)
			time.Sleep(300 * time.Millisecond)
		}
		w.Write([]byte("done"))
	}))
	idle, err := net.Dial("tcp", loop)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	io.WriteString(idle, post("/quick", "x"))
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	if n, err := idle.Read(buf); err != nil || !bytes.Contains(buf[:n], []byte("done")) {
		t.Fatalf("first call: %q %v", buf[:n], err)
	}
	busy, err := net.Dial("tcp", loop)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	io.WriteString(busy, post("/slow", "x"))
	<-started
	start := time.Now()
	if err := dp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("Shutdown returned after %v, before the call in flight ended", d)
	}
	busy.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(busy)
	if !bytes.Contains(b, []byte("Connection: close\r\n")) || !bytes.HasSuffix(b, []byte("done")) {
		t.Errorf("the call in flight was answered %q", b)
	}
	if _, err := idle.Read(buf); err == nil {
		t.Error("the idle connection is still open after Shutdown")
	}
}

// TestSlowHeadTimesOut: a head that does not arrive within
// ReadHeaderTimeout closes the connection, without an answer, as net/http
// does.
func TestSlowHeadTimesOut(t *testing.T) {
	_, loop, _ := servers(t, http.HandlerFunc(handler))
	c, err := net.Dial("tcp", loop)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /ok-cl HTTP/1.1\r\nHost: x\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	b, err := io.ReadAll(c)
	if err != nil || len(b) != 0 {
		t.Fatalf("got %q, %v", b, err)
	}
	if d := time.Since(start); d < time.Second || d > 5*time.Second {
		t.Errorf("closed after %v, want about the 2 s header timeout", d)
	}
}

// TestWatchOutlivesBodyDeadline: a body read under a deadline (as mce's
// body reader sets one) and a call that runs past it: the watch must not
// take the old deadline for the client leaving.
func TestWatchOutlivesBodyDeadline(t *testing.T) {
	_, loop, _ := servers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		rc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		b, err := io.ReadAll(r.Body)
		if err != nil {
			panic(err)
		}
		rc.SetReadDeadline(time.Time{})
		time.Sleep(300 * time.Millisecond)
		if r.Context().Err() != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write(b)
	}))
	c, err := net.Dial("tcp", loop)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	raw := post("/slow", "late body")
	cut := strings.Index(raw, "\r\n\r\n") + 4
	io.WriteString(c, raw[:cut])
	time.Sleep(30 * time.Millisecond) // the body comes in a read of its own, under the deadline
	io.WriteString(c, raw[cut:])
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "late body" {
		t.Fatalf("answer %d %q: the call was cancelled by the body's old deadline", resp.StatusCode, b)
	}
}

// TestUnreadBodyGrace: with UnreadBodyGrace, the loop answers a request
// whose body was left unread as net/http does behind a handler that says
// Connection: close and bounds the rest of the body (host's middleware),
// byte for byte; a handler can tell from BoundsUnreadBody.
func TestUnreadBodyGrace(t *testing.T) {
	const grace = 300 * time.Millisecond
	var told atomic.Int64
	bounded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b, ok := w.(interface{ BoundsUnreadBody() bool }); ok && b.BoundsUnreadBody() {
			told.Add(1)
		}
		bw := &boundWriter{ResponseWriter: w, body: &watchedBody{ReadCloser: r.Body, left: r.ContentLength}, grace: grace}
		r.Body = bw.body
		handler(bw, r)
	})
	plain, _, _ := servers(t, bounded)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dp := &Server{HTTP: &http.Server{Handler: http.HandlerFunc(handler), ReadHeaderTimeout: 2 * time.Second},
		Fast: fast, UnreadBodyGrace: grace}
	go dp.Serve(ln)
	t.Cleanup(func() { dp.Close() })
	loop := ln.Addr().String()
	for _, tc := range []struct{ name, raw string }{
		{"small body left unread", post("/no-read", "abc") + post("/ok-cl", "never")},
		{"large body left unread", post("/no-read", strings.Repeat("b", 300<<10)) + post("/ok-cl", "never")},
		{"body read", post("/ok-cl", "abc") + post("/ok-cl", "next")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := exchange(t, plain, tc.raw)
			got := exchange(t, loop, tc.raw)
			if got != want {
				t.Errorf("the loop answered\n%q\nnet/http answered\n%q", clip(got), clip(want))
			}
		})
	}
	// A body that trickles: the answer closes, and the connection ends within
	// the grace, not when the body would have ended.
	c, err := net.Dial("tcp", loop)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	io.WriteString(c, "POST /no-read HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nx")
	go func() {
		for range 50 {
			time.Sleep(100 * time.Millisecond)
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(4 * time.Second))
	b, _ := io.ReadAll(c)
	if !strings.Contains(string(b), "Connection: close\r\n") {
		t.Errorf("answer without Connection: close: %q", b)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the connection lasted %v; want about the grace (%v)", d, grace)
	}
	if told.Load() != 0 {
		t.Errorf("net/http's ResponseWriter said it bounds the body")
	}
}

// watchedBody and boundWriter do what host's middleware does on net/http:
// at the answer's header, a body not read to its end gets Connection: close
// and a read deadline.
type watchedBody struct {
	io.ReadCloser
	left int64
	done bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left <= 0 || err == io.EOF {
		b.done = true
	}
	return n, err
}

type boundWriter struct {
	http.ResponseWriter
	body  *watchedBody
	grace time.Duration
	wrote bool
}

func (w *boundWriter) before() {
	if w.wrote {
		return
	}
	w.wrote = true
	if !w.body.done {
		w.Header().Set("Connection", "close")
		http.NewResponseController(w.ResponseWriter).SetReadDeadline(time.Now().Add(w.grace))
	}
}

func (w *boundWriter) WriteHeader(code int)        { w.before(); w.ResponseWriter.WriteHeader(code) }
func (w *boundWriter) Write(p []byte) (int, error) { w.before(); return w.ResponseWriter.Write(p) }
func (w *boundWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// appendDate gives what formatting each time would, across seconds and
// back in time (a clock stepped back is formatted anew, not served stale).
func TestAppendDate(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 59, 900_000_000, time.FixedZone("X", 3600))
	for _, d := range []time.Duration{0, 50 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond, time.Hour, -time.Hour, 0} {
		now := base.Add(d)
		if got, want := string(appendDate([]byte("x"), now)), "x"+now.UTC().Format(http.TimeFormat); got != want {
			t.Errorf("appendDate(%v) = %q, want %q", now, got, want)
		}
	}
}
