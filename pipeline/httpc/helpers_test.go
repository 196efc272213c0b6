package httpc

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// startServerWith starts a loopback net/http server standing in for a
// container: it reads each POST to /invocations whole and runs handle with
// the body; connState, when not nil, watches its connections.
func startServerWith(t testing.TB, handle func(w http.ResponseWriter, r *http.Request, body []byte), connState func(net.Conn, http.ConnState)) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/invocations" || r.Method != http.MethodPost {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		handle(w, r, body)
	}))
	srv.Config.ConnState = connState
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// echo answers 200 with the body it got, followed by tag, as contentType.
func echo(tag, contentType string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, body []byte) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(append(append([]byte(nil), body...), tag...))
	}
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
