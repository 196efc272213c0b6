package host

import (
	"context"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/components"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/sdkhttp"
	"github.com/mce-run/mce/internal/testenv"
)

// newICHarnessOn is newICHarnessWith on backend b (a capBackend or one
// wrapping it) with log output to logs (nil: none).
func newICHarnessOn(t testing.TB, st *store.Store, cfg Config, b containers.Engine, logs *testenv.SyncBuffer) *harness {
	t.Helper()
	if st == nil {
		st = openStore(t)
	}
	cfg.Backend, cfg.Logger, cfg.Store = b, zerolog.Nop(), st
	if logs != nil {
		cfg.Logger = zerolog.New(logs)
	}
	s := New(cfg)
	hs := httptest.NewUnstartedServer(s.Handler())
	hs.Config.ConnContext = ConnContext
	hs.Start()
	t.Cleanup(func() {
		hs.Close()
		s.Close(context.Background())
	})
	client := sagemakerruntime.New(sagemakerruntime.Options{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL),
		Credentials: aws.AnonymousCredentials{}, HTTPClient: &sdkhttp.Client{Next: hs.Client()}})
	return &harness{t: t, srv: s, http: hs, client: client}
}

func copySpec(image string) *smtypes.InferenceComponentSpecification {
	return &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String(image)},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}}
}

// TestInstanceCountBounds: InitialInstanceCount, ManagedInstanceScaling's
// counts and DesiredInstanceCount are refused above spec.MaxInstances with
// SageMaker's constraint message when the configuration (or the scaling)
// is asked for. mce accepted 2147483647, and the first component placed on
// such an endpoint took all the memory there was.
func TestInstanceCountBounds(t *testing.T) {
	h, _ := newICHarness(t, nil)
	sm := h.sm()
	ctx := context.Background()
	config := func(name string, v smtypes.ProductionVariant) error {
		v.VariantName, v.InstanceType = aws.String("AllTraffic"), smtypes.ProductionVariantInstanceTypeMlM5Xlarge
		_, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(name),
			ExecutionRoleArn: aws.String(roleARN), ProductionVariants: []smtypes.ProductionVariant{v}})
		return err
	}
	const at = "1 validation error detected: Value '%s' at 'productionVariants.1.member.%s' failed to satisfy constraint: Member must have value less than or equal to 100"
	for _, c := range []struct {
		name   string
		v      smtypes.ProductionVariant
		member string
		value  string
	}{
		{"huge", smtypes.ProductionVariant{InitialInstanceCount: aws.Int32(2147483647)}, "initialInstanceCount", "2147483647"},
		{"just-over", smtypes.ProductionVariant{InitialInstanceCount: aws.Int32(101)}, "initialInstanceCount", "101"},
		{"max-scaling", smtypes.ProductionVariant{InitialInstanceCount: aws.Int32(1), ManagedInstanceScaling: &smtypes.ProductionVariantManagedInstanceScaling{
			Status: smtypes.ManagedInstanceScalingStatusEnabled, MinInstanceCount: aws.Int32(1), MaxInstanceCount: aws.Int32(2147483647)}},
			"managedInstanceScaling.maxInstanceCount", "2147483647"},
	} {
		err := config(c.name, c.v)
		wantMessage(t, err, "ValidationException", strings.ReplaceAll(strings.Replace(at, "%s", c.value, 1), "%s", c.member))
	}
	// Min above the bound is refused too.
	err := config("min-scaling", smtypes.ProductionVariant{InitialInstanceCount: aws.Int32(1), ManagedInstanceScaling: &smtypes.ProductionVariantManagedInstanceScaling{
		Status: smtypes.ManagedInstanceScalingStatusEnabled, MinInstanceCount: aws.Int32(101)}})
	wantMessage(t, err, "ValidationException", strings.ReplaceAll(strings.Replace(at, "%s", "101", 1), "%s", "managedInstanceScaling.minInstanceCount"))
	if err := config("widest", smtypes.ProductionVariant{InitialInstanceCount: aws.Int32(100), ManagedInstanceScaling: &smtypes.ProductionVariantManagedInstanceScaling{
		Status: smtypes.ManagedInstanceScalingStatusEnabled, MinInstanceCount: aws.Int32(100), MaxInstanceCount: aws.Int32(100)}}); err != nil {
		t.Fatalf("100 instances: %v", err)
	}
	createAll(t, sm, "steady", "-s", 1)
	_, err = sm.UpdateEndpointWeightsAndCapacities(ctx, &sagemaker.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("steady"),
		DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"), DesiredInstanceCount: aws.Int32(2147483647)}}})
	wantMessage(t, err, "ValidationException", "1 validation error detected: Value '2147483647' at 'desiredWeightsAndCapacities.1.member.desiredInstanceCount' failed to satisfy constraint: Member must have value less than or equal to 100")
}

// poisonEndpoint rewrites a stored endpoint and its configuration to
// instances instances, as an mce that accepted any count left them.
func poisonEndpoint(t *testing.T, st *store.Store, name string, instances int) {
	t.Helper()
	var rec EndpointRecord
	if err := st.Get(store.Endpoints, name, &rec); err != nil {
		t.Fatal(err)
	}
	rec.Plan.Variants[0].InstanceCount = instances
	if err := st.Put(store.Endpoints, name, rec); err != nil {
		t.Fatal(err)
	}
	var cfg ConfigRecord
	if err := st.Get(store.EndpointConfigs, rec.ConfigName, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Input.ProductionVariants[0].InitialInstanceCount = new(int32(instances))
	if err := st.Put(store.EndpointConfigs, rec.ConfigName, cfg); err != nil {
		t.Fatal(err)
	}
}

// TestPoisonedStateAfterRestart: mce restarted on a state an older mce
// left (a components endpoint of 2147483647 instances, a component being
// created on it; a model endpoint of as many) stays up: that component is
// Failed with the reason, the model endpoint Failed and never launched,
// and the other endpoints and components serve. It died of out of memory
// on every start (relaunchComponents → reconcileCopies).
func TestPoisonedStateAfterRestart(t *testing.T) {
	st := openStore(t)
	h1, _ := newICHarness(t, st)
	sm := h1.sm()
	ctx := context.Background()
	createAll(t, sm, "steady", "-steady", 1)
	createAll(t, sm, "wide", "-wide", 1)
	createICEndpoint(t, sm, "shared", "ml.m5.xlarge", 1)
	createICEndpoint(t, sm, "poisoned", "ml.m5.xlarge", 1)
	if err := createIC(ctx, sm, "good", "shared", copySpec("-good"), 1); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "good")
	h1.http.Close()
	h1.srv.Close(ctx)

	poisonEndpoint(t, st, "poisoned", 1<<31-1)
	poisonEndpoint(t, st, "wide", 1<<31-1)
	var bomb components.Record
	if err := st.Get(store.InferenceComponents, "good", &bomb); err != nil {
		t.Fatal(err)
	}
	bomb.Name, bomb.ARN, bomb.EndpointName = "bomb", strings.Replace(bomb.ARN, "/good", "/bomb", 1), "poisoned"
	bomb.Status, bomb.Copies, bomb.LastCopyID, bomb.Desired = spec.StatusCreating, nil, 0, 2
	if err := st.Put(store.InferenceComponents, "bomb", bomb); err != nil {
		t.Fatal(err)
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b := &capBackend{fakeBackend: &fakeBackend{t: t}}
	h2 := newICHarnessOn(t, st, Config{}, b, nil)
	if err := h2.srv.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	sm2 := h2.sm()
	d := waitIC(t, sm2, "bomb")
	want := "0 of 2 copies of the inference component are running. Variant AllTraffic of the endpoint has 2147483647 instances in its recorded configuration; mce runs 1 to 100 instances per variant. Update the endpoint to a configuration within that limit, then update the inference component."
	if d.InferenceComponentStatus != smtypes.InferenceComponentStatusFailed || aws.ToString(d.FailureReason) != want {
		t.Fatalf("bomb: %s %q", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	if d := waitIC(t, sm2, "good"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("good: %s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	if err := h2.srv.WaitEndpoint(ctx, "steady"); err != nil {
		t.Fatal(err)
	}
	err := h2.srv.WaitEndpoint(ctx, "wide")
	if err == nil || !strings.Contains(err.Error(), "Variant AllTraffic has 2147483647 instances in its recorded configuration; mce runs 1 to 100 instances per variant.") {
		t.Fatalf("wide: %v", err)
	}
	b.mu.Lock()
	for gen, p := range b.plans {
		if p.Name == "wide" {
			t.Errorf("wide was launched again (generation %d)", gen)
		}
	}
	b.mu.Unlock()
	for ep, ic := range map[string]string{"steady": "", "shared": "good"} {
		if got, err := h2.invokeIC(ep, ic); err != nil || !strings.HasPrefix(got, "x-") {
			t.Errorf("invoke %s %s after the restart = %q, %v", ep, ic, got, err)
		}
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<20 {
		t.Errorf("the restart allocated %d MiB", grew>>20)
	}
	// The poisoned configuration can no longer make an endpoint.
	_, err = sm2.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("again"), EndpointConfigName: aws.String("poisoned-config")})
	wantMessage(t, err, "ValidationException", "1 validation error detected: Value '2147483647' at 'productionVariants.1.member.initialInstanceCount' failed to satisfy constraint: Member must have value less than or equal to 100")
}
