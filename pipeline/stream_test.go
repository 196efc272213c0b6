package pipeline

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// blockingSink takes pieces only when the test lets it.
type blockingSink struct {
	head  StreamHead
	got   bytes.Buffer
	begun chan struct{}
	take  chan struct{} // one receive per Write
}

func (s *blockingSink) Begin(h StreamHead) error { s.head = h; close(s.begun); return nil }
func (s *blockingSink) Write(p []byte) error {
	<-s.take
	s.got.Write(p)
	return nil
}

// TestStreamBackpressure: a sink that does not take what it is given stops
// the reads from the container, so the container's writes block once the
// socket buffers are full; nothing piles up in mce. Once the sink takes
// again the whole answer arrives, intact.
func TestStreamBackpressure(t *testing.T) {
	const total = 64 << 20
	var written atomic.Int64
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/x-ones")
		chunk := bytes.Repeat([]byte{1}, 32<<10)
		for written.Load() < total {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			written.Add(int64(len(chunk)))
		}
	})
	route := NewRoute("s", Serial, []*Variant{NewVariant("v", 1, []*Instance{NewInstance([]Container{newFake("c", srv.srv.URL)})})})
	iv := NewInvoker(Options{Timeout: 30 * time.Second})
	sink := &blockingSink{begun: make(chan struct{}), take: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := iv.InvokeStream(context.Background(), route, &Request{Body: []byte("x")}, sink)
		done <- err
	}()
	waitFor(t, sink.begun, "the stream's head")
	time.Sleep(300 * time.Millisecond) // let the container write all it can
	stuck := written.Load()
	if stuck >= total/2 {
		t.Fatalf("the container wrote %d of %d bytes while the sink took nothing: the answer is buffered", stuck, total)
	}
	go func() {
		for {
			select {
			case sink.take <- struct{}{}:
			case <-done:
				return
			}
		}
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the stream never ended")
	}
	if err != nil {
		t.Fatal(err)
	}
	if sink.got.Len() != total || sink.head.ContentType != "application/x-ones" || sink.head.Container != "c" || sink.head.Variant != "v" {
		t.Errorf("got %d bytes, head %+v", sink.got.Len(), sink.head)
	}
	t.Logf("the container had written %d KiB when the sink stalled", stuck>>10)
}

// TestStreamFailures: the typed errors of a stream that breaks, times out,
// or whose sink fails, and a container error before the answer began.
func TestStreamFailures(t *testing.T) {
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		switch string(body) {
		case "status":
			http.Error(w, "no", http.StatusTeapot)
			return
		}
		w.Write([]byte("first"))
		w.(http.Flusher).Flush()
		switch string(body) {
		case "break":
			panic(http.ErrAbortHandler)
		case "stall":
			<-r.Context().Done()
		}
	})
	route := NewRoute("s", Serial, []*Variant{NewVariant("v", 1, []*Instance{NewInstance([]Container{newFake("c", srv.srv.URL)})})})
	iv := NewInvoker(Options{Timeout: 500 * time.Millisecond})
	call := func(body string, sink Sink) error {
		_, err := iv.InvokeStream(context.Background(), route, &Request{Body: []byte(body)}, sink)
		return err
	}
	collect := func() *collectSink { return &collectSink{} }

	var se *StreamError
	if err := call("break", collect()); !errors.As(err, &se) || se.Code != StreamBroken || se.Model.Container != "c" {
		t.Errorf("break: %v", err)
	}
	if err := call("stall", collect()); !errors.As(err, &se) || se.Code != ModelInvocationTimeExceeded {
		t.Errorf("stall: %v", err)
	}
	var me *ModelError
	if err := call("status", collect()); !errors.As(err, &me) || me.OriginalStatusCode != http.StatusTeapot || errors.As(err, &se) {
		t.Errorf("status: %v, want a ModelError (the stream had not begun)", err)
	}
	if err := call("ok", &collectSink{fail: true}); !errors.Is(err, ErrSink) {
		t.Errorf("failing sink: %v, want ErrSink", err)
	}
	s := collect()
	if err := call("ok", s); err != nil || s.got.String() != "first" {
		t.Errorf("ok: %q, %v", s.got.String(), err)
	}
	if _, err := iv.InvokeStream(context.Background(), route, &Request{Body: []byte("x"), TargetModel: "m"}, collect()); !errors.As(err, new(*ValidationError)) {
		t.Errorf("TargetModel: %v, want ValidationError", err)
	}
}

type collectSink struct {
	got  bytes.Buffer
	fail bool
}

func (s *collectSink) Begin(StreamHead) error { return nil }
func (s *collectSink) Write(p []byte) error {
	if s.fail {
		return errors.New("client gone")
	}
	s.got.Write(p)
	return nil
}
