package host

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/mce-run/mce/pipeline"
)

// TestPrefixAwareConfig: PREFIX_AWARE with its PrefixAwareRoutingConfig
// goes through aws-sdk-go-v2, is echoed by DescribeEndpointConfig and
// DescribeEndpoint, and configures the variant's and a component's route;
// out-of-range values are refused with SageMaker's constraint message.
func TestPrefixAwareConfig(t *testing.T) {
	h, _ := newICHarness(t, nil)
	sm := h.sm()
	ctx := context.Background()
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("m"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("-m")}}); err != nil {
		t.Fatal(err)
	}
	config := func(name, model string, length, threshold int32) error {
		return routedConfig(sm, name, model, &smtypes.ProductionVariantRoutingConfig{RoutingStrategy: smtypes.RoutingStrategyPrefixAware,
			PrefixAwareRoutingConfig: &smtypes.PrefixAwareRoutingConfig{PrefixLength: aws.Int32(length), ConcurrencyThreshold: aws.Int32(threshold)}})
	}

	err := config("bad", "m", 10, 0)
	wantMessage(t, err, "ValidationException", "2 validation errors detected: "+
		"Value '10' at 'productionVariants.1.member.routingConfig.prefixAwareRoutingConfig.prefixLength' failed to satisfy constraint: Member must have value greater than or equal to 1024; "+
		"Value '0' at 'productionVariants.1.member.routingConfig.prefixAwareRoutingConfig.concurrencyThreshold' failed to satisfy constraint: Member must have value greater than or equal to 1")

	for _, c := range []struct{ name, model string }{{"pa", "m"}, {"ic-pa", ""}} {
		if err := config(c.name, c.model, 2048, 6); err != nil {
			t.Fatal(err)
		}
		d, err := sm.DescribeEndpointConfig(ctx, &sagemaker.DescribeEndpointConfigInput{EndpointConfigName: aws.String(c.name)})
		if err != nil {
			t.Fatal(err)
		}
		rc := d.ProductionVariants[0].RoutingConfig
		if rc == nil || rc.RoutingStrategy != smtypes.RoutingStrategyPrefixAware || rc.PrefixAwareRoutingConfig == nil ||
			aws.ToInt32(rc.PrefixAwareRoutingConfig.PrefixLength) != 2048 || aws.ToInt32(rc.PrefixAwareRoutingConfig.ConcurrencyThreshold) != 6 {
			t.Fatalf("DescribeEndpointConfig RoutingConfig = %+v", rc)
		}
		if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String(c.name), EndpointConfigName: aws.String(c.name)}); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, sm, c.name, smtypes.EndpointStatusInService)
	}
	de, err := sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("pa")})
	if err != nil {
		t.Fatal(err)
	}
	if rc := de.ProductionVariants[0].RoutingConfig; rc == nil || rc.PrefixAwareRoutingConfig == nil ||
		aws.ToInt32(rc.PrefixAwareRoutingConfig.PrefixLength) != 2048 {
		t.Errorf("DescribeEndpoint RoutingConfig = %+v", rc)
	}
	if err := createIC(ctx, sm, "comp", "ic-pa", icSpec("m", 1, 1024, 0), 2); err != nil {
		t.Fatal(err)
	}
	if d := waitIC(t, sm, "comp"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("component %s: %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	icRoute, _, _, _ := h.srv.ics.Route("ic-pa", "comp")
	for _, route := range []*pipeline.Route{h.srv.reg.get("pa").route.Load(), icRoute} {
		v := route.Variants()[0]
		if l, c := v.PrefixAware(); v.Strategy() != pipeline.PrefixAware || l != 2048 || c != 6 {
			t.Errorf("variant routes %v with prefix length %d, threshold %d", v.Strategy(), l, c)
		}
	}
}
