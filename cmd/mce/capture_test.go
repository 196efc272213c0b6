package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"

	"github.com/mce-run/mce/host/capture"
	"github.com/mce-run/mce/internal/testenv"
)

// TestServeWritesCapturedDataOnShutdown: mce serve captures the calls of an
// endpoint file's endpoint with a DataCaptureConfig and, stopped well
// before a capture file is due (a minute after its first record), writes
// every captured call to S3 on its way out: the writer stops after the
// host, with nothing left to capture. --async-output-prefix bounds where
// capture may write, and the writer's series are on /metrics
// (--capture-buffer sets the buffer's limit).
func TestServeWritesCapturedDataOnShutdown(t *testing.T) {
	cli := testenv.Docker(t)
	testenv.Image(t, "probe")
	srv := testenv.S3Server(t)
	srv.Bucket(t, "capture")
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_REGION", srv.Region)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")

	file := filepath.Join(t.TempDir(), "ep.yaml")
	os.WriteFile(file, []byte(`
Models:
  - ModelName: m
    PrimaryContainer: {Image: mce-example/probe:latest}
EndpointConfigs:
  - EndpointConfigName: c
    ProductionVariants: [{VariantName: AllTraffic, ModelName: m, InitialInstanceCount: 1, InstanceType: ml.c5.large, ContainerStartupHealthCheckTimeoutInSeconds: 60}]
    DataCaptureConfig:
      EnableCapture: true
      InitialSamplingPercentage: 100
      DestinationS3Uri: s3://capture/monitor/data-capture
      CaptureOptions: [{CaptureMode: Input}, {CaptureMode: Output}]
      CaptureContentTypeHeader: {CsvContentTypes: [text/csv], JsonContentTypes: [application/json]}
Endpoints:
  - {EndpointName: ep, EndpointConfigName: c}
`), 0o644)
	listen := freePort(t)
	f := serveFlagsFor(t, listen, file)
	f.s3Endpoint, f.s3PathStyle = srv.Endpoint, true
	f.asyncOutPrefixes = []string{"s3://capture/monitor"}
	f.captureBuffer = 32 << 20
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, f) }()
	base := "http://" + listen
	waitInService(t, base, 1)

	sm, rt := sdkClients(base)
	const n = 20
	for i := range n {
		body := fmt.Sprintf("%d,%d\n", i, i*i)
		out, err := rt.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ep"), Body: []byte(body),
			ContentType: aws.String("text/csv"), InferenceId: aws.String(fmt.Sprintf("call-%02d", i))})
		if err != nil {
			t.Fatal(err)
		}
		if string(out.Body) != body {
			t.Fatalf("answer %q, want the probe's echo %q", out.Body, body)
		}
	}
	// Outside --async-output-prefix: refused when named.
	_, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("elsewhere"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("m"),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlC5Large}},
		DataCaptureConfig: &smtypes.DataCaptureConfig{InitialSamplingPercentage: aws.Int32(100), DestinationS3Uri: aws.String("s3://capture/elsewhere"),
			CaptureOptions: []smtypes.CaptureOption{{CaptureMode: smtypes.CaptureModeInputAndOutput}}}})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" || !strings.Contains(ae.ErrorMessage(), "outside the S3 prefixes") {
		t.Errorf("a destination outside --async-output-prefix: %v", err)
	}
	// The writer counts a record once its goroutine takes it (within a tick).
	var scrape []byte
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		scrape, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if bytes.Contains(scrape, []byte(`mce_data_capture_records_total{endpoint="ep",variant="AllTraffic"} 20`)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{`mce_data_capture_records_total{endpoint="ep",variant="AllTraffic"} 20`, `mce_data_capture_buffer_limit_bytes 3.3554432e+07`} {
		if !bytes.Contains(scrape, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	c := srv.Client(t)
	listCapture := func() []string {
		out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("capture"), Prefix: aws.String("monitor/data-capture/ep/AllTraffic/")})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		return keys
	}
	if keys := listCapture(); len(keys) != 0 {
		t.Fatalf("capture files before the shutdown: %q (the test assumes none is due yet)", keys)
	}

	cancel() // as SIGTERM does
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("serve did not stop")
	}
	seen := map[string]bool{}
	for _, key := range listCapture() {
		obj, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("capture"), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(obj.Body)
		for sc.Scan() {
			var r capture.Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			in := r.CaptureData.EndpointInput
			if in == nil || r.CaptureData.EndpointOutput == nil || in.Encoding != capture.EncodingCSV || r.CaptureData.EndpointOutput.Data != in.Data {
				t.Errorf("record %+v", r)
			}
			seen[r.EventMetadata.InferenceID] = true
		}
		obj.Body.Close()
	}
	if len(seen) != n {
		t.Errorf("%d calls captured after the shutdown, want %d: %v", len(seen), n, seen)
	}
	if c, k := testenv.Leftovers(t, cli, f.instance); c+k > 0 {
		t.Errorf("%d containers and %d networks left", c, k)
	}
}
