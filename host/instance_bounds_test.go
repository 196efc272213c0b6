package host

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
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
