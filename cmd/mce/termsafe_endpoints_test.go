package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/internal/testenv/hostenv"
)

// failingEngine fails every launch naming the image it could not run, as
// an engine does when an image cannot be pulled.
type failingEngine struct{}

func (failingEngine) Launch(_ context.Context, p containers.EndpointPlan, _ int) (containers.Launched, error) {
	return nil, errors.New("image " + p.Variants[0].Containers[0].Image + " not found")
}
func (failingEngine) Adopt(context.Context, containers.EndpointPlan, int) (containers.Launched, error) {
	return nil, errors.New("nothing to adopt")
}
func (failingEngine) Reconcile(context.Context) error { return nil }

// TestEndpointsEscapesServerText: an image name carrying terminal escapes
// (a colour change, a bell) reaches mce endpoints' table in the failure
// reason, and is printed escaped, not raw (issue 18).
func TestEndpointsEscapesServerText(t *testing.T) {
	h := hostenv.New(t, hostenv.Options{Backend: failingEngine{}})
	srv, hs := h.Server, h.HTTP
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sm := h.SageMakerClient()
	const image = "evil\x1b[31m:red\a"
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("m"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String(image)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("c"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("m"),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlC5Large}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("ep"), EndpointConfigName: aws.String("c")}); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitEndpoint(ctx, "ep"); err == nil {
		t.Fatal("the endpoint came up; want it Failed")
	}

	out, err := runCLI(ctx, "endpoints", "--endpoint-url", hs.URL)
	if err != nil {
		t.Fatalf("mce endpoints: %v\n%s", err, out)
	}
	if strings.ContainsAny(out, "\x1b\a") {
		t.Errorf("mce endpoints printed raw control characters:\n%q", out)
	}
	if !strings.Contains(out, `evil\x1b[31m:red\x07`) {
		t.Errorf("mce endpoints does not show the image name escaped:\n%s", out)
	}
}
