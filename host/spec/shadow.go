package spec

import (
	"slices"
	"strconv"
	"strings"
)

// Shadow variants (CreateEndpointConfig's ShadowProductionVariants,
// https://docs.aws.amazon.com/sagemaker/latest/dg/model-shadow-deployment.html):
// variants that receive a sampled copy of the production variant's requests
// and whose answers are never returned. SageMaker's rules, and where they
// are written:
//
//   - "If you use this field, you can only specify one variant for
//     ProductionVariants and one variant for ShadowProductionVariants"
//     (the API reference of CreateEndpointConfig's ShadowProductionVariants;
//     the developer guide's shadow tests: "a maximum of one shadow variant
//     per endpoint … a maximum of one production variant").
//   - The features that make an endpoint incompatible with shadow testing,
//     refused with a validation error (the developer guide's "Exclusions"
//     page of shadow tests): serverless inference, asynchronous inference,
//     Marketplace containers, multiple-container endpoints, multi-model
//     endpoints, Inf1 (Inferentia) instances, Elastic Inference.
//   - Variant names are unique within the configuration, shadow ones
//     included (they name the variant in DescribeEndpoint and in metrics).
//
// What mce adds: a shadow variant needs a ModelName (a variant for
// inference components has no containers to mirror to).

// configVariant is a variant of an endpoint configuration and whether it is
// a shadow variant.
type configVariant struct {
	ProductionVariant
	shadow bool
}

// variants lists the configuration's production variants, then its shadow
// variants.
func (c *CreateEndpointConfigInput) variants() []configVariant {
	out := make([]configVariant, 0, len(c.ProductionVariants)+len(c.ShadowProductionVariants))
	for _, v := range c.ProductionVariants {
		out = append(out, configVariant{ProductionVariant: v})
	}
	for _, v := range c.ShadowProductionVariants {
		out = append(out, configVariant{ProductionVariant: v, shadow: true})
	}
	return out
}

// AllVariants returns the production variants followed by the shadow
// variants (a new slice; the variants are shared).
func (c *CreateEndpointConfigInput) AllVariants() []ProductionVariant {
	return append(slices.Clip(c.ProductionVariants), c.ShadowProductionVariants...)
}

// checkShadowVariants applies SageMaker's rules for shadow variants that
// can be checked without the models (CheckShadowModel checks those).
func checkShadowVariants(s *semantic, c *CreateEndpointConfigInput) {
	if len(c.ShadowProductionVariants) == 0 {
		return
	}
	if len(c.ProductionVariants) != 1 || len(c.ShadowProductionVariants) != 1 {
		s.add("If you use ShadowProductionVariants, you can only specify one variant for ProductionVariants and one variant for ShadowProductionVariants; this endpoint configuration has " +
			strconv.Itoa(len(c.ProductionVariants)) + " and " + strconv.Itoa(len(c.ShadowProductionVariants)) + ".")
	}
	if c.AsyncInferenceConfig != nil {
		s.add("ShadowProductionVariants cannot be used with AsyncInferenceConfig: SageMaker does not run shadow variants on asynchronous inference endpoints.")
	}
	for _, v := range c.variants() {
		name := strconv.Quote(v.VariantName)
		switch {
		case v.shadow && v.ComponentVariant():
			s.add("Shadow variant " + name + " needs a ModelName: mce mirrors requests to a model's container, and inference components cannot be shadow variants.")
		case !v.shadow && v.ComponentVariant():
			s.add("An endpoint for inference components (production variant " + name + " names no ModelName) cannot have ShadowProductionVariants.")
		}
		if strings.HasPrefix(v.InstanceType, "ml.inf1.") {
			s.add("SageMaker does not run shadow variants on endpoints that use Inf1 (Inferentia-based) instances; variant " + name + " is " + v.InstanceType + ".")
		}
		if v.AcceleratorType != "" {
			s.add("SageMaker does not run shadow variants on Amazon Elastic Inference endpoints; variant " + name + " has AcceleratorType " + v.AcceleratorType + ".")
		}
	}
}

// CheckShadowModel refuses a model that cannot take part in an endpoint
// with shadow variants (SageMaker's exclusions of shadow testing): a model
// of several containers (a multi-container endpoint, Serial or Direct),
// one whose InferenceExecutionConfig is Direct, or a multi-model
// container. variant names the variant that uses the model. The model
// must be valid. The error is a *ValidationError.
func CheckShadowModel(variant string, m CreateModelInput) error {
	defs, _ := m.containers()
	name := strconv.Quote(variant)
	var msgs []string
	if len(defs) > 1 {
		msgs = append(msgs, "SageMaker does not run shadow variants on multiple-container endpoints; model "+strconv.Quote(m.ModelName)+
			" of variant "+name+" has "+strconv.Itoa(len(defs))+" containers.")
	} else if m.ExecutionMode() == ModeDirect {
		msgs = append(msgs, "SageMaker does not run shadow variants on multiple-container endpoints; model "+strconv.Quote(m.ModelName)+
			" of variant "+name+" has InferenceExecutionConfig Mode Direct.")
	}
	for _, d := range defs {
		if d.Mode == ModeMultiModel {
			msgs = append(msgs, "SageMaker does not run shadow variants on multi-model endpoints; model "+strconv.Quote(m.ModelName)+
				" of variant "+name+" has a MultiModel container.")
			break
		}
	}
	if len(msgs) > 0 {
		return &ValidationError{Messages: msgs}
	}
	return nil
}

// HasShadows reports whether the configuration has shadow variants.
func (c *CreateEndpointConfigInput) HasShadows() bool { return len(c.ShadowProductionVariants) > 0 }
