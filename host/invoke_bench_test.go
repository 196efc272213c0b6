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
	echoSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.Copy(w, r.Body)
	}))
	defer echoSrv.Close()
	st, err := store.Open(filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	s := New(Config{Backend: benchBackend{echoSrv.URL}, Store: st, Logger: zerolog.Nop()})
	defer s.Close(context.Background())
	p := plan("bench", "Serial", map[string][]string{"AllTraffic": {"echo:e"}})
	if _, err := s.startEndpoint(p, nil, p.ConfigName, nil); err != nil {
		b.Fatal(err)
	}
	if err := s.WaitEndpoint(context.Background(), "bench"); err != nil {
		b.Fatal(err)
	}
	h := s.Handler()
	payload := bytes.Repeat([]byte("x"), 1024)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest(http.MethodPost, "/endpoints/bench/invocations", bytes.NewReader(payload))
			req.Header.Set("Content-Type", "text/plain")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != 200 {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	})
}
