package bidistream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/host/bidistream"
	"github.com/mce-run/mce/host/bidistream/bidiclient"
)

// unsigned takes the client's messages as an unsigned stream's.
func unsigned(_ context.Context, msg eventstream.Message) ([]byte, bool, error) {
	if msg.Headers.Get(":chunk-signature") == nil {
		return nil, false, nil
	}
	return msg.Payload, len(msg.Payload) == 0, nil
}

// echoContainer serves the container's side: every message back, with its
// type, prefixed by "echo:"; "close:<code>" closes with that status; "big"
// answers with a message of n bytes.
func echoContainer(t *testing.T, accept bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != bidistream.ContainerPath && r.URL.Path != "/custom/path" {
			http.NotFound(w, r)
			return
		}
		if !accept {
			time.Sleep(3 * time.Second) // never upgrades within the limit
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(64 << 20)
		ctx := r.Context()
		if q := r.URL.RawQuery; q != "" {
			c.Write(ctx, websocket.MessageText, []byte("query:"+q))
		}
		for {
			typ, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			s := string(b)
			switch {
			case strings.HasPrefix(s, "close:"):
				var code int
				fmt.Sscan(s[len("close:"):], &code)
				c.Close(websocket.StatusCode(code), "asked to")
				return
			case strings.HasPrefix(s, "slow:"):
				time.Sleep(50 * time.Millisecond)
			case strings.HasPrefix(s, "big:"):
				var n int
				fmt.Sscan(s[len("big:"):], &n)
				c.Write(ctx, websocket.MessageBinary, bytes.Repeat([]byte{'b'}, n))
				continue
			}
			if err := c.Write(ctx, typ, append([]byte("echo:"), b...)); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// front is mce's side: an h2c server that bridges every stream to backend.
func front(t *testing.T, backend string, o bidistream.Options) (*bidiclient.Client, chan bidistream.Result) {
	results := make(chan bidistream.Result, 16)
	if o.DrainIdle == 0 {
		o.DrainIdle = 200 * time.Millisecond
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/endpoints/"), "/invocations-bidirectional-stream")
		req, aerr := bidistream.Check(name, r.Header)
		if aerr != nil {
			aerr.Write(w)
			return
		}
		results <- bidistream.Serve(w, r, unsigned, bidistream.Target{BaseURL: backend, Variant: "AllTraffic", Path: req.Path, Query: req.Query}, o, zerolog.Nop())
	})
	srv := httptest.NewUnstartedServer(h)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return &bidiclient.Client{Endpoint: srv.URL, Region: "us-east-1"}, results
}

func recvAll(t *testing.T, s *bidiclient.Stream, n int) []bidiclient.Part {
	t.Helper()
	var parts []bidiclient.Part
	for len(parts) < n {
		p, err := s.Recv()
		if err != nil {
			t.Fatalf("after %d parts: %v", len(parts), err)
		}
		parts = append(parts, p)
	}
	return parts
}

func TestEchoBothTypesAndFragments(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, results := front(t, echoContainer(t, true).URL, bidistream.Options{MaxPartBytes: 1024})
	s, err := c.Open(ctx, "ep", bidiclient.Input{})
	if err != nil {
		t.Fatal(err)
	}
	if s.InvokedProductionVariant != "AllTraffic" {
		t.Errorf("variant %q", s.InvokedProductionVariant)
	}
	if err := s.Send(ctx, []byte("héllo"), true, true); err != nil {
		t.Fatal(err)
	}
	p := recvAll(t, s, 1)[0]
	if string(p.Bytes) != "echo:héllo" || !p.Text || !p.Complete {
		t.Errorf("text part %+v", p)
	}
	// A BINARY message in two PARTIAL parts and a COMPLETE one: one WebSocket
	// message, echoed in parts of at most 1024 bytes.
	chunk := bytes.Repeat([]byte{0, 1, 2, 3}, 300) // 1200 bytes > 1024: refused as a part
	if err := s.Send(ctx, chunk[:1000], false, false); err != nil {
		t.Fatal(err)
	}
	s.Send(ctx, chunk[:1000], false, false)
	s.Send(ctx, []byte("end"), false, true)
	var got []byte
	var n int
	for {
		p, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		n++
		if p.Text || len(p.Bytes) > 1024 {
			t.Fatalf("binary part %d: text %v, %d bytes", n, p.Text, len(p.Bytes))
		}
		got = append(got, p.Bytes...)
		if p.Complete {
			break
		}
	}
	want := append(append(append([]byte("echo:"), chunk[:1000]...), chunk[:1000]...), "end"...)
	if !bytes.Equal(got, want) || n != 2 {
		t.Errorf("binary echo: %d bytes in %d parts, want %d bytes in 2", len(got), n, len(want))
	}
	if err := s.CloseSend(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("after the client's end: %v, want the stream to end", err)
	}
	res := <-results
	if res.Err != nil || res.PartsIn != 4 || res.PartsOut != 3 {
		t.Errorf("result %+v", res)
	}
}

func TestPathAndQueryReachTheContainer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _ := front(t, echoContainer(t, true).URL, bidistream.Options{})
	s, err := c.Open(ctx, "ep", bidiclient.Input{ModelInvocationPath: "custom/path", ModelQueryString: "lang=en&x=%20"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if p := recvAll(t, s, 1)[0]; string(p.Bytes) != "query:lang=en&x=%20" {
		t.Errorf("first part %q", p.Bytes)
	}
	_, err = c.Open(ctx, "ep", bidiclient.Input{ModelInvocationPath: "../etc"})
	var ae *bidiclient.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Type != "InputValidationError" || !strings.Contains(ae.Message, "modelInvocationPath") {
		t.Errorf("a bad path: %v", err)
	}
}

func TestContainerErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A container that never accepts: ModelError 424 within the limit.
	c, _ := front(t, echoContainer(t, false).URL, bidistream.Options{AcceptTimeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := c.Open(ctx, "ep", bidiclient.Input{})
	var ae *bidiclient.APIError
	if !errors.As(err, &ae) || ae.Status != 424 || ae.Type != "ModelError" || !strings.Contains(ae.Message, "within 300ms") {
		t.Errorf("never accepted: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the refusal took %v", took)
	}
	// A path the container does not serve: ModelError with its status.
	c, _ = front(t, echoContainer(t, true).URL, bidistream.Options{})
	_, err = c.Open(ctx, "ep", bidiclient.Input{ModelInvocationPath: "nope"})
	if !errors.As(err, &ae) || ae.Status != 424 || ae.OriginalStatusCode != 404 || !strings.Contains(ae.Message, bidistream.ImageLabel) {
		t.Errorf("not served: %v", err)
	}

	// The container closing with an error status: ModelStreamError.
	s, err := c.Open(ctx, "ep", bidiclient.Input{})
	if err != nil {
		t.Fatal(err)
	}
	s.Send(ctx, []byte("close:1011"), true, true)
	_, err = s.Recv()
	var se *bidiclient.StreamError
	if !errors.As(err, &se) || se.Type != "ModelStreamError" || !strings.Contains(se.Message, "1011") {
		t.Errorf("closed with 1011: %v", err)
	}
	// A message past MaxMessageBytes: ModelStreamError, nothing buffered.
	c, _ = front(t, echoContainer(t, true).URL, bidistream.Options{MaxMessageBytes: 1 << 20})
	s, _ = c.Open(ctx, "ep", bidiclient.Input{})
	s.Send(ctx, []byte("big:2000000"), true, true)
	for {
		_, err = s.Recv()
		if err != nil {
			break
		}
	}
	if !errors.As(err, &se) || se.Type != "ModelStreamError" || se.ErrorCode != "MessageTooBig" {
		t.Errorf("a message past the limit: %v", err)
	}
	// The container closing normally ends the stream.
	s, _ = c.Open(ctx, "ep", bidiclient.Input{})
	s.Send(ctx, []byte("close:1000"), true, true)
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("a normal close: %v", err)
	}
}

func TestHostileInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, results := front(t, echoContainer(t, true).URL, bidistream.Options{MaxPartBytes: 1024})
	for name, tc := range map[string]struct {
		send func(*bidiclient.Stream) error
		want string
	}{
		"part over the limit": {func(s *bidiclient.Stream) error { return s.Send(ctx, make([]byte, 1025), false, true) }, "larger than"},
		"invalid UTF-8":       {func(s *bidiclient.Stream) error { return s.Send(ctx, []byte{0xff, 0xfe}, true, true) }, "UTF-8"},
		"not an event stream": {func(s *bidiclient.Stream) error { return s.SendRaw(ctx, []byte("GET / HTTP/1.1\r\n\r\n")) }, "not a valid event stream"},
		"a 4 GiB prelude": {func(s *bidiclient.Stream) error {
			return s.SendRaw(ctx, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
		}, "larger than"},
		"mixed types in one message": {func(s *bidiclient.Stream) error {
			s.Send(ctx, []byte("a"), true, false)
			return s.Send(ctx, []byte("b"), false, true)
		}, "same DataType"},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := c.Open(ctx, "ep", bidiclient.Input{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			tc.send(s)
			_, err = s.Recv()
			var se *bidiclient.StreamError
			if !errors.As(err, &se) || se.Type != "InputValidationError" || !strings.Contains(se.Message, tc.want) {
				t.Errorf("got %v, want InputValidationError containing %q", err, tc.want)
			}
			if res := <-results; res.Err == nil {
				t.Error("the result has no error")
			}
		})
	}
}

// TestAnswersAfterTheClientsEnd: answers that come after the client ended
// its input still reach it, and the stream then ends after the quiet
// period, however many answers were still on their way.
func TestAnswersAfterTheClientsEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _ := front(t, echoContainer(t, true).URL, bidistream.Options{})
	s, err := c.Open(ctx, "ep", bidiclient.Input{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, m := range []string{"slow:1", "slow:2", "slow:3"} {
		s.Send(ctx, []byte(m), true, true)
	}
	s.CloseSend(ctx)
	var got []string
	for {
		p, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		got = append(got, string(p.Bytes))
	}
	if strings.Join(got, ",") != "echo:slow:1,echo:slow:2,echo:slow:3" {
		t.Errorf("answers %q", got)
	}
}
