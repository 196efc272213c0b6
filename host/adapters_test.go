package host

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// TestAdapterRefusedWithoutAdapterFolders: an engine without adapter
// folders (the Kubernetes engine, this fake) gives its copies none, so an
// adapter is refused at once, saying why; the base is untouched.
func TestAdapterRefusedWithoutAdapterFolders(t *testing.T) {
	h, _ := newICHarness(t, nil)
	sm := h.sm()
	ctx := context.Background()
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("model-a"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("-a")}}); err != nil {
		t.Fatal(err)
	}
	createICEndpoint(t, sm, "shared", "ml.m5.xlarge", 1)
	if err := createIC(ctx, sm, "base", "shared", icSpec("model-a", 1, 256, 0), 1); err != nil {
		t.Fatal(err)
	}
	if d := waitIC(t, sm, "base"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("base: %s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	if c := h.srv.ics.Get("base").Record().Template.Containers[0]; c.Adapters {
		t.Fatal("a copy was given an adapter folder by an engine that has none")
	}
	_, err := sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String("a1"),
		EndpointName: aws.String("shared"), Specification: &smtypes.InferenceComponentSpecification{BaseInferenceComponentName: aws.String("base"),
			Container: &smtypes.InferenceComponentContainerSpecification{ArtifactUrl: aws.String("s3://bucket/a1.tar.gz")}}})
	wantMessage(t, err, "ValidationException", "Adapter inference components need mce's Docker engine, which gives the base's copies a folder of adapters; this engine has none.")
	if got, err := h.invokeIC("shared", "base"); err != nil || got != "x-a" {
		t.Fatalf("base after the refusal: %q, %v", got, err)
	}
}
