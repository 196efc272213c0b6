package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/bidistream"
	"github.com/mce-run/mce/pipeline"
)

// fakeContainer stands in for a model container: it appends its tag to the
// body, and obeys the probe container's switches in the custom attributes
// (status=N, sleep=D, ct=T, attrs=V), so the host's tests need no Docker.
type fakeContainer struct {
	host      string
	tag       string
	srv       *httptest.Server
	calls     atomic.Int64
	cancelled atomic.Int64 // requests whose context ended while the container was working
	inside    atomic.Int64 // requests being answered now
	maxInside atomic.Int64 // the most requests answered at once
	ready     atomic.Bool
	mu        sync.Mutex
	seen      []http.Header
	output    []containers.LogLine // what it printed (see logs_fake_test.go)
	// stop ends the sleeps in progress when the test ends, before its
	// server closes (Close waits for the calls in progress).
	stop chan struct{}
}

func newFakeContainer(t testing.TB, hostname, tag string) *fakeContainer {
	f := &fakeContainer{host: hostname, tag: tag, stop: make(chan struct{})}
	f.ready.Store(true)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == bidistream.ContainerPath { // bidirectional streams: echo every message as <tag>:<message>
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer c.CloseNow()
			for {
				typ, b, err := c.Read(r.Context())
				if err != nil || c.Write(r.Context(), typ, append([]byte(tag+":"), b...)) != nil {
					return
				}
			}
		}
		f.calls.Add(1)
		suffix := tag
		for n := f.inside.Add(1); ; {
			if m := f.maxInside.Load(); n <= m || f.maxInside.CompareAndSwap(m, n) {
				break
			}
		}
		defer f.inside.Add(-1)
		f.mu.Lock()
		f.seen = append(f.seen, r.Header.Clone())
		f.mu.Unlock()
		body, _ := io.ReadAll(io.LimitReader(r.Body, 7<<20))
		ct := r.Header.Get("Content-Type")
		if code, ok := strings.CutPrefix(tag, "!status="); ok { // an image that always fails
			n, _ := strconv.Atoi(code)
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(n)
			fmt.Fprintf(w, "%s: broken image, status %d", hostname, n)
			return
		}
		if tag == "openai" { // a chat-completions container (openai_handler_test.go)
			fakeChat(w, r, hostname, body)
			return
		}
		if sid := r.Header.Get(hdrSessionID); sid != "" { // stateful sessions (sessions_test.go)
			fakeSession(w, r, f, sid)
			return
		}
		for _, kv := range strings.Split(r.Header.Get("X-Amzn-SageMaker-Custom-Attributes"), ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "status":
				code, _ := strconv.Atoi(v)
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(code)
				fmt.Fprintf(w, "%s: forced status %d", hostname, code)
				return
			case "fail": // fail=<hostname>:<status>
				h, code, _ := strings.Cut(v, ":")
				if h == hostname {
					n, _ := strconv.Atoi(code)
					w.Header().Set("Content-Type", "text/plain")
					w.WriteHeader(n)
					fmt.Fprintf(w, "%s: forced status %d", hostname, n)
					return
				}
			case "sleepon": // sleepon=<hostname>:<duration>: only that container sleeps
				h, dur, _ := strings.Cut(v, ":")
				if h != hostname {
					continue
				}
				d, _ := time.ParseDuration(dur)
				select {
				case <-time.After(d):
				case <-f.stop:
					return
				case <-r.Context().Done():
					f.cancelled.Add(1)
					return
				}
			case "sleep":
				d, _ := time.ParseDuration(v)
				select {
				case <-time.After(d):
				case <-r.Context().Done():
					f.cancelled.Add(1)
					return
				}
			case "ct":
				ct = v
			case "size": // size=N: answer N bytes of 'x' instead of the echo
				n, _ := strconv.Atoi(v)
				body = bytes.Repeat([]byte("x"), n)
				suffix = ""
			case "attrs":
				w.Header().Set("X-Amzn-SageMaker-Custom-Attributes", v)
			case "stream": // stream=N: N bytes in flushed 16 KiB pieces, as fast as they are taken
				n, _ := strconv.Atoi(v)
				w.Header().Set("Content-Type", "application/octet-stream")
				rc := http.NewResponseController(w)
				piece := make([]byte, 16<<10)
				for n > 0 && r.Context().Err() == nil {
					k := min(n, len(piece))
					if _, err := w.Write(piece[:k]); err != nil || rc.Flush() != nil {
						return
					}
					n -= k
				}
				return
			}
		}
		w.Header().Set("Content-Type", ct)
		w.Write(body)
		io.WriteString(w, suffix)
	}))
	t.Cleanup(f.srv.Close)
	t.Cleanup(func() { close(f.stop) }) // first: cleanups run last first
	return f
}

func (f *fakeContainer) Hostname() string { return f.host }

// BidirectionalStreaming: an image tagged "nobidi" lacks the label
// (containers.BidirectionalCapable).
func (f *fakeContainer) BidirectionalStreaming() bool { return f.tag != "nobidi" }
func (f *fakeContainer) BaseURL() string              { return f.srv.URL }
func (f *fakeContainer) Ready() bool                  { return f.ready.Load() }

func (f *fakeContainer) lastHeader() http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) == 0 {
		return nil
	}
	return f.seen[len(f.seen)-1]
}

// fakeBackend launches fake containers: each container plan's Image is its tag.
type fakeBackend struct {
	t      testing.TB
	mu     sync.Mutex
	byHost map[string]*fakeContainer // "endpoint/variant/hostname" of copy 0
	fail   error
	delay  time.Duration
	// scaleDelay is how long Scale takes.
	scaleDelay time.Duration
	launches   atomic.Int64
	closed     atomic.Int64
	onClose    func() error // when set, runs in each Launched.Close and is its result
	// stopOnClose: Launched.Close stops its containers' servers (calls
	// still in flight finish; later ones are refused), as an engine does.
	stopOnClose bool
}

func (b *fakeBackend) Adopt(context.Context, containers.EndpointPlan, int) (containers.Launched, error) {
	return nil, errors.New("fake containers do not outlive their test server")
}

func (b *fakeBackend) Reconcile(context.Context) error { return nil }

func (b *fakeBackend) Launch(ctx context.Context, plan containers.EndpointPlan, gen int) (containers.Launched, error) {
	b.launches.Add(1)
	if b.delay > 0 {
		select {
		case <-time.After(b.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if b.fail != nil {
		return nil, b.fail
	}
	l := &fakeLaunched{b: b, plan: plan, copies: map[string][][]pipeline.Container{}}
	for _, v := range plan.Variants {
		for cp := range v.InstanceCount {
			var chain []pipeline.Container
			for _, c := range v.Containers {
				fc := newFakeContainer(b.t, c.Hostname, c.Image)
				if cp == 0 {
					b.mu.Lock()
					if b.byHost == nil {
						b.byHost = map[string]*fakeContainer{}
					}
					b.byHost[plan.Name+"/"+v.Name+"/"+c.Hostname] = fc
					b.mu.Unlock()
				}
				chain = append(chain, fc)
			}
			l.copies[v.Name] = append(l.copies[v.Name], chain)
		}
	}
	return l, nil
}

func (b *fakeBackend) container(key string) *fakeContainer {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byHost[key]
}

type fakeLaunched struct {
	b      *fakeBackend
	plan   containers.EndpointPlan
	mu     sync.Mutex
	copies map[string][][]pipeline.Container
}

func (l *fakeLaunched) Copies(v string) [][]pipeline.Container {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]pipeline.Container(nil), l.copies[v]...)
}

func (l *fakeLaunched) Scale(ctx context.Context, variant string, n int) error {
	if d := l.b.scaleDelay; d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range l.plan.Variants {
		if v.Name != variant {
			continue
		}
		for len(l.copies[variant]) < n {
			var chain []pipeline.Container
			for _, c := range v.Containers {
				chain = append(chain, newFakeContainer(l.b.t, c.Hostname, c.Image))
			}
			l.copies[variant] = append(l.copies[variant], chain)
		}
		l.copies[variant] = l.copies[variant][:n]
		return nil
	}
	return fmt.Errorf("no variant %q", variant)
}
func (l *fakeLaunched) Close(context.Context) error {
	l.b.closed.Add(1)
	if l.b.stopOnClose {
		l.mu.Lock()
		for _, chains := range l.copies {
			for _, chain := range chains {
				for _, c := range chain {
					c.(*fakeContainer).srv.Close()
				}
			}
		}
		l.mu.Unlock()
	}
	if l.b.onClose != nil {
		return l.b.onClose()
	}
	return nil
}

// plan builds an endpoint plan: one variant per entry of variants, each a
// chain of containers given as "hostname:tag".
func plan(name, mode string, variants map[string][]string) containers.EndpointPlan {
	p := containers.EndpointPlan{Name: name, ConfigName: name, Mode: mode}
	for _, vname := range sortedKeys(variants) {
		v := containers.VariantPlan{Name: vname, InstanceCount: 1, Weight: 1}
		for _, hc := range variants[vname] {
			h, tag, _ := strings.Cut(hc, ":")
			v.Containers = append(v.Containers, containers.ContainerPlan{Hostname: h, Image: tag, Mode: "SingleModel"})
		}
		p.Variants = append(p.Variants, v)
	}
	return p
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
