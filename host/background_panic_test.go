package host

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/internal/testenv"
)

// panickyBackend panics launching an image named "-boom".
type panickyBackend struct{ *capBackend }

func (b panickyBackend) Launch(ctx context.Context, p containers.EndpointPlan, gen int) (containers.Launched, error) {
	for _, v := range p.Variants {
		for _, c := range v.Containers {
			if c.Image == "-boom" {
				var m map[string]int
				m["boom"]++ // a nil map: the kind of bug that must not take mce down
			}
		}
	}
	return b.capBackend.Launch(ctx, p, gen)
}

// TestBackgroundPanicsAreContained: a panic while launching a component's
// copy or an endpoint leaves that component or endpoint Failed, logged
// with its stack at error level; mce and everything else keep serving.
func TestBackgroundPanicsAreContained(t *testing.T) {
	logs := &testenv.SyncBuffer{}
	h := newICHarnessOn(t, nil, Config{}, panickyBackend{&capBackend{fakeBackend: &fakeBackend{t: t}}}, logs)
	sm := h.sm()
	ctx := context.Background()
	createICEndpoint(t, sm, "pool", "ml.m5.xlarge", 1)
	if err := createIC(ctx, sm, "fine", "pool", copySpec("-fine"), 1); err != nil {
		t.Fatal(err)
	}
	if err := createIC(ctx, sm, "bad", "pool", copySpec("-boom"), 2); err != nil {
		t.Fatal(err)
	}
	d := waitIC(t, sm, "bad")
	if d.InferenceComponentStatus != smtypes.InferenceComponentStatusFailed ||
		aws.ToString(d.FailureReason) != "0 of 2 copies of the inference component are running. Copies failed to start: mce met an internal error while launching a copy (its log has the details)\nmce met an internal error while launching a copy (its log has the details)" {
		t.Fatalf("bad: %s %q", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	if n := len(h.srv.ics.Get("bad").Record().Copies); n != 0 {
		t.Errorf("bad keeps %d copy records", n)
	}
	if d := waitIC(t, sm, "fine"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("fine: %s", d.InferenceComponentStatus)
	}
	// An endpoint whose launch panics.
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("boom"), PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("-boom")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("boom"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("boom"),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("boom"), EndpointConfigName: aws.String("boom")}); err != nil {
		t.Fatal(err)
	}
	err := h.srv.WaitEndpoint(ctx, "boom")
	if err == nil || !strings.Contains(err.Error(), "mce met an internal error while changing this endpoint (its log has the details)") {
		t.Fatalf("boom endpoint: %v", err)
	}
	if got, err := h.invokeIC("pool", "fine"); err != nil || got != "x-fine" {
		t.Fatalf("invoke fine = %q, %v", got, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !(strings.Count(logs.String(), `"level":"error"`) >= 3 && strings.Contains(logs.String(), "assignment to entry in nil map") &&
		strings.Contains(logs.String(), "panickyBackend")) {
		if time.Now().After(deadline) {
			t.Fatalf("the panics were not logged with their stacks at error level:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
