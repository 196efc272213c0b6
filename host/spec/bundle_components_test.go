package spec

import (
	"path/filepath"
	"strings"
	"testing"
)

const icEndpointFile = `
EndpointConfigs:
  - EndpointConfigName: ic-config
    ExecutionRoleArn: arn:aws:iam::123456789012:role/mce
    ProductionVariants:
      - VariantName: AllTraffic
        InstanceType: local
        InitialInstanceCount: 1
Endpoints:
  - EndpointName: ic-ep
    EndpointConfigName: ic-config
`

const icComponentsFile = `
InferenceComponents:
  - InferenceComponentName: first
    EndpointName: ic-ep
    VariantName: AllTraffic
    Specification:
      Container:
        Image: example/serve:1
        ArtifactUrl: file://artifacts/model.tar.gz
      ComputeResourceRequirements:
        NumberOfCpuCoresRequired: 1
        MinMemoryRequiredInMb: 256
    RuntimeConfig:
      CopyCount: 2
    Tags:
      - Key: team
        Value: ml
  - InferenceComponentName: second
    EndpointName: elsewhere
    VariantName: AllTraffic
    Specification:
      ModelName: some-model
      ComputeResourceRequirements:
        MinMemoryRequiredInMb: 128
    RuntimeConfig:
      CopyCount: 1
`

func TestLoadFilesInferenceComponents(t *testing.T) {
	paths := writeFiles(t, [][2]string{{"e.yaml", icEndpointFile}, {"c.yaml", icComponentsFile}})
	b, err := LoadFiles(paths...)
	if err != nil {
		t.Fatalf("LoadFiles: %v", err)
	}
	if len(b.InferenceComponents) != 2 {
		t.Fatalf("InferenceComponents = %+v, want 2", b.InferenceComponents)
	}
	ic := b.InferenceComponents[0]
	if ic.File != paths[1] || ic.Path != "InferenceComponents[0]" || ic.Dir != filepath.Dir(paths[1]) {
		t.Errorf("source = %+v, want %s InferenceComponents[0] in %s", ic.Source, paths[1], filepath.Dir(paths[1]))
	}
	if ic.Specification.Container.ArtifactURL != "file://artifacts/model.tar.gz" || *ic.RuntimeConfig.CopyCount != 2 ||
		len(ic.Tags) != 1 || ic.Tags[0].Key != "team" {
		t.Errorf("component = %+v", ic.CreateInferenceComponentInput)
	}
	// The second names an endpoint not in the files: it may exist, so only
	// Apply can refuse it.
	if _, _, err := b.Plans(testRegion, testAccount); err != nil {
		t.Fatalf("Plans: %v", err)
	}
}

func TestLoadFilesOnlyComponents(t *testing.T) {
	paths := writeFiles(t, [][2]string{{"c.yaml", icComponentsFile}})
	if _, err := LoadFiles(paths...); err != nil {
		t.Fatalf("a file of components only: %v", err)
	}
}

func TestInferenceComponentFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"invalid", icEndpointFile + `
InferenceComponents:
  - InferenceComponentName: bad_name
    EndpointName: ic-ep
    VariantName: AllTraffic
    Specification:
      Container: {Image: example/serve:1}
      ComputeResourceRequirements: {MinMemoryRequiredInMb: 256}
    RuntimeConfig: {CopyCount: 1}
  - InferenceComponentName: zero
    EndpointName: ic-ep
    VariantName: AllTraffic
    Specification:
      Container: {Image: example/serve:1}
      ComputeResourceRequirements: {MinMemoryRequiredInMb: 256}
    RuntimeConfig: {CopyCount: 0}
`, []string{"f.yaml: InferenceComponents[0]: ", "inferenceComponentName", "f.yaml: InferenceComponents[1]: ", "copy count must be an integer larger than 0"}},
		{"unknown key", icEndpointFile + `
InferenceComponents:
  - InferenceComponentName: one
    Endpoint: ic-ep
`, []string{"f.yaml", "InferenceComponents[0]", "Endpoint"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paths := writeFiles(t, [][2]string{{"f.yaml", tc.file}})
			_, err := LoadFiles(paths...)
			if err == nil {
				t.Fatal("LoadFiles: no error")
			}
			msg := strings.ReplaceAll(err.Error(), filepath.Dir(paths[0])+"/", "")
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestInferenceComponentPlanErrors(t *testing.T) {
	modelEndpoint := `
Models:
  - ModelName: m
    PrimaryContainer: {Image: example/serve:1}
EndpointConfigs:
  - EndpointConfigName: model-config
    ProductionVariants:
      - {VariantName: AllTraffic, ModelName: m, InstanceType: local, InitialInstanceCount: 1}
Endpoints:
  - {EndpointName: model-ep, EndpointConfigName: model-config}
`
	comp := func(name, endpoint, variant string) string {
		return `
  - InferenceComponentName: ` + name + `
    EndpointName: ` + endpoint + `
    VariantName: ` + variant + `
    Specification:
      Container: {Image: example/serve:1}
      ComputeResourceRequirements: {MinMemoryRequiredInMb: 256}
    RuntimeConfig: {CopyCount: 1}`
	}
	paths := writeFiles(t, [][2]string{
		{"e.yaml", icEndpointFile},
		{"m.yaml", modelEndpoint},
		{"f.yaml", "InferenceComponents:" + comp("one", "ic-ep", "AllTraffic") + comp("on-models", "model-ep", "AllTraffic") +
			comp("no-variant", "ic-ep", "Other") + comp("ONE", "ic-ep", "AllTraffic") + "\n"},
	})
	b, err := LoadFiles(paths...)
	if err != nil {
		t.Fatalf("LoadFiles: %v", err)
	}
	_, _, err = b.Plans(testRegion, testAccount)
	if err == nil {
		t.Fatal("Plans: no error")
	}
	msg := strings.ReplaceAll(err.Error(), filepath.Dir(paths[0])+"/", "")
	for _, w := range []string{
		`f.yaml: InferenceComponents[1]: Inference Components are not supported in endpoint "model-ep"`,
		`f.yaml: InferenceComponents[2]: The variant name Other is not present in endpoint "ic-ep"`,
		`f.yaml: InferenceComponents[3]: Cannot create already existing inference component`, "inference-component/one",
	} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not contain %q", msg, w)
		}
	}
	if strings.Contains(msg, "InferenceComponents[0]") {
		t.Errorf("error %q names the valid component", msg)
	}
}
