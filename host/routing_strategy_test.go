package host

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"

	"github.com/mce-run/mce/pipeline"
)

// TestRoutingStrategy: RoutingConfig.RoutingStrategy goes through
// aws-sdk-go-v2 and back (DescribeEndpointConfig), a value outside the enum
// is refused as SageMaker refuses it, and the strategy is honoured when
// calls are routed, on a variant of a model and on an inference
// component's copies: with one copy held by a slow call,
// LEAST_OUTSTANDING_REQUESTS sends every other call to the idle copy while
// RANDOM keeps sending calls to both.
func TestRoutingStrategy(t *testing.T) {
	h, _ := newICHarness(t, nil)
	sm := h.sm()
	ctx := context.Background()
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("m"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("-m")}}); err != nil {
		t.Fatal(err)
	}
	config := func(name, model, strategy string) error {
		var rc *smtypes.ProductionVariantRoutingConfig
		if strategy != "" {
			rc = &smtypes.ProductionVariantRoutingConfig{RoutingStrategy: smtypes.RoutingStrategy(strategy)}
		}
		return routedConfig(sm, name, model, rc)
	}

	err := config("bad", "m", "ROUND_ROBIN")
	wantMessage(t, err, "ValidationException", "1 validation error detected: Value 'ROUND_ROBIN' at 'productionVariants.1.member.routingConfig.routingStrategy' failed to satisfy constraint: Member must satisfy enum value set: [LEAST_OUTSTANDING_REQUESTS, RANDOM, PREFIX_AWARE]")

	for _, c := range []struct{ name, model, strategy string }{
		{"random", "m", "RANDOM"}, {"lor", "m", "LEAST_OUTSTANDING_REQUESTS"}, {"default", "m", ""}, {"ic-random", "", "RANDOM"},
	} {
		if err := config(c.name, c.model, c.strategy); err != nil {
			t.Fatalf("CreateEndpointConfig %s: %v", c.name, err)
		}
		d, err := sm.DescribeEndpointConfig(ctx, &sagemaker.DescribeEndpointConfigInput{EndpointConfigName: aws.String(c.name)})
		if err != nil {
			t.Fatal(err)
		}
		rc := d.ProductionVariants[0].RoutingConfig
		switch {
		case c.strategy == "" && rc != nil:
			t.Errorf("%s: DescribeEndpointConfig has RoutingConfig %+v, want none (none was given)", c.name, *rc)
		case c.strategy != "" && (rc == nil || string(rc.RoutingStrategy) != c.strategy):
			t.Errorf("%s: DescribeEndpointConfig RoutingConfig = %+v, want RoutingStrategy %s", c.name, rc, c.strategy)
		}
		if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String(c.name), EndpointConfigName: aws.String(c.name)}); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, sm, c.name, smtypes.EndpointStatusInService)
	}
	if err := createIC(ctx, sm, "comp", "ic-random", icSpec("m", 1, 1024, 0), 2); err != nil {
		t.Fatal(err)
	}
	if d := waitIC(t, sm, "comp"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("component %s: %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}

	for _, c := range []struct {
		endpoint, component string
		want                pipeline.Strategy
	}{
		{"random", "", pipeline.Random},
		{"lor", "", pipeline.LeastOutstanding},
		{"default", "", pipeline.LeastOutstanding},
		{"ic-random", "comp", pipeline.Random},
	} {
		t.Run(c.endpoint, func(t *testing.T) {
			route := h.srv.reg.get(c.endpoint).route.Load()
			if c.component != "" {
				route, _, _, _ = h.srv.ics.Route(c.endpoint, c.component)
			}
			v := route.Variants()[0]
			if v.Strategy() != c.want {
				t.Fatalf("variant strategy %v, want %v", v.Strategy(), c.want)
			}
			var copies []*fakeContainer
			for _, in := range v.Instances() {
				copies = append(copies, in.Containers()[0].(*fakeContainer))
			}
			if len(copies) != 2 {
				t.Fatalf("%d copies, want 2", len(copies))
			}
			call := func(attrs string) error {
				in := &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(c.endpoint), Body: []byte("x")}
				if c.component != "" {
					in.InferenceComponentName = aws.String(c.component)
				}
				if attrs != "" {
					in.CustomAttributes = aws.String(attrs)
				}
				_, err := h.invoke(in)
				return err
			}
			// Hold one copy with a slow call.
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := call("sleep=3s"); err != nil {
					t.Errorf("slow call: %v", err)
				}
			}()
			defer wg.Wait()
			held := -1
			for deadline := time.Now().Add(2 * time.Second); held < 0; time.Sleep(5 * time.Millisecond) {
				for i, fc := range copies {
					if fc.inside.Load() == 1 {
						held = i
					}
				}
				if time.Now().After(deadline) {
					t.Fatal("the slow call reached no copy")
				}
			}
			before := copies[held].calls.Load()
			const n = 40
			for range n {
				if err := call(""); err != nil {
					t.Fatal(err)
				}
			}
			got := copies[held].calls.Load() - before
			if copies[held].inside.Load() != 1 {
				t.Fatal("the slow call ended before the calls were made; the test proves nothing")
			}
			switch c.want {
			case pipeline.Random:
				// About n/2 expected; 0 has chance 2^-40.
				if got == 0 {
					t.Errorf("RANDOM sent none of %d calls to the copy holding a slow call", n)
				}
			default:
				if got != 0 {
					t.Errorf("LEAST_OUTSTANDING_REQUESTS sent %d of %d calls to the copy holding a slow call", got, n)
				}
			}
		})
	}
}

// TestDescribeEndpointEchoesVariantConfig: DescribeEndpoint's variant
// summaries carry the configuration's RoutingConfig and
// ManagedInstanceScaling (members of ProductionVariantSummary), through
// aws-sdk-go-v2, after the configuration itself is deleted too; a variant
// configured without them shows neither.
func TestDescribeEndpointEchoesVariantConfig(t *testing.T) {
	h, _ := newICHarness(t, nil)
	sm := h.sm()
	ctx := context.Background()
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("m"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("-m")}}); err != nil {
		t.Fatal(err)
	}
	_, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("c"),
		ProductionVariants: []smtypes.ProductionVariant{
			{VariantName: aws.String("Routed"), ModelName: aws.String("m"), InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large,
				RoutingConfig: &smtypes.ProductionVariantRoutingConfig{RoutingStrategy: smtypes.RoutingStrategyRandom},
				ManagedInstanceScaling: &smtypes.ProductionVariantManagedInstanceScaling{Status: smtypes.ManagedInstanceScalingStatusEnabled,
					MinInstanceCount: aws.Int32(1), MaxInstanceCount: aws.Int32(3)}},
			{VariantName: aws.String("Plain"), ModelName: aws.String("m"), InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("e"), EndpointConfigName: aws.String("c")}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, sm, "e", smtypes.EndpointStatusInService)
	if _, err := sm.DeleteEndpointConfig(ctx, &sagemaker.DeleteEndpointConfigInput{EndpointConfigName: aws.String("c")}); err != nil {
		t.Fatal(err)
	}
	d, err := sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("e")})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.ProductionVariants) != 2 {
		t.Fatalf("%d variant summaries", len(d.ProductionVariants))
	}
	routed, plain := d.ProductionVariants[0], d.ProductionVariants[1]
	if routed.RoutingConfig == nil || routed.RoutingConfig.RoutingStrategy != smtypes.RoutingStrategyRandom {
		t.Errorf("Routed: RoutingConfig %+v, want RANDOM", routed.RoutingConfig)
	}
	if m := routed.ManagedInstanceScaling; m == nil || m.Status != smtypes.ManagedInstanceScalingStatusEnabled ||
		aws.ToInt32(m.MinInstanceCount) != 1 || aws.ToInt32(m.MaxInstanceCount) != 3 {
		t.Errorf("Routed: ManagedInstanceScaling %+v, want ENABLED 1..3", m)
	}
	if plain.RoutingConfig != nil || plain.ManagedInstanceScaling != nil {
		t.Errorf("Plain: %+v %+v, want neither", plain.RoutingConfig, plain.ManagedInstanceScaling)
	}
}

// routedConfig creates endpoint configuration name: one variant of two
// instances of model with RoutingConfig rc, or, when model is "", a variant
// for inference components.
func routedConfig(sm *sagemaker.Client, name, model string, rc *smtypes.ProductionVariantRoutingConfig) error {
	v := smtypes.ProductionVariant{VariantName: aws.String("AllTraffic"), InitialInstanceCount: aws.Int32(2),
		InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large, RoutingConfig: rc}
	in := &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(name)}
	if model != "" {
		v.ModelName = aws.String(model)
	} else {
		in.ExecutionRoleArn = aws.String(roleARN)
	}
	in.ProductionVariants = []smtypes.ProductionVariant{v}
	_, err := sm.CreateEndpointConfig(context.Background(), in)
	return err
}
