package host

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	rttypes "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/host/capture"
	"github.com/mce-run/mce/internal/testenv"
)

// captureStore is a capture.Store in memory that can be taken down: while
// down, every write fails as a store that does not answer would.
type captureStore struct {
	mu      sync.Mutex
	objects map[string][]byte
	down    bool
	failed  int
}

func newCaptureStore() *captureStore { return &captureStore{objects: map[string][]byte{}} }

func (s *captureStore) PutObject(_ context.Context, url string, body []byte, _ string, _ map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		s.failed++
		return errors.New("dial tcp 127.0.0.1:9: connect: connection refused")
	}
	s.objects[url] = bytes.Clone(body)
	return nil
}

func (s *captureStore) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// records are the records written, by object URL order, each with its URL.
func (s *captureStore) records(t *testing.T) []urlRecord {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var urls []string
	for u := range s.objects {
		urls = append(urls, u)
	}
	sort.Strings(urls)
	var out []urlRecord
	for _, u := range urls {
		for _, r := range captureLines(t, s.objects[u]) {
			out = append(out, urlRecord{u, r})
		}
	}
	return out
}

type urlRecord struct {
	url string
	capture.Record
}

// captureLines decodes a capture file: one JSON record a line, each with
// SageMaker's members only.
func captureLines(t *testing.T, body []byte) []capture.Record {
	t.Helper()
	var recs []capture.Record
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 32<<20)
	for sc.Scan() {
		var r capture.Record
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("capture line %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

// newCaptureWriter is a writer on store with short retries, closed (after
// the servers of the test, whose cleanups run first) at the end.
func newCaptureWriter(t *testing.T, store capture.Store, mutate func(*capture.Options)) *capture.Writer {
	t.Helper()
	opts := capture.Options{Store: store, RetryMin: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond, TickInterval: 5 * time.Millisecond}
	if mutate != nil {
		mutate(&opts)
	}
	w, err := capture.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = w.Close(ctx)
	})
	return w
}

func flushCapture(t *testing.T, w *capture.Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// sdkCapture is a DataCaptureConfig as the SageMaker Python SDK's
// DataCaptureConfig._to_request_dict sends it: both capture modes,
// text/csv as CSV and application/json as JSON.
func sdkCapture(enable bool, pct int32, dest string) *smtypes.DataCaptureConfig {
	return &smtypes.DataCaptureConfig{EnableCapture: aws.Bool(enable), InitialSamplingPercentage: aws.Int32(pct), DestinationS3Uri: aws.String(dest),
		CaptureOptions:           []smtypes.CaptureOption{{CaptureMode: smtypes.CaptureModeInput}, {CaptureMode: smtypes.CaptureModeOutput}},
		CaptureContentTypeHeader: &smtypes.CaptureContentTypeHeader{CsvContentTypes: []string{"text/csv"}, JsonContentTypes: []string{"application/json"}}}
}

// createCaptureEndpoint creates model NAME-model (a fake container whose
// tag is tag), configuration config with capture dc, and endpoint name on
// it, and waits until it serves.
func createCaptureEndpoint(t *testing.T, h *harness, name, config, tag string, dc *smtypes.DataCaptureConfig) {
	t.Helper()
	ctx := context.Background()
	sm := h.sm()
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String(name + "-model"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String(tag)}}); err != nil {
		t.Fatal(err)
	}
	createCaptureConfig(t, sm, config, name+"-model", dc)
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String(config)}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, h, name)
}

func createCaptureConfig(t *testing.T, sm *sagemaker.Client, config, model string, dc *smtypes.DataCaptureConfig) {
	t.Helper()
	if _, err := sm.CreateEndpointConfig(context.Background(), &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(config),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String(model),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}},
		DataCaptureConfig: dc}); err != nil {
		t.Fatalf("CreateEndpointConfig %s: %v", config, err)
	}
}

func waitServing(t *testing.T, h *harness, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.srv.WaitEndpoint(ctx, name); err != nil {
		t.Fatalf("endpoint %s: %v", name, err)
	}
}

// updateCapture is the SageMaker Python SDK's
// Predictor.update_data_capture_config (enable_data_capture and
// disable_data_capture too): DescribeEndpoint for the configuration's name,
// DescribeEndpointConfig, CreateEndpointConfig with what it described and
// the new DataCaptureConfig (nil: the one described), UpdateEndpoint, and
// DescribeEndpoint until the update is done.
func updateCapture(t *testing.T, h *harness, endpoint, newConfig string, dc *smtypes.DataCaptureConfig) {
	t.Helper()
	ctx := context.Background()
	sm := h.sm()
	ep, err := sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String(endpoint)})
	if err != nil {
		t.Fatal(err)
	}
	old, err := sm.DescribeEndpointConfig(ctx, &sagemaker.DescribeEndpointConfigInput{EndpointConfigName: ep.EndpointConfigName})
	if err != nil {
		t.Fatal(err)
	}
	if dc == nil {
		dc = old.DataCaptureConfig
	}
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(newConfig),
		ProductionVariants: old.ProductionVariants, DataCaptureConfig: dc, AsyncInferenceConfig: old.AsyncInferenceConfig}); err != nil {
		t.Fatalf("CreateEndpointConfig %s: %v", newConfig, err)
	}
	if _, err := sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String(endpoint), EndpointConfigName: aws.String(newConfig)}); err != nil {
		t.Fatalf("UpdateEndpoint: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String(endpoint)})
		if err != nil {
			t.Fatal(err)
		}
		if d.EndpointStatus == smtypes.EndpointStatusInService && aws.ToString(d.EndpointConfigName) == newConfig {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("update to %s: %s %s", newConfig, d.EndpointStatus, aws.ToString(d.FailureReason))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func describeCapture(t *testing.T, h *harness, endpoint string) *smtypes.DataCaptureConfigSummary {
	t.Helper()
	d, err := h.sm().DescribeEndpoint(context.Background(), &sagemaker.DescribeEndpointInput{EndpointName: aws.String(endpoint)})
	if err != nil {
		t.Fatal(err)
	}
	return d.DataCaptureConfig
}

func wantCaptureSummary(t *testing.T, got *smtypes.DataCaptureConfigSummary, enable bool, status smtypes.CaptureStatus, pct int32, dest string) {
	t.Helper()
	if got == nil {
		t.Fatalf("DescribeEndpoint has no DataCaptureConfig; want %s at %d%%", status, pct)
	}
	if aws.ToBool(got.EnableCapture) != enable || got.CaptureStatus != status || aws.ToInt32(got.CurrentSamplingPercentage) != pct ||
		aws.ToString(got.DestinationS3Uri) != dest {
		t.Fatalf("DataCaptureConfig = {EnableCapture %v, CaptureStatus %s, CurrentSamplingPercentage %d, DestinationS3Uri %s}; want {%v %s %d %s}",
			aws.ToBool(got.EnableCapture), got.CaptureStatus, aws.ToInt32(got.CurrentSamplingPercentage), aws.ToString(got.DestinationS3Uri),
			enable, status, pct, dest)
	}
}

func (h *harness) invokeCapture(t *testing.T, endpoint, contentType, body, inferenceID string) *sagemakerruntime.InvokeEndpointOutput {
	t.Helper()
	in := &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(endpoint), Body: []byte(body), ContentType: aws.String(contentType)}
	if inferenceID != "" {
		in.InferenceId = aws.String(inferenceID)
	}
	out, err := h.invoke(in)
	if err != nil {
		t.Fatalf("InvokeEndpoint %s: %v", endpoint, err)
	}
	return out
}

// capturePath is where SageMaker puts a capture file:
// DESTINATION/ENDPOINT/VARIANT/yyyy/mm/dd/hh/mm-ss-SSS-UUID.jsonl.
func capturePath(dest, endpoint, variant string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(dest+"/"+endpoint+"/"+variant+"/") +
		`\d{4}/\d{2}/\d{2}/\d{2}/\d{2}-\d{2}-\d{3}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.jsonl$`)
}

// payload checks one captured payload against what was sent or answered.
func payload(t *testing.T, what string, p *capture.Payload, mode, contentType, encoding, data string) {
	t.Helper()
	if p == nil {
		t.Fatalf("%s: no %s payload", what, mode)
	}
	got, err := p.Bytes()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if p.Mode != mode || p.ObservedContentType != contentType || p.Encoding != encoding || string(got) != data {
		t.Fatalf("%s: %s payload %+v (data %q), want %s %s %q", what, mode, p, got, contentType, encoding, data)
	}
}

// TestDataCaptureThroughTheAPI (issue 28, item 3) drives data capture as
// the SageMaker Python SDK does, with aws-sdk-go-v2, against a real S3
// server (versitygw) written through mce's own S3 client: a configuration
// with the SDK's DataCaptureConfig, described back unchanged; an endpoint
// on it whose DescribeEndpoint shows the capture Started; CSV, JSON and
// binary calls and a streamed one captured in SageMaker's format and place,
// a failed call not; then the SDK's disable_data_capture (Stopped, nothing
// captured), sampling at 0 %, a configuration without capture (no
// DataCaptureConfig shown), enable_data_capture again (captured), and the
// deletion. Before the wiring, the configuration was refused.
func TestDataCaptureThroughTheAPI(t *testing.T) {
	srv := testenv.S3Server(t)
	srv.Bucket(t, "capture")
	f, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{t.TempDir()},
		S3: artifact.S3Options{Endpoint: srv.Endpoint, Region: srv.Region, UsePathStyle: true, Credentials: srv.Credentials()}})
	if err != nil {
		t.Fatal(err)
	}
	w := newCaptureWriter(t, f, nil)
	h := newHarness(t, Config{Capture: w})
	sm := h.sm()
	ctx := context.Background()
	const dest = "s3://capture/model-monitor/data-capture"
	dc := sdkCapture(true, 100, dest)
	dc.KmsKeyId = aws.String("alias/capture")
	createCaptureEndpoint(t, h, "churn", "churn-config", "!", dc)

	// DescribeEndpointConfig gives the configuration back as it was sent
	// (the SDK's create_endpoint_config_from_existing copies it).
	desc, err := sm.DescribeEndpointConfig(ctx, &sagemaker.DescribeEndpointConfigInput{EndpointConfigName: aws.String("churn-config")})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(desc.DataCaptureConfig); string(got) != string(must(json.Marshal(dc))) {
		t.Errorf("DescribeEndpointConfig's DataCaptureConfig = %s, want %s", got, must(json.Marshal(dc)))
	}
	got := describeCapture(t, h, "churn")
	wantCaptureSummary(t, got, true, smtypes.CaptureStatusStarted, 100, dest)
	if aws.ToString(got.KmsKeyId) != "alias/capture" {
		t.Errorf("KmsKeyId = %q", aws.ToString(got.KmsKeyId))
	}

	// Calls: CSV, JSON and binary bodies; a streamed answer; a failure.
	h.invokeCapture(t, "churn", "text/csv", "5,1.2,3\n", "order-17")
	h.invokeCapture(t, "churn", "application/json", `{"instances":[[1,2]]}`, "")
	h.invokeCapture(t, "churn", "application/x-npy", "\x93NUMPY\x00\xff", "bin-1")
	st, err := h.client.InvokeEndpointWithResponseStream(ctx, &sagemakerruntime.InvokeEndpointWithResponseStreamInput{EndpointName: aws.String("churn"),
		Body: []byte("7,8\n"), ContentType: aws.String("text/csv"), InferenceId: aws.String("stream-1")})
	if err != nil {
		t.Fatal(err)
	}
	var streamed []byte
	for ev := range st.GetStream().Events() {
		if p, ok := ev.(*rttypes.ResponseStreamMemberPayloadPart); ok {
			streamed = append(streamed, p.Value.Bytes...)
		}
	}
	st.GetStream().Close()
	if string(streamed) != "7,8\n!" {
		t.Fatalf("streamed answer %q", streamed)
	}
	if _, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("churn"), Body: []byte("x"),
		CustomAttributes: aws.String("status=500"), InferenceId: aws.String("failed")}); err == nil {
		t.Fatal("the failing call succeeded")
	}
	flushCapture(t, w)

	recs := s3Records(t, srv, "capture", "model-monitor/data-capture/")
	if len(recs) != 4 {
		t.Fatalf("%d records captured, want 4 (the failed call is not): %+v", len(recs), recs)
	}
	byID := map[string]capture.Record{}
	for _, r := range recs {
		if !capturePath(dest, "churn", "AllTraffic").MatchString(r.url) {
			t.Errorf("capture file %s is not DESTINATION/ENDPOINT/VARIANT/yyyy/mm/dd/hh/mm-ss-SSS-UUID.jsonl", r.url)
		}
		if r.EventVersion != "0" || r.EventMetadata.EventID == "" {
			t.Errorf("record %+v: eventVersion and eventId", r.Record)
		}
		if _, err := time.Parse(capture.TimeLayout, r.EventMetadata.InferenceTime); err != nil {
			t.Errorf("inferenceTime %q: %v", r.EventMetadata.InferenceTime, err)
		}
		key := r.EventMetadata.InferenceID
		if key == "" {
			key = r.CaptureData.EndpointInput.ObservedContentType
		}
		byID[key] = r.Record
	}
	csv := byID["order-17"]
	payload(t, "CSV", csv.CaptureData.EndpointInput, "INPUT", "text/csv", "CSV", "5,1.2,3\n")
	payload(t, "CSV", csv.CaptureData.EndpointOutput, "OUTPUT", "text/csv", "CSV", "5,1.2,3\n!")
	js := byID["application/json"]
	payload(t, "JSON", js.CaptureData.EndpointInput, "INPUT", "application/json", "JSON", `{"instances":[[1,2]]}`)
	payload(t, "JSON", js.CaptureData.EndpointOutput, "OUTPUT", "application/json", "JSON", `{"instances":[[1,2]]}!`)
	bin := byID["bin-1"]
	payload(t, "binary", bin.CaptureData.EndpointInput, "INPUT", "application/x-npy", "BASE64", "\x93NUMPY\x00\xff")
	payload(t, "binary", bin.CaptureData.EndpointOutput, "OUTPUT", "application/x-npy", "BASE64", "\x93NUMPY\x00\xff!")
	str := byID["stream-1"]
	payload(t, "stream", str.CaptureData.EndpointInput, "INPUT", "text/csv", "CSV", "7,8\n")
	payload(t, "stream", str.CaptureData.EndpointOutput, "OUTPUT", "text/csv", "CSV", "7,8\n!")

	// disable_data_capture: kept, Stopped, nothing captured.
	updateCapture(t, h, "churn", "churn-off", sdkCapture(false, 20, dest))
	wantCaptureSummary(t, describeCapture(t, h, "churn"), false, smtypes.CaptureStatusStopped, 20, dest)
	h.invokeCapture(t, "churn", "text/csv", "1\n", "while-off")
	// Sampling at 0 %: Started, nothing captured.
	updateCapture(t, h, "churn", "churn-zero", sdkCapture(true, 0, dest))
	wantCaptureSummary(t, describeCapture(t, h, "churn"), true, smtypes.CaptureStatusStarted, 0, dest)
	h.invokeCapture(t, "churn", "text/csv", "2\n", "at-zero")
	// A configuration without capture: no DataCaptureConfig.
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("churn-none"),
		ProductionVariants: desc.ProductionVariants}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("churn"), EndpointConfigName: aws.String("churn-none")}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, h, "churn")
	if got := describeCapture(t, h, "churn"); got != nil {
		t.Errorf("DescribeEndpoint without capture shows %+v", got)
	}
	h.invokeCapture(t, "churn", "text/csv", "3\n", "without")
	// enable_data_capture: the SDK's defaults again, to a new prefix.
	updateCapture(t, h, "churn", "churn-on", sdkCapture(true, 100, dest+"/again"))
	wantCaptureSummary(t, describeCapture(t, h, "churn"), true, smtypes.CaptureStatusStarted, 100, dest+"/again")
	h.invokeCapture(t, "churn", "text/csv", "4\n", "again")
	flushCapture(t, w)
	recs = s3Records(t, srv, "capture", "model-monitor/data-capture/")
	if len(recs) != 5 {
		t.Fatalf("%d records, want the 4 of before and 1 after enable_data_capture: %+v", len(recs), recs)
	}
	for _, r := range recs {
		if id := r.EventMetadata.InferenceID; id == "again" && !capturePath(dest+"/again", "churn", "AllTraffic").MatchString(r.url) {
			t.Errorf("the call after enable_data_capture went to %s", r.url)
		} else if id == "while-off" || id == "at-zero" || id == "without" {
			t.Errorf("call %s captured while capture was off", id)
		}
	}
	if n := captureMetric(t, h, "mce_data_capture_records_written_total", `endpoint="churn"`); n != 5 {
		t.Errorf("mce_data_capture_records_written_total = %v, want 5", n)
	}
	// The deletion drops the endpoint's capture and its series.
	if _, err := sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("churn")}); err != nil {
		t.Fatal(err)
	}
	waitEndpointGone(t, h, "churn")
	if n := captureMetric(t, h, "mce_data_capture_records_total", `endpoint="churn"`); n != 0 {
		t.Errorf("mce_data_capture_records_total of the deleted endpoint = %v", n)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// s3Records reads every capture file under bucket/prefix with
// aws-sdk-go-v2's S3 client, as a user's analysis would.
func s3Records(t *testing.T, srv *testenv.S3, bucket, prefix string) []urlRecord {
	t.Helper()
	c := srv.Client(t)
	ctx := context.Background()
	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	var out []urlRecord
	for _, o := range list.Contents {
		obj, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(obj.Body)
		obj.Body.Close()
		if ct := aws.ToString(obj.ContentType); ct != "application/jsonlines" {
			t.Errorf("%s: Content-Type %q", aws.ToString(o.Key), ct)
		}
		for _, r := range captureLines(t, body) {
			out = append(out, urlRecord{"s3://" + bucket + "/" + aws.ToString(o.Key), r})
		}
	}
	return out
}

func waitEndpointGone(t *testing.T, h *harness, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for h.srv.reg.get(name) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("endpoint %s not deleted", name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDataCaptureStoreDown: with the S3 store down, a sampled call still
// answers at once (the writer holds its record and tries again), the
// failed writes are counted, DescribeEndpoint still says Started; when the
// store comes back, every record that was taken is written. With the
// buffer full (a limit of one record), a sampled call is dropped, counted,
// and still answers.
func TestDataCaptureStoreDown(t *testing.T) {
	store := newCaptureStore()
	store.setDown(true)
	w := newCaptureWriter(t, store, func(o *capture.Options) { o.MaxBufferBytes, o.FlushInterval = 4<<10, 20*time.Millisecond })
	h := newHarness(t, Config{Capture: w})
	createCaptureEndpoint(t, h, "ep", "cfg", "!", sdkCapture(true, 100, "s3://b/c"))
	for _, id := range []string{"one", "two"} {
		start := time.Now()
		if out := h.invokeCapture(t, "ep", "text/csv", "1,2\n", id); string(out.Body) != "1,2\n!" {
			t.Fatalf("answer %q", out.Body)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("a call took %s with the store down", d)
		}
	}
	waitUntil(t, "failed writes counted", func() bool {
		return captureMetric(t, h, "mce_data_capture_upload_errors_total", `endpoint="ep"`) > 0 && store.failures() > 0
	})
	wantCaptureSummary(t, describeCapture(t, h, "ep"), true, smtypes.CaptureStatusStarted, 100, "s3://b/c")

	// The buffer holds about one 4 KiB record: the next is dropped.
	big := strings.Repeat("9", 3<<10)
	h.invokeCapture(t, "ep", "text/csv", big, "big-1")
	h.invokeCapture(t, "ep", "text/csv", big, "big-2")
	if got := captureMetric(t, h, "mce_data_capture_records_dropped_total", `endpoint="ep"`, `variant="AllTraffic"`, `reason="buffer_full"`); got < 1 {
		t.Errorf("buffer_full drops = %v, want at least 1", got)
	}

	store.setDown(false)
	flushCapture(t, w)
	ids := map[string]bool{}
	for _, r := range store.records(t) {
		ids[r.EventMetadata.InferenceID] = true
	}
	if !ids["one"] || !ids["two"] {
		t.Errorf("records written once the store came back: %v, want one and two", ids)
	}

	// Every data capture series is now in a scrape: docs/metrics.md lists
	// them all, and no other (the docs test of metrics_docker_test.go
	// leaves these to this test).
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(mce_data_capture_[a-z0-9_]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		documented[m[1]] = true
	}
	rec := httptest.NewRecorder()
	h.srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	served := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (mce_data_capture_[a-z0-9_]+) `).FindAllStringSubmatch(rec.Body.String(), -1) {
		served[m[1]] = true
		if !documented[m[1]] {
			t.Errorf("docs/metrics.md has no row for %s", m[1])
		}
	}
	for name := range documented {
		if !served[name] {
			t.Errorf("docs/metrics.md lists %s, which the scrape lacks", name)
		}
	}
	if len(served) != 7 {
		t.Errorf("%d data capture series served, want 7: %v", len(served), served)
	}
}

func (s *captureStore) failures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// captureMetric sums the samples of series name whose labels hold all of
// want (`k="v"`), in the server's /metrics.
func captureMetric(t *testing.T, h *harness, name string, want ...string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? ([0-9.e+-]+)$`)
	total := 0.0
next:
	for _, m := range re.FindAllStringSubmatch(rec.Body.String(), -1) {
		for _, w := range want {
			if !strings.Contains(m[1], w) {
				continue next
			}
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		total += v
	}
	return total
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDataCaptureAfterRestart: an endpoint's DataCaptureConfig is part of
// its durable record: after a restart (a new server and writer on the same
// state) the endpoint captures again. One whose destination the restarted
// mce no longer allows serves without capture, and DescribeEndpoint says
// Stopped.
func TestDataCaptureAfterRestart(t *testing.T) {
	st := openStore(t)
	store := newCaptureStore()
	h1 := newHarness(t, Config{Store: st, Capture: newCaptureWriter(t, store, nil)})
	createCaptureEndpoint(t, h1, "kept", "kept-cfg", "!", sdkCapture(true, 100, "s3://b/c"))
	createCaptureEndpoint(t, h1, "narrowed", "narrowed-cfg", "?", sdkCapture(true, 100, "s3://elsewhere/c"))

	w2 := newCaptureWriter(t, store, func(o *capture.Options) { o.Allowed = func(u string) bool { return strings.HasPrefix(u, "s3://b/") } })
	h2 := newHarness(t, Config{Store: st, Capture: w2})
	if err := h2.srv.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitServing(t, h2, "kept")
	waitServing(t, h2, "narrowed")
	wantCaptureSummary(t, describeCapture(t, h2, "kept"), true, smtypes.CaptureStatusStarted, 100, "s3://b/c")
	wantCaptureSummary(t, describeCapture(t, h2, "narrowed"), true, smtypes.CaptureStatusStopped, 100, "s3://elsewhere/c")
	h2.invokeCapture(t, "kept", "text/csv", "1\n", "after-restart")
	if out := h2.invokeCapture(t, "narrowed", "text/csv", "2\n", "narrowed-call"); string(out.Body) != "2\n?" {
		t.Fatalf("answer %q", out.Body)
	}
	flushCapture(t, w2)
	var ids []string
	for _, r := range store.records(t) {
		ids = append(ids, r.EventMetadata.InferenceID)
		if r.EventMetadata.InferenceID == "after-restart" && !capturePath("s3://b/c", "kept", "AllTraffic").MatchString(r.url) {
			t.Errorf("captured to %s", r.url)
		}
	}
	if len(ids) != 1 || ids[0] != "after-restart" {
		t.Errorf("captured after the restart: %q, want [after-restart]", ids)
	}
}

// TestDataCaptureRefused: a DataCaptureConfig mce cannot carry out is
// refused when the configuration is created, as a ValidationException:
// without a writer, and with a destination outside the prefixes mce writes
// to (mce serve --async-output-prefix).
func TestDataCaptureRefused(t *testing.T) {
	ctx := context.Background()
	create := func(h *harness, name, dest string) error {
		_, err := h.sm().CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(name),
			ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("m"),
				InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}},
			DataCaptureConfig: sdkCapture(true, 20, dest)})
		return err
	}
	model := func(h *harness) {
		if _, err := h.sm().CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("m"),
			PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("!")}}); err != nil {
			t.Fatal(err)
		}
	}
	none := newHarness(t, Config{})
	model(none)
	if code, msg := apiCode(t, create(none, "c", "s3://b/c")); code != "ValidationException" || !strings.Contains(msg, "no S3 store") {
		t.Errorf("without a writer: %s %q", code, msg)
	}
	w := newCaptureWriter(t, newCaptureStore(), func(o *capture.Options) { o.Allowed = func(u string) bool { return strings.HasPrefix(u, "s3://ok/") } })
	h := newHarness(t, Config{Capture: w})
	model(h)
	if code, msg := apiCode(t, create(h, "c", "s3://other/c")); code != "ValidationException" ||
		msg != `DataCaptureConfig's DestinationS3Uri "s3://other/c" is outside the S3 prefixes mce writes to.` {
		t.Errorf("outside the prefixes: %s %q", code, msg)
	}
	if err := create(h, "c", "s3://ok/c"); err != nil {
		t.Errorf("inside the prefixes: %v", err)
	}
}

// TestDataCaptureNeedsPutObject: mce writes the capture files with its own
// S3 identity, so creating a configuration with a DataCaptureConfig needs
// the caller's s3:PutObject under its destination (and on the objects its
// statements single out there); the refusal is AccessDeniedException.
func TestDataCaptureNeedsPutObject(t *testing.T) {
	a := devAuthz(t,
		`{Effect: Allow, Action: "s3:PutObject", Resource: "arn:aws:s3:::capture/team-a/*"}`,
		`{Effect: Deny, Action: "s3:PutObject", Resource: "arn:aws:s3:::capture/team-a/secret/*"}`)
	w := newCaptureWriter(t, newCaptureStore(), nil)
	h := newHarness(t, Config{Authz: a, Capture: w})
	admin, dev := h.smAs("AKIAADMIN0000EXAMPLE", "admin-secret"), h.smAs("AKIADEV00000EXAMPLE", "dev-secret")
	ctx := context.Background()
	if _, err := admin.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("m"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("!")}}); err != nil {
		t.Fatal(err)
	}
	create := func(sm *sagemaker.Client, name, dest string) error {
		_, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(name),
			ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("m"),
				InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}},
			DataCaptureConfig: sdkCapture(true, 20, dest)})
		return err
	}
	for _, tt := range []struct {
		dest string
		ok   bool
	}{
		{"s3://capture/team-a/monitor", true},
		{"s3://capture/team-a/secret/x", false},
		{"s3://capture/team-a", false}, // secret/ lies under it
		{"s3://capture/team-b", false},
	} {
		err := create(dev, "c-"+strings.NewReplacer("/", "-", ":", "").Replace(tt.dest), tt.dest)
		if tt.ok && err != nil || !tt.ok && !isAccessDenied(err) {
			t.Errorf("dev's capture to %s: %v (want allowed: %v)", tt.dest, err, tt.ok)
		}
	}
	if err := create(admin, "admin-c", "s3://capture/team-b"); err != nil {
		t.Errorf("admin: %v", err)
	}
}

// TestDataCaptureAsync: an asynchronous endpoint with a DataCaptureConfig
// (SageMaker accepts both in one configuration) captures what it answered
// from S3: the input read from InputLocation and the answer written to the
// OutputLocation, at the time the request was accepted, with the
// InferenceId InvokeEndpointAsync returned.
func TestDataCaptureAsync(t *testing.T) {
	srv := testenv.S3Server(t)
	srv.Bucket(t, "async")
	f, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{t.TempDir()},
		S3: artifact.S3Options{Endpoint: srv.Endpoint, Region: srv.Region, UsePathStyle: true, Credentials: srv.Credentials()}})
	if err != nil {
		t.Fatal(err)
	}
	w := newCaptureWriter(t, f, nil)
	h := newHarness(t, Config{Capture: w, AsyncObjects: f})
	t.Cleanup(func() { h.srv.Close(context.Background()) }) // before the fake containers close
	ctx := context.Background()
	sm := h.sm()
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("m"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("!")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("c"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("m"),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}},
		AsyncInferenceConfig: &smtypes.AsyncInferenceConfig{OutputConfig: &smtypes.AsyncInferenceOutputConfig{S3OutputPath: aws.String("s3://async/out")}},
		DataCaptureConfig:    sdkCapture(true, 100, "s3://async/capture")}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("ep"), EndpointConfigName: aws.String("c")}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, h, "ep")
	srv.Put(t, "async", "in/a.csv", []byte("1,2,3\n"))
	before := time.Now().UTC().Truncate(time.Second)
	out, err := h.client.InvokeEndpointAsync(ctx, &sagemakerruntime.InvokeEndpointAsyncInput{EndpointName: aws.String("ep"),
		InputLocation: aws.String("s3://async/in/a.csv"), ContentType: aws.String("text/csv"), InferenceId: aws.String("job-1")})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the asynchronous answer", func() bool {
		_, err := srv.Client(t).HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("async"), Key: aws.String("out/job-1.out")})
		return err == nil
	})
	flushCapture(t, w)
	recs := s3Records(t, srv, "async", "capture/")
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1: %+v", len(recs), recs)
	}
	r := recs[0]
	if r.EventMetadata.InferenceID != aws.ToString(out.InferenceId) || !capturePath("s3://async/capture", "ep", "AllTraffic").MatchString(r.url) {
		t.Errorf("record %+v at %s", r.Record, r.url)
	}
	if at, err := time.Parse(capture.TimeLayout, r.EventMetadata.InferenceTime); err != nil || at.Before(before) || at.After(time.Now()) {
		t.Errorf("inferenceTime %s, want the acceptance time (after %s)", r.EventMetadata.InferenceTime, before)
	}
	payload(t, "async", r.CaptureData.EndpointInput, "INPUT", "text/csv", "CSV", "1,2,3\n")
	payload(t, "async", r.CaptureData.EndpointOutput, "OUTPUT", "text/csv", "CSV", "1,2,3\n!")
}

// TestDataCaptureInferenceComponents: an endpoint that hosts inference
// components captures their calls under its variant (SageMaker's record
// has no member for the component).
func TestDataCaptureInferenceComponents(t *testing.T) {
	store := newCaptureStore()
	w := newCaptureWriter(t, store, nil)
	h, _ := newICHarnessWith(t, nil, Config{Capture: w})
	ctx := context.Background()
	sm := h.sm()
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("ics-config"),
		ExecutionRoleArn: aws.String(roleARN), DataCaptureConfig: sdkCapture(true, 100, "s3://b/ic"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceType("local")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("ics"), EndpointConfigName: aws.String("ics-config")}); err != nil {
		t.Fatal(err)
	}
	waitServing(t, h, "ics")
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-b")},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}}
	if err := createIC(ctx, sm, "base", "ics", sp, 1); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "base")
	if _, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ics"), InferenceComponentName: aws.String("base"),
		Body: []byte(`{"q":1}`), ContentType: aws.String("application/json"), InferenceId: aws.String("ic-1")}); err != nil {
		t.Fatal(err)
	}
	flushCapture(t, w)
	recs := store.records(t)
	if len(recs) != 1 || recs[0].EventMetadata.InferenceID != "ic-1" || !capturePath("s3://b/ic", "ics", "AllTraffic").MatchString(recs[0].url) {
		t.Fatalf("records %+v", recs)
	}
	payload(t, "component", recs[0].CaptureData.EndpointOutput, "OUTPUT", "application/json", "JSON", `{"q":1}-b`)
}
