package pipeline

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeContainer is a Container whose readiness a test flips.
type fakeContainer struct {
	host  string
	base  string
	ready atomic.Bool
}

var _ Container = (*fakeContainer)(nil)

func (c *fakeContainer) Hostname() string { return c.host }
func (c *fakeContainer) BaseURL() string  { return c.base }
func (c *fakeContainer) Ready() bool      { return c.ready.Load() }

func newFake(host, base string) *fakeContainer {
	c := &fakeContainer{host: host, base: base}
	c.ready.Store(true)
	return c
}

// seen is one request a fake server received.
type seen struct {
	header http.Header
	body   []byte
}

// fakeServer is an httptest server standing in for a model container; it
// records what it was sent and answers with handle.
type fakeServer struct {
	srv   *httptest.Server
	mu    sync.Mutex
	reqs  []seen
	calls atomic.Int64
}

// startServer starts a loopback server that records each request to
// /invocations, then runs handle with the body it read.
func startServer(t testing.TB, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *fakeServer {
	t.Helper()
	return startServerWith(t, handle, nil)
}

// startServerWith is startServer with a hook on connection states.
func startServerWith(t testing.TB, handle func(w http.ResponseWriter, r *http.Request, body []byte), connState func(net.Conn, http.ConnState)) *fakeServer {
	t.Helper()
	fs := &fakeServer{}
	fs.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/invocations" || r.Method != http.MethodPost {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		fs.calls.Add(1)
		fs.mu.Lock()
		fs.reqs = append(fs.reqs, seen{header: r.Header.Clone(), body: body})
		fs.mu.Unlock()
		handle(w, r, body)
	}))
	fs.srv.Config.ConnState = connState
	fs.srv.Start()
	t.Cleanup(fs.srv.Close)
	return fs
}

func (fs *fakeServer) requests() []seen {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]seen(nil), fs.reqs...)
}

// echo answers 200 with the body it got, prefixed by tag, as contentType.
func echo(tag, contentType string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, body []byte) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(append(append([]byte(nil), body...), tag...))
	}
}

// deadURL returns a loopback base URL on which nothing listens.
func deadURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// observation is one ObserveContainer call.
type observation struct {
	endpoint, variant, container string
	d                            time.Duration
	status                       int
	err                          error
}

// recorder is an Observer that keeps every observation.
type recorder struct {
	mu  sync.Mutex
	obs []observation
}

func (r *recorder) ObserveContainer(endpoint, variant, container string, d time.Duration, status int, err error) {
	r.mu.Lock()
	r.obs = append(r.obs, observation{endpoint, variant, container, d, status, err})
	r.mu.Unlock()
}

func (r *recorder) all() []observation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observation(nil), r.obs...)
}

// chain starts n echo servers named container-1..n that append "|name" to
// the body and answer Content-Type "application/x-name; charset=utf-8".
func chain(t testing.TB, n int) ([]*fakeServer, []Container) {
	t.Helper()
	srvs := make([]*fakeServer, n)
	cs := make([]Container, n)
	for i := range n {
		name := "container-" + strconv.Itoa(i+1)
		srvs[i] = startServer(t, echo("|"+name, "application/x-"+name+"; charset=utf-8"))
		cs[i] = newFake(name, srvs[i].srv.URL)
	}
	return srvs, cs
}

// waitFor waits, generously, for ch to be closed or receive.
func waitFor[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("gave up waiting for %s", what)
	}
}
