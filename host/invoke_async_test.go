package host

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
)

// An asynchronous endpoint answers InvokeEndpointAsync only: SageMaker
// refuses InvokeEndpoint and InvokeEndpointWithResponseStream on it with a
// 400 ValidationError, and the container is never called (issue 18).
func TestSyncInvokeOnAsyncEndpointRefused(t *testing.T) {
	h := newHarness(t, Config{ContainerTimeout: 5 * time.Second, Account: "123456789012"})
	p := plan("aep", "Direct", map[string][]string{"AllTraffic": {"c1:one"}})
	p.Async = &containers.AsyncPlan{OutputPath: "s3://b/out", FailurePath: "s3://b/out", MaxConcurrentPerInstance: 1}
	if err := h.deploy(p); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const want = "Endpoint aep of account 123456789012 is an asynchronous endpoint"

	_, err := h.client.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{
		EndpointName: aws.String("aep"), Body: body("x"), ContentType: aws.String("text/plain")})
	wantAPIError(t, err, apierr.CodeValidation, want)
	wantStatus(t, err, http.StatusBadRequest)

	_, err = h.client.InvokeEndpointWithResponseStream(ctx, &sagemakerruntime.InvokeEndpointWithResponseStreamInput{
		EndpointName: aws.String("aep"), Body: body("x"), ContentType: aws.String("text/plain")})
	wantAPIError(t, err, apierr.CodeValidation, want)
	wantStatus(t, err, http.StatusBadRequest)

	if n := h.backend.container("aep/AllTraffic/c1").calls.Load(); n != 0 {
		t.Errorf("the container was called %d times, want 0", n)
	}

	// A real-time endpoint beside it still serves.
	if err := h.deploy(plan("rt", "Direct", map[string][]string{"AllTraffic": {"c1:one"}})); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{
		EndpointName: aws.String("rt"), TargetContainerHostname: aws.String("c1"), Body: body("x")}); err != nil {
		t.Fatal(err)
	}
}

// wantStatus checks the HTTP status an SDK error came with.
func wantStatus(t *testing.T, err error, status int) {
	t.Helper()
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != status {
		t.Fatalf("error %v: want HTTP status %d", err, status)
	}
}
