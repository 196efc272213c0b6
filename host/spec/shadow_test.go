package spec

import (
	"encoding/json"
	"testing"
)

// shadowConfig is a valid configuration with one production and one shadow
// variant; tests mutate copies.
func shadowConfig() CreateEndpointConfigInput {
	c := oneVariantConfig()
	c.ShadowProductionVariants = []ProductionVariant{{
		VariantName: "Shadow", ModelName: "challenger", InitialInstanceCount: ptr[int32](1), InstanceType: "ml.m5.large",
		InitialVariantWeight: ptr(0.5),
	}}
	return c
}

func TestShadowVariantsValidate(t *testing.T) {
	const prefix1 = "1 validation error detected: "
	const sv = "shadowProductionVariants.1.member."
	tests := []struct {
		name   string
		mutate func(c *CreateEndpointConfigInput)
		want   string
	}{
		{"valid", func(c *CreateEndpointConfigInput) {}, ""},
		{"a shadow of weight 0 samples nothing and is valid", func(c *CreateEndpointConfigInput) {
			c.ShadowProductionVariants[0].InitialVariantWeight = ptr(0.0)
		}, ""},
		{"empty list", func(c *CreateEndpointConfigInput) { c.ShadowProductionVariants = []ProductionVariant{} },
			prefix1 + "Value at 'shadowProductionVariants' failed to satisfy constraint: Member must have length greater than or equal to 1"},
		{"shadow members are checked as production ones", func(c *CreateEndpointConfigInput) {
			v := &c.ShadowProductionVariants[0]
			v.VariantName, v.InitialVariantWeight = "", ptr(-1.0)
		}, "2 validation errors detected: " +
			"Value null at '" + sv + "variantName' failed to satisfy constraint: Member must not be null; " +
			"Value '-1.0' at '" + sv + "initialVariantWeight' failed to satisfy constraint: Member must have value greater than or equal to 0"},
		{"two shadows", func(c *CreateEndpointConfigInput) {
			s := c.ShadowProductionVariants[0]
			s.VariantName = "Shadow2"
			c.ShadowProductionVariants = append(c.ShadowProductionVariants, s)
		}, "If you use ShadowProductionVariants, you can only specify one variant for ProductionVariants and one variant for ShadowProductionVariants; this endpoint configuration has 1 and 2."},
		{"two production variants", func(c *CreateEndpointConfigInput) {
			p := c.ProductionVariants[0]
			p.VariantName = "B"
			c.ProductionVariants = append(c.ProductionVariants, p)
		}, "If you use ShadowProductionVariants, you can only specify one variant for ProductionVariants and one variant for ShadowProductionVariants; this endpoint configuration has 2 and 1."},
		{"names are unique across production and shadow", func(c *CreateEndpointConfigInput) {
			c.ShadowProductionVariants[0].VariantName = "AllTraffic"
		}, `VariantName must be unique within an endpoint configuration; "AllTraffic" appears more than once.`},
		{"asynchronous endpoint", func(c *CreateEndpointConfigInput) {
			c.AsyncInferenceConfig = &AsyncInferenceConfig{OutputConfig: &AsyncInferenceOutputConfig{S3OutputPath: "s3://b/out"}}
		}, "ShadowProductionVariants cannot be used with AsyncInferenceConfig: SageMaker does not run shadow variants on asynchronous inference endpoints."},
		{"serverless shadow", func(c *CreateEndpointConfigInput) {
			v := &c.ShadowProductionVariants[0]
			v.ServerlessConfig = json.RawMessage(`{"MemorySizeInMB":2048,"MaxConcurrency":5}`)
			v.InstanceType, v.InitialInstanceCount = "", nil
		}, `ServerlessConfig is not supported by mce (shadow variant "Shadow"): give InstanceType and InitialInstanceCount instead.`},
		{"shadow without instances", func(c *CreateEndpointConfigInput) { c.ShadowProductionVariants[0].InitialInstanceCount = nil },
			`Shadow variant "Shadow" needs an InitialInstanceCount.`},
		{"shadow without a model", func(c *CreateEndpointConfigInput) { c.ShadowProductionVariants[0].ModelName = "" },
			`Shadow variant "Shadow" needs a ModelName: mce mirrors requests to a model's container, and inference components cannot be shadow variants.`},
		{"inference components with a shadow", func(c *CreateEndpointConfigInput) {
			c.ProductionVariants[0].ModelName = ""
			c.ExecutionRoleARN = "arn:aws:iam::123456789012:role/ic"
		}, `An endpoint for inference components (production variant "AllTraffic" names no ModelName) cannot have ShadowProductionVariants.`},
		{"Inf1 and Elastic Inference", func(c *CreateEndpointConfigInput) {
			c.ShadowProductionVariants[0].InstanceType = "ml.inf1.xlarge"
			c.ProductionVariants[0].AcceleratorType = "ml.eia2.medium"
		}, `SageMaker does not run shadow variants on Amazon Elastic Inference endpoints; variant "AllTraffic" has AcceleratorType ml.eia2.medium. ` +
			`SageMaker does not run shadow variants on endpoints that use Inf1 (Inferentia-based) instances; variant "Shadow" is ml.inf1.xlarge.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := shadowConfig()
			tt.mutate(&c)
			if got := validationMessage(t, c.Validate()); got != tt.want {
				t.Errorf("Validate()\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}
}

func TestShadowVariantsWarnings(t *testing.T) {
	c := shadowConfig()
	c.ShadowProductionVariants[0].VolumeSizeInGB = ptr[int32](10)
	want := `endpoint configuration "ab-config": VolumeSizeInGB (shadow variant "Shadow") ignored locally`
	for _, w := range c.Warnings() {
		if w == want {
			return
		}
	}
	t.Errorf("Warnings() = %q, want it to hold %q", c.Warnings(), want)
}

func singleModel(name, image string) CreateModelInput {
	return CreateModelInput{ModelName: name, PrimaryContainer: &ContainerDefinition{Image: image}}
}

func TestShadowPlan(t *testing.T) {
	models := map[string]CreateModelInput{
		"ab-model":   singleModel("ab-model", "mce-example/sentiment:v1"),
		"challenger": singleModel("challenger", "mce-example/sentiment:v2"),
	}
	plan, _, err := BuildPlan(testRegion, testAccount, CreateEndpointInput{EndpointName: "ep", EndpointConfigName: "ab-config"},
		shadowConfig(), MapLookup(models, "/"))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Variants) != 2 {
		t.Fatalf("plan has %d variants, want 2: %+v", len(plan.Variants), plan.Variants)
	}
	p, s := plan.Variants[0], plan.Variants[1]
	if p.Name != "AllTraffic" || p.Shadow || p.Weight != 1 {
		t.Errorf("production variant = %+v, want AllTraffic, not a shadow, weight 1", p)
	}
	if s.Name != "Shadow" || !s.Shadow || s.Weight != 0.5 || s.ModelName != "challenger" || len(s.Containers) != 1 ||
		s.Containers[0].Image != "mce-example/sentiment:v2" {
		t.Errorf("shadow variant = %+v, want Shadow, a shadow of weight 0.5 running challenger's image", s)
	}
}

// SageMaker's exclusions of shadow testing that need the models: a
// multi-container model (either variant's, Serial or Direct) and a
// multi-model container.
func TestShadowPlanRefusesModels(t *testing.T) {
	twoContainers := directModel()
	twoContainers.ModelName = "challenger"
	twoContainers.InferenceExecutionConfig = nil // Serial
	direct := CreateModelInput{ModelName: "challenger", Containers: []ContainerDefinition{{ContainerHostname: "only", Image: "img"}},
		InferenceExecutionConfig: &InferenceExecutionConfig{Mode: ModeDirect}}
	mme := singleModel("ab-model", "img")
	mme.PrimaryContainer.Mode, mme.PrimaryContainer.ModelDataURL = ModeMultiModel, "s3://b/models/"
	tests := []struct {
		name   string
		models []CreateModelInput
		want   string
	}{
		{"multi-container shadow", []CreateModelInput{singleModel("ab-model", "img"), twoContainers},
			`SageMaker does not run shadow variants on multiple-container endpoints; model "challenger" of variant "Shadow" has 2 containers.`},
		{"direct shadow", []CreateModelInput{singleModel("ab-model", "img"), direct},
			`SageMaker does not run shadow variants on multiple-container endpoints; model "challenger" of variant "Shadow" has InferenceExecutionConfig Mode Direct.`},
		{"multi-model production", []CreateModelInput{mme, singleModel("challenger", "img")},
			`SageMaker does not run shadow variants on multi-model endpoints; model "ab-model" of variant "AllTraffic" has a MultiModel container.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			models := map[string]CreateModelInput{}
			for _, m := range tt.models {
				models[m.ModelName] = m
			}
			_, _, err := BuildPlan(testRegion, testAccount, CreateEndpointInput{EndpointName: "ep", EndpointConfigName: "ab-config"},
				shadowConfig(), MapLookup(models, "/"))
			if got := validationMessage(t, err); got != tt.want {
				t.Errorf("BuildPlan()\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}
}
