package host_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/host"
	"github.com/mce-run/mce/internal/testenv"
	"github.com/mce-run/mce/internal/testenv/hostenv"
)

// TestDockerAdapterDiskBudget: adapters hold --artifact-disk-budget as
// model data does, and a Failed adapter holds nothing (issue 26: with
// 64 MiB, twelve adapters of 10 MB were staged while an 80 MB model was
// refused, and failed adapters kept their files). With a budget of 64 KiB
// and adapters of 20 KiB, the fourth fails naming the flag; an adapter the
// base's container refuses fails and its staged files are deleted;
// deleting an adapter gives its room back, so the refused one, updated,
// goes InService.
func TestDockerAdapterDiskBudget(t *testing.T) {
	testenv.Docker(t)
	image := testenv.OwnImage(t, "modelserver") // this checkout's: its adapter API
	hh := hostenv.New(t, hostenv.Options{
		Runtime: func(o *docker.Options) { o.Adopt, o.ArtifactDiskBudget = true, 64<<10 },
		Host:    func(c *host.Config) { c.ContainerTimeout = 10 * time.Second }})
	if err := hh.Server.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := &icHost{Host: hh, sm: hh.SageMakerClient(), run: hh.RuntimeClient()}
	ctx := context.Background()
	const ep = "lora-budget"

	dir := t.TempDir() // under the host's model roots (the temporary folder)
	model, _ := json.Marshal(map[string]any{
		"inputs":  []any{map[string]any{"name": "INPUT0", "datatype": "FP64", "shape": []int{-1, 2}}},
		"outputs": []any{map[string]any{"name": "OUTPUT0", "datatype": "FP64", "shape": []int{-1, 2}}},
		"layers": []any{map[string]any{"weights": lW0, "bias": lB0, "activation": "relu"},
			map[string]any{"weights": lW1, "bias": lB1}}})
	os.MkdirAll(filepath.Join(dir, "base"), 0o755)
	os.WriteFile(filepath.Join(dir, "base", "model.json"), model, 0o644)
	good, _ := json.Marshal(&lora{Format: "mce-lora/1", Rank: 1, Alpha: 2, Layers: []loraLayer{
		{Layer: 0, A: [][]float64{{1, 0.5}}, B: [][]float64{{0.2}, {-0.4}, {0.6}}}}})
	os.MkdirAll(filepath.Join(dir, "big"), 0o755) // 20 KiB with its padding
	os.WriteFile(filepath.Join(dir, "big", "adapter.json"), good, 0o644)
	os.WriteFile(filepath.Join(dir, "big", "padding"), []byte(strings.Repeat("p", 20<<10)), 0o644)
	os.MkdirAll(filepath.Join(dir, "bad"), 0o755) // staged, then refused by the container
	os.WriteFile(filepath.Join(dir, "bad", "adapter.json"), []byte(`{"format":"not-a-lora"}`), 0o644)

	if _, err := h.sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(ep + "-config"),
		ExecutionRoleArn: aws.String("arn:aws:iam::123456789012:role/mce"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), InitialInstanceCount: aws.Int32(1),
			InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Xlarge}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String(ep), EndpointConfigName: aws.String(ep + "-config")}); err != nil {
		t.Fatal(err)
	}
	if err := h.Server.WaitEndpoint(ctx, ep); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String("llm"),
		EndpointName: aws.String(ep), VariantName: aws.String("AllTraffic"),
		Specification: &smtypes.InferenceComponentSpecification{
			Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String(image), ArtifactUrl: aws.String("file://" + filepath.Join(dir, "base"))},
			ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{NumberOfCpuCoresRequired: aws.Float32(0.25),
				MinMemoryRequiredInMb: aws.Int32(128)}},
		RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(1)}}); err != nil {
		t.Fatal(err)
	}
	if d := h.wait(t, "llm"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("llm: %s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	adapterSpec := func(folder string) *smtypes.InferenceComponentSpecification {
		return &smtypes.InferenceComponentSpecification{BaseInferenceComponentName: aws.String("llm"),
			Container: &smtypes.InferenceComponentContainerSpecification{ArtifactUrl: aws.String("file://" + filepath.Join(dir, folder))}}
	}
	create := func(name, folder string) *sagemaker.DescribeInferenceComponentOutput {
		t.Helper()
		if _, err := h.sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String(name),
			EndpointName: aws.String(ep), Specification: adapterSpec(folder)}); err != nil {
			t.Fatal(err)
		}
		return h.wait(t, name)
	}
	staged := func(name string) bool {
		_, err := os.Stat(filepath.Join(h.StateDir, "instances", h.Instance, "adapters", ep, "llm", name))
		return err == nil
	}

	// Refused by the container: Failed, and nothing of it left on disk.
	if d := create("bad", "bad"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusFailed ||
		!strings.Contains(aws.ToString(d.FailureReason), "could not be registered") {
		t.Fatalf("bad: %s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	if staged("bad") {
		t.Error("the Failed adapter's staged files are still on disk")
	}

	for _, name := range []string{"a0", "a1", "a2"} { // 60 KiB of 64
		if d := create(name, "big"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
			t.Fatalf("%s: %s %s", name, d.InferenceComponentStatus, aws.ToString(d.FailureReason))
		}
	}
	d := create("a3", "big")
	if d.InferenceComponentStatus != smtypes.InferenceComponentStatusFailed ||
		!strings.Contains(aws.ToString(d.FailureReason), artifact.DiskBudgetFlag) {
		t.Fatalf("a3 (80 KiB of 64): %s %q, want Failed naming %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason), artifact.DiskBudgetFlag)
	}
	if staged("a3") {
		t.Error("the adapter refused for the disk budget left its files")
	}

	if _, err := h.sm.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String("a0")}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, h, "a0")
	if _, err := h.sm.UpdateInferenceComponent(ctx, &sagemaker.UpdateInferenceComponentInput{InferenceComponentName: aws.String("a3"),
		Specification: adapterSpec("big")}); err != nil {
		t.Fatal(err)
	}
	if d := h.wait(t, "a3"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("a3 in the room a0 gave back: %s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	for _, name := range []string{"bad", "a1", "a2", "a3"} {
		if _, err := h.sm.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String(name)}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, h, name)
	}
}
