package host

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// TestCopiesCountAgainstMaxContainers: each copy of an inference component
// is a container of --max-containers: a create, update or scale that
// would pass it is refused with ResourceLimitExceeded, endpoints count the
// copies, and copies relaunched after a restart under a lower limit stop
// at it (the component Failed, saying so). A components endpoint went to
// 34 containers under a limit of 12: copies counted as 0.
func TestCopiesCountAgainstMaxContainers(t *testing.T) {
	st := openStore(t)
	h, _ := newICHarnessWith(t, st, Config{MaxContainers: 12})
	sm := h.sm()
	ctx := context.Background()
	createAll(t, sm, "steady", "-s", 1) // 1 container
	createICEndpoint(t, sm, "pool", "ml.m5.xlarge", 2)
	if err := createIC(ctx, sm, "a", "pool", copySpec("-a"), 10); err != nil {
		t.Fatal(err)
	}
	if d := waitIC(t, sm, "a"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("a: %s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	limited := func(used, delta int) string {
		return "The account-level service limit 'total containers across all endpoints' is 12 Containers, with current utilization of " +
			strconv.Itoa(used) + " Containers and a request delta of " + strconv.Itoa(delta) + " Containers. Start mce with a higher --max-containers to raise it."
	}
	wantMessage(t, createIC(ctx, sm, "b", "pool", copySpec("-b"), 2), "ResourceLimitExceeded", limited(11, 2))
	if h.srv.ics.Get("b") != nil {
		t.Fatal("a refused component was created")
	}
	if err := createIC(ctx, sm, "b", "pool", copySpec("-b"), 1); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "b")
	_, err := sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String("a"),
		DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(11)}})
	wantMessage(t, err, "ResourceLimitExceeded", limited(12, 1))
	// A new specification starts all its copies beside the old ones.
	_, err = sm.UpdateInferenceComponent(ctx, &sagemaker.UpdateInferenceComponentInput{InferenceComponentName: aws.String("b"), Specification: copySpec("-b2")})
	wantMessage(t, err, "ResourceLimitExceeded", limited(12, 1))
	// Endpoints count the copies.
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("more"), PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("-m")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("more"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("more"),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}}}); err != nil {
		t.Fatal(err)
	}
	_, err = sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("more"), EndpointConfigName: aws.String("more")})
	wantMessage(t, err, "ResourceLimitExceeded", limited(12, 1))
	// Scaling down is never refused, and frees room.
	for name, n := range map[string]int32{"a": 4, "b": 0} {
		if _, err := sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String(name),
			DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(n)}}); err != nil {
			t.Fatal(err)
		}
		waitIC(t, sm, name)
	}
	if err := createIC(ctx, sm, "c", "pool", copySpec("-c"), 7); err != nil {
		t.Fatal(err)
	}
	if d := waitIC(t, sm, "c"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("c: %s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	if n := h.srv.containersInUse(nil); n != 12 {
		t.Fatalf("%d containers in use, want 12", n)
	}
	h.http.Close()
	h.srv.Close(ctx)

	// Restarted with a limit of 6: the fakes are gone, every copy is
	// placed again, and the copies stop at the limit.
	h2, _ := newICHarnessWith(t, st, Config{MaxContainers: 6})
	if err := h2.srv.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	sm2 := h2.sm()
	copies, reasons := 0, []string{}
	for _, name := range []string{"a", "c"} {
		d := waitIC(t, sm2, name)
		copies += int(aws.ToInt32(d.RuntimeConfig.CurrentCopyCount))
		if d.InferenceComponentStatus == smtypes.InferenceComponentStatusFailed {
			reasons = append(reasons, aws.ToString(d.FailureReason))
		}
	}
	if copies != 5 || len(reasons) == 0 {
		t.Fatalf("after a restart under a limit of 6 (1 taken by steady): %d copies, reasons %q; want 5 copies and a component Failed", copies, reasons)
	}
	for _, r := range reasons {
		if !strings.Contains(r, "would pass the limit of 6 containers of all endpoints and inference component copies together (mce serve --max-containers; ") {
			t.Errorf("FailureReason %q does not name the limit", r)
		}
	}
}
