package pipeline

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// blockUntilCancelled answers nothing until the client gives up; it reports
// on entered when the request arrived and closes cancelled when the server
// saw the client's cancellation.
func blockUntilCancelled(entered chan<- struct{}, cancelled chan<- struct{}) func(http.ResponseWriter, *http.Request, []byte) {
	var once sync.Once
	return func(_ http.ResponseWriter, r *http.Request, _ []byte) {
		if entered != nil {
			entered <- struct{}{}
		}
		select {
		case <-r.Context().Done():
			once.Do(func() { close(cancelled) })
		case <-time.After(30 * time.Second):
		}
	}
}

func TestTimeout(t *testing.T) {
	cancelled := make(chan struct{})
	slow := startServer(t, blockUntilCancelled(nil, cancelled))
	after := startServer(t, echo("", "text/plain"))
	rec := &recorder{}
	iv := NewInvoker(Options{Timeout: 200 * time.Millisecond, Observer: rec})
	defer iv.Close()
	cs := []Container{newFake("slow", slow.srv.URL), newFake("after", after.srv.URL)}
	route := NewRoute("E", Serial, []*Variant{NewVariant("v", 1, []*Instance{NewInstance(cs)})})

	_, err := iv.Invoke(context.Background(), route, &Request{Body: []byte("x")})
	var me *ModelError
	if !errors.As(err, &me) {
		t.Fatalf("error %T %v, want *ModelError", err, err)
	}
	want := `Received server error (0) from slow with message "Your invocation timed out while waiting for a response from container slow. ` +
		`Review the latency metrics for each container (mce_container_latency_seconds on mce's /metrics), resolve the issue, and try again.". ` +
		`See the mce log for endpoint "E" (container "slow") for more information.`
	if me.Message != want {
		t.Errorf("Message =\n %s\nwant\n %s", me.Message, want)
	}
	if me.OriginalStatusCode != 0 || me.Container != "slow" {
		t.Errorf("status, container = %d, %q; want 0, slow", me.OriginalStatusCode, me.Container)
	}
	waitFor(t, cancelled, "the container to see its request cancelled")
	if n := after.calls.Load(); n != 0 {
		t.Errorf("the next container was called %d times, want 0", n)
	}
	if obs := rec.all(); len(obs) != 1 || obs[0].status != 0 || !errors.Is(obs[0].err, me) {
		t.Errorf("observations = %+v, want one with status 0 and the ModelError", obs)
	}
}

func TestClientCancel(t *testing.T) {
	entered := make(chan struct{}, 1)
	cancelled := make(chan struct{})
	slow := startServer(t, blockUntilCancelled(entered, cancelled))
	iv := NewInvoker(Options{})
	defer iv.Close()
	route := NewRoute("E", Direct, []*Variant{NewVariant("v", 1, []*Instance{NewInstance([]Container{newFake("slow", slow.srv.URL)})})})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-entered
		cancel()
	}()
	_, err := iv.Invoke(ctx, route, &Request{Body: []byte("x"), TargetContainerHostname: "slow"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	var me *ModelError
	if errors.As(err, &me) {
		t.Errorf("a client that went away became a ModelError: %v", me)
	}
	waitFor(t, cancelled, "the container to see its request cancelled")

	// A context already done calls nothing.
	before := slow.calls.Load()
	if _, err := iv.Invoke(ctx, route, &Request{TargetContainerHostname: "slow"}); !errors.Is(err, context.Canceled) {
		t.Errorf("done context: error %v, want context.Canceled", err)
	}
	if got := slow.calls.Load(); got != before {
		t.Errorf("done context still called the container")
	}
}

func TestUnavailable(t *testing.T) {
	type setup struct {
		route   *Route
		servers []*fakeServer
		// served is the index in servers that must serve the call, or -1
		// when an UnavailableError is expected.
		served int
		req    Request
	}
	build := map[string]func(t *testing.T) setup{
		"serial with one container down": func(t *testing.T) setup {
			srvs, cs := chain(t, 2)
			cs[1].(*fakeContainer).ready.Store(false)
			return setup{NewRoute("E", Serial, []*Variant{NewVariant("v", 1, []*Instance{NewInstance(cs)})}), srvs, -1, Request{}}
		},
		"direct target down": func(t *testing.T) setup {
			srvs, cs := chain(t, 2)
			cs[0].(*fakeContainer).ready.Store(false)
			return setup{NewRoute("E", Direct, []*Variant{NewVariant("v", 1, []*Instance{NewInstance(cs)})}), srvs, -1,
				Request{TargetContainerHostname: "container-1"}}
		},
		"direct target up, another down": func(t *testing.T) setup {
			srvs, cs := chain(t, 2)
			cs[0].(*fakeContainer).ready.Store(false)
			return setup{NewRoute("E", Direct, []*Variant{NewVariant("v", 1, []*Instance{NewInstance(cs)})}), srvs, 1,
				Request{TargetContainerHostname: "container-2"}}
		},
		"serial picks the instance that is up": func(t *testing.T) setup {
			srvsA, csA := chain(t, 1)
			srvsB, csB := chain(t, 1)
			csA[0].(*fakeContainer).ready.Store(false)
			insts := []*Instance{NewInstance(csA), NewInstance(csB)}
			return setup{NewRoute("E", Serial, []*Variant{NewVariant("v", 1, insts)}), append(srvsA, srvsB...), 1, Request{}}
		},
		"variant without instances": func(t *testing.T) setup {
			return setup{NewRoute("E", Serial, []*Variant{NewVariant("v", 1, nil)}), nil, -1, Request{}}
		},
		"every weight is zero": func(t *testing.T) setup {
			srvs, cs := chain(t, 1)
			return setup{NewRoute("E", Serial, []*Variant{NewVariant("v", 0, []*Instance{NewInstance(cs)})}), srvs, -1, Request{}}
		},
		"no variants": func(t *testing.T) setup {
			return setup{NewRoute("E", Serial, nil), nil, -1, Request{}}
		},
	}
	for name, mk := range build {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			iv := NewInvoker(Options{})
			defer iv.Close()
			resp, err := iv.Invoke(context.Background(), s.route, &s.req)
			if s.served < 0 {
				var ue *UnavailableError
				if !errors.As(err, &ue) {
					t.Fatalf("error %T %v, want *UnavailableError", err, err)
				}
				if ue.Endpoint != "E" || !strings.Contains(ue.Message, "E") {
					t.Errorf("error %+v does not name endpoint E", ue)
				}
			} else {
				if err != nil {
					t.Fatalf("Invoke: %v", err)
				}
				resp.Release()
			}
			for i, srv := range s.servers {
				want := int64(0)
				if i == s.served {
					want = 1
				}
				if got := srv.calls.Load(); got != want {
					t.Errorf("server %d called %d times, want %d", i, got, want)
				}
			}
		})
	}
}

func TestDialFailureRetry(t *testing.T) {
	tests := []struct {
		name string
		mode Mode
		// hosts of instance A (tried first) and B; "dead" containers refuse
		// connections.
		a, b     []string
		target   string
		wantBody string
	}{
		{"direct", Direct, []string{"dead"}, []string{"live-b"}, "m", "x|live-b"},
		{"serial first hop", Serial, []string{"dead", "live-a2"}, []string{"live-b1", "live-b2"}, "", "x|live-b1|live-b2"},
		{"serial continues at the failed hop", Serial, []string{"live-a1", "dead"}, []string{"live-b1", "live-b2"}, "", "x|live-a1|live-b2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			servers := map[string]*fakeServer{}
			mk := func(names []string) *Instance {
				cs := make([]Container, len(names))
				for i, n := range names {
					host := "m"
					if tt.mode == Serial {
						host = "c" + strconv.Itoa(i+1)
					}
					if n == "dead" {
						cs[i] = newFake(host, deadURL(t))
						continue
					}
					servers[n] = startServer(t, echo("|"+n, "text/plain"))
					cs[i] = newFake(host, servers[n].srv.URL)
				}
				return NewInstance(cs)
			}
			a, b := mk(tt.a), mk(tt.b)
			b.outstanding.Add(1) // make A the least outstanding, so it is tried first
			rec := &recorder{}
			iv := NewInvoker(Options{Observer: rec})
			defer iv.Close()
			route := NewRoute("E", tt.mode, []*Variant{NewVariant("v", 1, []*Instance{a, b})})

			resp, err := iv.Invoke(context.Background(), route, &Request{Body: []byte("x"), TargetContainerHostname: tt.target})
			if err != nil {
				t.Fatalf("Invoke: %v", err)
			}
			defer resp.Release()
			if string(resp.Body) != tt.wantBody {
				t.Errorf("body = %q, want %q", resp.Body, tt.wantBody)
			}
			for n, s := range servers {
				want := int64(0)
				if strings.Contains(tt.wantBody, "|"+n) {
					want = 1
				}
				if got := s.calls.Load(); got != want {
					t.Errorf("%s called %d times, want %d", n, got, want)
				}
			}
			if got := a.Outstanding() + b.Outstanding(); got != 1 {
				t.Errorf("outstanding after the call = %d, want the 1 the test added", got)
			}
			var dialObs int
			for _, o := range rec.all() {
				var op *net.OpError
				if o.err != nil && o.status == 0 && errors.As(o.err, &op) {
					dialObs++
				}
			}
			if dialObs != 1 {
				t.Errorf("%d observations of a failed dial, want 1", dialObs)
			}
		})
	}
}

func TestDialFailureWithoutAlternative(t *testing.T) {
	tests := []struct {
		name      string
		instances int
	}{
		{"one instance", 1},
		{"every instance dead: one retry only", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			insts := make([]*Instance, tt.instances)
			for i := range insts {
				insts[i] = NewInstance([]Container{newFake("m", deadURL(t))})
			}
			rec := &recorder{}
			iv := NewInvoker(Options{Observer: rec})
			defer iv.Close()
			route := NewRoute("E", Serial, []*Variant{NewVariant("v", 1, insts)})
			_, err := iv.Invoke(context.Background(), route, &Request{Body: []byte("x")})
			var me *ModelError
			if !errors.As(err, &me) {
				t.Fatalf("error %T %v, want *ModelError", err, err)
			}
			var op *net.OpError
			if me.OriginalStatusCode != 0 || !strings.Contains(me.Message, "could not connect") || !errors.As(err, &op) {
				t.Errorf("error = %v (status %d), want status 0, a connect failure wrapping *net.OpError", me, me.OriginalStatusCode)
			}
			wantObs := min(tt.instances, 2)
			if got := len(rec.all()); got != wantObs {
				t.Errorf("%d container calls observed, want %d", got, wantObs)
			}
		})
	}
}

// TestInvalidResponse: an answer that is not valid HTTP/1.1 is a ModelError
// with no status, in SageMaker's words, and nothing of the answer's bytes
// reaches the message.
func TestInvalidResponse(t *testing.T) {
	for _, answer := range []string{
		"SSH-2.0-OpenSSH\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain\rX-Injected: 1\r\nContent-Length: 5\r\n\r\nhello",
	} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
				_, _ = io.WriteString(c, answer)
			}
		}()
		iv := NewInvoker(Options{})
		route := NewRoute("E", Direct, []*Variant{NewVariant("v", 1, []*Instance{NewInstance([]Container{newFake("m", "http://"+l.Addr().String())})})})
		_, err = iv.Invoke(context.Background(), route, &Request{Body: []byte("x"), TargetContainerHostname: "m"})
		iv.Close()
		var me *ModelError
		if !errors.As(err, &me) {
			t.Fatalf("answer %q: error %T %v, want *ModelError", answer, err, err)
		}
		if me.OriginalStatusCode != 0 || !strings.Contains(me.Message, "got no valid response from container m") {
			t.Errorf("answer %q: status %d, message %q; want 0 and no valid response", answer, me.OriginalStatusCode, me.Message)
		}
		if strings.ContainsAny(me.Message, "\r\n\x00") {
			t.Errorf("message %q carries control characters", me.Message)
		}
	}
}

func TestNoRetryAfterRequestSent(t *testing.T) {
	// A reads the whole request, then drops the connection without an
	// answer: the POST reached the container, so it must not be replayed.
	a := startServer(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	b := startServer(t, echo("|b", "text/plain"))
	instA := NewInstance([]Container{newFake("m", a.srv.URL)})
	instB := NewInstance([]Container{newFake("m", b.srv.URL)})
	instB.outstanding.Add(1)
	iv := NewInvoker(Options{})
	defer iv.Close()
	route := NewRoute("E", Direct, []*Variant{NewVariant("v", 1, []*Instance{instA, instB})})

	_, err := iv.Invoke(context.Background(), route, &Request{Body: []byte("x"), TargetContainerHostname: "m"})
	var me *ModelError
	if !errors.As(err, &me) {
		t.Fatalf("error %T %v, want *ModelError", err, err)
	}
	if me.OriginalStatusCode != 0 || me.Container != "m" {
		t.Errorf("status, container = %d, %q; want 0, m", me.OriginalStatusCode, me.Container)
	}
	if got := a.calls.Load(); got != 1 {
		t.Errorf("A called %d times, want 1", got)
	}
	if got := b.calls.Load(); got != 0 {
		t.Errorf("B called %d times, want 0 (no retry after the request was sent)", got)
	}
}

func TestForgetAndClose(t *testing.T) {
	closed := make(chan struct{}, 16)
	srv := startServerWith(t, echo("", "text/plain"), func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- struct{}{}
		}
	})
	c := newFake("m", srv.srv.URL)
	route := NewRoute("E", Serial, []*Variant{NewVariant("v", 1, []*Instance{NewInstance([]Container{c})})})
	iv := NewInvoker(Options{})
	invoke := func() {
		t.Helper()
		resp, err := iv.Invoke(context.Background(), route, &Request{Body: []byte("x")})
		if err != nil {
			t.Fatalf("Invoke: %v", err)
		}
		resp.Release()
	}

	invoke()
	iv.Forget(c.BaseURL())
	waitFor(t, closed, "Forget to close the idle connection")

	invoke() // a forgotten container is dialled afresh
	iv.Close()
	waitFor(t, closed, "Close to close the idle connection")
	invoke() // the Invoker stays usable after Close
	iv.Close()
}
