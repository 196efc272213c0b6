package spec

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mce-run/mce/containers"
)

const (
	testRegion  = "us-east-1"
	testAccount = "123456789012"
)

func absTestdata(t *testing.T, rel string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", rel))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestPlansDirectAndSerial(t *testing.T) {
	dir := absTestdata(t, ".")
	direct := containers.EndpointPlan{
		Name: "ab-test", ConfigName: "ab-config", Mode: ModeDirect,
		Variants: []containers.VariantPlan{
			{
				Name: "v1", ModelName: "ab-model", InstanceType: "ml.m5.large", InstanceCount: 1, Weight: 3,
				HealthCheckTimeout: 240 * time.Second,
				Containers: []containers.ContainerPlan{
					{Hostname: "english", Image: "mce-example/sentiment:latest", Environment: map[string]string{"LANGUAGE": "en"},
						ModelDataURL: "file://../models/sentiment-en.tar.gz", BaseDir: dir, Mode: ModeSingleModel},
					{Hostname: "german", Image: "mce-example/sentiment:latest", Environment: map[string]string{"LANGUAGE": "de"},
						ModelDataURL: "file://../models/sentiment-de.tar.gz", BaseDir: dir, Mode: ModeSingleModel},
				},
			},
			{
				Name: "v2", ModelName: "ab-model-v2", InstanceType: "ml.g5.12xlarge", InstanceCount: 2, Weight: 1,
				HealthCheckTimeout: 600 * time.Second, RoutingStrategy: RoutingLeastOutstanding,
				Described: json.RawMessage(`{"RoutingConfig":{"RoutingStrategy":"LEAST_OUTSTANDING_REQUESTS"}}`),
				Containers: []containers.ContainerPlan{
					{Hostname: "english", Image: "mce-example/sentiment:v2", Environment: map[string]string{"LANGUAGE": "en", "USE_GPU": "1"},
						ModelDataURL: "s3://models/sentiment/en-v2.tar.gz", BaseDir: dir, Mode: ModeSingleModel, GPUs: "4"},
					{Hostname: "german", Image: "mce-example/sentiment:v2", Environment: map[string]string{"LANGUAGE": "de", "USE_GPU": "1"},
						ModelDataURL: "s3://models/sentiment/de-v2.tar.gz", BaseDir: dir, Mode: ModeSingleModel,
						Resources: containers.Resources{Gpus: "device=1", Cpus: 2, MemoryMiB: 4096}, GPUs: "device=1"},
				},
			},
		},
	}
	featurizerEnv := map[string]string{"SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT": "text/csv"}
	serial := containers.EndpointPlan{
		Name: "pipeline", ConfigName: "pipeline-config", Mode: ModeSerial,
		Variants: []containers.VariantPlan{
			{
				Name: "current", ModelName: "pipeline-v1", InstanceType: "local", InstanceCount: 1, Weight: 0.9,
				HealthCheckTimeout: 240 * time.Second,
				Containers: []containers.ContainerPlan{
					{Hostname: "container-1", Image: "mce-example/featurizer:latest", Environment: featurizerEnv, BaseDir: dir, Mode: ModeSingleModel},
					{Hostname: "container-2", Image: "mce-example/classifier:latest", ModelDataURL: "file://models/classifier-v1.tar.gz", BaseDir: dir, Mode: ModeSingleModel},
					{Hostname: "container-3", Image: "mce-example/postprocessor:latest", BaseDir: dir, Mode: ModeSingleModel},
				},
			},
			{
				Name: "candidate", ModelName: "pipeline-v2", InstanceType: "local_gpu", InstanceCount: 1, Weight: 0.1,
				HealthCheckTimeout: 240 * time.Second, DownloadTimeout: 900 * time.Second,
				Containers: []containers.ContainerPlan{
					{Hostname: "container-1", Image: "mce-example/featurizer:latest", Environment: featurizerEnv, BaseDir: dir, Mode: ModeSingleModel, GPUs: "all"},
					{Hostname: "container-2", Image: "mce-example/classifier:latest", Environment: map[string]string{"THRESHOLD": "0.7"},
						ModelDataURL: "file:///srv/models/classifier-v2.tar.gz", BaseDir: dir, Mode: ModeSingleModel, GPUs: "all"},
					{Hostname: "container-3", Image: "mce-example/postprocessor:latest", BaseDir: dir, Mode: ModeSingleModel, GPUs: "all"},
				},
			},
		},
	}
	mme := containers.EndpointPlan{
		Name: "triton-mme", ConfigName: "triton-mme-config", Mode: ModeSerial,
		Variants: []containers.VariantPlan{{
			Name: "AllTraffic", ModelName: "triton-mme", InstanceType: "ml.g5.xlarge", InstanceCount: 1, Weight: 1,
			HealthCheckTimeout: 240 * time.Second,
			Containers: []containers.ContainerPlan{{
				Hostname: "primary", Image: "nvcr.io/nvidia/tritonserver:24.08-py3",
				Environment:  map[string]string{"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "resnet", "SAGEMAKER_TRITON_LOG_VERBOSE": "false"},
				ModelDataURL: "file://models/", BaseDir: dir, Mode: ModeMultiModel, ModelCacheSetting: "Enabled", GPUs: "1",
			}},
		}},
	}
	tests := []struct {
		name      string
		files     []string
		want      []containers.EndpointPlan
		wantWarns []string
	}{
		{"Direct endpoint, YAML", []string{"testdata/ab-test.yaml"}, []containers.EndpointPlan{direct}, []string{
			`testdata/ab-test.yaml: model "ab-model": ExecutionRoleArn ignored locally`,
		}},
		{"Direct endpoint, JSON", []string{"testdata/ab-test.json"}, []containers.EndpointPlan{direct}, []string{
			`testdata/ab-test.json: model "ab-model": ExecutionRoleArn ignored locally`,
		}},
		{"Serial endpoint", []string{"testdata/pipeline.yaml"}, []containers.EndpointPlan{serial}, nil},
		{"several files, file order", []string{"testdata/pipeline.yaml", "testdata/mme.yaml"}, []containers.EndpointPlan{serial, mme}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := LoadFiles(tt.files...)
			if err != nil {
				t.Fatalf("LoadFiles: %v", err)
			}
			got, warns, err := b.Plans(testRegion, testAccount)
			if err != nil {
				t.Fatalf("Plans: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Plans()\n got: %+v\nwant: %+v", got, tt.want)
			}
			if !reflect.DeepEqual(warns, tt.wantWarns) {
				t.Errorf("warnings\n got: %q\nwant: %q", warns, tt.wantWarns)
			}
		})
	}
}

func TestBuildPlan(t *testing.T) {
	model := directModel()
	config := oneVariantConfig()
	endpoint := CreateEndpointInput{EndpointName: "ab-test", EndpointConfigName: "AB-Config"}
	serialModel := CreateModelInput{ModelName: "serial", PrimaryContainer: &ContainerDefinition{Image: "i"}}
	twoModes := oneVariantConfig()
	twoModes.ProductionVariants = append(twoModes.ProductionVariants, ProductionVariant{
		VariantName: "B", ModelName: "serial", InitialInstanceCount: ptr[int32](1), InstanceType: "ml.m5.large",
	})
	unknownGPU := oneVariantConfig()
	unknownGPU.ProductionVariants[0].InstanceType = "ml.g9.xlarge"
	unknownGPU.Tags = []Tag{{Key: "k"}}
	broken := directModel()
	broken.Containers[1].ContainerHostname = ""

	lookup := MapLookup(map[string]CreateModelInput{"AB-MODEL": model, "serial": serialModel}, "/srv/endpoints")
	tests := []struct {
		name      string
		endpoint  CreateEndpointInput
		config    CreateEndpointConfigInput
		lookup    ModelLookup
		wantHosts []string
		wantGPUs  string
		wantWarns []string
		wantErr   string
		wantAs    any
	}{
		{name: "names match case-insensitively", endpoint: endpoint, config: config, lookup: lookup,
			wantHosts: []string{"english", "german"}},
		{name: "unknown GPU instance type warns", endpoint: endpoint, config: unknownGPU, lookup: lookup,
			wantHosts: []string{"english", "german"},
			wantWarns: []string{
				`production variant "AllTraffic": mce does not know how many GPUs instance type "ml.g9.xlarge" has and gives it none; set Resources.Gpus on its containers`,
			}},
		{name: "missing model", endpoint: endpoint, config: config, lookup: MapLookup(nil, ""),
			wantErr: `Could not find model "arn:aws:sagemaker:us-east-1:123456789012:model/ab-model".`, wantAs: new(*NotFoundError)},
		{name: "configuration of another name", endpoint: CreateEndpointInput{EndpointName: "e", EndpointConfigName: "Other"}, config: config, lookup: lookup,
			wantErr: `Could not find endpoint configuration "arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/other".`, wantAs: new(*NotFoundError)},
		{name: "invalid stored model", endpoint: endpoint, config: config, lookup: MapLookup(map[string]CreateModelInput{"ab-model": broken}, ""),
			wantErr: "ContainerHostname must be specified for every container when InferenceExecutionConfig Mode is Direct; container 2 has none.", wantAs: new(*ValidationError)},
		{name: "invalid endpoint", endpoint: CreateEndpointInput{EndpointConfigName: "ab-config"}, config: config, lookup: lookup,
			wantErr: "1 validation error detected: Value null at 'endpointName' failed to satisfy constraint: Member must not be null", wantAs: new(*ValidationError)},
		{name: "variants disagree on the mode", endpoint: endpoint, config: twoModes, lookup: lookup,
			wantErr: `All production variants of an endpoint must share one InferenceExecutionConfig Mode in mce; variant "AllTraffic" is Direct and variant "B" is Serial.`,
			wantAs:  new(*ValidationError)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, warns, err := BuildPlan(testRegion, testAccount, tt.endpoint, tt.config, tt.lookup)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("BuildPlan() error = %v, want %s", err, tt.wantErr)
				}
				if !errors.As(err, tt.wantAs) {
					t.Errorf("BuildPlan() error %T is not %T", err, tt.wantAs)
				}
				return
			}
			if err != nil {
				t.Fatalf("BuildPlan(): %v", err)
			}
			var hosts []string
			for _, c := range plan.Variants[0].Containers {
				hosts = append(hosts, c.Hostname)
				if c.BaseDir != "/srv/endpoints" {
					t.Errorf("BaseDir = %q, want /srv/endpoints", c.BaseDir)
				}
				if c.GPUs != tt.wantGPUs {
					t.Errorf("GPUs = %q, want %q", c.GPUs, tt.wantGPUs)
				}
			}
			if !reflect.DeepEqual(hosts, tt.wantHosts) {
				t.Errorf("hostnames = %q, want %q", hosts, tt.wantHosts)
			}
			if !reflect.DeepEqual(warns, tt.wantWarns) {
				t.Errorf("warnings\n got: %q\nwant: %q", warns, tt.wantWarns)
			}
		})
	}
}

// TestContainerGPUs checks how InstanceType and Resources.Gpus combine.
func TestContainerGPUs(t *testing.T) {
	tests := []struct {
		instanceType, gpus, want string
	}{
		{"local", "", ""},
		{"local_gpu", "", "all"},
		{"ml.m5.large", "", ""},
		{"ml.g5.12xlarge", "", "4"},
		{"ml.p4d.24xlarge", "", "8"},
		{"local_gpu", "none", ""},
		{"ml.g5.12xlarge", "0", ""},
		{"ml.g5.12xlarge", "2", "2"},
		{"ml.m5.large", "0,1", "device=0,1"},
		{"local", "all", "all"},
	}
	for _, tt := range tests {
		t.Run(tt.instanceType+"/"+tt.gpus, func(t *testing.T) {
			m := CreateModelInput{ModelName: "m", PrimaryContainer: &ContainerDefinition{Image: "i"}}
			if tt.gpus != "" {
				m.PrimaryContainer.Resources = &containers.Resources{Gpus: tt.gpus}
			}
			c := oneVariantConfig()
			c.ProductionVariants[0].ModelName = "m"
			c.ProductionVariants[0].InstanceType = tt.instanceType
			plan, _, err := BuildPlan(testRegion, testAccount, CreateEndpointInput{EndpointName: "e", EndpointConfigName: "ab-config"}, c,
				MapLookup(map[string]CreateModelInput{"m": m}, ""))
			if err != nil {
				t.Fatal(err)
			}
			if got := plan.Variants[0].Containers[0].GPUs; got != tt.want {
				t.Errorf("GPUs = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestModelDataPath(t *testing.T) {
	tests := []struct {
		url, base, want string
		ok              bool
	}{
		{"file://../models/m.tar.gz", "/srv/endpoints", "/srv/models/m.tar.gz", true},
		{"file://models/", "/srv/endpoints", "/srv/endpoints/models", true},
		{"file:///opt/models/m.tar.gz", "/srv/endpoints", "/opt/models/m.tar.gz", true},
		{"s3://bucket/m.tar.gz", "/srv/endpoints", "", false},
		{"", "/srv/endpoints", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			got, ok := containers.ContainerPlan{ModelDataURL: tt.url, BaseDir: tt.base}.ModelDataPath()
			if got != filepath.FromSlash(tt.want) || ok != tt.ok {
				t.Errorf("ModelDataPath() = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestPlanCopiesEnvironment: plans must not alias the shapes they came from.
func TestPlanCopiesEnvironment(t *testing.T) {
	m := directModel()
	m.Containers[0].Environment = map[string]string{"A": "b"}
	plan, _, err := BuildPlan(testRegion, testAccount, CreateEndpointInput{EndpointName: "e", EndpointConfigName: "ab-config"},
		oneVariantConfig(), MapLookup(map[string]CreateModelInput{"ab-model": m}, ""))
	if err != nil {
		t.Fatal(err)
	}
	plan.Variants[0].Containers[0].Environment["A"] = "changed"
	if got := m.Containers[0].Environment["A"]; got != "b" {
		t.Errorf("model Environment changed through the plan: A = %q", got)
	}
}

// TestPlanNetworkIsolation: EnableNetworkIsolation on the model, or on the
// endpoint configuration, isolates the variant; nothing else does.
func TestPlanNetworkIsolation(t *testing.T) {
	endpoint := CreateEndpointInput{EndpointName: "ab-test", EndpointConfigName: "ab-config"}
	for _, tt := range []struct {
		name          string
		model, config *bool
		want          bool
	}{
		{"unset", nil, nil, false},
		{"model false", ptr(false), nil, false},
		{"model true", ptr(true), nil, true},
		{"configuration true", nil, ptr(true), true},
		{"configuration false, model true", ptr(true), ptr(false), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := directModel()
			m.EnableNetworkIsolation = tt.model
			c := oneVariantConfig()
			c.EnableNetworkIsolation = tt.config
			plan, warns, err := BuildPlan(testRegion, testAccount, endpoint, c, MapLookup(map[string]CreateModelInput{"ab-model": m}, ""))
			if err != nil {
				t.Fatal(err)
			}
			if got := plan.Variants[0].NetworkIsolation; got != tt.want {
				t.Errorf("NetworkIsolation = %v, want %v", got, tt.want)
			}
			for _, w := range warns {
				if strings.Contains(w, "EnableNetworkIsolation") {
					t.Errorf("warning %q: isolation is honoured, not ignored", w)
				}
			}
		})
	}
}

func TestManagedInstanceScalingBoundsInstances(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want int
	}{
		{``, 0},
		{`{"Status":"ENABLED","MinInstanceCount":1,"MaxInstanceCount":3}`, 3},
		{`{"Status":"DISABLED","MinInstanceCount":1,"MaxInstanceCount":3}`, 0},
		{`{"Status":"ENABLED","MinInstanceCount":1}`, 0},
	} {
		v := ProductionVariant{VariantName: "v", InstanceType: "local", ManagedInstanceScaling: []byte(tc.raw)}
		if got, _ := variantPlan(v, CreateModelInput{}, ""); got.MaxInstanceCount != tc.want {
			t.Errorf("ManagedInstanceScaling %s: MaxInstanceCount %d, want %d", tc.raw, got.MaxInstanceCount, tc.want)
		}
	}
}

// A container's AdditionalModelDataSources reach its plan as channels.
func TestBuildPlanAdditionalModelData(t *testing.T) {
	model := directModel()
	model.Containers[1].AdditionalModelDataSources = json.RawMessage(`[{"ChannelName":"draft","S3DataSource":{"S3Uri":"s3://b/draft/","S3DataType":"S3Prefix","CompressionType":"None"}}]`)
	lookup := MapLookup(map[string]CreateModelInput{"AB-MODEL": model}, "/srv/endpoints")
	plan, _, err := BuildPlan(testRegion, testAccount, CreateEndpointInput{EndpointName: "ab-test", EndpointConfigName: "AB-Config"}, oneVariantConfig(), lookup)
	if err != nil {
		t.Fatal(err)
	}
	cs := plan.Variants[0].Containers
	if len(cs[0].AdditionalModelData) != 0 || len(cs[1].AdditionalModelData) != 1 ||
		cs[1].AdditionalModelData[0] != (containers.ModelDataChannel{Channel: "draft", URL: "s3://b/draft/"}) {
		t.Errorf("channels %+v, %+v", cs[0].AdditionalModelData, cs[1].AdditionalModelData)
	}
}
