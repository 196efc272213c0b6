package host

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// TestListTimeFilters: the List operations' CreationTime* and
// LastModifiedTime* filters, which the SDKs send as seconds since the epoch
// (a JSON number). The strict decoder took the timestamp type for a mapping
// and refused every such request ("expected a mapping, got a number");
// boto3 showed it in e2e/test_components.py.
func TestListTimeFilters(t *testing.T) {
	h, _ := newICHarness(t, nil)
	sm := h.sm()
	ctx := context.Background()
	before := time.Now().Add(-time.Minute)
	createAll(t, sm, "plain", "-p", 1)
	createICEndpoint(t, sm, "shared", "local", 1)
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-c")},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}}
	if err := createIC(ctx, sm, "comp", "shared", sp, 1); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "comp")
	after := time.Now().Add(time.Minute)
	for _, c := range []struct {
		name          string
		since, before *time.Time
		want          int
	}{
		{"created after a minute ago", &before, nil, 1},
		{"created after a minute from now", &after, nil, 0},
		{"created before a minute from now", nil, &after, 1},
		{"created before a minute ago", nil, &before, 0},
	} {
		ics, err := sm.ListInferenceComponents(ctx, &sagemaker.ListInferenceComponentsInput{CreationTimeAfter: c.since, CreationTimeBefore: c.before,
			LastModifiedTimeAfter: c.since, LastModifiedTimeBefore: c.before})
		if err != nil || len(ics.InferenceComponents) != c.want {
			t.Errorf("ListInferenceComponents %s: %+v, %v; want %d", c.name, ics, err, c.want)
		}
		eps, err := sm.ListEndpoints(ctx, &sagemaker.ListEndpointsInput{CreationTimeAfter: c.since, CreationTimeBefore: c.before,
			LastModifiedTimeAfter: c.since, LastModifiedTimeBefore: c.before, NameContains: aws.String("plain")})
		if err != nil || len(eps.Endpoints) != c.want {
			t.Errorf("ListEndpoints %s: %+v, %v; want %d", c.name, eps, err, c.want)
		}
		ms, err := sm.ListModels(ctx, &sagemaker.ListModelsInput{CreationTimeAfter: c.since, CreationTimeBefore: c.before})
		if err != nil || len(ms.Models) != c.want {
			t.Errorf("ListModels %s: %+v, %v; want %d", c.name, ms, err, c.want)
		}
	}
	// Not a number: SageMaker's ValidationException, naming the member.
	for _, body := range []string{`{"CreationTimeAfter": "yesterday"}`, `{"CreationTimeAfter": {"a": 1}}`, `{"CreationTimeAfter": 1e300}`} {
		req, _ := http.NewRequest("POST", h.http.URL+"/", strings.NewReader(body))
		req.Header.Set("X-Amz-Target", "SageMaker.ListInferenceComponents")
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		resp, err := h.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), "ValidationException") ||
			!strings.Contains(string(b), "CreationTimeAfter: wrong type: expected a timestamp (seconds since the epoch)") {
			t.Errorf("%s: %d %s", body, resp.StatusCode, b)
		}
	}
}
