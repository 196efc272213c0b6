package host

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/dataplane"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/pipeline"
	"github.com/mce-run/mce/pipeline/httpc"
)

// benchContainer is one echo server standing in for a model container.
type benchContainer struct{ url string }

func (c benchContainer) Hostname() string { return "echo" }
func (c benchContainer) BaseURL() string  { return c.url }
func (c benchContainer) Ready() bool      { return true }

type benchBackend struct{ url string }

func (b benchBackend) Launch(context.Context, containers.EndpointPlan, int) (containers.Launched, error) {
	return benchLaunched{b.url}, nil
}
func (b benchBackend) Adopt(context.Context, containers.EndpointPlan, int) (containers.Launched, error) {
	return benchLaunched{b.url}, nil
}
func (benchBackend) Reconcile(context.Context) error { return nil }

type benchLaunched struct{ url string }

func (l benchLaunched) Copies(string) [][]pipeline.Container {
	return [][]pipeline.Container{{benchContainer{l.url}}}
}
func (benchLaunched) Scale(context.Context, string, int) error { return nil }
func (benchLaunched) Close(context.Context) error              { return nil }

// BenchmarkInvoke is the host's whole InvokeEndpoint path (headers, body,
// routing, metrics, the status page's recorder) against one echo container
// on loopback, with the client side left out: the handler is called
// directly. Compare runs before and after a change to the hot path:
//
//	go test -run '^$' -bench Invoke -benchmem -count 5 ./host/
func BenchmarkInvoke(b *testing.B) {
	h := invokeBench(b)
	payload := bytes.Repeat([]byte("x"), 1024)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			invokeOnce(b, h, payload)
		}
	})
}

// invokeBench is a host with endpoint "bench" InService, its one container
// an echo server on loopback; it returns the host's handler.
func invokeBench(tb testing.TB) http.Handler {
	echoSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The whole body before the answer: net/http's HTTP/1 server stops
		// reading a request's body once its answer is being written (an
		// io.Copy from the body would echo only the first 512 bytes).
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Write(b)
	}))
	tb.Cleanup(echoSrv.Close)
	st, err := store.Open(filepath.Join(tb.TempDir(), "state.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	s := New(Config{Backend: benchBackend{echoSrv.URL}, Store: st, Logger: zerolog.Nop()})
	tb.Cleanup(func() { s.Close(context.Background()) })
	p := plan("bench", "Serial", map[string][]string{"AllTraffic": {"echo:e"}})
	if _, err := s.startEndpoint(p, nil, p.ConfigName, nil); err != nil {
		tb.Fatal(err)
	}
	if err := s.WaitEndpoint(context.Background(), "bench"); err != nil {
		tb.Fatal(err)
	}
	return s.Handler()
}

// invokeOnce is one InvokeEndpoint of payload through h.
func invokeOnce(tb testing.TB, h http.Handler, payload []byte) {
	req := httptest.NewRequest(http.MethodPost, "/endpoints/bench/invocations", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "text/plain")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 200 || w.Body.Len() != len(payload) {
		tb.Fatalf("status %d, %d bytes: %.200s", w.Code, w.Body.Len(), w.Body)
	}
}

// BenchmarkInvokeTCP is InvokeEndpoint over a real loopback connection,
// the client side included (mce's own container client, on keep-alive
// connections), served by net/http alone and by the API listener's loop
// (host/dataplane): what the loop saves per call, in time and
// allocations, in one run.
//
//	go test -run '^$' -bench InvokeTCP -benchmem -count 5 ./host/
func BenchmarkInvokeTCP(b *testing.B) {
	h := invokeBench(b)
	for _, srv := range []string{"nethttp", "loop"} {
		b.Run(srv, func(b *testing.B) {
			base := serveTCP(b, h, srv == "loop")
			cl := httpc.New(httpc.Options{Timeout: time.Minute, DialTimeout: time.Second, MaxBody: 1 << 20})
			defer cl.Close()
			payload := bytes.Repeat([]byte("x"), 1024)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var dst []byte
				ok := true
				for ok && pb.Next() {
					dst, ok = invokeTCPOnce(b, cl, base, payload, dst)
				}
			})
		})
	}
}

// invokeTCPOnce is one InvokeEndpoint of payload over cl to the host at
// base, its answer checked; dst is scratch for the answer, returned for
// the next call. It reports a failure with tb.Errorf (safe from the
// goroutines of RunParallel) and says whether the call succeeded.
func invokeTCPOnce(tb testing.TB, cl *httpc.Client, base string, payload, dst []byte) ([]byte, bool) {
	req := httpc.Request{BaseURL: base, Method: http.MethodPost, Path: "/endpoints/bench/invocations", Body: payload}
	req.Header[0] = httpc.Header{Name: "Content-Type", Value: "text/plain"}
	res := cl.Do(context.Background(), &req, dst)
	if res.Outcome != httpc.OK || len(res.Body) != len(payload) {
		tb.Errorf("outcome %v, status %d, %d bytes: %v %s", res.Outcome, res.Status, len(res.Body), res.Err, res.ErrBody)
		return dst, false
	}
	return res.Body[:0], true
}

// serveTCP serves h on a loopback listener, as mce serve does (loop) or
// by net/http alone, and returns its base URL.
func serveTCP(tb testing.TB, h http.Handler, loop bool) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	if loop {
		dp := &dataplane.Server{HTTP: hs, Fast: dataplane.InvokeEndpointLine, UnreadBodyGrace: UnreadBodyGrace}
		go dp.Serve(ln)
		tb.Cleanup(func() { dp.Close() })
	} else {
		go hs.Serve(ln)
		tb.Cleanup(func() { hs.Close() })
	}
	return "http://" + ln.Addr().String()
}
