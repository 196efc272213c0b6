package cloudwatch_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/mce-run/mce/host/cloudwatch"
)

// A variant's invocations recorded on the hot path and read back with
// GetMetricStatistics over AWS JSON 1.0, as boto3 asks.
func Example() {
	dir, _ := os.MkdirTemp("", "cloudwatch-example-")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 11, 28, 10, 0, 30, 0, time.UTC)
	svc, err := cloudwatch.Open(cloudwatch.Options{Dir: dir, Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	defer svc.Close()

	// Once, when the variant is made:
	dims := []cloudwatch.Dimension{{Name: "EndpointName", Value: "ab-test"}, {Name: "VariantName", Value: "challenger"}}
	invocations, _ := svc.Series("AWS/SageMaker", "Invocations", dims, "Count", cloudwatch.Standard)
	// Per call, with the time the call ended:
	for range 3 {
		invocations.ObserveAt(now, 1)
	}

	body := `{"Namespace":"AWS/SageMaker","MetricName":"Invocations",` +
		`"Dimensions":[{"Name":"EndpointName","Value":"ab-test"},{"Name":"VariantName","Value":"challenger"}],` +
		`"StartTime":1795860000,"EndTime":1795860060,"Period":60,"Statistics":["Sum"]}`
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("X-Amz-Target", "GraniteServiceVersion20100801.GetMetricStatistics")
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	rec := httptest.NewRecorder()
	svc.Serve(rec, req, []byte(body))
	fmt.Println(rec.Code, rec.Body.String())
	// Output: 200 {"Label":"Invocations","Datapoints":[{"Timestamp":1795860000,"Sum":3,"Unit":"Count"}]}
}
