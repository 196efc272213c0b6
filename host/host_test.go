package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"
	"github.com/aws/smithy-go"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/sdkhttp"
)

type harness struct {
	t       testing.TB
	srv     *Server
	http    *httptest.Server
	backend *fakeBackend
	client  *sagemakerruntime.Client
}

func newHarness(t testing.TB, cfg Config) *harness {
	t.Helper()
	b := &fakeBackend{t: t}
	if cfg.Backend == nil {
		cfg.Backend = b
	}
	cfg.Logger = zerolog.Nop()
	if cfg.Store == nil {
		cfg.Store = openStore(t)
	}
	s := New(cfg)
	hs := httptest.NewUnstartedServer(s.Handler())
	hs.Config.ConnContext = ConnContext
	hs.Start()
	t.Cleanup(func() {
		hs.Close()
		s.Close(context.Background())
	})
	client := sagemakerruntime.New(sagemakerruntime.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(hs.URL),
		Credentials:  aws.AnonymousCredentials{},
		HTTPClient:   &sdkhttp.Client{Next: hs.Client()}, // see internal/sdkhttp
	})
	return &harness{t: t, srv: s, http: hs, backend: b, client: client}
}

// deploy creates the endpoint from a plan and waits until its launch ends.
func (h *harness) deploy(p containers.EndpointPlan) error {
	h.t.Helper()
	if _, err := h.srv.startEndpoint(p, nil, p.ConfigName, nil); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return h.srv.WaitEndpoint(ctx, p.Name)
}

func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func (h *harness) invoke(in *sagemakerruntime.InvokeEndpointInput) (*sagemakerruntime.InvokeEndpointOutput, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return h.client.InvokeEndpoint(ctx, in)
}

func body(s string) []byte { return []byte(s) }

func wantAPIError(t *testing.T, err error, code, msgPart string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error = %v (%T), want API error %s", err, err, code)
	}
	if ae.ErrorCode() != code {
		t.Fatalf("code = %q (%v), want %q", ae.ErrorCode(), err, code)
	}
	if !strings.Contains(ae.ErrorMessage(), msgPart) {
		t.Fatalf("message = %q, want it to contain %q", ae.ErrorMessage(), msgPart)
	}
}

func TestDirectInvocation(t *testing.T) {
	h := newHarness(t, Config{})
	if err := h.deploy(plan("ab", "Direct", map[string][]string{"AllTraffic": {"english:EN", "german:DE"}})); err != nil {
		t.Fatal(err)
	}
	out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{
		EndpointName: aws.String("ab"), Body: body("hello "), ContentType: aws.String("text/plain"),
		TargetContainerHostname: aws.String("german"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out.Body); got != "hello DE" {
		t.Errorf("body = %q, want %q", got, "hello DE")
	}
	if got := aws.ToString(out.InvokedProductionVariant); got != "AllTraffic" {
		t.Errorf("variant = %q", got)
	}
	if got := aws.ToString(out.ContentType); got != "text/plain" {
		t.Errorf("content type = %q", got)
	}
	if out.CustomAttributes != nil {
		t.Errorf("custom attributes = %q, want none (the container set none)", aws.ToString(out.CustomAttributes))
	}
	if n := h.backend.container("ab/AllTraffic/english").calls.Load(); n != 0 {
		t.Errorf("english was called %d times; Direct must call only the target", n)
	}

	t.Run("missing hostname", func(t *testing.T) {
		_, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab"), Body: body("x")})
		var ve *types.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("err = %v, want *types.ValidationError", err)
		}
	})
	t.Run("unknown hostname", func(t *testing.T) {
		_, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab"), Body: body("x"),
			TargetContainerHostname: aws.String("french")})
		wantAPIError(t, err, "ValidationError", "french")
	})
	t.Run("bad hostname pattern", func(t *testing.T) {
		_, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab"), Body: body("x"),
			TargetContainerHostname: aws.String("bad_name")})
		wantAPIError(t, err, "ValidationError", "Value 'bad_name' at 'targetContainerHostname' failed to satisfy constraint")
	})
	t.Run("custom attributes round trip", func(t *testing.T) {
		out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab"), Body: body("x"),
			TargetContainerHostname: aws.String("english"), CustomAttributes: aws.String("attrs=trace-7")})
		if err != nil {
			t.Fatal(err)
		}
		if got := aws.ToString(out.CustomAttributes); got != "trace-7" {
			t.Errorf("custom attributes = %q, want trace-7", got)
		}
	})
	t.Run("target model on a single-model endpoint", func(t *testing.T) {
		_, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab"), Body: body("x"),
			TargetContainerHostname: aws.String("english"), TargetModel: aws.String("m.tar.gz")})
		wantAPIError(t, err, "ValidationError", "Endpoint ab is not a multi-model endpoint and does not support target model header.")
	})
}

func TestSerialInvocation(t *testing.T) {
	h := newHarness(t, Config{})
	if err := h.deploy(plan("chain", "Serial", map[string][]string{"AllTraffic": {"a:A", "b:B", "c:C"}})); err != nil {
		t.Fatal(err)
	}
	out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{
		EndpointName: aws.String("chain"), Body: body("x"), ContentType: aws.String("text/csv"),
		Accept: aws.String("application/json"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out.Body); got != "xABC" {
		t.Errorf("body = %q, want xABC (order a, b, c)", got)
	}
	a, c := h.backend.container("chain/AllTraffic/a"), h.backend.container("chain/AllTraffic/c")
	if got := a.lastHeader().Get("Accept"); got != "" {
		t.Errorf("first container got Accept %q; only the last gets the client's", got)
	}
	if got := c.lastHeader().Get("Accept"); got != "application/json" {
		t.Errorf("last container got Accept %q", got)
	}

	t.Run("content type chains", func(t *testing.T) {
		// a answers text/csv; charset=utf-8 and b must receive exactly that.
		_, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("chain"), Body: body("x"),
			ContentType: aws.String("application/json"), CustomAttributes: aws.String("ct=text/csv; charset=utf-8")})
		if err != nil {
			t.Fatal(err)
		}
		if got := h.backend.container("chain/AllTraffic/b").lastHeader().Get("Content-Type"); got != "text/csv; charset=utf-8" {
			t.Errorf("b got Content-Type %q", got)
		}
	})
	t.Run("error at container b stops the chain", func(t *testing.T) {
		before := c.calls.Load()
		_, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("chain"), Body: body("x"),
			CustomAttributes: aws.String("fail=b:503")})
		var me *types.ModelError
		if !errors.As(err, &me) {
			t.Fatalf("err = %v, want *types.ModelError", err)
		}
		if got := aws.ToInt32(me.OriginalStatusCode); got != 503 {
			t.Errorf("OriginalStatusCode = %d, want 503", got)
		}
		if got := aws.ToString(me.OriginalMessage); got != "b: forced status 503" {
			t.Errorf("OriginalMessage = %q", got)
		}
		if !strings.Contains(aws.ToString(me.Message), "Received server error (503) from b") {
			t.Errorf("Message = %q", aws.ToString(me.Message))
		}
		if c.calls.Load() != before {
			t.Error("container c was called after b failed")
		}
	})
	t.Run("hostname on a serial endpoint", func(t *testing.T) {
		_, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("chain"), Body: body("x"),
			TargetContainerHostname: aws.String("a")})
		var ve *types.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("err = %v, want *types.ValidationError", err)
		}
	})
}

func TestContainerTimeout(t *testing.T) {
	h := newHarness(t, Config{ContainerTimeout: 200 * time.Millisecond})
	if err := h.deploy(plan("slow", "Serial", map[string][]string{"AllTraffic": {"primary:P"}})); err != nil {
		t.Fatal(err)
	}
	_, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("slow"), Body: body("x"),
		CustomAttributes: aws.String("sleep=5s")})
	var me *types.ModelError
	if !errors.As(err, &me) {
		t.Fatalf("err = %v, want *types.ModelError", err)
	}
	if got := aws.ToInt32(me.OriginalStatusCode); got != 0 {
		t.Errorf("OriginalStatusCode = %d, want 0 on timeout", got)
	}
	if !strings.Contains(aws.ToString(me.Message), "timed out") {
		t.Errorf("Message = %q", aws.ToString(me.Message))
	}
}

func TestEndpointStates(t *testing.T) {
	h := newHarness(t, Config{})
	t.Run("unknown endpoint", func(t *testing.T) {
		_, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("nope"), Body: body("x")})
		wantAPIError(t, err, "ValidationError", "Endpoint nope of account 123456789012 not found.")
	})
	t.Run("creating", func(t *testing.T) {
		h := newHarness(t, Config{})
		h.backend.delay = 2 * time.Second
		if _, err := h.srv.startEndpoint(plan("later", "Serial", map[string][]string{"AllTraffic": {"primary:P"}}), nil, "later", nil); err != nil {
			t.Fatal(err)
		}
		_, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("later"), Body: body("x")})
		wantAPIError(t, err, "ValidationError", "is not InService: its status is Creating")
	})
	t.Run("failed", func(t *testing.T) {
		h := newHarness(t, Config{})
		h.backend.fail = errors.New("image missing")
		if err := h.deploy(plan("broken", "Serial", map[string][]string{"AllTraffic": {"primary:P"}})); err == nil {
			t.Fatal("launch succeeded, want failure")
		}
		infos := h.srv.Endpoints()
		var got *EndpointInfo
		for i := range infos {
			if infos[i].Name == "broken" {
				got = &infos[i]
			}
		}
		if got == nil || got.Status != spec.StatusFailed || got.FailureReason != "image missing" {
			t.Fatalf("endpoint info = %+v", got)
		}
		_, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("broken"), Body: body("x")})
		wantAPIError(t, err, "ValidationError", "its status is Failed")
	})
	t.Run("duplicate name", func(t *testing.T) {
		if err := h.deploy(plan("twice", "Serial", map[string][]string{"AllTraffic": {"primary:P"}})); err != nil {
			t.Fatal(err)
		}
		if _, err := h.srv.startEndpoint(plan("twice", "Serial", map[string][]string{"AllTraffic": {"primary:P"}}), nil, "twice", nil); err == nil {
			t.Fatal("a second endpoint with the same name was accepted")
		}
	})
}

func TestVariants(t *testing.T) {
	h := newHarness(t, Config{})
	p := plan("split", "Serial", map[string][]string{"one": {"primary:1"}, "two": {"primary:2"}})
	p.Variants[0].Weight = 3
	p.Variants[1].Weight = 1
	if err := h.deploy(p); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for range 400 {
		out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("split"), Body: body("x")})
		if err != nil {
			t.Fatal(err)
		}
		v := aws.ToString(out.InvokedProductionVariant)
		if want := "x" + map[string]string{"one": "1", "two": "2"}[v]; string(out.Body) != want {
			t.Fatalf("variant %s answered %q", v, out.Body)
		}
		counts[v]++
	}
	// 3:1 split of 400 draws: "one" gets 300 on average, sd ~8.7.
	if counts["one"] < 250 || counts["one"] > 350 {
		t.Errorf("split = %v, want about 300:100", counts)
	}
	for _, target := range []string{"one", "two"} {
		out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("split"), Body: body("x"),
			TargetVariant: aws.String(target)})
		if err != nil {
			t.Fatal(err)
		}
		if got := aws.ToString(out.InvokedProductionVariant); got != target {
			t.Errorf("TargetVariant %s answered by %s", target, got)
		}
	}
	_, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("split"), Body: body("x"),
		TargetVariant: aws.String("three")})
	wantAPIError(t, err, "ValidationError", "three")
}

func TestOversizeBody(t *testing.T) {
	h := newHarness(t, Config{})
	// The container echoes the body and adds nothing (empty tag).
	if err := h.deploy(plan("big", "Serial", map[string][]string{"AllTraffic": {"primary:"}})); err != nil {
		t.Fatal(err)
	}
	_, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("big"), Body: make([]byte, MaxPayload)})
	if err != nil {
		t.Fatalf("a body of exactly 6 MiB was refused: %v", err)
	}
	_, err = h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("big"), Body: make([]byte, MaxPayload+1)})
	wantAPIError(t, err, "ValidationError", "exceeds the maximum of 6291456 bytes")

	// Without a Content-Length (chunked), the cap still holds.
	req, _ := http.NewRequest(http.MethodPost, h.http.URL+"/endpoints/big/invocations", io.MultiReader(bytes.NewReader(make([]byte, MaxPayload)), strings.NewReader("!")))
	req.ContentLength = -1
	resp, err := h.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Header.Get("X-Amzn-ErrorType") != "ValidationError" {
		t.Errorf("chunked oversize: status %d, type %q", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"))
	}
}

// TestErrorShape checks the raw wire form of errors: JSON body with __type and
// Message, the X-Amzn-ErrorType header, a request id — never an empty body.
func TestErrorShape(t *testing.T) {
	h := newHarness(t, Config{})
	cases := []struct {
		name, method, path, wantType string
		wantStatus                   int
	}{
		{"unknown endpoint", "POST", "/endpoints/nope/invocations", "ValidationError", 400},
		{"bad endpoint name", "POST", "/endpoints/bad_name/invocations", "ValidationError", 400},
		{"unknown path", "GET", "/nothing/here", "UnknownOperationException", 404},
		{"wrong method", "GET", "/endpoints/x/invocations", "UnknownOperationException", 405},
		{"streaming, unknown endpoint", "POST", "/endpoints/x/invocations-response-stream", "ValidationError", 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, h.http.URL+tc.path, strings.NewReader("x"))
			resp, err := h.http.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b struct {
				Type    string `json:"__type"`
				Message string
			}
			if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
				t.Fatalf("body is not JSON: %v", err)
			}
			if resp.StatusCode != tc.wantStatus || b.Type != tc.wantType || b.Message == "" {
				t.Errorf("got %d %+v, want %d %s", resp.StatusCode, b, tc.wantStatus, tc.wantType)
			}
			if got := resp.Header.Get("X-Amzn-ErrorType"); got != tc.wantType {
				t.Errorf("X-Amzn-ErrorType = %q", got)
			}
			if resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("X-Amzn-RequestId") == "" {
				t.Errorf("headers = %v", resp.Header)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	h := newHarness(t, Config{MetricsOnAPI: true})
	if err := h.deploy(plan("m", "Serial", map[string][]string{"AllTraffic": {"a:A", "b:B"}})); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("m"), Body: body("x")}); err != nil {
			t.Fatal(err)
		}
	}
	h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("m"), Body: body("x"), CustomAttributes: aws.String("fail=b:404")})
	resp, err := h.http.Client().Get(h.http.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`mce_invocations_total{endpoint="m",variant="AllTraffic"} 4`,
		`mce_invocation_4xx_errors_total{endpoint="m",variant="AllTraffic"} 1`,
		`mce_invocation_5xx_errors_total{endpoint="m",variant="AllTraffic"} 0`,
		`mce_invocation_model_errors_total{endpoint="m",variant="AllTraffic"} 1`,
		`mce_model_latency_seconds_count{endpoint="m",variant="AllTraffic"} 3`,
		`mce_overhead_latency_seconds_count{endpoint="m",variant="AllTraffic"} 3`,
		`mce_container_latency_seconds_count{container="a",endpoint="m",variant="AllTraffic"} 4`,
		`mce_container_latency_seconds_count{container="b",endpoint="m",variant="AllTraffic"} 4`,
		`mce_container_invocations_total{container="b",endpoint="m",variant="AllTraffic"} 4`,
		`mce_container_invocation_4xx_errors_total{container="b",endpoint="m",variant="AllTraffic"} 1`,
		`mce_container_invocation_4xx_errors_total{container="a",endpoint="m",variant="AllTraffic"} 0`,
		`mce_endpoint_status{endpoint="m",status="InService"} 1`,
		`mce_endpoint_status{endpoint="m",status="Creating"} 0`,
		`mce_variant_desired_instances{endpoint="m",variant="AllTraffic"} 1`,
		`mce_container_ready{container="a",endpoint="m",variant="AllTraffic"} 1`,
		`mce_container_restarts_total{container="b",endpoint="m",variant="AllTraffic"} 0`,
		`mce_inflight_requests{endpoint="m",variant="AllTraffic"} 0`,
		`mce_build_info{`,
	} {
		if !strings.Contains(string(text), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestMetricsOfDeletedEndpoint: a caller's spelling of the endpoint's name
// (names match case-insensitively) makes no series of its own, and a deleted
// endpoint's series go with it, so that no caller can grow them without
// bound.
func TestMetricsOfDeletedEndpoint(t *testing.T) {
	h := newHarness(t, Config{MetricsOnAPI: true})
	scrape := func() string {
		t.Helper()
		resp, err := h.http.Client().Get(h.http.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if err := h.deploy(plan("Gone", "Serial", map[string][]string{"AllTraffic": {"a:A"}})); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Gone", "gone", "GONE"} {
		if _, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(name), Body: body("x")}); err != nil {
			t.Fatal(err)
		}
	}
	m := scrape()
	if want := `mce_invocations_total{endpoint="Gone",variant="AllTraffic"} 3`; !strings.Contains(m, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	if strings.Contains(m, `endpoint="gone"`) || strings.Contains(m, `endpoint="GONE"`) {
		t.Errorf("the callers' spellings have series of their own")
	}
	h.srv.deleteEndpoint(h.srv.reg.get("gone"))
	deadline := time.Now().Add(5 * time.Second)
	for h.srv.reg.get("gone") != nil {
		if time.Now().After(deadline) {
			t.Fatal("the endpoint was not deleted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if m := scrape(); strings.Contains(m, `endpoint="Gone"`) {
		t.Errorf("a deleted endpoint's series stay:\n%s", m)
	}
}

// TestStateMetrics: the state read at scrape time. A call in progress shows
// in mce_inflight_requests and leaves it; a failed launch shows as
// status="Failed" and nothing else.
func TestStateMetrics(t *testing.T) {
	h := newHarness(t, Config{MetricsOnAPI: true})
	scrape := func() string {
		t.Helper()
		resp, err := h.http.Client().Get(h.http.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if err := h.deploy(plan("slow", "Serial", map[string][]string{"AllTraffic": {"a:A"}})); err != nil {
		t.Fatal(err)
	}
	const idle, busy = `mce_inflight_requests{endpoint="slow",variant="AllTraffic"} 0`, `mce_inflight_requests{endpoint="slow",variant="AllTraffic"} 1`
	if m := scrape(); !strings.Contains(m, idle) {
		t.Fatalf("before any call: /metrics lacks %s", idle)
	}
	done := make(chan error, 1)
	go func() {
		_, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("slow"), Body: body("x"), CustomAttributes: aws.String("sleep=1500ms")})
		done <- err
	}()
	deadline := time.Now().Add(time.Second)
	for !strings.Contains(scrape(), busy) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s while a call was in progress", busy)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m := scrape(); !strings.Contains(m, idle) {
		t.Errorf("after the call: /metrics lacks %s", idle)
	}

	h.backend.fail = errors.New("image missing")
	if err := h.deploy(plan("broken", "Serial", map[string][]string{"AllTraffic": {"primary:P"}})); err == nil {
		t.Fatal("launch succeeded, want failure")
	}
	m := scrape()
	for _, st := range endpointStatuses {
		want := 0
		if st == spec.StatusFailed {
			want = 1
		}
		if line := fmt.Sprintf(`mce_endpoint_status{endpoint="broken",status="%s"} %d`, st, want); !strings.Contains(m, line) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	if strings.Contains(m, `container_ready{container="primary",endpoint="broken"`) {
		t.Errorf("a failed endpoint reports containers")
	}
}

// TestCloseStopsContainersKeepsEndpoints: shutting down stops every
// endpoint's containers but keeps the endpoints' records for the next start.
func TestCloseStopsContainersKeepsEndpoints(t *testing.T) {
	b := &fakeBackend{t: t}
	st := openStore(t)
	s := New(Config{Backend: b, Logger: zerolog.Nop(), Store: st})
	for _, name := range []string{"e1", "e2"} {
		if _, err := s.startEndpoint(plan(name, "Serial", map[string][]string{"AllTraffic": {"primary:P"}}), nil, name, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitEndpoint(context.Background(), name); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := b.closed.Load(); got != 2 {
		t.Errorf("closed %d launches, want 2", got)
	}
	var recs []EndpointRecord
	store.List(st, store.Endpoints, func(r EndpointRecord) error { recs = append(recs, r); return nil })
	if len(recs) != 2 || recs[0].Status != spec.StatusInService {
		t.Errorf("records after Close: %+v", recs)
	}
}

// TestClientHangUpCancelsContainerCall: when the client goes away, the call
// into the container is cancelled rather than left running.
func TestClientHangUpCancelsContainerCall(t *testing.T) {
	h := newHarness(t, Config{})
	if err := h.deploy(plan("hang", "Serial", map[string][]string{"AllTraffic": {"primary:P"}})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := h.client.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("hang"), Body: body("x"),
		CustomAttributes: aws.String("sleep=10s")})
	if err == nil {
		t.Fatal("the call succeeded; want the client's deadline")
	}
	c := h.backend.container("hang/AllTraffic/primary")
	deadline := time.Now().Add(5 * time.Second)
	for c.cancelled.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if c.cancelled.Load() != 1 {
		t.Error("the container's request was not cancelled when the client hung up")
	}
}

// TestMetricsOnlyForTheOperator: Prometheus scrapers do not sign, so with
// policies enforced the API listener has no /metrics (issue 9: it listed
// every endpoint and container to unsigned callers); MetricsHandler, for
// the operator's own listener, serves them.
func TestMetricsOnlyForTheOperator(t *testing.T) {
	for _, c := range []struct {
		name       string
		cfg        Config
		wantStatus int
	}{
		{"no policies, compatibility on", Config{MetricsOnAPI: true}, 200},
		{"no policies, compatibility off", Config{}, 404},
		{"policies enforced", Config{MetricsOnAPI: true, Authz: exampleAuthz(t)}, 404},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, c.cfg)
			resp, err := h.http.Client().Get(h.http.URL + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.wantStatus {
				t.Fatalf("GET /metrics on the API: %d %s, want %d", resp.StatusCode, b, c.wantStatus)
			}
			if c.wantStatus != 200 && !strings.Contains(string(b), `"__type":"UnknownOperationException"`) {
				t.Errorf("not the API's own 404: %s", b)
			}
			op := httptest.NewServer(h.srv.MetricsHandler())
			defer op.Close()
			resp, err = op.Client().Get(op.URL + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("operator's metrics listener: %d", resp.StatusCode)
			}
		})
	}
}

// TestEndpointsMode: the listing names a multi-model endpoint MultiModel, not
// the Serial its model's (absent) InferenceExecutionConfig defaults to.
func TestEndpointsMode(t *testing.T) {
	h := newHarness(t, Config{})
	mme := plan("many", "Serial", map[string][]string{"AllTraffic": {"primary:P"}})
	mme.Variants[0].Containers[0].Mode = "MultiModel"
	for _, p := range []containers.EndpointPlan{
		mme,
		plan("chain", "Serial", map[string][]string{"AllTraffic": {"a:A", "b:B"}}),
		plan("direct", "Direct", map[string][]string{"AllTraffic": {"a:A", "b:B"}}),
	} {
		if err := h.deploy(p); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{"many": "MultiModel", "chain": "Serial", "direct": "Direct"}
	infos := h.srv.Endpoints()
	if len(infos) != len(want) {
		t.Fatalf("Endpoints() = %+v", infos)
	}
	for _, info := range infos {
		if info.Mode != want[info.Name] {
			t.Errorf("%s: Mode = %q, want %q", info.Name, info.Mode, want[info.Name])
		}
	}
}
