package host_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"

	"github.com/mce-run/mce/host"
	"github.com/mce-run/mce/host/async"
	"github.com/mce-run/mce/internal/testenv"
	"github.com/mce-run/mce/internal/testenv/hostenv"
)

// asyncEnv is an mce host on real containers with a real S3 server
// (versitygw) holding the inputs and answers of asynchronous requests.
type asyncEnv struct {
	srv *host.Server
	rt  *sagemakerruntime.Client
	s3  *testenv.S3
	url string
}

const asyncBucket = "async"

// asyncHost serves one asynchronous endpoint "ep" on the probe container with
// the given MaxConcurrentInvocationsPerInstance and instance count.
func asyncHost(t testing.TB, perInstance, instances int, opts ...func(*host.Config)) *asyncEnv {
	t.Helper()
	return asyncHostYAML(t, fmt.Sprintf(`
Models:
  - ModelName: m
    PrimaryContainer: {Image: mce-example/probe:latest}
  - ModelName: sync
    PrimaryContainer: {Image: mce-example/probe:latest}
EndpointConfigs:
  - EndpointConfigName: c
    ProductionVariants: [{VariantName: AllTraffic, ModelName: m, InitialInstanceCount: %d, InstanceType: ml.c5.large}]
    AsyncInferenceConfig:
      ClientConfig: {MaxConcurrentInvocationsPerInstance: %d}
      OutputConfig: {S3OutputPath: 's3://%s/out/', S3FailurePath: 's3://%s/failed'}
  - EndpointConfigName: sync
    ProductionVariants: [{VariantName: AllTraffic, ModelName: sync, InitialInstanceCount: 1, InstanceType: ml.c5.large}]
Endpoints:
  - {EndpointName: ep, EndpointConfigName: c}
  - {EndpointName: sync, EndpointConfigName: sync}
`, instances, perInstance, asyncBucket, asyncBucket), opts...)
}

// asyncHostYAML serves the endpoints of an endpoint file.
func asyncHostYAML(t testing.TB, yaml string, opts ...func(*host.Config)) *asyncEnv {
	t.Helper()
	testenv.Docker(t)
	testenv.Image(t, "probe")
	s3srv := testenv.S3Server(t)
	s3srv.Bucket(t, asyncBucket)
	h := hostenv.New(t, hostenv.Options{S3: s3srv, Host: func(c *host.Config) {
		for _, o := range opts {
			o(c)
		}
	}})
	h.ApplyYAML(t, yaml)
	return &asyncEnv{srv: h.Server, s3: s3srv, url: h.URL, rt: h.RuntimeClient()}
}

func (a *asyncEnv) submit(t testing.TB, in *sagemakerruntime.InvokeEndpointAsyncInput) *sagemakerruntime.InvokeEndpointAsyncOutput {
	t.Helper()
	if in.EndpointName == nil {
		in.EndpointName = aws.String("ep")
	}
	out, err := a.rt.InvokeEndpointAsync(context.Background(), in)
	if err != nil {
		t.Fatalf("InvokeEndpointAsync: %v", err)
	}
	return out
}

// wait polls S3 until the object at url exists and returns its body.
func (a *asyncEnv) wait(t testing.TB, url string, within time.Duration) string {
	t.Helper()
	bucket, key, _ := strings.Cut(strings.TrimPrefix(url, "s3://"), "/")
	c := a.s3.Client(t)
	deadline := time.Now().Add(within)
	for {
		out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err == nil {
			b, _ := io.ReadAll(out.Body)
			out.Body.Close()
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no object at %s after %s: %v", url, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (a *asyncEnv) exists(t testing.TB, url string) bool {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(url, "s3://"), "/")
	_, err := a.s3.Client(t).HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	return err == nil
}

func (a *asyncEnv) scrape(t testing.TB) string {
	resp, err := http.Get(a.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestAsyncInvokeOnDocker: aws-sdk-go-v2's InvokeEndpointAsync against real
// containers and a real S3 server — the answer lands at OutputLocation,
// concurrency stays within MaxConcurrentInvocationsPerInstance × instances,
// the backlog metrics see the queue, and callers' mistakes are clear 400s.
func TestAsyncInvokeOnDocker(t *testing.T) {
	a := asyncHost(t, 2, 1)

	// One request, answered: the probe echoes the input.
	a.s3.Put(t, asyncBucket, "in/hello.json", []byte(`{"hello":"async"}`))
	out := a.submit(t, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/in/hello.json"),
		ContentType: aws.String("application/json"), InferenceId: aws.String("first")})
	if aws.ToString(out.InferenceId) != "first" || aws.ToString(out.OutputLocation) != "s3://async/out/first.out" ||
		aws.ToString(out.FailureLocation) != "s3://async/failed/first-error.out" {
		t.Fatalf("202 answer: id %q, output %q, failure %q", aws.ToString(out.InferenceId), aws.ToString(out.OutputLocation), aws.ToString(out.FailureLocation))
	}
	if got := a.wait(t, *out.OutputLocation, 20*time.Second); got != `{"hello":"async"}` {
		t.Errorf("answer %q", got)
	}
	// Without an InferenceId, mce makes one, and names the output after it.
	out = a.submit(t, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/in/hello.json")})
	if id := aws.ToString(out.InferenceId); len(id) != 36 || aws.ToString(out.OutputLocation) != "s3://async/out/"+id+".out" {
		t.Errorf("generated id %q, output %q", id, aws.ToString(out.OutputLocation))
	}
	a.wait(t, *out.OutputLocation, 20*time.Second)

	// Six requests of 600 ms on one instance allowing two at a time: three
	// rounds, so at least 1.8 s, and less than the 3.6 s of one at a time.
	a.s3.Put(t, asyncBucket, "in/slow", []byte("slow"))
	start := time.Now()
	var outs []*sagemakerruntime.InvokeEndpointAsyncOutput
	for i := range 6 {
		outs = append(outs, a.submit(t, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/in/slow"),
			InferenceId: aws.String(fmt.Sprintf("slow-%d", i)), CustomAttributes: aws.String("sleep=600ms")}))
	}
	time.Sleep(300 * time.Millisecond)
	m := a.scrape(t)
	for _, want := range []string{`mce_async_backlog_size{endpoint="ep"} 6`, `mce_async_backlog_size_per_instance{endpoint="ep"} 6`,
		`mce_async_has_backlog_without_capacity{endpoint="ep"} 0`, `mce_async_oldest_request_age_seconds{endpoint="ep"} 0.`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, grepSampleLines(m, "mce_async"))
		}
	}
	for _, o := range outs {
		a.wait(t, *o.OutputLocation, 20*time.Second)
	}
	took := time.Since(start)
	if took < 1800*time.Millisecond || took >= 3600*time.Millisecond {
		t.Errorf("6 requests of 600 ms at concurrency 2 took %s; want [1.8 s, 3.6 s)", took)
	}
	// An answer is in S3 a moment before its request is marked done.
	drained := func(m string) bool {
		return strings.Contains(m, `mce_async_backlog_size{endpoint="ep"} 0`) &&
			strings.Contains(m, `mce_async_requests_completed_total{endpoint="ep",outcome="answered"} 8`)
	}
	m = a.scrape(t)
	for deadline := time.Now().Add(5 * time.Second); !drained(m) && time.Now().Before(deadline); m = a.scrape(t) {
		time.Sleep(20 * time.Millisecond)
	}
	if !drained(m) {
		t.Errorf("after the backlog:\n%s", grepSampleLines(m, "mce_async"))
	}

	// An inline Body (at most 128,000 bytes) instead of an InputLocation:
	// kept in the state, not in S3, answered like any other.
	inline := bytes.Repeat([]byte("i"), async.MaxInline)
	out = a.submit(t, &sagemakerruntime.InvokeEndpointAsyncInput{Body: inline, ContentType: aws.String("text/plain"), InferenceId: aws.String("inline")})
	if got := a.wait(t, *out.OutputLocation, 20*time.Second); got != string(inline) {
		t.Errorf("inline answer: %d bytes, want the %d sent", len(got), len(inline))
	}
	out = a.submit(t, &sagemakerruntime.InvokeEndpointAsyncInput{Body: []byte(`{"small":1}`), ContentType: aws.String("application/json"),
		CustomAttributes: aws.String("info"), InferenceId: aws.String("inline-info")})
	if got := a.wait(t, *out.OutputLocation, 20*time.Second); !strings.Contains(got, `"content_type":"application/json"`) {
		t.Errorf("inline input's Content-Type at the container: %s", got)
	}

	// A missing input object: accepted, then written to the failure location.
	out = a.submit(t, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/in/nothing-here"), InferenceId: aws.String("missing")})
	if got := a.wait(t, *out.FailureLocation, 20*time.Second); !strings.Contains(got, "there is no object at InputLocation s3://async/in/nothing-here") {
		t.Errorf("failure for a missing input: %q", got)
	}
	if a.exists(t, *out.OutputLocation) {
		t.Error("a failed request also has an output object")
	}
	// A container error is written to the failure location in SageMaker's words.
	out = a.submit(t, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/in/hello.json"),
		InferenceId: aws.String("model-error"), CustomAttributes: aws.String("status=500")})
	if got := a.wait(t, *out.FailureLocation, 20*time.Second); !strings.Contains(got, `"__type":"ModelError","Message":"Received server error (500)`) {
		t.Errorf("failure for a container error: %q", got)
	}

	// Callers' mistakes are refused at once.
	for _, tc := range []struct {
		name string
		in   sagemakerruntime.InvokeEndpointAsyncInput
		msg  string
	}{
		{"no input", sagemakerruntime.InvokeEndpointAsyncInput{}, "Either InputLocation"},
		{"both inputs", sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/x"), Body: []byte("x")}, "mutually exclusive"},
		{"inline body too big", sagemakerruntime.InvokeEndpointAsyncInput{Body: bytes.Repeat([]byte("x"), async.MaxInline+1)},
			"Value at 'body' failed to satisfy constraint: Member must have length less than or equal to 128000"},
		{"file URL", sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("file:///etc/passwd")},
			"Value 'file:///etc/passwd' at 'inputLocation' failed to satisfy constraint"},
		{"https URL", sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("https://example.com/x")}, "s3:// URIs only"},
		{"no key", sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async")}, "needs a bucket and an object key"},
		{"TTL too short", sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/x"), RequestTTLSeconds: aws.Int32(59)},
			"'requestTTLSeconds' failed to satisfy constraint: Member must have value greater than or equal to 60"},
		{"timeout too long", sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/x"), InvocationTimeoutSeconds: aws.Int32(3601)},
			"'invocationTimeoutSeconds' failed to satisfy constraint: Member must have value less than or equal to 3600"},
		{"synchronous endpoint", sagemakerruntime.InvokeEndpointAsyncInput{EndpointName: aws.String("sync"), InputLocation: aws.String("s3://async/x")},
			"Endpoint sync is not an asynchronous endpoint"},
		{"unknown endpoint", sagemakerruntime.InvokeEndpointAsyncInput{EndpointName: aws.String("nope"), InputLocation: aws.String("s3://async/x")},
			"Endpoint nope of account 123456789012 not found."},
		{"inference id stepping out of the output path", sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/x"),
			InferenceId: aws.String("../../elsewhere/x")}, `InferenceId "../../elsewhere/x" names an S3 key with an empty, . or .. path segment`},
	} {
		in := tc.in
		if in.EndpointName == nil {
			in.EndpointName = aws.String("ep")
		}
		_, err := a.rt.InvokeEndpointAsync(context.Background(), &in)
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "ValidationError" || !strings.Contains(api.ErrorMessage(), tc.msg) {
			t.Errorf("%s: %v; want ValidationError %q", tc.name, err, tc.msg)
		}
	}

	// Deleting the endpoint settles what is queued at the failure location.
	busy := a.submit(t, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/in/slow"), CustomAttributes: aws.String("sleep=1s")})
	var queued []*sagemakerruntime.InvokeEndpointAsyncOutput
	for range 3 {
		queued = append(queued, a.submit(t, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/in/slow"), CustomAttributes: aws.String("sleep=1s")}))
	}
	if err := a.srv.DeleteEndpoint(context.Background(), "ep"); err != nil {
		t.Fatal(err)
	}
	settled := 0
	for _, o := range append(queued, busy) {
		deadline := time.Now().Add(20 * time.Second)
		for !a.exists(t, *o.OutputLocation) && !a.exists(t, *o.FailureLocation) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if a.exists(t, *o.FailureLocation) {
			if got := a.wait(t, *o.FailureLocation, time.Second); !strings.Contains(got, "Endpoint ep was deleted before inference request") &&
				!strings.Contains(got, "ServiceUnavailable") {
				t.Errorf("failure after deletion: %q", got)
			}
			settled++
		} else if !a.exists(t, *o.OutputLocation) {
			t.Errorf("request %s was neither answered nor failed after the endpoint's deletion", aws.ToString(o.InferenceId))
		}
	}
	if settled < len(queued)-1 {
		t.Errorf("%d of %d queued requests went to the failure location after the deletion", settled, len(queued))
	}
}

// TestAsyncTTLAndInvocationTimeout: a request that waits in the queue past
// its RequestTTLSeconds goes to the failure location without running, and
// one that runs past its InvocationTimeoutSeconds is cut off and fails.
// SageMaker's minimum TTL is 60 s, so this test takes a minute.
func TestAsyncTTLAndInvocationTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a 60 s TTL")
	}
	// About 61 s of it is a wait on the clock: in parallel, it runs beside
	// the framework examples' tests (their work is in their containers), once
	// the package's other tests are done, instead of alone (suite time).
	t.Parallel()
	a := asyncHost(t, 1, 1)
	a.s3.Put(t, asyncBucket, "in/x", []byte("x"))
	start := time.Now()
	// Occupies the only slot for 61 s, then is cut off at 61 s of its 90 s sleep.
	long := a.submit(t, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/in/x"), InferenceId: aws.String("long"),
		CustomAttributes: aws.String("sleep=90s"), InvocationTimeoutSeconds: aws.Int32(61)})
	time.Sleep(200 * time.Millisecond)
	expiring := a.submit(t, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/in/x"), InferenceId: aws.String("expiring"),
		RequestTTLSeconds: aws.Int32(60)})
	got := a.wait(t, *expiring.FailureLocation, 75*time.Second)
	if took := time.Since(start); took < 60*time.Second {
		t.Errorf("the request expired after %s, before its 60 s TTL", took)
	}
	if !strings.Contains(got, "Inference request expiring expired: it waited longer than its RequestTTLSeconds (60 s)") {
		t.Errorf("expiry message %q", got)
	}
	got = a.wait(t, *long.FailureLocation, 30*time.Second)
	if took := time.Since(start); took < 61*time.Second || took > 75*time.Second {
		t.Errorf("the long request failed after %s; want its 61 s timeout", took)
	}
	if !strings.Contains(got, "Inference request long exceeded its InvocationTimeoutSeconds (61 s)") {
		t.Errorf("timeout message %q", got)
	}
	if a.exists(t, *long.OutputLocation) || a.exists(t, *expiring.OutputLocation) {
		t.Error("a failed request has an output object")
	}
}

func grepSampleLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestAsyncBoto3: e2e/test_async.py — boto3's invoke_endpoint_async and the
// aws CLI's invoke-endpoint-async, unmodified, against this host, with boto3's
// s3 client putting inputs and reading answers from the same versitygw.
func TestAsyncBoto3(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import boto3").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but /usr/bin/python3 has no boto3 (make deps): %v", err)
		}
		t.Skip("/usr/bin/python3 with boto3 is missing (make deps)")
	}
	a := asyncHost(t, 2, 1)
	cmd := exec.Command("/usr/bin/python3", "-I", filepath.Join(testenv.RepoRoot(t), "e2e", "test_async.py"),
		"--url", a.url, "--s3-endpoint", a.s3.Endpoint, "--bucket", asyncBucket, "--endpoint", "ep")
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+a.s3.AccessKey, "AWS_SECRET_ACCESS_KEY="+a.s3.SecretKey,
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true")
	out, err := cmd.CombinedOutput()
	t.Logf("e2e/test_async.py:\n%s", out)
	if err != nil || !strings.Contains(string(out), " 0 failed") {
		t.Errorf("e2e/test_async.py: %v", err)
	}
}

// TestAsyncBacklogCap: beyond AsyncMaxBacklog requests queued or running,
// InvokeEndpointAsync answers 503 ServiceUnavailable and persists nothing.
func TestAsyncBacklogCap(t *testing.T) {
	a := asyncHost(t, 1, 1, func(c *host.Config) { c.AsyncMaxBacklog = 2 })
	a.s3.Put(t, asyncBucket, "in/x", []byte("x"))
	var outs []*sagemakerruntime.InvokeEndpointAsyncOutput
	for range 2 {
		outs = append(outs, a.submit(t, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/in/x"), CustomAttributes: aws.String("sleep=1500ms")}))
	}
	_, err := a.rt.InvokeEndpointAsync(context.Background(), &sagemakerruntime.InvokeEndpointAsyncInput{EndpointName: aws.String("ep"),
		InputLocation: aws.String("s3://async/in/x")}, func(o *sagemakerruntime.Options) { o.RetryMaxAttempts = 1 })
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "ServiceUnavailable" || !strings.Contains(api.ErrorMessage(), "queue is full: 2 requests") {
		t.Errorf("third request: %v; want ServiceUnavailable", err)
	}
	for _, o := range outs {
		a.wait(t, *o.OutputLocation, 20*time.Second)
	}
	// Room again once the backlog is worked through.
	o := a.submit(t, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/in/x")})
	a.wait(t, *o.OutputLocation, 20*time.Second)
}

// TestAsyncPerInstanceConcurrencyAcrossVariants: two variants of one
// instance each, MaxConcurrentInvocationsPerInstance 1: four 800 ms
// requests run two at a time, one on each variant — never two on one
// instance, and both variants serve.
func TestAsyncPerInstanceConcurrencyAcrossVariants(t *testing.T) {
	a := asyncHostYAML(t, `
Models:
  - ModelName: ma
    PrimaryContainer: {Image: mce-example/probe:latest, Environment: {PROBE_TAG: " from a"}}
  - ModelName: mb
    PrimaryContainer: {Image: mce-example/probe:latest, Environment: {PROBE_TAG: " from b"}}
EndpointConfigs:
  - EndpointConfigName: c
    ProductionVariants:
      - {VariantName: A, ModelName: ma, InitialInstanceCount: 1, InstanceType: ml.c5.large}
      - {VariantName: B, ModelName: mb, InitialInstanceCount: 1, InstanceType: ml.c5.large}
    AsyncInferenceConfig:
      ClientConfig: {MaxConcurrentInvocationsPerInstance: 1}
      OutputConfig: {S3OutputPath: 's3://async/out'}
Endpoints:
  - {EndpointName: ep, EndpointConfigName: c}
`)
	a.s3.Put(t, asyncBucket, "in/x", []byte("x"))
	start := time.Now()
	var outs []*sagemakerruntime.InvokeEndpointAsyncOutput
	for range 4 {
		outs = append(outs, a.submit(t, &sagemakerruntime.InvokeEndpointAsyncInput{InputLocation: aws.String("s3://async/in/x"), CustomAttributes: aws.String("sleep=800ms")}))
	}
	if got := aws.ToString(outs[0].FailureLocation); !strings.HasPrefix(got, "s3://async/out/") || !strings.HasSuffix(got, "-error.out") {
		t.Errorf("without S3FailurePath, failures go beside the answers: %q", got)
	}
	served := map[string]int{}
	for _, o := range outs {
		served[a.wait(t, *o.OutputLocation, 20*time.Second)]++
	}
	took := time.Since(start)
	if served["x from a"] == 0 || served["x from b"] == 0 || served["x from a"]+served["x from b"] != 4 {
		t.Errorf("answers by variant: %v", served)
	}
	if took < 1600*time.Millisecond || took >= 3200*time.Millisecond {
		t.Errorf("4 requests of 800 ms on 2 instances at 1 each took %s; want [1.6 s, 3.2 s)", took)
	}
}
