package pipeline

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDirectRouting(t *testing.T) {
	names := []string{"english", "german", "french"}
	srvs := make([]*fakeServer, len(names))
	cs := make([]Container, len(names))
	for i, n := range names {
		srvs[i] = startServer(t, echo("<"+n, "text/plain"))
		cs[i] = newFake(n, srvs[i].srv.URL)
	}
	iv := NewInvoker(Options{})
	defer iv.Close()
	route := NewRoute("ab", Direct, []*Variant{NewVariant("AllTraffic", 1, []*Instance{NewInstance(cs)})})

	for i, target := range names {
		t.Run(target, func(t *testing.T) {
			before := make([]int64, len(srvs))
			for j, s := range srvs {
				before[j] = s.calls.Load()
			}
			resp, err := iv.Invoke(context.Background(), route, &Request{
				Body: []byte("hello"), ContentType: "text/plain", Accept: "application/json",
				CustomAttributes: "trace=1", InferenceID: "inf-1", TargetContainerHostname: target,
			})
			if err != nil {
				t.Fatalf("Invoke: %v", err)
			}
			defer resp.Release()
			if got, want := string(resp.Body), "hello<"+target; got != want {
				t.Errorf("body = %q, want %q", got, want)
			}
			if resp.Container != target || resp.Variant != "AllTraffic" {
				t.Errorf("container, variant = %q, %q; want %q, AllTraffic", resp.Container, resp.Variant, target)
			}
			for j, s := range srvs {
				want := before[j]
				if j == i {
					want++
				}
				if got := s.calls.Load(); got != want {
					t.Errorf("%s called %d times, want %d", names[j], got, want)
				}
			}
			reqs := srvs[i].requests()
			h := reqs[len(reqs)-1].header
			for k, want := range map[string]string{
				"Content-Type": "text/plain", "Accept": "application/json",
				"X-Amzn-Sagemaker-Custom-Attributes": "trace=1", "X-Amzn-Sagemaker-Inference-Id": "inf-1",
			} {
				if got := h.Get(k); got != want {
					t.Errorf("container got %s %q, want %q", k, got, want)
				}
			}
		})
	}
}

func TestRequestValidation(t *testing.T) {
	_, cs := chain(t, 2)
	iv := NewInvoker(Options{MaxPayload: 100})
	defer iv.Close()
	variants := func() []*Variant {
		return []*Variant{NewVariant("v1", 1, []*Instance{NewInstance(cs)})}
	}
	direct := NewRoute("dir", Direct, variants())
	serial := NewRoute("ser", Serial, variants())

	tests := []struct {
		name     string
		route    *Route
		req      Request
		contains []string
	}{
		{"direct without hostname", direct, Request{}, []string{"dir", "Direct", "TargetContainerHostname"}},
		{"direct unknown hostname", direct, Request{TargetContainerHostname: "nope"}, []string{"nope", "dir"}},
		{"serial with hostname", serial, Request{TargetContainerHostname: "container-1"}, []string{"ser", "not in Direct"}},
		{"unknown variant", serial, Request{TargetVariant: "v9"}, []string{"v9", "ser"}},
		{"payload over cap", serial, Request{Body: make([]byte, 101)}, []string{"101"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := iv.Invoke(context.Background(), tt.route, &tt.req)
			if err == nil {
				resp.Release()
				t.Fatal("Invoke succeeded, want ValidationError")
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %T %v, want *ValidationError", err, err)
			}
			if ve.Endpoint != tt.route.Endpoint {
				t.Errorf("Endpoint = %q, want %q", ve.Endpoint, tt.route.Endpoint)
			}
			for _, s := range tt.contains {
				if !strings.Contains(ve.Message, s) {
					t.Errorf("message %q does not mention %q", ve.Message, s)
				}
			}
		})
	}
}

func TestSerialChain(t *testing.T) {
	tests := []struct {
		name string
		// attrs[k] is what container k+1 sets as custom attributes ("" none).
		attrs     []string
		wantAttrs string
	}{
		{"last sets attributes", []string{"", "", "out=3"}, "out=3"},
		{"only a middle container sets them", []string{"", "out=2", ""}, ""},
		{"none set", []string{"", "", ""}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srvs := make([]*fakeServer, 3)
			cs := make([]Container, 3)
			for i := range srvs {
				name := []string{"featurizer", "classifier", "post"}[i]
				ct := []string{"text/csv; charset=utf-8", "application/x-recordio-protobuf", "application/json; verbose=1"}[i]
				attr := tt.attrs[i]
				srvs[i] = startServer(t, func(w http.ResponseWriter, _ *http.Request, body []byte) {
					w.Header().Set("Content-Type", ct)
					if attr != "" {
						w.Header().Set("X-Amzn-SageMaker-Custom-Attributes", attr)
					}
					_, _ = w.Write(append(body, "|"+name...))
				})
				cs[i] = newFake(name, srvs[i].srv.URL)
			}
			rec := &recorder{}
			iv := NewInvoker(Options{Observer: rec})
			defer iv.Close()
			route := NewRoute("chain", Serial, []*Variant{NewVariant("v", 1, []*Instance{NewInstance(cs)})})

			resp, err := iv.Invoke(context.Background(), route, &Request{
				Body: []byte("x"), ContentType: "application/json", Accept: "text/plain",
				CustomAttributes: "in=1", InferenceID: "id-7",
			})
			if err != nil {
				t.Fatalf("Invoke: %v", err)
			}
			defer resp.Release()
			if got, want := string(resp.Body), "x|featurizer|classifier|post"; got != want {
				t.Errorf("body = %q, want %q", got, want)
			}
			if got, want := resp.ContentType, "application/json; verbose=1"; got != want {
				t.Errorf("ContentType = %q, want %q", got, want)
			}
			if resp.CustomAttributes != tt.wantAttrs {
				t.Errorf("CustomAttributes = %q, want %q", resp.CustomAttributes, tt.wantAttrs)
			}
			if resp.Container != "post" {
				t.Errorf("Container = %q, want post", resp.Container)
			}

			wantCT := []string{"application/json", "text/csv; charset=utf-8", "application/x-recordio-protobuf"}
			wantBody := []string{"x", "x|featurizer", "x|featurizer|classifier"}
			wantAccept := [][]string{nil, nil, {"text/plain"}}
			for i, s := range srvs {
				reqs := s.requests()
				if len(reqs) != 1 {
					t.Fatalf("%s got %d requests, want 1", cs[i].Hostname(), len(reqs))
				}
				h := reqs[0].header
				if got := h.Get("Content-Type"); got != wantCT[i] {
					t.Errorf("%s Content-Type = %q, want %q", cs[i].Hostname(), got, wantCT[i])
				}
				if got := h.Values("Accept"); !slices.Equal(got, wantAccept[i]) {
					t.Errorf("%s Accept = %q, want %q", cs[i].Hostname(), got, wantAccept[i])
				}
				if got := string(reqs[0].body); got != wantBody[i] {
					t.Errorf("%s body = %q, want %q", cs[i].Hostname(), got, wantBody[i])
				}
				if got := h.Get("X-Amzn-SageMaker-Custom-Attributes"); got != "in=1" {
					t.Errorf("%s custom attributes = %q, want in=1", cs[i].Hostname(), got)
				}
				if got := h.Get("X-Amzn-SageMaker-Inference-Id"); got != "id-7" {
					t.Errorf("%s inference id = %q, want id-7", cs[i].Hostname(), got)
				}
			}

			obs := rec.all()
			if len(obs) != 3 {
				t.Fatalf("%d observations, want 3", len(obs))
			}
			var sum int64
			for i, o := range obs {
				if o.container != cs[i].Hostname() || o.endpoint != "chain" || o.variant != "v" || o.status != 200 || o.err != nil {
					t.Errorf("observation %d = %+v, want %s, chain, v, 200, nil", i, o, cs[i].Hostname())
				}
				sum += int64(o.d)
			}
			if int64(resp.ModelLatency) != sum {
				t.Errorf("ModelLatency = %v, want the sum of observed hops %v", resp.ModelLatency, sum)
			}
		})
	}
}

func TestSerialWithoutHeaders(t *testing.T) {
	srvs, cs := chain(t, 2)
	iv := NewInvoker(Options{})
	defer iv.Close()
	route := NewRoute("bare", Serial, []*Variant{NewVariant("v", 1, []*Instance{NewInstance(cs)})})
	resp, err := iv.Invoke(context.Background(), route, &Request{})
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	defer resp.Release()
	if got, want := string(resp.Body), "|container-1|container-2"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
	h := srvs[0].requests()[0].header
	for _, k := range []string{"Content-Type", "Accept", "X-Amzn-SageMaker-Custom-Attributes", "X-Amzn-SageMaker-Inference-Id"} {
		if v, ok := h[http.CanonicalHeaderKey(k)]; ok {
			t.Errorf("container-1 got %s %q, want it absent", k, v)
		}
	}
}

func TestContainerError(t *testing.T) {
	tests := []struct {
		name        string
		failAt      int // index of the failing container, of 3
		status      int
		body        string
		wantMessage string
	}{
		{
			"client error in the middle", 1, 400, "bad input",
			`Received client error (400) from container-2 with message "bad input". See the mce log for endpoint "E" (container "container-2") for more information.`,
		},
		{
			"server error first", 0, 500, "boom",
			`Received server error (500) from container-1 with message "boom". See the mce log for endpoint "E" (container "container-1") for more information.`,
		},
		{
			"unsupported media type last", 2, 415, `Content-type application/json not supported`,
			`Received client error (415) from container-3 with message "Content-type application/json not supported". See the mce log for endpoint "E" (container "container-3") for more information.`,
		},
		{
			"redirect is an error", 0, 302, "",
			`Received unexpected status (302) from container-1 with message "". See the mce log for endpoint "E" (container "container-1") for more information.`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srvs := make([]*fakeServer, 3)
			cs := make([]Container, 3)
			for i := range srvs {
				if i == tt.failAt {
					srvs[i] = startServer(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
						if tt.status == 302 {
							w.Header().Set("Location", "/elsewhere")
						}
						w.WriteHeader(tt.status)
						_, _ = w.Write([]byte(tt.body))
					})
				} else {
					srvs[i] = startServer(t, echo("", "application/json"))
				}
				cs[i] = newFake("container-"+strconv.Itoa(i+1), srvs[i].srv.URL)
			}
			rec := &recorder{}
			iv := NewInvoker(Options{Observer: rec})
			defer iv.Close()
			route := NewRoute("E", Serial, []*Variant{NewVariant("v", 1, []*Instance{NewInstance(cs)})})
			resp, err := iv.Invoke(context.Background(), route, &Request{Body: []byte("{}")})
			if err == nil {
				resp.Release()
				t.Fatal("Invoke succeeded, want ModelError")
			}
			var me *ModelError
			if !errors.As(err, &me) {
				t.Fatalf("error %T %v, want *ModelError", err, err)
			}
			if me.Message != tt.wantMessage {
				t.Errorf("Message =\n %s\nwant\n %s", me.Message, tt.wantMessage)
			}
			if me.OriginalStatusCode != tt.status || me.OriginalMessage != tt.body || me.Container != cs[tt.failAt].Hostname() {
				t.Errorf("status, message, container = %d, %q, %q; want %d, %q, %q",
					me.OriginalStatusCode, me.OriginalMessage, me.Container, tt.status, tt.body, cs[tt.failAt].Hostname())
			}
			for i, s := range srvs {
				want := int64(0)
				if i <= tt.failAt {
					want = 1
				}
				if got := s.calls.Load(); got != want {
					t.Errorf("container-%d called %d times, want %d", i+1, got, want)
				}
			}
			obs := rec.all()
			if len(obs) != tt.failAt+1 {
				t.Fatalf("%d observations, want %d", len(obs), tt.failAt+1)
			}
			if o := obs[tt.failAt]; o.status != tt.status || !errors.Is(o.err, me) {
				t.Errorf("last observation status %d err %v, want %d and the ModelError", o.status, o.err, tt.status)
			}
		})
	}
}

func TestContainerErrorBodyClipped(t *testing.T) {
	long := strings.Repeat("é", 3000) // 6000 bytes of two-byte runes
	invalid := strings.Repeat("a\xff", 2000)
	tests := []struct{ name, body string }{
		{"long multibyte", long},
		{"invalid utf-8", invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(tt.body))
			})
			iv := NewInvoker(Options{})
			defer iv.Close()
			route := NewRoute("E", Serial, []*Variant{NewVariant("v", 1, []*Instance{NewInstance([]Container{newFake("m", srv.srv.URL)})})})
			_, err := iv.Invoke(context.Background(), route, &Request{Body: []byte("x")})
			var me *ModelError
			if !errors.As(err, &me) {
				t.Fatalf("error %T %v, want *ModelError", err, err)
			}
			if n := len(me.OriginalMessage); n == 0 || n > maxOriginalMessage {
				t.Errorf("OriginalMessage is %d bytes, want 1..%d", n, maxOriginalMessage)
			}
			if !utf8.ValidString(me.OriginalMessage) || !utf8.ValidString(me.Message) {
				t.Error("messages are not valid UTF-8")
			}
			if want := strings.ToValidUTF8(tt.body, "\uFFFD"); !strings.HasPrefix(want, me.OriginalMessage) {
				t.Errorf("OriginalMessage %q is not a prefix of the container's body", me.OriginalMessage[:32])
			}
			if len(me.Message) > 2048 {
				t.Errorf("Message is %d bytes, over SageMaker's 2048", len(me.Message))
			}
		})
	}
}

func TestOversize(t *testing.T) {
	const limit = 1000
	big := bytes.Repeat([]byte("z"), limit+1)
	exact := bytes.Repeat([]byte("z"), limit)
	// answer writes body, flushing first when chunked so no Content-Length
	// is announced.
	answer := func(body []byte, chunked bool) func(http.ResponseWriter, *http.Request, []byte) {
		return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			w.Header().Set("Content-Type", "application/octet-stream")
			if chunked {
				w.(http.Flusher).Flush()
			}
			_, _ = w.Write(body)
		}
	}
	tests := []struct {
		name     string
		limit    int
		first    []byte // the first container's answer
		second   []byte // the last container's answer (nil: echo)
		chunked  bool
		wantErr  string // "" for success
		wantLast int64  // calls expected on the last container
	}{
		{"intermediate announced", limit, big, nil, false,
			"Received response from container-1 with status code 200. However, the request payload from container-1 to container-2 is 1001 bytes, which has exceeded the maximum limit of 1000 bytes.", 0},
		{"intermediate chunked", limit, big, nil, true,
			"Received response from container-1 with status code 200. However, the request payload from container-1 to container-2 is more than 1000 bytes, which has exceeded the maximum limit of 1000 bytes.", 0},
		{"final chunked", limit, exact, big, true,
			"Received response from container-2 with status code 200. However, the response payload from container-2 is more than 1000 bytes, which has exceeded the maximum limit of 1000 bytes.", 1},
		{"exactly the limit passes", limit, exact, exact, true, "", 1},
		{"default limit, intermediate chunked", 0, bytes.Repeat([]byte("z"), DefaultMaxPayload+1), nil, true,
			"Received response from container-1 with status code 200. However, the request payload from container-1 to container-2 is more than 6291456 bytes, which has exceeded the maximum limit of 6 MiB.", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s1 := startServer(t, answer(tt.first, tt.chunked))
			h2 := echo("", "application/octet-stream")
			if tt.second != nil {
				h2 = answer(tt.second, tt.chunked)
			}
			s2 := startServer(t, h2)
			iv := NewInvoker(Options{MaxPayload: tt.limit})
			defer iv.Close()
			cs := []Container{newFake("container-1", s1.srv.URL), newFake("container-2", s2.srv.URL)}
			route := NewRoute("E", Serial, []*Variant{NewVariant("v", 1, []*Instance{NewInstance(cs)})})
			resp, err := iv.Invoke(context.Background(), route, &Request{Body: []byte("in")})
			if got := s2.calls.Load(); got != tt.wantLast {
				t.Errorf("container-2 called %d times, want %d", got, tt.wantLast)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Invoke: %v", err)
				}
				defer resp.Release()
				if !bytes.Equal(resp.Body, exact) {
					t.Errorf("body is %d bytes, want %d", len(resp.Body), len(exact))
				}
				return
			}
			var me *ModelError
			if !errors.As(err, &me) {
				t.Fatalf("error %T %v, want *ModelError", err, err)
			}
			if me.Message != tt.wantErr {
				t.Errorf("Message =\n %s\nwant\n %s", me.Message, tt.wantErr)
			}
			if me.OriginalStatusCode != 200 {
				t.Errorf("OriginalStatusCode = %d, want 200", me.OriginalStatusCode)
			}
		})
	}
}

func TestResponseRelease(t *testing.T) {
	_, cs := chain(t, 1)
	iv := NewInvoker(Options{})
	defer iv.Close()
	route := NewRoute("E", Serial, []*Variant{NewVariant("v", 1, []*Instance{NewInstance(cs)})})
	resp, err := iv.Invoke(context.Background(), route, &Request{Body: []byte("a")})
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	resp.Release()
	resp.Release() // twice is harmless
	if resp.Body != nil {
		t.Errorf("Body = %q after Release, want nil", resp.Body)
	}
	var nilResp *Response
	nilResp.Release()
}

// TestRequestBodyNotRetained: a container that answers before reading the
// request leaves Go's transport writing the body after the response came
// back. Invoke must have cut the transport off the body by the time it
// returns, so the host may reuse the buffer at once (-race checks it).
func TestRequestBodyNotRetained(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("early"))
	}))
	defer srv.Close()
	iv := NewInvoker(Options{})
	defer iv.Close()
	route := NewRoute("E", Serial, []*Variant{NewVariant("v", 1, []*Instance{NewInstance([]Container{newFake("m", srv.URL)})})})
	for range 5 {
		body := bytes.Repeat([]byte("b"), DefaultMaxPayload)
		resp, err := iv.Invoke(context.Background(), route, &Request{Body: body})
		if err == nil {
			if string(resp.Body) != "early" {
				t.Errorf("body = %q, want early", resp.Body)
			}
			resp.Release()
		} else if !errors.As(err, new(*ModelError)) {
			t.Fatalf("error %T %v, want success or a *ModelError", err, err)
		}
		for i := range body { // the host reusing its buffer
			body[i] = 'x'
		}
	}
}
