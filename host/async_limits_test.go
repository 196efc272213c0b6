package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/host/async"
	"github.com/mce-run/mce/internal/testenv"
)

// Asynchronous inference on fake containers (no Docker) with a real S3
// server (versitygw) holding inputs, answers and failures.

const limitsBucket = "async"

type asyncHarness struct {
	*harness
	s3  *testenv.S3
	ctr *fakeContainer
}

// newAsyncHarness serves endpoint "ep", one fake container "c" (tag "!"),
// asynchronous with perInstance concurrency, outputs under
// s3://async/out and s3://async/failed.
func newAsyncHarness(t *testing.T, cfg Config, perInstance int) *asyncHarness {
	t.Helper()
	srv := testenv.S3Server(t)
	srv.Bucket(t, limitsBucket)
	f, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{t.TempDir()},
		S3: artifact.S3Options{Endpoint: srv.Endpoint, Region: srv.Region, UsePathStyle: true, Credentials: srv.Credentials()}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.AsyncObjects = f
	h := newHarness(t, cfg)
	p := plan("ep", "Serial", map[string][]string{"AllTraffic": {"c:!"}})
	p.Async = &containers.AsyncPlan{OutputPath: "s3://async/out", FailurePath: "s3://async/failed", MaxConcurrentPerInstance: perInstance}
	if err := h.deploy(p); err != nil {
		t.Fatal(err)
	}
	// Before the fake containers close (cleanups run last first): stopping
	// mce ends the calls still in them.
	t.Cleanup(func() { h.srv.Close(context.Background()) })
	return &asyncHarness{harness: h, s3: srv, ctr: h.backend.container("ep/AllTraffic/c")}
}

// object polls S3 for the object at url: its body and Content-Type.
func (a *asyncHarness) object(t *testing.T, url string) ([]byte, string) {
	t.Helper()
	bucket, key, _ := strings.Cut(strings.TrimPrefix(url, "s3://"), "/")
	c := a.s3.Client(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err == nil {
			b, _ := io.ReadAll(out.Body)
			out.Body.Close()
			return b, aws.ToString(out.ContentType)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no object at %s: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (a *asyncHarness) put(t *testing.T, key, contentType string, body []byte) {
	t.Helper()
	in := &s3.PutObjectInput{Bucket: aws.String(limitsBucket), Key: aws.String(key), Body: bytes.NewReader(body)}
	if contentType != "" {
		in.ContentType = aws.String(contentType)
	}
	if _, err := a.s3.Client(t).PutObject(context.Background(), in); err != nil {
		t.Fatal(err)
	}
}

func (a *asyncHarness) submit(t *testing.T, c *sagemakerruntime.Client, in *sagemakerruntime.InvokeEndpointAsyncInput) (*sagemakerruntime.InvokeEndpointAsyncOutput, error) {
	t.Helper()
	if c == nil {
		c = a.client
	}
	in.EndpointName = aws.String("ep")
	return c.InvokeEndpointAsync(context.Background(), in, func(o *sagemakerruntime.Options) { o.RetryMaxAttempts = 1 })
}

// TestAsyncInputContentTypeFromObject (issue 18, item 1): the SageMaker
// Python SDK's AsyncPredictor stores its input with a Content-Type and sends
// none with InvokeEndpointAsync; the container gets the object's type. A
// ContentType on the call wins; an object without one (or with S3's
// binary/octet-stream) goes as application/octet-stream.
func TestAsyncInputContentTypeFromObject(t *testing.T) {
	a := newAsyncHarness(t, Config{}, 1)
	a.put(t, "in/rows.csv", "text/csv", []byte("1,2\n"))
	a.put(t, "in/plain", "", []byte("x"))
	for _, tc := range []struct {
		name, input, callType, want string
	}{
		{"object's type", "in/rows.csv", "", "text/csv"},
		{"the call's type wins", "in/rows.csv", "application/json", "application/json"},
		{"no type anywhere", "in/plain", "", "application/octet-stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/" + tc.input)}
			if tc.callType != "" {
				in.ContentType = aws.String(tc.callType)
			}
			out, err := a.submit(t, nil, in)
			if err != nil {
				t.Fatal(err)
			}
			_, ct := a.object(t, aws.ToString(out.OutputLocation))
			if got := a.ctr.lastHeader().Get("Content-Type"); got != tc.want {
				t.Errorf("container got Content-Type %q; want %q", got, tc.want)
			}
			if ct != tc.want { // the fake answers with the request's type
				t.Errorf("answer stored as %q; want %q", ct, tc.want)
			}
		})
	}
}

// TestAsyncFailureObjectIsJSON (issue 18, item 2): a failure is written as
// SageMaker's JSON error body with Content-Type application/json, so that
// the SDK's AsyncInferenceResponse, which runs the failure object through
// the predictor's deserializer (JSON for most), raises
// AsyncInferenceModelError with it rather than a JSON decode error.
func TestAsyncFailureObjectIsJSON(t *testing.T) {
	a := newAsyncHarness(t, Config{}, 1)
	a.put(t, "in/x", "", []byte("x"))
	for _, tc := range []struct {
		name, input, attrs, code, text string
	}{
		{"model error", "in/x", "status=500", "ModelError", "(500) from c"},
		{"missing input", "in/absent", "", "ValidationError", "there is no object at InputLocation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/" + tc.input)}
			if tc.attrs != "" {
				in.CustomAttributes = aws.String(tc.attrs)
			}
			out, err := a.submit(t, nil, in)
			if err != nil {
				t.Fatal(err)
			}
			b, ct := a.object(t, aws.ToString(out.FailureLocation))
			var doc struct {
				Type    string `json:"__type"`
				Message string
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatalf("failure object %q is not JSON: %v", b, err)
			}
			if ct != "application/json" || doc.Type != tc.code || !strings.Contains(doc.Message, tc.text) {
				t.Errorf("failure object: %s %q; want application/json, %s with %q", ct, b, tc.code, tc.text)
			}
		})
	}
}

// TestAsyncAnswersWithinMemoryBudget (issue 18, item 3): answers count
// against --async-memory as inputs do. With room for 2 requests' inputs and
// answers at the cap, 8 requests allowed to run at once (per-instance
// concurrency 8) whose answers are near the cap run at most 2 at a time,
// and the bytes held by running requests never pass the budget. Without
// the reservation all 8 run at once and hold 8 answers.
func TestAsyncAnswersWithinMemoryBudget(t *testing.T) {
	const payload = 1 << 20
	a := newAsyncHarness(t, Config{AsyncMaxPayload: payload, AsyncMemory: 3 * payload}, 8)
	a.put(t, "in/x", "", []byte("x"))
	var outs []*sagemakerruntime.InvokeEndpointAsyncOutput
	for range 8 {
		out, err := a.submit(t, nil, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/in/x"),
			CustomAttributes: aws.String("sleep=100ms,size=1000000")})
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out)
	}
	for _, o := range outs {
		if b, _ := a.object(t, aws.ToString(o.OutputLocation)); len(b) != 1000000 {
			t.Fatalf("answer of %d bytes", len(b))
		}
	}
	if got := a.ctr.maxInside.Load(); got > 2 {
		t.Errorf("%d requests ran at once; the budget has room for 2 (input + a 1 MiB answer each)", got)
	}
	if _, peak := a.srv.async.Memory(); peak > a.srv.cfg.AsyncMemory || peak < 1000000 {
		t.Errorf("peak bytes held by async requests %d; want an answer's worth, within the budget %d", peak, a.srv.cfg.AsyncMemory)
	}
	a.srv.Close(context.Background()) // waits for the requests' last steps
	if held, _ := a.srv.async.Memory(); held != 0 {
		t.Errorf("%d bytes still counted as held after every request ended", held)
	}
}

// TestAsyncBacklogExactUnderConcurrency (issue 18, item 5): 60 callers at
// once against a backlog cap of 20, none finishing meanwhile: exactly 20
// are accepted and 40 refused with ServiceUnavailable.
func TestAsyncBacklogExactUnderConcurrency(t *testing.T) {
	const limit, callers = 20, 60
	a := newAsyncHarness(t, Config{AsyncMaxBacklog: limit}, 1)
	a.put(t, "in/x", "", []byte("x"))
	var mu sync.Mutex
	accepted, refused := 0, 0
	var other []error
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// The first one accepted occupies the endpoint's only slot
			// until the test ends; the others queue behind it.
			_, err := a.submit(t, nil, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/in/x"),
				CustomAttributes: aws.String("sleep=10m")})
			mu.Lock()
			defer mu.Unlock()
			var api smithy.APIError
			switch {
			case err == nil:
				accepted++
			case errors.As(err, &api) && api.ErrorCode() == "ServiceUnavailable":
				refused++
			default:
				other = append(other, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if accepted != limit || refused != callers-limit || len(other) > 0 {
		t.Errorf("accepted %d, refused %d, other errors %v; want %d and %d", accepted, refused, other, limit, callers-limit)
	}
	if n, ok := a.srv.async.Reserve(); ok || n != limit {
		t.Errorf("backlog after the burst: %d (room: %v); want %d, full", n, ok, limit)
	}
}

// asyncAuthz writes a credentials file: "reader" may invoke the endpoint
// asynchronously and read s3://async/in/*, "invoker" may only invoke.
func asyncAuthz(t *testing.T) *authz.Authorizer {
	t.Helper()
	dir := t.TempDir()
	creds := `Credentials:
  - AccessKeyId: AKIAREADER000EXAMPLE
    SecretAccessKey: reader-example-secret-key-0000000000
    Arn: arn:aws:iam::123456789012:user/reader
    Policies:
      - Version: "2012-10-17"
        Statement:
          - {Effect: Allow, Action: sagemaker:InvokeEndpointAsync, Resource: "*"}
          - {Effect: Allow, Action: s3:GetObject, Resource: "arn:aws:s3:::async/in/*"}
  - AccessKeyId: AKIAINVOKER00EXAMPLE
    SecretAccessKey: invoker-example-secret-key-000000000
    Arn: arn:aws:iam::123456789012:user/invoker
    Policies:
      - Version: "2012-10-17"
        Statement:
          - {Effect: Allow, Action: sagemaker:InvokeEndpointAsync, Resource: "*"}
`
	path := filepath.Join(dir, "credentials.yaml")
	if err := os.WriteFile(path, []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	az, err := authz.Load(context.Background(), authz.Config{CredentialsFile: path, Region: "us-east-1", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return az
}

// TestAsyncInputAuthorizedForCaller (issue 18, item 4): mce reads inputs
// with its own S3 credentials, so a caller must be allowed s3:GetObject on
// the input object. A caller allowed only InvokeEndpointAsync cannot have
// another object read back to it as its answer, and the refusal is the
// same whether the object exists or not.
func TestAsyncInputAuthorizedForCaller(t *testing.T) {
	a := newAsyncHarness(t, Config{Authz: asyncAuthz(t)}, 1)
	a.put(t, "in/x", "", []byte("x"))
	a.put(t, "secret.txt", "", []byte("secret"))
	reader := a.runtimeAs("AKIAREADER000EXAMPLE", "reader-example-secret-key-0000000000")
	invoker := a.runtimeAs("AKIAINVOKER00EXAMPLE", "invoker-example-secret-key-000000000")
	denied := func(who string, c *sagemakerruntime.Client, input string) string {
		t.Helper()
		_, err := a.submit(t, c, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String(input)})
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "AccessDeniedException" || !strings.Contains(api.ErrorMessage(), "s3:GetObject") {
			t.Errorf("%s reading %s: %v; want AccessDeniedException naming s3:GetObject", who, input, err)
			return ""
		}
		return strings.ReplaceAll(api.ErrorMessage(), strings.TrimPrefix(input, "s3://"), "OBJECT")
	}
	exists := denied("invoker", invoker, "s3://async/secret.txt")
	absent := denied("invoker", invoker, "s3://async/absent.txt")
	if exists != absent {
		t.Errorf("refusals differ between an object that exists and one that does not:\n%s\n%s", exists, absent)
	}
	denied("invoker", invoker, "s3://async/in/x")
	denied("reader", reader, "s3://async/secret.txt")
	out, err := a.submit(t, reader, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/in/x")})
	if err != nil {
		t.Fatalf("reader, allowed its input: %v", err)
	}
	if b, _ := a.object(t, aws.ToString(out.OutputLocation)); string(b) != "x!" {
		t.Errorf("answer %q", b)
	}
	if a.ctr.calls.Load() != 1 {
		t.Errorf("the container ran %d times; only the allowed request should run", a.ctr.calls.Load())
	}
}

// TestAsyncS3Prefixes (issue 18, item 4): --async-input-prefix and
// --async-output-prefix confine what mce reads and writes for callers.
func TestAsyncS3Prefixes(t *testing.T) {
	in, err := async.NormalizeS3Prefix("s3://async/in")
	if err != nil {
		t.Fatal(err)
	}
	a := newAsyncHarness(t, Config{AsyncInputPrefixes: []string{in}, AsyncOutputPrefixes: []string{"s3://async/out/", "s3://async/failed/"}}, 1)
	a.put(t, "in/x", "", []byte("x"))
	a.put(t, "secret.txt", "", []byte("secret"))
	for _, tc := range []struct{ input, code string }{
		{"s3://async/secret.txt", "AccessDeniedException"},
		{"s3://async/inx", "AccessDeniedException"},
		{"s3://other/in/x", "AccessDeniedException"},
		{"s3://async/in/../secret.txt", "ValidationError"},
	} {
		_, err := a.submit(t, nil, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String(tc.input)})
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != tc.code {
			t.Errorf("InputLocation %s: %v; want %s", tc.input, err, tc.code)
		}
	}
	out, err := a.submit(t, nil, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/in/x")})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := a.object(t, aws.ToString(out.OutputLocation)); string(b) != "x!" {
		t.Errorf("answer %q", b)
	}

	// An endpoint whose output path lies outside the output prefixes.
	p := plan("elsewhere", "Serial", map[string][]string{"AllTraffic": {"c:!"}})
	p.Async = &containers.AsyncPlan{OutputPath: "s3://victim/overwrite", FailurePath: "s3://async/failed", MaxConcurrentPerInstance: 1}
	if err := a.deploy(p); err != nil {
		t.Fatal(err)
	}
	_, err = a.client.InvokeEndpointAsync(context.Background(), &sagemakerruntime.InvokeEndpointAsyncInput{EndpointName: aws.String("elsewhere"),
		InputLocation: aws.String("s3://async/in/x")}, func(o *sagemakerruntime.Options) { o.RetryMaxAttempts = 1 })
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "ValidationError" || !strings.Contains(api.ErrorMessage(), "--async-output-prefix") {
		t.Errorf("endpoint writing outside the output prefixes: %v; want ValidationError naming --async-output-prefix", err)
	}
	if c := a.backend.container("elsewhere/AllTraffic/c"); c != nil && c.calls.Load() != 0 {
		t.Errorf("the refused request ran")
	}

	for _, bad := range []string{"data", "s3://", "s3:///k", "s3://b/a/../k"} {
		if _, err := async.NormalizeS3Prefix(bad); err == nil {
			t.Errorf("NormalizeS3Prefix(%q) accepted", bad)
		}
	}
	if got, _ := async.NormalizeS3Prefix("s3://data"); got != "s3://data/" {
		t.Errorf("NormalizeS3Prefix(s3://data) = %q", got)
	}
}
