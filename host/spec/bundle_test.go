package spec

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLoadFilesAcrossFolders(t *testing.T) {
	b, err := LoadFiles("testdata/split/models/model.yaml", "testdata/split/endpoints/endpoint.yaml")
	if err != nil {
		t.Fatalf("LoadFiles: %v", err)
	}
	if got, want := b.Models[0].Dir, absTestdata(t, "split/models"); got != want {
		t.Errorf("model Dir = %q, want %q", got, want)
	}
	if got, want := b.Endpoints[0].Dir, absTestdata(t, "split/endpoints"); got != want {
		t.Errorf("endpoint Dir = %q, want %q", got, want)
	}
	plans, warns, err := b.Plans(testRegion, testAccount)
	if err != nil {
		t.Fatalf("Plans: %v", err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings = %q, want none", warns)
	}
	if len(plans) != 1 || len(plans[0].Variants) != 1 || len(plans[0].Variants[0].Containers) != 1 {
		t.Fatalf("plans = %+v, want one endpoint with one container", plans)
	}
	c := plans[0].Variants[0].Containers[0]
	// The model's artifacts resolve beside the model's file, not the endpoint's.
	path, ok := c.ModelDataPath()
	if want := absTestdata(t, "split/models/artifacts/model.tar.gz"); !ok || path != want {
		t.Errorf("ModelDataPath() = %q, %v; want %q", path, ok, want)
	}
	if c.Hostname != HostnamePrimary {
		t.Errorf("Hostname = %q, want %q", c.Hostname, HostnamePrimary)
	}
	if got, want := plans[0].Variants[0].ModelName, "split-model"; got != want {
		t.Errorf("ModelName = %q, want %q (as the variant spells it)", got, want)
	}
}

// writeFiles writes name → content into a fresh folder and returns the paths
// in the order given.
func writeFiles(t *testing.T, files [][2]string) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for _, f := range files {
		p := filepath.Join(dir, f[0])
		if err := os.WriteFile(p, []byte(f[1]), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

const (
	modelFile = `Models:
  - ModelName: AB-Model
    PrimaryContainer: {Image: img}
`
	configFile = `EndpointConfigs:
  - EndpointConfigName: ab-config
    ProductionVariants:
      - {VariantName: AllTraffic, ModelName: ab-model, InitialInstanceCount: 1, InstanceType: ml.m5.large}
`
	endpointFile = `Endpoints:
  - {EndpointName: ab-test, EndpointConfigName: ab-config}
`
)

func TestPlansCrossFileErrors(t *testing.T) {
	tests := []struct {
		name  string
		files [][2]string
		want  []string // each error, without the temp folder
		as    any
	}{
		{
			name:  "endpoint names a missing configuration",
			files: [][2]string{{"m.yaml", modelFile}, {"e.yaml", "Endpoints:\n  - {EndpointName: ab-test, EndpointConfigName: nope}\n"}},
			want:  []string{`e.yaml: Endpoints[0]: Could not find endpoint configuration "arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/nope".`},
			as:    new(*NotFoundError),
		},
		{
			name:  "configuration names a missing model",
			files: [][2]string{{"c.yaml", configFile}, {"e.yaml", endpointFile}},
			want:  []string{`c.yaml: EndpointConfigs[0]: Could not find model "arn:aws:sagemaker:us-east-1:123456789012:model/ab-model".`},
			as:    new(*NotFoundError),
		},
		{
			name:  "model defined in two files, names differing in case",
			files: [][2]string{{"a.yaml", modelFile}, {"b.yaml", strings.ReplaceAll(modelFile, "AB-Model", "ab-model")}, {"c.yaml", configFile + endpointFile}},
			want:  []string{`b.yaml: Models[0]: Cannot create already existing model "arn:aws:sagemaker:us-east-1:123456789012:model/ab-model". (first defined in a.yaml)`},
			as:    new(*AlreadyExistsError),
		},
		{
			name:  "configuration defined twice in one file",
			files: [][2]string{{"a.yaml", modelFile + configFile + "  - {EndpointConfigName: AB-config, ProductionVariants: [{VariantName: v, ModelName: ab-model, InitialInstanceCount: 1, InstanceType: local}]}\n" + endpointFile}},
			want:  []string{`a.yaml: EndpointConfigs[1]: Cannot create already existing endpoint configuration "arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/ab-config". (first defined in a.yaml)`},
			as:    new(*AlreadyExistsError),
		},
		{
			name:  "endpoint defined twice",
			files: [][2]string{{"a.yaml", modelFile + configFile + endpointFile}, {"b.yaml", endpointFile}},
			want:  []string{`b.yaml: Endpoints[0]: Cannot create already existing endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/ab-test". (first defined in a.yaml)`},
			as:    new(*AlreadyExistsError),
		},
		{
			name: "all problems at once",
			files: [][2]string{
				{"c.yaml", configFile},
				{"e.yaml", endpointFile + "  - {EndpointName: other, EndpointConfigName: gone}\n"},
			},
			want: []string{
				`c.yaml: EndpointConfigs[0]: Could not find model "arn:aws:sagemaker:us-east-1:123456789012:model/ab-model".`,
				`e.yaml: Endpoints[1]: Could not find endpoint configuration "arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/gone".`,
			},
			as: new(*NotFoundError),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths := writeFiles(t, tt.files)
			b, err := LoadFiles(paths...)
			if err != nil {
				t.Fatalf("LoadFiles: %v", err)
			}
			plans, _, err := b.Plans(testRegion, testAccount)
			if err == nil {
				t.Fatalf("Plans() = %+v, want an error", plans)
			}
			dir := filepath.Dir(paths[0]) + string(filepath.Separator)
			got := strings.Split(strings.ReplaceAll(err.Error(), dir, ""), "\n")
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Plans() error\n got: %q\nwant: %q", got, tt.want)
			}
			if !errors.As(err, tt.as) {
				t.Errorf("Plans() error is not %T", tt.as)
			}
		})
	}
}

func TestLoadFilesErrors(t *testing.T) {
	badModel := "Models:\n  - ModelName: m\n    Containers:\n      - {Image: i}\n      - {ContainerHostname: x y, Image: i}\n"
	tests := []struct {
		name  string
		files [][2]string
		want  []string
		as    any
	}{
		{
			name:  "validation errors name the file and definition",
			files: [][2]string{{"ab.yaml", badModel}},
			want: []string{"ab.yaml: Models[0]: 1 validation error detected: Value 'x y' at 'containers.2.member.containerHostname' " +
				"failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"},
			as: new(*ValidationError),
		},
		{
			name: "every broken file and definition is reported",
			files: [][2]string{
				{"a.yaml", badModel},
				{"b.json", `{"Endpoints": [{"EndpointName": "e"}, {"EndpointName": "f", "EndpointConfigName": "c", "Tagz": []}]}`},
				{"c.yaml", "EndpointConfigs:\n  - {EndpointConfigName: c, ProductionVariants: [{VariantName: v, ModelName: m, InstanceType: local, InitialInstanceCount: 1, ServerlessConfig: {MaxConcurrency: 1}}]}\n"},
			},
			want: []string{
				"a.yaml: Models[0]: 1 validation error detected: Value 'x y' at 'containers.2.member.containerHostname' " +
					"failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}",
				"b.json: Endpoints[1].Tagz: unknown field",
				`c.yaml: EndpointConfigs[0]: ServerlessConfig is not supported by mce (production variant "v"): give InstanceType and InitialInstanceCount instead.`,
			},
			as: new(*DecodeError),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths := writeFiles(t, tt.files)
			_, err := LoadFiles(paths...)
			if err == nil {
				t.Fatal("LoadFiles() succeeded, want an error")
			}
			dir := filepath.Dir(paths[0]) + string(filepath.Separator)
			got := strings.Split(strings.ReplaceAll(err.Error(), dir, ""), "\n")
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("LoadFiles() error\n got: %q\nwant: %q", got, tt.want)
			}
			if !errors.As(err, tt.as) {
				t.Errorf("LoadFiles() error is not %T", tt.as)
			}
		})
	}

	t.Run("missing file", func(t *testing.T) {
		_, err := LoadFiles(filepath.Join(t.TempDir(), "nope.yaml"))
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("LoadFiles() error = %v, want fs.ErrNotExist", err)
		}
	})
	t.Run("file over the cap", func(t *testing.T) {
		paths := writeFiles(t, [][2]string{{"big.yaml", endpointFile + strings.Repeat("#", MaxFileSize)}})
		_, err := LoadFiles(paths...)
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("LoadFiles() error = %v, want ErrTooLarge", err)
		}
	})
	t.Run("no files", func(t *testing.T) {
		if _, err := LoadFiles(); err == nil {
			t.Error("LoadFiles() succeeded with no files")
		}
	})
}

func TestPlansWarnUnused(t *testing.T) {
	extraModel := "  - ModelName: spare\n    PrimaryContainer: {Image: img}\n"
	extraConfig := "  - EndpointConfigName: spare-config\n    ProductionVariants: [{VariantName: v, ModelName: spare, InitialInstanceCount: 1, InstanceType: local}]\n"
	paths := writeFiles(t, [][2]string{{"a.yaml", modelFile + extraModel + configFile + extraConfig + endpointFile}})
	b, err := LoadFiles(paths...)
	if err != nil {
		t.Fatal(err)
	}
	_, warns, err := b.Plans(testRegion, testAccount)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		// spare is named by spare-config, but no endpoint uses either.
		paths[0] + `: model "spare" is not used by any endpoint`,
		paths[0] + `: endpoint configuration "spare-config" is not used by any endpoint`,
	}
	if !reflect.DeepEqual(warns, want) {
		t.Errorf("warnings\n got: %q\nwant: %q", warns, want)
	}
}

// TestPlansReportBrokenDefinitionsOnce: a reference to a definition that is
// present but invalid reports the definition's error only, not "Could not find".
func TestPlansReportBrokenDefinitionsOnce(t *testing.T) {
	brokenModel := directModel()
	brokenModel.Containers[0].Image = "" // a rule failure
	goodModel := directModel()
	goodModel.ModelName = "good"
	brokenConfig := oneVariantConfig()
	brokenConfig.EndpointConfigName = "broken-config"
	brokenConfig.ProductionVariants[0].InitialInstanceCount = ptr[int32](0)
	goodConfig := oneVariantConfig() // names the broken model
	b := &Bundle{
		Models:          []Model{{brokenModel, Source{File: "m.yaml", Path: "Models[0]"}}, {goodModel, Source{File: "m.yaml", Path: "Models[1]"}}},
		EndpointConfigs: []EndpointConfig{{brokenConfig, Source{File: "c.yaml", Path: "EndpointConfigs[0]"}}, {goodConfig, Source{File: "c.yaml", Path: "EndpointConfigs[1]"}}},
		Endpoints: []Endpoint{
			{CreateEndpointInput{EndpointName: "a", EndpointConfigName: "broken-config"}, Source{File: "e.yaml", Path: "Endpoints[0]"}},
			{CreateEndpointInput{EndpointName: "b", EndpointConfigName: "ab-config"}, Source{File: "e.yaml", Path: "Endpoints[1]"}},
		},
	}
	_, _, err := b.Plans(testRegion, testAccount)
	if err == nil {
		t.Fatal("Plans() succeeded, want errors")
	}
	want := []string{
		`m.yaml: Models[0]: Container "english" has no Image; mce runs every container from its Image.`,
		"c.yaml: EndpointConfigs[0]: 1 validation error detected: Value '0' at 'productionVariants.1.member.initialInstanceCount' failed to satisfy constraint: Member must have value greater than or equal to 1",
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("Plans() error\n got: %q\nwant: %q", got, want)
	}
}
