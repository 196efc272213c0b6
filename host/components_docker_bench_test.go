package host_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"

	"github.com/mce-run/mce/internal/testenv"
)

// BenchmarkInferenceComponentDocker measures inference components on the
// real Docker engine with the probe image, in one run:
//
//   - invoke: one InvokeEndpoint through a component and one through a
//     plain endpoint of the same image per iteration (component-ns/call,
//     plain-ns/call and their ratio; ns/op is the pair);
//   - place: CreateInferenceComponent of one copy until it is InService
//     (ns/op; the deletion between iterations is not timed);
//   - scale-0-to-1: UpdateInferenceComponentRuntimeConfig from 0 copies to
//     1 until the first answer (ns/op; the scaling down is not timed).
//
// It skips without a Docker engine (and under -short), as the other Docker
// tests do, and fails if a call fails.
func BenchmarkInferenceComponentDocker(b *testing.B) {
	image := testenv.Image(b, "probe")
	h := startICHost(b, testenv.Instance(b), b.TempDir(), nil)
	ctx := context.Background()
	// gpu-share: the endpoint of components that icHost.invoke calls.
	if _, err := h.sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("gpu-share-config"),
		ExecutionRoleArn: aws.String("arn:aws:iam::123456789012:role/mce"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), InitialInstanceCount: aws.Int32(1),
			InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Xlarge}}}); err != nil {
		b.Fatal(err)
	}
	if _, err := h.sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("gpu-share"), EndpointConfigName: aws.String("gpu-share-config")}); err != nil {
		b.Fatal(err)
	}
	// plain: a model of the same image, with the same environment.
	env := map[string]string{"PROBE_TAG": "-bench"}
	if _, err := h.sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("plain-model"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String(image), Environment: env}}); err != nil {
		b.Fatal(err)
	}
	if _, err := h.sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("plain-config"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("plain-model"),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Xlarge}}}); err != nil {
		b.Fatal(err)
	}
	if _, err := h.sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("plain"), EndpointConfigName: aws.String("plain-config")}); err != nil {
		b.Fatal(err)
	}
	for _, ep := range []string{"gpu-share", "plain"} {
		if err := h.Server.WaitEndpoint(ctx, ep); err != nil {
			b.Fatal(err)
		}
	}
	create := func(tb testing.TB, name string) {
		tb.Helper()
		if _, err := h.sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String(name),
			EndpointName: aws.String("gpu-share"), VariantName: aws.String("AllTraffic"),
			Specification: &smtypes.InferenceComponentSpecification{
				Container:                   &smtypes.InferenceComponentContainerSpecification{Image: aws.String(image), Environment: env},
				ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}},
			RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(1)}}); err != nil {
			tb.Fatal(err)
		}
	}
	// describe polls every millisecond while the component is Creating or
	// Updating (icHost.wait polls every 100 ms, too coarse for a timing).
	describe := func(tb testing.TB, name string) *sagemaker.DescribeInferenceComponentOutput {
		tb.Helper()
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Millisecond) {
			d, err := h.sm.DescribeInferenceComponent(ctx, &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String(name)})
			if err != nil {
				tb.Fatal(err)
			}
			switch d.InferenceComponentStatus {
			case smtypes.InferenceComponentStatusInService:
				return d
			case smtypes.InferenceComponentStatusFailed:
				tb.Fatalf("%s failed: %s", name, aws.ToString(d.FailureReason))
			}
			if time.Now().After(deadline) {
				tb.Fatalf("%s still %s", name, d.InferenceComponentStatus)
			}
		}
	}
	create(b, "bench")
	describe(b, "bench")
	plain := &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("plain"), Body: []byte("x")}
	comp := &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("gpu-share"), InferenceComponentName: aws.String("bench"), Body: []byte("x")}
	call := func(in *sagemakerruntime.InvokeEndpointInput) (time.Duration, error) {
		start := time.Now()
		out, err := h.run.InvokeEndpoint(ctx, in)
		if err == nil && string(out.Body) != "x-bench" {
			err = errors.New("answer " + string(out.Body))
		}
		return time.Since(start), err
	}
	mustCall := func(tb testing.TB, in *sagemakerruntime.InvokeEndpointInput) time.Duration {
		tb.Helper()
		d, err := call(in)
		if err != nil {
			tb.Fatal(err)
		}
		return d
	}

	b.Run("invoke", func(b *testing.B) {
		for range 200 {
			mustCall(b, plain)
			mustCall(b, comp)
		}
		var tp, tc time.Duration
		n := 0
		for b.Loop() { // which route goes first alternates, so neither gains from going second
			if n%2 == 0 {
				tp += mustCall(b, plain)
				tc += mustCall(b, comp)
			} else {
				tc += mustCall(b, comp)
				tp += mustCall(b, plain)
			}
			n++
		}
		b.ReportMetric(float64(tp.Nanoseconds())/float64(n), "plain-ns/call")
		b.ReportMetric(float64(tc.Nanoseconds())/float64(n), "component-ns/call")
		b.ReportMetric(float64(tc)/float64(tp), "component/plain")
	})

	b.Run("place", func(b *testing.B) {
		for b.Loop() {
			create(b, "placed")
			describe(b, "placed")
			b.StopTimer()
			if _, err := h.sm.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String("placed")}); err != nil {
				b.Fatal(err)
			}
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
				_, err := h.sm.DescribeInferenceComponent(ctx, &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String("placed")})
				if err != nil {
					break
				}
				if time.Now().After(deadline) {
					b.Fatal("placed was not deleted within a minute")
				}
			}
			b.StartTimer()
		}
	})

	b.Run("scale-0-to-1", func(b *testing.B) {
		scale := func(n int32) {
			b.Helper()
			if _, err := h.sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String("bench"),
				DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(n)}}); err != nil {
				b.Fatal(err)
			}
		}
		for b.Loop() {
			b.StopTimer()
			scale(0)
			if d := describe(b, "bench"); aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 0 {
				b.Fatalf("scaled to 0: %+v", d.RuntimeConfig)
			}
			b.StartTimer()
			scale(1)
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
				_, err := call(comp)
				if err == nil {
					break
				}
				var ae smithy.APIError
				if !errors.As(err, &ae) || !strings.HasPrefix(ae.ErrorMessage(), "Inference Component has no capacity") || time.Now().After(deadline) {
					b.Fatalf("while scaling 0 → 1: %v", err)
				}
			}
		}
	})
}
