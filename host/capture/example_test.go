package capture_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mce-run/mce/host/capture"
	"github.com/mce-run/mce/host/spec"
)

// printStore prints what it is given instead of writing to S3.
type printStore struct{}

func (printStore) PutObject(_ context.Context, url string, body []byte, contentType string, _ map[string]string) error {
	fmt.Println(url, contentType)
	fmt.Print(string(body))
	return nil
}

// The life of data capture in mce: one Writer for the process, a Capturer
// per endpoint built from its DataCaptureConfig, a Sample on every call
// and a Record on those sampled, Close at shutdown.
func Example() {
	w, err := capture.New(capture.Options{Store: printStore{},
		NewID: func() string { return "4651a1bf-4b00-4248-a309-4a18b11e4277" }}) // fixed IDs, for the example's output
	if err != nil {
		panic(err)
	}
	pct := int32(100)
	c, err := w.NewCapturer("churn", spec.DataCaptureConfig{InitialSamplingPercentage: &pct, DestinationS3URI: "s3://bucket/capture",
		CaptureOptions:           []spec.CaptureOption{{CaptureMode: spec.CaptureInputAndOutput}},
		CaptureContentTypeHeader: &spec.CaptureContentTypeHeader{CSVContentTypes: []string{"text/csv"}}})
	if err != nil {
		panic(err)
	}

	// On the call path: decide, and after the answer, hand over.
	if t := c.Sample(); t.Active() {
		t.Record(capture.Call{Variant: "AllTraffic", InferenceID: "order-17", Time: time.Date(2021, 9, 27, 3, 47, 25, 5e6, time.UTC),
			Input: []byte("5,1.2\n"), InputContentType: "text/csv",
			Output: []byte(`{"label":1}`), OutputContentType: "application/json"})
	}
	fmt.Printf("%+v\n", c.Status())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		panic(err)
	}
	fmt.Println(strings.Repeat("-", 3), c.Status().CaptureStatus)
	// Output:
	// {EnableCapture:true CaptureStatus:Started CurrentSamplingPercentage:100 DestinationS3URI:s3://bucket/capture KMSKeyID:}
	// s3://bucket/capture/churn/AllTraffic/2021/09/27/03/47-25-005-4651a1bf-4b00-4248-a309-4a18b11e4277.jsonl application/jsonlines
	// {"captureData":{"endpointInput":{"observedContentType":"text/csv","mode":"INPUT","data":"5,1.2\n","encoding":"CSV"},"endpointOutput":{"observedContentType":"application/json","mode":"OUTPUT","data":"eyJsYWJlbCI6MX0=","encoding":"BASE64"}},"eventMetadata":{"eventId":"4651a1bf-4b00-4248-a309-4a18b11e4277","inferenceId":"order-17","inferenceTime":"2021-09-27T03:47:25Z"},"eventVersion":"0"}
	// --- Stopped
}
