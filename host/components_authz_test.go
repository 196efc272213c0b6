package host

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// TestInferenceComponentAuthorization: the component operations are
// authorized on the component's ARN (a resource-scoped Deny holds) with
// the tag condition keys of the request and of the component.
func TestInferenceComponentAuthorization(t *testing.T) {
	a := devAuthz(t,
		`{Sid: NotSecret, Effect: Deny, Action: "sagemaker:*", Resource: "arn:aws:sagemaker:*:*:inference-component/secret-*"}`,
		`{Sid: NotTheirs, Effect: Deny, Action: "sagemaker:*", Resource: "arn:aws:sagemaker:*:*:endpoint/theirs"}`,
		`{Sid: NotProd, Effect: Deny, Action: "sagemaker:*", Resource: "*", Condition: {StringEquals: {"aws:ResourceTag/env": prod}}}`,
		`{Sid: NoProdTag, Effect: Deny, Action: "sagemaker:*", Resource: "*", Condition: {StringEquals: {"aws:RequestTag/env": prod}}}`)
	h, _ := newICHarnessWith(t, nil, Config{Authz: a})
	admin, dev := h.smAs("AKIAADMIN0000EXAMPLE", "admin-secret"), h.smAs("AKIADEV00000EXAMPLE", "dev-secret")
	createICEndpoint(t, admin, "guarded", "local", 1)
	ctx := context.Background()
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-g")},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}}
	create := func(c *sagemaker.Client, name string, tags ...smtypes.Tag) error {
		_, err := c.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String(name),
			EndpointName: aws.String("guarded"), VariantName: aws.String("AllTraffic"), Specification: sp,
			RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(1)}, Tags: tags})
		return err
	}
	prod := smtypes.Tag{Key: aws.String("env"), Value: aws.String("prod")}
	// A component on an endpoint the caller may not touch.
	createICEndpoint(t, admin, "theirs", "local", 1)
	_, err := dev.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String("squatter"),
		EndpointName: aws.String("theirs"), VariantName: aws.String("AllTraffic"), Specification: sp,
		RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(1)}})
	if !isAccessDenied(err) {
		t.Errorf("dev placed a component on an endpoint denied to it: %v", err)
	}
	if err := create(dev, "secret-model"); !isAccessDenied(err) {
		t.Errorf("dev created secret-model under a resource-scoped Deny: %v", err)
	}
	if err := create(dev, "tagged", prod); !isAccessDenied(err) {
		t.Errorf("dev created a component tagged env=prod: %v", err)
	}
	if err := create(admin, "prod-model", prod); err != nil {
		t.Fatal(err)
	}
	if err := create(dev, "dev-model"); err != nil {
		t.Fatal(err)
	}
	waitIC(t, admin, "prod-model")
	waitIC(t, admin, "dev-model")
	_, err = dev.DescribeInferenceComponent(ctx, &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String("prod-model")})
	if !isAccessDenied(err) {
		t.Errorf("dev described prod-model (env=prod): %v", err)
	}
	_, err = dev.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String("prod-model"),
		DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(0)}})
	if !isAccessDenied(err) {
		t.Errorf("dev scaled prod-model (env=prod): %v", err)
	}
	_, err = dev.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String("prod-model")})
	if !isAccessDenied(err) {
		t.Errorf("dev deleted prod-model (env=prod): %v", err)
	}
	if _, err := dev.DescribeInferenceComponent(ctx, &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String("dev-model")}); err != nil {
		t.Errorf("dev may describe dev-model: %v", err)
	}
	if _, err := dev.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String("dev-model")}); err != nil {
		t.Errorf("dev may delete dev-model: %v", err)
	}
}
