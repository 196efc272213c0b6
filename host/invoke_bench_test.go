package host

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/pipeline"
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
		w.Header().Set("Content-Type", "text/plain")
		io.Copy(w, r.Body)
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
	if w.Code != 200 {
		tb.Fatalf("status %d: %s", w.Code, w.Body)
	}
}
