package httpc

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// streamer is a Streamer that keeps what it was given, or fails with err
// after the first read.
type streamer struct {
	head StreamHead
	body []byte
	err  error
}

func (s *streamer) Stream(h StreamHead, body io.Reader) error {
	s.head = h
	var p [3]byte
	for {
		n, err := body.Read(p[:])
		s.body = append(s.body, p[:n]...)
		if s.err != nil {
			return s.err
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func TestStream(t *testing.T) {
	srv := startRaw(t, answering(func(int, *http.Request) (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Amzn-SageMaker-Custom-Attributes: a=1\r\n" +
			"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", false
	}))
	cl := New(Options{Timeout: time.Minute, DialTimeout: time.Second, MaxBody: 4})
	defer cl.Close()
	s := &streamer{}
	before := time.Now()
	res := cl.Do(context.Background(), &Request{BaseURL: srv.url, Method: http.MethodPost, Path: "/invocations", Stream: s}, nil)
	if res.Outcome != OK || len(res.Body) != 0 {
		t.Fatalf("outcome %v, %v, body %q; want OK and the body streamed", res.Outcome, res.Err, res.Body)
	}
	if string(s.body) != "hello world" {
		t.Errorf("streamed %q, want %q (MaxBody does not apply)", s.body, "hello world")
	}
	if s.head.ContentType != "text/event-stream" || s.head.CustomAttributes != "a=1" ||
		s.head.Deadline.Before(before.Add(time.Minute)) || s.head.Deadline.After(time.Now().Add(time.Minute)) {
		t.Errorf("head %+v, want the answer's fields and a deadline a minute after the call began", s.head)
	}

	// A Streamer's error ends the exchange and closes the connection: the
	// next call dials again.
	s = &streamer{err: errors.New("client gone")}
	res = cl.Do(context.Background(), &Request{BaseURL: srv.url, Method: http.MethodPost, Path: "/invocations", Stream: s}, nil)
	if res.Outcome != Broken || !errors.Is(res.Err, s.err) {
		t.Fatalf("outcome %v, %v; want Broken with the Streamer's error", res.Outcome, res.Err)
	}
	// A body over MaxBody is left unread: the connection is closed too.
	for range 2 {
		if res := post(cl, context.Background(), srv.url, "x"); res.Outcome != TooBig {
			t.Fatalf("outcome %v, %v; want TooBig over MaxBody 4", res.Outcome, res.Err)
		}
	}
	if got := srv.accepted.Load(); got != 3 {
		t.Errorf("%d connections for 4 calls, want 3: the streamed one kept, closed after the failed one and after the unread one", got)
	}
}

func TestForgetAndClose(t *testing.T) {
	closed := make(chan struct{}, 16)
	srv := startServerWith(t, echo("", "text/plain"), func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- struct{}{}
		}
	})
	cl := New(Options{Timeout: time.Minute, DialTimeout: time.Second, MaxBody: 1 << 10})
	call := func() {
		t.Helper()
		if res := post(cl, context.Background(), srv.URL, "x"); res.Outcome != OK {
			t.Fatalf("outcome %v, %v", res.Outcome, res.Err)
		}
	}

	call()
	cl.Forget(srv.URL)
	if _, ok := cl.targets.Load(srv.URL); ok {
		t.Error("Forget left the connection pool")
	}
	waitFor(t, closed, "Forget to close the idle connection")

	call() // a forgotten container is dialled afresh
	cl.Close()
	waitFor(t, closed, "Close to close the idle connection")
	call() // the Client stays usable after Close
	cl.Close()
}
