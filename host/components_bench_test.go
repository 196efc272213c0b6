package host

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
)

// TestInferenceComponentRouteOverhead times InvokeEndpoint through an
// inference component against a plain endpoint of the same fake container
// (the component route adds a lookup by name); it logs the figures and
// fails only if a call fails. -short skips it.
func TestInferenceComponentRouteOverhead(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	h, _ := newICHarness(t, nil)
	sm := h.sm()
	ctx := context.Background()
	createAll(t, sm, "bench-plain", "-c", 1)
	createICEndpoint(t, sm, "bench-ic", "local", 1)
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-c")},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}}
	if err := createIC(ctx, sm, "bench", "bench-ic", sp, 1); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "bench")
	const n = 2000
	run := func(endpoint, ic string) time.Duration {
		in := &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(endpoint), Body: []byte("x")}
		if ic != "" {
			in.InferenceComponentName = aws.String(ic)
		}
		start := time.Now()
		for range n {
			if _, err := h.client.InvokeEndpoint(ctx, in); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start) / n
	}
	run("bench-plain", "") // warm both
	run("bench-ic", "bench")
	plain, comp := run("bench-plain", ""), run("bench-ic", "bench")
	t.Logf("per call over loopback with the Go SDK: plain endpoint %v, inference component %v (ratio %.2f)", plain, comp, float64(comp)/float64(plain))
}
