package host

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// TestSecondChecksCarryResourceTags: a call that names an existing resource
// besides its own is authorized on that resource too, with that resource's
// tags as aws:ResourceTag. A principal denied everything on env=prod
// resources used to place a component on the env=prod endpoint (the
// authorizer gave no resource tags to any Create* action, the check on the
// existing endpoint included) and could create or update an endpoint from
// an env=prod endpoint configuration (which was not authorized at all).
func TestSecondChecksCarryResourceTags(t *testing.T) {
	a := devAuthz(t,
		`{Sid: NotProd, Effect: Deny, Action: "sagemaker:*", Resource: "*", Condition: {StringEquals: {"aws:ResourceTag/env": prod}}}`)
	h, _ := newICHarnessWith(t, nil, Config{Authz: a})
	admin, dev := h.smAs("AKIAADMIN0000EXAMPLE", "admin-secret"), h.smAs("AKIADEV00000EXAMPLE", "dev-secret")
	ctx := context.Background()
	prod := []smtypes.Tag{{Key: aws.String("env"), Value: aws.String("prod")}}
	arn := func(kind, name string) *string {
		return aws.String("arn:aws:sagemaker:us-east-1:123456789012:" + kind + "/" + name)
	}

	// A component on the env=prod endpoint.
	createICEndpoint(t, admin, "prod-ep", "local", 1)
	createICEndpoint(t, admin, "dev-ep", "local", 1)
	if _, err := admin.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: arn("endpoint", "prod-ep"), Tags: prod}); err != nil {
		t.Fatal(err)
	}
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-g")},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}}
	if err := createIC(ctx, dev, "squatter", "prod-ep", sp, 1); !isAccessDenied(err) {
		t.Errorf("dev placed a component on the env=prod endpoint: %v", err)
	}
	if c := h.srv.ics.Get("squatter"); c != nil {
		t.Errorf("the refused component exists: %+v", c.Record())
	}
	if err := createIC(ctx, dev, "mine", "dev-ep", sp, 1); err != nil {
		t.Errorf("dev placing a component on dev-ep: %v", err)
	}

	// An endpoint made from, or moved to, an env=prod configuration.
	if _, err := admin.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("m"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A")}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		tags []smtypes.Tag
	}{{"prod-config", prod}, {"dev-config", nil}} {
		if _, err := admin.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(c.name),
			ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("m"),
				InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}}, Tags: c.tags}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := dev.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("from-prod"), EndpointConfigName: aws.String("prod-config")})
	if !isAccessDenied(err) {
		t.Errorf("dev created an endpoint from the env=prod configuration: %v", err)
	}
	if h.srv.reg.get("from-prod") != nil {
		t.Error("the refused endpoint exists")
	}
	if _, err := dev.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("plain"), EndpointConfigName: aws.String("dev-config")}); err != nil {
		t.Fatalf("dev creating an endpoint from dev-config: %v", err)
	}
	if err := h.srv.WaitEndpoint(ctx, "plain"); err != nil {
		t.Fatal(err)
	}
	_, err = dev.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("plain"), EndpointConfigName: aws.String("prod-config")})
	if !isAccessDenied(err) {
		t.Errorf("dev moved an endpoint to the env=prod configuration: %v", err)
	}
	if got := h.srv.reg.get("plain").record().ConfigName; got != "dev-config" {
		t.Errorf("plain's configuration is %s after the refused update", got)
	}
}

// TestDeleteEndpointAuthorizesItsComponents: DeleteEndpoint deletes the
// endpoint's inference components, so it needs
// sagemaker:DeleteInferenceComponent on each (its ARN, its tags); when one
// is denied the whole call is refused, naming it, and nothing is deleted.
// It used to delete components whose deletion a Deny held.
func TestDeleteEndpointAuthorizesItsComponents(t *testing.T) {
	a := devAuthz(t,
		`{Sid: KeepByName, Effect: Deny, Action: "sagemaker:DeleteInferenceComponent", Resource: "arn:aws:sagemaker:*:*:inference-component/keep-*"}`,
		`{Sid: KeepByTag, Effect: Deny, Action: "sagemaker:DeleteInferenceComponent", Resource: "*", Condition: {StringEquals: {"aws:ResourceTag/owner": admin}}}`)
	h, _ := newICHarnessWith(t, nil, Config{Authz: a})
	admin, dev := h.smAs("AKIAADMIN0000EXAMPLE", "admin-secret"), h.smAs("AKIADEV00000EXAMPLE", "dev-secret")
	ctx := context.Background()
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-d")},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}}
	for _, ep := range []string{"by-name", "by-tag", "mine"} {
		createICEndpoint(t, admin, ep, "local", 1)
	}
	for _, c := range []struct {
		client         *sagemaker.Client
		name, endpoint string
		tags           []smtypes.Tag
	}{
		{admin, "free-1", "by-name", nil}, {admin, "keep-me", "by-name", nil},
		{admin, "owned", "by-tag", []smtypes.Tag{{Key: aws.String("owner"), Value: aws.String("admin")}}},
		{dev, "dev-1", "mine", nil}, {dev, "dev-2", "mine", nil},
	} {
		if _, err := c.client.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String(c.name),
			EndpointName: aws.String(c.endpoint), VariantName: aws.String("AllTraffic"), Specification: sp,
			RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(1)}, Tags: c.tags}); err != nil {
			t.Fatal(err)
		}
		waitIC(t, admin, c.name)
	}
	for ep, kept := range map[string]string{"by-name": "keep-me", "by-tag": "owned"} {
		_, err := dev.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String(ep)})
		if !isAccessDenied(err) {
			t.Fatalf("dev deleted %s and its component %s, whose deletion a Deny holds: %v", ep, kept, err)
		}
		if !strings.Contains(err.Error(), "sagemaker:DeleteInferenceComponent on resource: arn:aws:sagemaker:us-east-1:123456789012:inference-component/"+kept) {
			t.Errorf("the refusal does not name %s: %v", kept, err)
		}
		e := h.srv.reg.get(ep)
		if e == nil || e.deleting.Load() {
			t.Fatalf("endpoint %s is being deleted after the refusal", ep)
		}
	}
	for _, ic := range []string{"free-1", "keep-me", "owned"} {
		if d := waitIC(t, admin, ic); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
			t.Errorf("%s is %s after the refused DeleteEndpoint", ic, d.InferenceComponentStatus)
		}
	}
	// What the caller may delete goes, components and all.
	if _, err := dev.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("mine")}); err != nil {
		t.Fatalf("dev deleting its own endpoint: %v", err)
	}
	if _, err := admin.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String("keep-me")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for h.srv.ics.Get("keep-me") != nil || h.srv.reg.get("mine") != nil {
		if time.Now().After(deadline) {
			t.Fatal("keep-me or endpoint mine still there")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := dev.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("by-name")}); err != nil {
		t.Fatalf("dev deleting by-name once keep-me is gone: %v", err)
	}
}
