package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/mce-run/mce/internal/loadtest"
	"github.com/mce-run/mce/internal/testenv"
)

func readReport(t *testing.T, dir string) *loadtest.Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, loadtest.FileJSON))
	if err != nil {
		t.Fatal(err)
	}
	var r loadtest.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// serveProbe serves mce on an endpoint file of the model m (the probe
// image) followed by rest (its EndpointConfigs and Endpoints) on a free
// port, and waits until its endpoints are InService: the context of the
// test's calls and mce's URL.
func serveProbe(t *testing.T, rest string) (context.Context, string) {
	t.Helper()
	cli := testenv.Docker(t)
	img := testenv.OwnImage(t, "probe")
	file := filepath.Join(t.TempDir(), "ep.yaml")
	if err := os.WriteFile(file, []byte(`
Models:
  - ModelName: m
    PrimaryContainer: {Image: `+img+`}`+rest), 0o644); err != nil {
		t.Fatal(err)
	}
	return serveInService(t, cli, serveFlagsFor(t, freePort(t), file))
}

// TestLoadtestAgainstMce runs mce loadtest for a few seconds against mce
// serving the probe: user and rate stages, streaming with time to first
// byte, the probe's forced errors and an unknown endpoint counted by their
// SageMaker codes, mce's metrics scraped meanwhile, each variant's figures
// read from mce's CloudWatch API after the run (a two-variant endpoint: the
// calls mce counts per variant are those the load test saw each answer),
// and bad flags refused.
func TestLoadtestAgainstMce(t *testing.T) {
	ctx, url := serveProbe(t, `
EndpointConfigs:
  - EndpointConfigName: c
    ProductionVariants: [{VariantName: AllTraffic, ModelName: m, InitialInstanceCount: 1, InstanceType: ml.c5.large}]
Endpoints:
  - {EndpointName: ep, EndpointConfigName: c}
`)
	payload := filepath.Join(t.TempDir(), "x.json")
	os.WriteFile(payload, []byte(`{"x":1}`), 0o644)

	// users, with a 5 ms model: latency, throughput, metrics
	dir := t.TempDir()
	out, err := runCLI(ctx, "loadtest", "ep", "--endpoint-url", url, "--users", "1,3", "--spawn-rate", "20", "--duration", "1500ms",
		"--payload", payload, "--custom-attributes", "sleep=5ms", "--target", "p50=5s", "--out", dir, "-q")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "highest throughput within p50<=5s") || !strings.Contains(out, "report: "+dir) {
		t.Errorf("summary:\n%s", out)
	}
	r := readReport(t, dir)
	if len(r.Stages) != 2 || r.Plan.Request.ContentType != "application/json" {
		t.Fatalf("stages %d, plan %+v", len(r.Stages), r.Plan.Request)
	}
	for _, s := range r.Stages {
		if s.Completed == 0 || s.Errors != 0 || s.P50 < 5 || s.MetTarget == nil || !*s.MetTarget {
			t.Errorf("%s: %+v", s.Name, s)
		}
	}
	if r.Metrics == nil || r.Metrics.Scrapes < 2 || !strings.HasSuffix(r.Metrics.URL, "/metrics") {
		t.Fatalf("metrics %+v", r.Metrics)
	}
	var inv float64
	for _, s := range r.Stages {
		if s.Mce != nil {
			inv += s.Mce.Invocations
			if s.Mce.Invocations > 0 && s.Mce.ModelLatencyMS < 5 {
				t.Errorf("%s: mce's model latency %.2f ms under the probe's 5 ms sleep", s.Name, s.Mce.ModelLatencyMS)
			}
		}
	}
	if inv == 0 {
		t.Error("mce's metrics saw no invocations during the run")
	}
	if cw := r.CloudWatch; cw == nil || cw.Error != "" || cw.URL != url || len(r.Variants) != 1 {
		t.Fatalf("cloudwatch %+v, variants %+v", cw, r.Variants)
	}
	if v := r.Variants[0]; v.Variant != "AllTraffic" || v.Mce == nil || v.Mce.Invocations != float64(v.Answered) ||
		v.Answered != r.Stages[0].Completed+r.Stages[1].Completed || v.Mce.ModelLatency == nil || v.Mce.ModelLatency.P50 < 5*0.99 {
		t.Errorf("variant %+v, mce %+v", v, v.Mce)
	}
	for _, name := range []string{loadtest.FileHTML, loadtest.FileStagesCSV, loadtest.FileSecondsCSV, loadtest.FileMetricsCSV, "latency.png", "mce_latency.png", "variants.png"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}

	// two variants: mce's CloudWatch API counts, per variant, the calls the
	// load test saw that variant answer (InvokedProductionVariant)
	sm := sagemaker.New(sagemaker.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), Credentials: aws.AnonymousCredentials{}})
	variant := func(name string) smtypes.ProductionVariant {
		return smtypes.ProductionVariant{VariantName: aws.String(name), ModelName: aws.String("m"), InitialInstanceCount: aws.Int32(1),
			InstanceType: smtypes.ProductionVariantInstanceTypeMlC5Large, InitialVariantWeight: aws.Float32(1)}
	}
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("ab-config"),
		ProductionVariants: []smtypes.ProductionVariant{variant("VariantA"), variant("VariantB")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("ab"), EndpointConfigName: aws.String("ab-config")}); err != nil {
		t.Fatal(err)
	}
	waitInServiceSDK(t, sm, "ab")
	dir = t.TempDir()
	if out, err = runCLI(ctx, "loadtest", "ab", "--endpoint-url", url, "--users", "4", "--duration", "1s", "--payload", payload,
		"--custom-attributes", "sleep=2ms", "--out", dir, "-q", "--metrics-url", "off"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "mce's own server-side figures, from its CloudWatch API") {
		t.Errorf("summary:\n%s", out)
	}
	r = readReport(t, dir)
	if cw := r.CloudWatch; cw == nil || cw.Error != "" || len(r.Variants) != 2 || r.Variants[0].Variant != "VariantA" || r.Variants[1].Variant != "VariantB" {
		t.Fatalf("cloudwatch %+v, variants %+v, errors %v", cw, r.Variants, r.ErrorSamples)
	}
	var answered int64
	for _, v := range r.Variants {
		m := v.Mce
		if v.Answered == 0 || m == nil || m.Invocations != float64(v.Answered) || m.Errors4XX != 0 || m.Errors5XX != 0 ||
			m.ModelLatency == nil || m.ModelLatency.Count != v.Answered || m.ModelLatency.P50 < 2*0.99 ||
			m.OverheadLatency == nil || m.OverheadLatency.Count != v.Answered || v.Latency == nil || v.Latency.P50 < m.ModelLatency.P50*0.99 {
			t.Errorf("%s: answered %d (client %+v), mce %+v model %+v overhead %+v", v.Variant, v.Answered, v.Latency, m, m.ModelLatency, m.OverheadLatency)
		}
		answered += v.Answered
	}
	if s := r.Stages[0]; s.Errors != 0 || s.Completed != answered {
		t.Errorf("stage: %d calls, %d errors; the variants answered %d", s.Completed, s.Errors, answered)
	}

	// a rate stage, streamed: the first part comes before the whole answer
	dir = t.TempDir()
	if out, err := runCLI(ctx, "loadtest", "ep", "--endpoint-url", url, "--rate", "20", "--duration", "1s", "--stream",
		"--custom-attributes", "stream=3,every=30ms", "--out", dir, "-q", "--metrics-url", "off", "--cloudwatch=false"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	r = readReport(t, dir)
	s := r.Stages[0]
	if s.Completed == 0 || s.Errors != 0 || s.TTFB == nil || s.P50 < 60 || s.TTFB.P50 >= s.P50 || r.Metrics != nil || r.CloudWatch != nil {
		t.Errorf("stream: %+v ttfb %+v metrics %v cloudwatch %v", s, s.TTFB, r.Metrics, r.CloudWatch)
	}
	if len(r.Variants) != 1 || r.Variants[0].Variant != "AllTraffic" || r.Variants[0].Answered != s.Completed || r.Variants[0].Mce != nil {
		t.Errorf("stream: variants %+v", r.Variants)
	}

	// failures by code: the model's 500, an unknown endpoint
	dir = t.TempDir()
	if out, err := runCLI(ctx, "loadtest", "ep", "--endpoint-url", url, "--users", "1", "--duration", "500ms",
		"--custom-attributes", "status=500", "--out", dir, "-q"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if s := readReport(t, dir).Stages[0]; s.Codes["ModelError:500"] == 0 || s.Codes["ModelError:500"] != s.Errors || s.Errors != s.Completed {
		t.Errorf("forced 500: %+v", s)
	}
	dir = t.TempDir()
	if out, err := runCLI(ctx, "loadtest", "no-such-endpoint", "--endpoint-url", url, "--users", "1", "--max-requests", "5",
		"--duration", "5s", "--out", dir, "-q"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r := readReport(t, dir); r.Stages[0].Codes["ValidationError"] != 5 || !strings.Contains(r.StopReason, "max_requests") {
		t.Errorf("unknown endpoint: %+v, %q", r.Stages[0].Codes, r.StopReason)
	}

	// Ctrl-C: exit status 130 and a partial report
	invocations := func() string {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, `mce_invocations_total{endpoint="ep"`) {
				return l
			}
		}
		return ""
	}
	before := invocations()
	dir = t.TempDir()
	res := make(chan error, 1)
	go func() {
		_, err := runCLI(ctx, "loadtest", "ep", "--endpoint-url", url, "--users", "2", "--duration", "1m", "--out", dir, "-q", "--metrics-url", "off")
		res <- err
	}()
	for deadline := time.Now().Add(20 * time.Second); invocations() == before; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the load test never called mce")
		}
	}
	syscall.Kill(os.Getpid(), syscall.SIGINT) // the load test's handler holds SIGINT while it runs
	select {
	case err := <-res:
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 130 {
			t.Errorf("Ctrl-C: %v, want exit status 130", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Ctrl-C did not stop the load test")
	}
	if r := readReport(t, dir); !r.Interrupted || r.Stages[0].Completed == 0 || r.Stages[0].Errors != 0 {
		t.Errorf("partial report: interrupted %v, %+v %v", r.Interrupted, r.Stages[0], r.ErrorSamples)
	}

	for _, bad := range [][]string{
		{"--users", "x"},
		{"--users", "1", "--rate", "5"},
		{"--users", "1", "--payload", "/no/such/file"},
		{"--users", "1", "--payload", "-"},
		{"--users", "1", "--shape", "zipf", "--models", "3"},
		{"--rate", "5", "--target", "p90<1s"},
		{"--users", "1", "--plan", "/no/such/plan.yaml"},
		{},
	} {
		_, err := runCLI(ctx, append([]string{"loadtest", "ep", "--endpoint-url", url, "-q", "--out", t.TempDir()}, bad...)...)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 {
			t.Errorf("%v: %v, want exit status 2", bad, err)
		}
	}
}

// TestLoadtestMultiModel drives the 200-model endpoint (its model server
// holds 20 models at a time) with the top-k shape: every model named is in
// the cold figures once, mce's scraped metrics show models resident (at most
// the 20 the server holds), and every answer is a success.
func TestLoadtestMultiModel(t *testing.T) {
	cli := testenv.Docker(t)
	dir := testenv.MMEModels(t)
	img := testenv.OwnImage(t, "modelserver")
	file := filepath.Join(t.TempDir(), "mme.yaml")
	os.WriteFile(file, []byte(`
Models:
  - ModelName: mm
    PrimaryContainer:
      Image: `+img+`
      Mode: MultiModel
      ModelDataUrl: file://`+dir+`/
      Environment: {MODELSERVER_MEMORY_BYTES: "209715200"}
EndpointConfigs:
  - EndpointConfigName: c
    ProductionVariants: [{VariantName: AllTraffic, ModelName: mm, InitialInstanceCount: 1, InstanceType: ml.c5.large}]
Endpoints:
  - {EndpointName: mme, EndpointConfigName: c}
`), 0o644)
	listen := freePort(t)
	f := serveFlagsFor(t, listen, file)
	ctx, url := serveInService(t, cli, f)
	payload := filepath.Join(t.TempDir(), "req.json")
	os.WriteFile(payload, []byte(`{"inputs":[{"name":"INPUT0","shape":[1,4],"datatype":"FP32","data":[1.06,1.18,-0.07,1.77]}]}`), 0o644)
	out := t.TempDir()
	if got, err := runCLI(ctx, "loadtest", "mme", "--endpoint-url", url, "--payload", payload, "--models", "200", "--first-model", "0",
		"--model-pattern", "model-{i:03}.tar.gz", "--shape", "top-k", "--top-k", "10", "--share", "0.9", "--rate", "40", "--duration", "2s",
		"--seed", "3", "--out", out, "-q"); err != nil {
		t.Fatalf("%v\n%s", err, got)
	}
	r := readReport(t, out)
	s := r.Stages[0]
	if s.Completed == 0 || s.Errors != 0 {
		t.Fatalf("stage %+v (errors %v)", s, r.ErrorSamples)
	}
	if r.Cold.Count < 10 || r.Cold.Count+r.Warm.Count != s.Completed || r.Warm.Count == 0 {
		t.Errorf("cold %d + warm %d of %d calls", r.Cold.Count, r.Warm.Count, s.Completed)
	}
	if m := r.Answers.MostModelsResident; m == nil || *m < 10 || *m > 20 {
		t.Errorf("most models resident %v, want 10 to 20", m)
	}
	if s.Mce == nil || s.Mce.Invocations == 0 {
		t.Errorf("mce metrics for the stage: %+v", s.Mce)
	}
}

// TestLoadtestNeedsCredentialsForSageMaker: without --endpoint-url the
// target is SageMaker, and with no AWS credentials the command says so at
// once instead of counting a run of failures.
func TestLoadtestNeedsCredentialsForSageMaker(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(empty, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(empty, "credentials"))
	for _, k := range []string{"AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "MCE_ENDPOINT_URL",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	out := t.TempDir()
	_, err := runCLI(context.Background(), "loadtest", "ep", "--users", "1", "--duration", "1s", "--out", out, "-q")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(ee.msg, "no AWS credentials") || !strings.Contains(ee.msg, "--endpoint-url") {
		t.Errorf("got %v, want exit status 2 about credentials", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("wrote a report: %v", entries)
	}
}

// TestLoadtestInferenceComponent load-tests an inference component of an
// endpoint that hosts them: with --inference-component every call (plain
// and streamed) reaches the component's copies and succeeds, and the plan
// in the report names it; without it every call gets SageMaker's
// ValidationError for a missing component name.
func TestLoadtestInferenceComponent(t *testing.T) {
	ctx, url := serveProbe(t, `
EndpointConfigs:
  - EndpointConfigName: c
    ExecutionRoleArn: arn:aws:iam::123456789012:role/mce
    ProductionVariants: [{VariantName: AllTraffic, InitialInstanceCount: 1, InstanceType: ml.c5.large}]
Endpoints:
  - {EndpointName: shared, EndpointConfigName: c}
`)
	sm := sagemaker.New(sagemaker.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), Credentials: aws.AnonymousCredentials{}})
	if _, err := sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String("comp"),
		EndpointName: aws.String("shared"), VariantName: aws.String("AllTraffic"),
		Specification: &smtypes.InferenceComponentSpecification{ModelName: aws.String("m"),
			ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}},
		RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(2)}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		d, err := sm.DescribeInferenceComponent(ctx, &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String("comp")})
		if err != nil {
			t.Fatal(err)
		}
		if d.InferenceComponentStatus == smtypes.InferenceComponentStatusInService {
			break
		}
		if d.InferenceComponentStatus == smtypes.InferenceComponentStatusFailed || time.Now().After(deadline) {
			t.Fatalf("component %s: %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
		}
	}

	for _, stream := range []bool{false, true} {
		dir := t.TempDir()
		args := []string{"loadtest", "shared", "--endpoint-url", url, "--inference-component", "comp", "--users", "2", "--duration", "1s",
			"--custom-attributes", "sleep=2ms", "--out", dir, "-q", "--metrics-url", "off"}
		if stream {
			args = append(args, "--stream")
		}
		if out, err := runCLI(ctx, args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		r := readReport(t, dir)
		if s := r.Stages[0]; s.Completed == 0 || s.Errors != 0 || r.Plan.Request.InferenceComponent != "comp" {
			t.Errorf("stream %v: %+v, errors %v, plan request %+v", stream, s, r.ErrorSamples, r.Plan.Request)
		}
	}

	dir := t.TempDir()
	if out, err := runCLI(ctx, "loadtest", "shared", "--endpoint-url", url, "--users", "1", "--max-requests", "3", "--duration", "5s",
		"--out", dir, "-q", "--metrics-url", "off"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r := readReport(t, dir); r.Stages[0].Codes["ValidationError"] != 3 {
		t.Errorf("without --inference-component: %+v, samples %v", r.Stages[0].Codes, r.ErrorSamples)
	}
}
