package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"

	"github.com/mce-run/mce/internal/testenv"
)

// TestInferenceComponentRollingUpdateUnderTraffic drives
// UpdateInferenceComponent through the SDK while callers keep invoking the
// component through the runtime API, on an instance of 8 cores (capBackend)
// that another component shares:
//   - the same specification with a copy count of 3 instead of 2, with
//     room for one copy more: one copy is added, none replaced (it ended
//     Failed with 1 of 3 before);
//   - a new image alone (a partial specification), with room for one copy
//     more: the copies are replaced one at a time, DescribeInferenceComponent
//     saying Updating with 3 copies wanted and 3 or 4 taking calls;
//   - ComputeResourceRequirements alone, as the SageMaker Python SDK's
//     update_predictor(resources=…) sends it: the image is kept.
//
// No call fails, and the answers go from the old image to the new one.
func TestInferenceComponentRollingUpdateUnderTraffic(t *testing.T) {
	h, b := newICHarness(t, nil)
	b.delay = 30 * time.Millisecond // each copy takes a while to start
	sm := h.sm()
	ctx := context.Background()
	createICEndpoint(t, sm, "rolling", "ml.m5.xlarge", 1)
	cores := func(n float32) *smtypes.InferenceComponentComputeResourceRequirements {
		return &smtypes.InferenceComponentComputeResourceRequirements{NumberOfCpuCoresRequired: aws.Float32(n), MinMemoryRequiredInMb: aws.Int32(256)}
	}
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-v1")},
		ComputeResourceRequirements: cores(2)}
	if err := createIC(ctx, sm, "live", "rolling", sp, 2); err != nil {
		t.Fatal(err)
	}
	filler := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-f")},
		ComputeResourceRequirements: cores(2)}
	if err := createIC(ctx, sm, "filler", "rolling", filler, 1); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"live", "filler"} {
		if d := waitIC(t, sm, name); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
			t.Fatalf("%s: %s %s", name, d.InferenceComponentStatus, aws.ToString(d.FailureReason))
		}
	}
	var mu sync.Mutex
	answers := map[string]int{}
	traffic := testenv.StartTraffic(t, 4, func() error {
		out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("rolling"), InferenceComponentName: aws.String("live"),
			Body: []byte("x"), CustomAttributes: aws.String("sleep=5ms")})
		if err != nil {
			return err
		}
		mu.Lock()
		answers[string(out.Body)]++
		mu.Unlock()
		if !strings.HasPrefix(string(out.Body), "x-v") {
			return errors.New("answer " + string(out.Body))
		}
		return nil
	})
	// watch polls DescribeInferenceComponent until the update ends and
	// returns every (status, desired, current) it saw.
	watch := func() (seen []string, last *sagemaker.DescribeInferenceComponentOutput) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			d, err := sm.DescribeInferenceComponent(ctx, &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String("live")})
			if err != nil {
				t.Fatal(err)
			}
			rc := d.RuntimeConfig
			seen = append(seen, fmt.Sprintf("%s %d %d", d.InferenceComponentStatus, aws.ToInt32(rc.DesiredCopyCount), aws.ToInt32(rc.CurrentCopyCount)))
			if d.InferenceComponentStatus != smtypes.InferenceComponentStatusUpdating {
				return seen, d
			}
			if time.Now().After(deadline) {
				t.Fatalf("still Updating: %v", seen)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	time.Sleep(50 * time.Millisecond)

	// (a) The same specification, 3 copies: 6 of 8 cores are taken, room
	// for one copy.
	launches := b.launches.Load()
	if _, err := sm.UpdateInferenceComponent(ctx, &sagemaker.UpdateInferenceComponentInput{InferenceComponentName: aws.String("live"),
		Specification: sp, RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(3)}}); err != nil {
		t.Fatal(err)
	}
	seen, d := watch()
	if d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService || aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 3 {
		t.Fatalf("2 → 3 with the same specification: %s %+v %q (seen %v)", d.InferenceComponentStatus, d.RuntimeConfig, aws.ToString(d.FailureReason), seen)
	}
	if n := b.launches.Load() - launches; n != 1 {
		t.Errorf("2 → 3 with the same specification launched %d copies, want 1 (none replaced)", n)
	}
	time.Sleep(50 * time.Millisecond)

	// (b) A new image alone: the instance is full; the filler goes, which
	// leaves room for one copy, enough for a batch.
	if _, err := sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String("filler"),
		DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(0)}}); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "filler")
	before := h.srv.ics.Get("live").Record().Copies
	if _, err := sm.UpdateInferenceComponent(ctx, &sagemaker.UpdateInferenceComponentInput{InferenceComponentName: aws.String("live"),
		Specification: &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-v2")}}}); err != nil {
		t.Fatal(err)
	}
	seen, d = watch()
	if d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService || aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 3 || aws.ToString(d.FailureReason) != "" ||
		aws.ToString(d.Specification.Container.DeployedImage.SpecifiedImage) != "-v2" || aws.ToFloat32(d.Specification.ComputeResourceRequirements.NumberOfCpuCoresRequired) != 2 {
		t.Fatalf("after the new image: %s %+v %q %+v (seen %v)", d.InferenceComponentStatus, d.RuntimeConfig, aws.ToString(d.FailureReason), d.Specification, seen)
	}
	for _, s := range seen[:len(seen)-1] {
		if s != "Updating 3 3" && s != "Updating 3 4" {
			t.Errorf("during the rolling update DescribeInferenceComponent said %q; want Updating, 3 desired, 3 or 4 current", s)
		}
	}
	after := h.srv.ics.Get("live").Record().Copies
	for _, a := range after {
		for _, o := range before {
			if a.ID == o.ID {
				t.Errorf("copy %d of the previous image still runs", a.ID)
			}
		}
	}
	time.Sleep(50 * time.Millisecond)

	// (c) Resources alone: the image is kept.
	if _, err := sm.UpdateInferenceComponent(ctx, &sagemaker.UpdateInferenceComponentInput{InferenceComponentName: aws.String("live"),
		Specification: &smtypes.InferenceComponentSpecification{ComputeResourceRequirements: cores(1.5)}}); err != nil {
		t.Fatal(err)
	}
	_, d = watch()
	if d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService || aws.ToString(d.Specification.Container.DeployedImage.SpecifiedImage) != "-v2" ||
		aws.ToFloat32(d.Specification.ComputeResourceRequirements.NumberOfCpuCoresRequired) != 1.5 {
		t.Fatalf("after resources alone: %s %q %+v", d.InferenceComponentStatus, aws.ToString(d.FailureReason), d.Specification)
	}
	time.Sleep(50 * time.Millisecond)
	traffic.Stop()
	mu.Lock()
	defer mu.Unlock()
	if traffic.Failed() > 0 || answers["x-v1"] == 0 || answers["x-v2"] == 0 {
		t.Fatalf("%v; answers %v", traffic, answers)
	}
	t.Logf("%d calls, none failed: %v", traffic.OK(), answers)
}
