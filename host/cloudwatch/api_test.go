package cloudwatch

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/smithy-go"
)

// TestWriteErrorInTheRequestsProtocol: a refusal host decides (here an
// authentication failure) reaches each client in its protocol's shape:
// aws-sdk-go-v2 (CBOR) sees the code, the query protocol an ErrorResponse.
func TestWriteErrorInTheRequestsProtocol(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, http.StatusForbidden, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided.")
	}))
	defer srv.Close()
	cw := cloudwatch.New(cloudwatch.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.AnonymousCredentials{}, Retryer: aws.NopRetryer{}})
	_, err := cw.ListMetrics(context.Background(), &cloudwatch.ListMetricsInput{})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "SignatureDoesNotMatch" || !strings.Contains(ae.ErrorMessage(), "does not match") {
		t.Errorf("CBOR: %v", err)
	}
	req := httptest.NewRequest("POST", "/", strings.NewReader("Action=ListMetrics&Version=2010-08-01"))
	req.Header.Set("Content-Type", contentTypeForm)
	rec := httptest.NewRecorder()
	WriteError(rec, req, http.StatusForbidden, "SignatureDoesNotMatch", "no")
	if rec.Code != 403 || !strings.Contains(rec.Body.String(), "<Code>SignatureDoesNotMatch</Code>") || !strings.Contains(rec.Body.String(), "<Type>Sender</Type>") {
		t.Errorf("query: %d %s", rec.Code, rec.Body)
	}
	req = httptest.NewRequest("POST", "/", bytes.NewReader([]byte("{}")))
	req.Header.Set("X-Amz-Target", TargetPrefix+"ListMetrics")
	rec = httptest.NewRecorder()
	WriteError(rec, req, http.StatusInternalServerError, "InternalFailure", "x")
	if rec.Code != 500 || rec.Header().Get(headerQueryErr) != "InternalFailure;Receiver" {
		t.Errorf("JSON: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
}

// TestStatisticsInGo: the Go form answers statistics and percentiles
// together, with the API's rules.
func TestStatisticsInGo(t *testing.T) {
	c := newClock(t0)
	s := openTest(t, t.TempDir(), c, nil)
	h := mustSeries(t, s, "AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard)
	for i := range 100 {
		h.Observe(float64(i + 1))
	}
	c.Set(t0.Add(time.Minute))
	s.Flush()
	h.Observe(7)
	dps, err := s.Statistics("AWS/SageMaker", "ModelLatency", epDims, "", t0, t0.Add(2*time.Minute), 60, "Sum", "SampleCount", "p50", "p100")
	if err != nil {
		t.Fatal(err)
	}
	if len(dps) != 2 || *dps[0].Sum != 5050 || *dps[0].SampleCount != 100 || dps[0].ExtendedStatistics["p100"] != 100 ||
		dps[0].ExtendedStatistics["p50"] < 49.5 || dps[0].ExtendedStatistics["p50"] > 50.5 || *dps[1].Sum != 7 || dps[1].ExtendedStatistics["p50"] != 7 {
		t.Errorf("%+v", dps)
	}
	var ae *APIError
	if _, err := s.Statistics("AWS/SageMaker", "ModelLatency", epDims, "", t0, t0.Add(time.Minute), 61, "Sum"); !errors.As(err, &ae) || ae.Code != CodeInvalidParameterValue {
		t.Errorf("Period 61: %v", err)
	}
}
