package capture_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/host/capture"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/internal/testenv"
)

// The store mce already uses for asynchronous inference takes capture
// files as they are.
var _ capture.Store = (*artifact.Fetcher)(nil)

// TestS3RoundTrip writes captured calls through mce's S3 client
// (artifact.Fetcher) to a real S3 server (versitygw) and reads them back
// with aws-sdk-go-v2, as a user's analysis would: every call is there, in
// SageMaker's format, under DESTINATION/ENDPOINT/VARIANT/yyyy/mm/dd/hh/.
func TestS3RoundTrip(t *testing.T) {
	srv := testenv.S3Server(t)
	srv.Bucket(t, "capture")
	f, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{t.TempDir()},
		S3: artifact.S3Options{Endpoint: srv.Endpoint, Region: srv.Region, UsePathStyle: true, Credentials: srv.Credentials()}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := capture.New(capture.Options{Store: f, FlushBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	on := true
	c, err := w.NewCapturer("ab-test", spec.DataCaptureConfig{EnableCapture: &on, InitialSamplingPercentage: aws.Int32(100),
		DestinationS3URI: "s3://capture/datacapture",
		CaptureOptions:   []spec.CaptureOption{{CaptureMode: spec.CaptureInput}, {CaptureMode: spec.CaptureOutput}},
		CaptureContentTypeHeader: &spec.CaptureContentTypeHeader{CSVContentTypes: []string{"text/csv"},
			JSONContentTypes: []string{"application/json"}}})
	if err != nil {
		t.Fatal(err)
	}
	const calls = 200
	sent := map[string]string{} // inference ID → the answer
	for i := range calls {
		variant := []string{"English", "German"}[i%2]
		id := fmt.Sprintf("call-%03d", i)
		answer := fmt.Sprintf(`{"label":%d,"variant":%q}`, i%2, variant)
		sent[id] = answer
		tk := c.Sample()
		tk.Record(capture.Call{Variant: variant, InferenceID: id, Input: []byte(fmt.Sprintf("%d,%d,%d\n", i, i*2, i*3)),
			InputContentType: "text/csv", Output: []byte(answer), OutputContentType: "application/json"})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}

	cl := srv.Client(t)
	keyRe := regexp.MustCompile(`^datacapture/ab-test/(English|German)/\d{4}/\d{2}/\d{2}/\d{2}/\d{2}-\d{2}-\d{3}-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.jsonl$`)
	got := map[string]bool{}
	p := s3.NewListObjectsV2Paginator(cl, &s3.ListObjectsV2Input{Bucket: aws.String("capture"), Prefix: aws.String("datacapture/")})
	files := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			if !keyRe.MatchString(key) {
				t.Errorf("key %s is not SageMaker's DESTINATION/ENDPOINT/VARIANT/yyyy/mm/dd/hh/mm-ss-SSS-UUID.jsonl", key)
			}
			files++
			out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("capture"), Key: o.Key})
			if err != nil {
				t.Fatal(err)
			}
			if ct := aws.ToString(out.ContentType); ct != capture.ContentType {
				t.Errorf("%s: Content-Type %q", key, ct)
			}
			var body bytes.Buffer
			_, err = body.ReadFrom(out.Body)
			out.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(&body)
			for sc.Scan() {
				var r capture.Record
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				id := r.EventMetadata.InferenceID
				in, out := r.CaptureData.EndpointInput, r.CaptureData.EndpointOutput
				if in == nil || out == nil || in.Encoding != capture.EncodingCSV || out.Encoding != capture.EncodingJSON ||
					out.Data != sent[id] || r.EventVersion != "0" || got[id] {
					t.Errorf("%s: record %s", key, sc.Text())
				}
				got[id] = true
			}
		}
	}
	if len(got) != calls {
		t.Errorf("%d of %d calls read back", len(got), calls)
	}
	if files < 2 {
		t.Errorf("%d files: want at least one per variant", files)
	}
}

// TestS3StoreDownThenUp: while S3 refuses the files (here: the bucket does
// not exist yet), the records stay buffered and are tried again; once it
// takes them, every record acknowledged is written, and the calls never
// waited.
func TestS3StoreDownThenUp(t *testing.T) {
	srv := testenv.S3Server(t)
	f, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{t.TempDir()},
		S3: artifact.S3Options{Endpoint: srv.Endpoint, Region: srv.Region, UsePathStyle: true, Credentials: srv.Credentials()}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := capture.New(capture.Options{Store: f, RetryMin: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c, err := w.NewCapturer("ep", spec.DataCaptureConfig{InitialSamplingPercentage: aws.Int32(100), DestinationS3URI: "s3://late/capture",
		CaptureOptions: []spec.CaptureOption{{CaptureMode: spec.CaptureInputAndOutput}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		c.Sample().Record(capture.Call{Variant: "v", InferenceID: fmt.Sprint(i), Input: []byte{byte(i)}, Output: []byte{0xff, byte(i)},
			InputContentType: "application/x-npy", OutputContentType: "application/x-npy"})
	}
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := w.Flush(short); err == nil {
		t.Fatal("Flush succeeded without a bucket")
	}
	srv.Bucket(t, "late")
	ctx, cancel2 := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel2()
	if err := w.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	out, err := srv.Client(t).ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("late")})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range out.Contents {
		for _, line := range bytes.Split(bytes.TrimSuffix(srv.Get(t, "late", aws.ToString(o.Key)), []byte("\n")), []byte("\n")) {
			var r capture.Record
			if err := json.Unmarshal(line, &r); err != nil {
				t.Fatal(err)
			}
			if b, err := r.CaptureData.EndpointOutput.Bytes(); err != nil || r.CaptureData.EndpointOutput.Encoding != capture.EncodingBase64 || len(b) != 2 {
				t.Errorf("record %s", line)
			}
			n++
		}
	}
	if n != 50 {
		t.Errorf("%d of 50 records written after the store came back", n)
	}
}
