package host

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
)

// BenchmarkInferenceComponentRoute measures mce's own cost of routing by
// component name: each iteration is one InvokeEndpoint through an
// inference component and one through a plain endpoint of the same fake
// container (no Docker, so the container's network does not hide it), over
// loopback with the Go SDK. It reports component-ns/call, plain-ns/call
// and their ratio; ns/op is the pair. (BenchmarkInferenceComponentDocker in
// components_docker_bench_test.go measures the same on real containers,
// with placement and scaling.)
func BenchmarkInferenceComponentRoute(b *testing.B) {
	h, _ := newICHarness(b, nil)
	sm := h.sm()
	ctx := context.Background()
	createAll(b, sm, "bench-plain", "-c", 1)
	createICEndpoint(b, sm, "bench-ic", "local", 1)
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-c")},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}}
	if err := createIC(ctx, sm, "bench", "bench-ic", sp, 1); err != nil {
		b.Fatal(err)
	}
	waitIC(b, sm, "bench")
	plain := &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("bench-plain"), Body: []byte("x")}
	comp := &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("bench-ic"), InferenceComponentName: aws.String("bench"), Body: []byte("x")}
	call := func(in *sagemakerruntime.InvokeEndpointInput) time.Duration {
		start := time.Now()
		out, err := h.client.InvokeEndpoint(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		if string(out.Body) != "x-c" {
			b.Fatalf("answer %q, want x-c", out.Body)
		}
		return time.Since(start)
	}
	for range 200 { // warm both routes and their connections
		call(plain)
		call(comp)
	}
	var tp, tc time.Duration
	n := 0
	for b.Loop() { // which route goes first alternates, so neither gains from going second
		if n%2 == 0 {
			tp += call(plain)
			tc += call(comp)
		} else {
			tc += call(comp)
			tp += call(plain)
		}
		n++
	}
	b.ReportMetric(float64(tp.Nanoseconds())/float64(n), "plain-ns/call")
	b.ReportMetric(float64(tc.Nanoseconds())/float64(n), "component-ns/call")
	b.ReportMetric(float64(tc)/float64(tp), "component/plain")
}
