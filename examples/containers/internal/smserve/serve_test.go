package smserve

import (
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
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes Serve makes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// harness runs Serve on a loopback listener.
type harness struct {
	url            string
	stdout, stderr syncBuffer
	cancel         context.CancelFunc
	done           chan error
}

func startServe(t *testing.T, p Program, environ ...string) *harness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ConfigFromEnviron(append([]string{"SM_MODEL_DIR=/models/x"}, environ...), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	h := &harness{url: "http://" + ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- Serve(ctx, ln, p, cfg, &h.stdout, &h.stderr) }()
	t.Cleanup(func() {
		cancel()
		<-h.done
	})
	return h
}

func (h *harness) call(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, h.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func (h *harness) stop(t *testing.T) error {
	t.Helper()
	h.cancel()
	select {
	case err := <-h.done:
		h.done <- err // for Cleanup
		return err
	case <-time.After(ShutdownTimeout + time.Second):
		t.Fatal("Serve did not return after cancel")
		return nil
	}
}

func echoHandler() http.Handler {
	return HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		b, err := ReadBody(w, r)
		if err != nil {
			return err
		}
		Write(w, http.StatusOK, "text/plain", b)
		return nil
	})
}

func TestServeLifecycle(t *testing.T) {
	release := make(chan struct{})
	p := Program{Name: "demo", Load: func(ctx context.Context, cfg Config) (Loaded, error) {
		if cfg.ModelDir != "/models/x" {
			return Loaded{}, errors.New("wrong model dir " + cfg.ModelDir)
		}
		select {
		case <-release:
		case <-ctx.Done():
			return Loaded{}, ctx.Err()
		}
		return Loaded{Invocations: echoHandler(), Summary: "3 tokens"}, nil
	}}
	h := startServe(t, p)

	if code, body := h.call(t, http.MethodGet, "/ping", ""); code != http.StatusServiceUnavailable || body != "" {
		t.Errorf("ping while loading = %d %q, want 503 empty", code, body)
	}
	if code, body := h.call(t, http.MethodPost, "/invocations", "x"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not loaded") {
		t.Errorf("invoke while loading = %d %q, want 503 naming the reason", code, body)
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := h.call(t, http.MethodGet, "/ping", "")
		if code == http.StatusOK {
			if body != "" {
				t.Errorf("ping body = %q, want empty", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ping never became 200 (last %d)", code)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, body := h.call(t, http.MethodPost, "/invocations", "hello"); code != http.StatusOK || body != "hello" {
		t.Errorf("invoke = %d %q, want 200 hello", code, body)
	}
	if code, _ := h.call(t, http.MethodGet, "/invocations", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /invocations = %d, want 405", code)
	}
	if code, _ := h.call(t, http.MethodGet, "/nope", ""); code != http.StatusNotFound {
		t.Errorf("GET /nope = %d, want 404", code)
	}
	if err := h.stop(t); err != nil {
		t.Errorf("Serve after cancel = %v, want nil", err)
	}
	if got := h.stdout.String(); !strings.HasPrefix(got, "demo listening on 127.0.0.1:") || strings.Count(got, "\n") != 1 {
		t.Errorf("stdout = %q, want one listening line", got)
	}
	if got := h.stderr.String(); !strings.Contains(got, "demo: model loaded from /models/x") || !strings.Contains(got, "3 tokens") || strings.Count(got, "\n") != 1 {
		t.Errorf("stderr = %q, want one loaded line", got)
	}
}

func TestServeReadyFunc(t *testing.T) {
	var ready atomic.Bool
	p := Program{Name: "r", Load: func(context.Context, Config) (Loaded, error) {
		return Loaded{Invocations: echoHandler(), Ready: ready.Load}, nil
	}}
	h := startServe(t, p)
	waitFor(t, func() bool { return strings.Contains(h.stderr.String(), "loaded") })
	if code, _ := h.call(t, http.MethodGet, "/ping", ""); code != http.StatusServiceUnavailable {
		t.Errorf("ping not ready = %d, want 503", code)
	}
	ready.Store(true)
	if code, _ := h.call(t, http.MethodGet, "/ping", ""); code != http.StatusOK {
		t.Errorf("ping ready = %d, want 200", code)
	}
}

func TestServeLoadFailure(t *testing.T) {
	boom := errors.New("vocab.txt: no such file")
	tests := []struct {
		name string
		load func(context.Context, Config) (Loaded, error)
		want string
	}{
		{"error", func(context.Context, Config) (Loaded, error) { return Loaded{}, boom }, "vocab.txt"},
		{"no handler", func(context.Context, Config) (Loaded, error) { return Loaded{}, nil }, "no invocations handler"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startServe(t, Program{Name: "f", Load: tt.load})
			select {
			case err := <-h.done:
				h.done <- err
				if err == nil || !strings.Contains(err.Error(), tt.want) || ExitCode(err) != 1 {
					t.Errorf("Serve = %v, want error containing %q and exit code 1", err, tt.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Serve kept running after a failed load")
			}
		})
	}
}

func TestServeGracefulShutdownFinishesRequest(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	p := Program{Name: "g", Load: func(context.Context, Config) (Loaded, error) {
		return Loaded{Invocations: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			close(entered)
			<-release
			_, _ = io.WriteString(w, "finished")
		})}, nil
	}}
	h := startServe(t, p)
	waitFor(t, func() bool { return strings.Contains(h.stderr.String(), "loaded") })
	type result struct {
		code int
		body string
	}
	got := make(chan result, 1)
	go func() {
		code, body := h.call(t, http.MethodPost, "/invocations", "")
		got <- result{code, body}
	}()
	<-entered
	h.cancel()
	time.Sleep(50 * time.Millisecond) // let Shutdown start; it must wait for the busy request
	close(release)
	if r := <-got; r.code != http.StatusOK || r.body != "finished" {
		t.Errorf("in-flight request = %d %q, want 200 finished", r.code, r.body)
	}
	start := time.Now()
	if err := h.stop(t); err != nil || time.Since(start) > time.Second {
		t.Errorf("Serve = %v after %s, want nil promptly", err, time.Since(start))
	}
}

func TestStartRejects(t *testing.T) {
	p := Program{Name: "s", Load: func(context.Context, Config) (Loaded, error) { return Loaded{}, nil }}
	tests := []struct {
		name    string
		args    []string
		environ []string
	}{
		{"unknown argument", []string{"train"}, nil},
		{"two arguments", []string{"serve", "serve"}, nil},
		{"bad port", []string{"serve"}, []string{"SAGEMAKER_BIND_TO_PORT=99999"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Start(t.Context(), p, tt.args, tt.environ, nil, io.Discard, io.Discard)
			if ExitCode(err) != 2 {
				t.Errorf("Start = %v, want a configuration error (exit 2)", err)
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
