package spec

import (
	"strings"
	"testing"
)

// TestAdapterSpecification holds the rules of adapter inference
// components: an ArtifactUrl, and nothing that runs a container or takes
// resources of its own.
func TestAdapterSpecification(t *testing.T) {
	one := int32(1)
	mem := int32(128)
	adapter := func(mod func(*CreateInferenceComponentInput)) *CreateInferenceComponentInput {
		in := &CreateInferenceComponentInput{InferenceComponentName: "a1", EndpointName: "ep",
			Specification: &InferenceComponentSpecification{BaseInferenceComponentName: "base",
				Container: &InferenceComponentContainer{ArtifactURL: "s3://bucket/adapters/a1.tar.gz"}}}
		if mod != nil {
			mod(in)
		}
		return in
	}
	if err := adapter(nil).Validate(); err != nil {
		t.Fatalf("an adapter without VariantName and RuntimeConfig: %v", err)
	}
	for name, c := range map[string]struct {
		mod  func(*CreateInferenceComponentInput)
		want string
	}{
		"no artifact": {func(in *CreateInferenceComponentInput) { in.Specification.Container = nil }, "needs Container.ArtifactUrl"},
		"empty url":   {func(in *CreateInferenceComponentInput) { in.Specification.Container.ArtifactURL = "" }, "needs Container.ArtifactUrl"},
		"image":       {func(in *CreateInferenceComponentInput) { in.Specification.Container.Image = "example/serve:1" }, "omit Container.Image"},
		"environment": {func(in *CreateInferenceComponentInput) {
			in.Specification.Container.Environment = map[string]string{"A": "b"}
		}, "omit Container.Environment"},
		"model": {func(in *CreateInferenceComponentInput) { in.Specification.ModelName = "m" }, "omit ModelName"},
		"resources": {func(in *CreateInferenceComponentInput) {
			in.Specification.ComputeResourceRequirements = &InferenceComponentComputeRequirements{MinMemoryRequiredInMb: &mem}
		}, "omit ComputeResourceRequirements"},
		"startup": {func(in *CreateInferenceComponentInput) {
			in.Specification.StartupParameters = &InferenceComponentStartupParameters{}
		}, "omit StartupParameters"},
		"copies": {func(in *CreateInferenceComponentInput) {
			in.RuntimeConfig = &InferenceComponentRuntimeConfig{CopyCount: &one}
		}, "Omit RuntimeConfig"},
		"bad base name": {func(in *CreateInferenceComponentInput) {
			in.Specification.BaseInferenceComponentName = "no_underscores"
		}, "baseInferenceComponentName"},
		"bad url": {func(in *CreateInferenceComponentInput) { in.Specification.Container.ArtifactURL = "ftp://x/y" }, "artifactUrl"},
	} {
		err := adapter(c.mod).Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
	sp := adapter(nil).Specification
	if !sp.IsAdapter() || (&InferenceComponentSpecification{ModelName: "m"}).IsAdapter() {
		t.Error("IsAdapter")
	}
	if err := ValidateSpecification(sp); err != nil {
		t.Errorf("an adapter's Specification for UpdateInferenceComponent: %v", err)
	}
}

// TestLoadFilesAdapter: an adapter in endpoint files needs no VariantName
// (its base's).
func TestLoadFilesAdapter(t *testing.T) {
	paths := writeFiles(t, [][2]string{{"e.yaml", icEndpointFile}, {"c.yaml", `
InferenceComponents:
  - InferenceComponentName: base
    EndpointName: ic-ep
    VariantName: AllTraffic
    Specification:
      Container: {Image: "example/serve:1", ArtifactUrl: "file://artifacts/model.tar.gz"}
      ComputeResourceRequirements: {MinMemoryRequiredInMb: 256}
    RuntimeConfig: {CopyCount: 1}
  - InferenceComponentName: a1
    EndpointName: ic-ep
    Specification:
      BaseInferenceComponentName: base
      Container: {ArtifactUrl: "file://artifacts/a1.tar.gz"}
`}})
	b, err := LoadFiles(paths...)
	if err != nil {
		t.Fatalf("LoadFiles: %v", err)
	}
	if len(b.InferenceComponents) != 2 || !b.InferenceComponents[1].Specification.IsAdapter() {
		t.Fatalf("InferenceComponents = %+v", b.InferenceComponents)
	}
}
