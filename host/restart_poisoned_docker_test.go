package host_test

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"

	"github.com/mce-run/mce/host"
	"github.com/mce-run/mce/host/components"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/testenv"
)

// TestDockerRestartOnPoisonedState restarts mce, on the real Docker
// engine, on the state an older mce left when it accepted an endpoint of
// 2147483647 instances and died placing the first inference component on
// it (the component's record Creating, no copy placed): mce comes up, that
// component is Failed with the reason, and the other endpoints and
// components serve with the containers they had. mce died of out of
// memory on every such start (relaunchComponents → reconcileCopies).
func TestDockerRestartOnPoisonedState(t *testing.T) {
	testenv.Docker(t)
	image := testenv.Image(t, "probe")
	instance := testenv.Instance(t)
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after both hosts' teardown
	h := startICHost(t, instance, t.TempDir(), st)
	ctx := context.Background()
	sm := h.sm

	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("steady"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String(image), Environment: map[string]string{"PROBE_TAG": "-steady"}}}); err != nil {
		t.Fatal(err)
	}
	config := func(name string, v smtypes.ProductionVariant) {
		t.Helper()
		v.VariantName, v.InitialInstanceCount = aws.String("AllTraffic"), aws.Int32(1)
		if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(name),
			ExecutionRoleArn: aws.String("arn:aws:iam::123456789012:role/mce"), ProductionVariants: []smtypes.ProductionVariant{v}}); err != nil {
			t.Fatal(err)
		}
		if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String(name)}); err != nil {
			t.Fatal(err)
		}
		if err := h.Server.WaitEndpoint(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	config("steady", smtypes.ProductionVariant{ModelName: aws.String("steady"), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large})
	config("shared", smtypes.ProductionVariant{InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Xlarge})
	config("poisoned", smtypes.ProductionVariant{InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Xlarge})
	if _, err := sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String("good"),
		EndpointName: aws.String("shared"), VariantName: aws.String("AllTraffic"),
		Specification: &smtypes.InferenceComponentSpecification{
			Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String(image), Environment: map[string]string{"PROBE_TAG": "-good"}},
			ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{NumberOfCpuCoresRequired: aws.Float32(0.25),
				MinMemoryRequiredInMb: aws.Int32(128)}},
		RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(1)}}); err != nil {
		t.Fatal(err)
	}
	if d := h.wait(t, "good"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("good: %s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	h.Crash()

	// The state as the older mce left it: its API took 2147483647
	// instances, and it died placing "bomb" (record Creating, no copy).
	const instances = 1<<31 - 1
	var ep host.EndpointRecord
	if err := st.Get(store.Endpoints, "poisoned", &ep); err != nil {
		t.Fatal(err)
	}
	ep.Plan.Variants[0].InstanceCount = instances
	var cfg host.ConfigRecord
	if err := st.Get(store.EndpointConfigs, "poisoned", &cfg); err != nil {
		t.Fatal(err)
	}
	n := int32(instances)
	cfg.Input.ProductionVariants[0].InitialInstanceCount = &n
	var bomb components.Record
	if err := st.Get(store.InferenceComponents, "good", &bomb); err != nil {
		t.Fatal(err)
	}
	bomb.Name, bomb.ARN, bomb.EndpointName = "bomb", strings.Replace(bomb.ARN, "/good", "/bomb", 1), "poisoned"
	bomb.Status, bomb.Copies, bomb.LastCopyID, bomb.FailureReason = spec.StatusCreating, nil, 0, ""
	for kind, rec := range map[string]any{store.Endpoints: ep, store.EndpointConfigs: cfg, store.InferenceComponents: bomb} {
		name := "poisoned"
		if kind == store.InferenceComponents {
			name = "bomb"
		}
		if err := st.Put(kind, name, rec); err != nil {
			t.Fatal(err)
		}
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h2 := startICHost(t, instance, h.StateDir, st)
	d := h2.wait(t, "bomb")
	if d.InferenceComponentStatus != smtypes.InferenceComponentStatusFailed ||
		!strings.Contains(aws.ToString(d.FailureReason), "has 2147483647 instances in its recorded configuration; mce runs 1 to 100 instances per variant.") {
		t.Fatalf("bomb after the restart: %s %q", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	if d := h2.wait(t, "good"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService || aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 1 {
		t.Fatalf("good after the restart: %s %+v %s", d.InferenceComponentStatus, d.RuntimeConfig, aws.ToString(d.FailureReason))
	}
	if err := h2.Server.WaitEndpoint(ctx, "steady"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ endpoint, ic, want string }{{"steady", "", "x-steady"}, {"shared", "good", "x-good"}} {
		in := &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(c.endpoint), Body: []byte("x")}
		if c.ic != "" {
			in.InferenceComponentName = aws.String(c.ic)
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		out, err := h2.run.InvokeEndpoint(cctx, in)
		cancel()
		if err != nil || string(out.Body) != c.want {
			t.Fatalf("invoke %s %s after the restart: %v", c.endpoint, c.ic, err)
		}
	}
	runtime.ReadMemStats(&after)
	t.Logf("the restart on the poisoned state allocated %d MiB in all", (after.TotalAlloc-before.TotalAlloc)>>20)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<20 {
		t.Errorf("the restart allocated %d MiB", grew>>20)
	}
	// The poisoned configuration makes no endpoint any more.
	_, err = h2.sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("again"), EndpointConfigName: aws.String("poisoned")})
	if err == nil || !strings.Contains(err.Error(), "Member must have value less than or equal to 100") {
		t.Errorf("CreateEndpoint on the poisoned configuration: %v", err)
	}
}
