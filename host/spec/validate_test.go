package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mce-run/mce/containers"
)

func ptr[T any](v T) *T { return &v }

// directModel is a valid two-container Direct model; tests mutate copies.
func directModel() CreateModelInput {
	return CreateModelInput{
		ModelName: "ab-model",
		Containers: []ContainerDefinition{
			{ContainerHostname: "english", Image: "mce-example/sentiment:latest", ModelDataURL: "file://../models/en.tar.gz"},
			{ContainerHostname: "german", Image: "mce-example/sentiment:latest", ModelDataURL: "s3://bucket/de.tar.gz"},
		},
		InferenceExecutionConfig: &InferenceExecutionConfig{Mode: ModeDirect},
	}
}

func env(n, valueLen int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("K%02d", i)] = strings.Repeat("v", valueLen)
	}
	return m
}

// validationMessage runs validate and returns the ValidationException text,
// "" for success; any other error type fails the test.
func validationMessage(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %T is not a *ValidationError: %v", err, err)
	}
	return ve.Message()
}

func TestCreateModelValidate(t *testing.T) {
	const prefix1 = "1 validation error detected: "
	long64 := strings.Repeat("a", 63) + "_"
	tests := []struct {
		name   string
		mutate func(m *CreateModelInput)
		want   string
	}{
		{"valid Direct model", func(m *CreateModelInput) {}, ""},
		{"valid Serial model with automatic hostnames", func(m *CreateModelInput) {
			m.InferenceExecutionConfig = nil
			m.Containers[0].ContainerHostname, m.Containers[1].ContainerHostname = "", ""
		}, ""},
		{"valid PrimaryContainer with empty Containers", func(m *CreateModelInput) {
			m.PrimaryContainer = &m.Containers[0]
			m.Containers = []ContainerDefinition{}
			m.InferenceExecutionConfig = nil
		}, ""},
		{"valid file:// URL forms", func(m *CreateModelInput) {
			m.Containers[0].ModelDataURL = "file:///srv/models/m.tar.gz"
			m.Containers[1].ModelDataURL = "https://example.com/m.tar.gz"
		}, ""},
		{"hostname pattern", func(m *CreateModelInput) { m.Containers[1].ContainerHostname = "x y" },
			prefix1 + "Value 'x y' at 'containers.2.member.containerHostname' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"},
		{"PrimaryContainer hostname pattern", func(m *CreateModelInput) {
			m.PrimaryContainer = &ContainerDefinition{ContainerHostname: "-a", Image: "i"}
			m.Containers = nil
			m.InferenceExecutionConfig = nil
		}, prefix1 + "Value '-a' at 'primaryContainer.containerHostname' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"},
		{"missing ModelName", func(m *CreateModelInput) { m.ModelName = "" },
			prefix1 + "Value null at 'modelName' failed to satisfy constraint: Member must not be null"},
		{"ModelName too long and malformed", func(m *CreateModelInput) { m.ModelName = long64 },
			"2 validation errors detected: Value '" + long64 + "' at 'modelName' failed to satisfy constraint: Member must have length less than or equal to 63; " +
				"Value '" + long64 + "' at 'modelName' failed to satisfy constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9])*"},
		{"16 containers", func(m *CreateModelInput) {
			m.InferenceExecutionConfig = nil
			m.Containers = make([]ContainerDefinition, 16)
			for i := range m.Containers {
				m.Containers[i].Image = "i"
			}
		}, prefix1 + "Value at 'containers' failed to satisfy constraint: Member must have length less than or equal to 15"},
		{"unknown execution mode", func(m *CreateModelInput) { m.InferenceExecutionConfig.Mode = "Parallel" },
			prefix1 + "Value 'Parallel' at 'inferenceExecutionConfig.mode' failed to satisfy constraint: Member must satisfy enum value set: [Serial, Direct]"},
		{"execution config without mode", func(m *CreateModelInput) { m.InferenceExecutionConfig.Mode = "" },
			prefix1 + "Value null at 'inferenceExecutionConfig.mode' failed to satisfy constraint: Member must not be null"},
		{"image with a space", func(m *CreateModelInput) { m.Containers[0].Image = "my image" },
			prefix1 + "Value 'my image' at 'containers.1.member.image' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\S]+"},
		{"image too long", func(m *CreateModelInput) { m.Containers[0].Image = strings.Repeat("i", 256) },
			prefix1 + "Value '" + strings.Repeat("i", 256) + "' at 'containers.1.member.image' failed to satisfy constraint: Member must have length less than or equal to 255"},
		{"ModelDataUrl scheme", func(m *CreateModelInput) { m.Containers[1].ModelDataURL = "ftp://host/m.tar.gz" },
			prefix1 + "Value 'ftp://host/m.tar.gz' at 'containers.2.member.modelDataUrl' failed to satisfy constraint: Member must satisfy regular expression pattern: ^(https|s3)://([^/]+)/?(.*)$|^file://(.+)$"},
		{"ModelDataUrl too long", func(m *CreateModelInput) { m.Containers[1].ModelDataURL = "s3://b/" + strings.Repeat("k", 1018) },
			prefix1 + "Value 's3://b/" + strings.Repeat("k", 1018) + "' at 'containers.2.member.modelDataUrl' failed to satisfy constraint: Member must have length less than or equal to 1024"},
		{"container mode", func(m *CreateModelInput) { m.Containers[0].Mode = "Multi" },
			prefix1 + "Value 'Multi' at 'containers.1.member.mode' failed to satisfy constraint: Member must satisfy enum value set: [SingleModel, MultiModel]"},
		{"model cache setting", func(m *CreateModelInput) {
			m.Containers[0].Mode = ModeMultiModel
			m.Containers[0].MultiModelConfig = &MultiModelConfig{ModelCacheSetting: "On"}
		}, prefix1 + "Value 'On' at 'containers.1.member.multiModelConfig.modelCacheSetting' failed to satisfy constraint: Member must satisfy enum value set: [Enabled, Disabled]"},
		{"image config without access mode", func(m *CreateModelInput) { m.Containers[0].ImageConfig = &ImageConfig{} },
			prefix1 + "Value null at 'containers.1.member.imageConfig.repositoryAccessMode' failed to satisfy constraint: Member must not be null"},
		{"image config access mode", func(m *CreateModelInput) { m.Containers[0].ImageConfig = &ImageConfig{RepositoryAccessMode: "Private"} },
			prefix1 + "Value 'Private' at 'containers.1.member.imageConfig.repositoryAccessMode' failed to satisfy constraint: Member must satisfy enum value set: [Platform, Vpc]"},
		{"101 environment entries", func(m *CreateModelInput) { m.Containers[0].Environment = env(101, 1) },
			prefix1 + "Value at 'containers.1.member.environment' failed to satisfy constraint: Member must have length less than or equal to 100"},
		{"environment keys", func(m *CreateModelInput) {
			m.Containers[1].Environment = map[string]string{"bad-key": "v", "1ST": "v", "GOOD": "v"}
		}, "2 validation errors detected: " +
			"Value '1ST' at 'containers.2.member.environment' failed to satisfy constraint: Map keys must satisfy constraint: [Member must have length less than or equal to 1024, Member must satisfy regular expression pattern: [a-zA-Z_][a-zA-Z0-9_]*]; " +
			"Value 'bad-key' at 'containers.2.member.environment' failed to satisfy constraint: Map keys must satisfy constraint: [Member must have length less than or equal to 1024, Member must satisfy regular expression pattern: [a-zA-Z_][a-zA-Z0-9_]*]"},
		{"environment key too long", func(m *CreateModelInput) {
			m.Containers[0].Environment = map[string]string{strings.Repeat("K", 1025): "v"}
		}, prefix1 + "Value '" + strings.Repeat("K", 1025) + "' at 'containers.1.member.environment' failed to satisfy constraint: Map keys must satisfy constraint: [Member must have length less than or equal to 1024, Member must satisfy regular expression pattern: [a-zA-Z_][a-zA-Z0-9_]*]"},
		{"environment value too long", func(m *CreateModelInput) {
			m.Containers[0].Environment = map[string]string{"BIG": strings.Repeat("v", 1025), "OK": strings.Repeat("v", 1024)}
		}, prefix1 + "Value 'BIG' at 'containers.1.member.environment' failed to satisfy constraint: Map value must satisfy constraint: [Member must have length less than or equal to 1024, Member must satisfy regular expression pattern: [\\S\\s]*]"},
		{"mce resources", func(m *CreateModelInput) {
			m.Containers[0].Resources = &containers.Resources{Gpus: "lots", Cpus: -1, MemoryMiB: -5}
		}, "3 validation errors detected: " +
			`Value 'lots' at 'containers.1.member.resources.gpus' failed to satisfy constraint: Member must be "all", "none", a GPU count, or GPU device IDs such as "device=0,1" (mce); ` +
			"Value '-1.0' at 'containers.1.member.resources.cpus' failed to satisfy constraint: Member must have value greater than or equal to 0; " +
			"Value '-5' at 'containers.1.member.resources.memoryMiB' failed to satisfy constraint: Member must have value greater than or equal to 0"},
		{"execution role ARN", func(m *CreateModelInput) { m.ExecutionRoleARN = "my-role" },
			"2 validation errors detected: " +
				"Value 'my-role' at 'executionRoleArn' failed to satisfy constraint: Member must have length greater than or equal to 20; " +
				"Value 'my-role' at 'executionRoleArn' failed to satisfy constraint: Member must satisfy regular expression pattern: ^arn:aws[a-z\\-]*:iam::\\d{12}:role/?[a-zA-Z_0-9+=,.@\\-_/]+$"},
		{"51 tags", func(m *CreateModelInput) { m.Tags = make([]Tag, 51); fillTags(m.Tags) },
			prefix1 + "Value at 'tags' failed to satisfy constraint: Member must have length less than or equal to 50"},
		{"tag without key", func(m *CreateModelInput) { m.Tags = []Tag{{Key: "team", Value: "nlp"}, {Value: "x"}} },
			prefix1 + "Value null at 'tags.2.member.key' failed to satisfy constraint: Member must not be null"},
		{"constraint failures hide rule failures", func(m *CreateModelInput) {
			m.ModelName = ""
			m.PrimaryContainer = &ContainerDefinition{Image: "i"} // both: a rule failure
		}, prefix1 + "Value null at 'modelName' failed to satisfy constraint: Member must not be null"},

		// Rule (semantic) failures: one sentence each.
		{"both PrimaryContainer and Containers", func(m *CreateModelInput) { m.PrimaryContainer = &ContainerDefinition{Image: "i"} },
			"Specify either PrimaryContainer or Containers, not both."},
		{"no container", func(m *CreateModelInput) { m.Containers = nil },
			"Either PrimaryContainer or Containers must be specified."},
		{"Direct with PrimaryContainer", func(m *CreateModelInput) {
			m.PrimaryContainer = &m.Containers[0]
			m.Containers = nil
		}, "InferenceExecutionConfig Mode Direct requires Containers; a PrimaryContainer cannot be invoked directly."},
		{"Direct needs every hostname", func(m *CreateModelInput) { m.Containers[1].ContainerHostname = "" },
			"ContainerHostname must be specified for every container when InferenceExecutionConfig Mode is Direct; container 2 has none."},
		{"one hostname means all", func(m *CreateModelInput) {
			m.InferenceExecutionConfig = nil
			m.Containers[0].ContainerHostname = ""
		}, "If ContainerHostname is specified for one container it must be specified for all containers; container 1 has none."},
		{"duplicate hostnames ignore case", func(m *CreateModelInput) {
			m.Containers = append(m.Containers, ContainerDefinition{ContainerHostname: "English", Image: "i"})
		}, `ContainerHostname must be unique within a model; "English" is used by containers 1 and 3.`},
		{"two MultiModel containers", func(m *CreateModelInput) {
			for i := range m.Containers {
				m.Containers[i].Mode = ModeMultiModel
			}
		}, "More than one container in MultiModel mode is not supported with inference pipeline."},
		{"MultiModel without a prefix", func(m *CreateModelInput) {
			m.Containers[0].Mode = ModeMultiModel
			m.Containers[0].ModelDataURL = ""
		}, `Container "english" is in MultiModel mode and needs a ModelDataUrl: the prefix under which the TargetModel artifacts live.`},
		{"several rule failures in one message", func(m *CreateModelInput) {
			m.InferenceExecutionConfig = nil
			m.Containers = []ContainerDefinition{{Mode: ModeMultiModel, Image: "i"}, {Mode: ModeMultiModel, Image: "i"}}
		}, `Container "container-1" is in MultiModel mode and needs a ModelDataUrl: the prefix under which the TargetModel artifacts live. ` +
			`Container "container-2" is in MultiModel mode and needs a ModelDataUrl: the prefix under which the TargetModel artifacts live. ` +
			"More than one container in MultiModel mode is not supported with inference pipeline."},
		{"environment over 32 KB across the model", func(m *CreateModelInput) {
			// 20 entries of 3 + 1000 bytes per container: 20060 each, 40120 in all.
			m.Containers[0].Environment = env(20, 1000)
			m.Containers[1].Environment = env(20, 1000)
		}, `The Environment of all containers of a model may hold at most 32768 bytes of keys and values; model "ab-model" has 40120.`},
		{"environment at 32 KB passes", func(m *CreateModelInput) {
			m.Containers[0].Environment = map[string]string{"A": strings.Repeat("v", 1023)} // 1024 bytes
			m.Containers[1].Environment = env(31, 1021)                                     // 31 * 1024 bytes
			m.Containers = append(m.Containers, ContainerDefinition{ContainerHostname: "c", Image: "i"})
		}, ""},
		{"environment one byte over 32 KB", func(m *CreateModelInput) {
			m.Containers[0].Environment = map[string]string{"A": strings.Repeat("v", 1023)}
			m.Containers[1].Environment = env(31, 1021)
			m.Containers = append(m.Containers, ContainerDefinition{ContainerHostname: "c", Image: "i", Environment: map[string]string{"B": ""}})
		}, `The Environment of all containers of a model may hold at most 32768 bytes of keys and values; model "ab-model" has 32769.`},
		{"missing image", func(m *CreateModelInput) { m.Containers[1].Image = "" },
			`Container "german" has no Image; mce runs every container from its Image.`},
		{"model packages are refused", func(m *CreateModelInput) {
			m.Containers[0].ModelPackageName = "arn:aws:sagemaker:us-east-1:123456789012:model-package/p/1"
		}, `ModelPackageName is not supported by mce (container "english"): give the container's Image, and its ModelDataUrl when it needs artifacts.`},
		{"additional model data sources: none", func(m *CreateModelInput) {
			m.Containers[1].AdditionalModelDataSources = json.RawMessage(`[]`)
		}, ""},
		{"additional model data sources: a draft folder and an archive", func(m *CreateModelInput) {
			m.Containers[1].AdditionalModelDataSources = json.RawMessage(`[{"ChannelName":"draft_model","S3DataSource":{"S3Uri":"s3://bucket/draft/","S3DataType":"S3Prefix","CompressionType":"None"}},` +
				`{"ChannelName":"extra.v1","S3DataSource":{"S3Uri":"file://models/extra.tar.gz","S3DataType":"S3Object","CompressionType":"Gzip"}}]`)
		}, ""},
		{"additional model data sources: six", func(m *CreateModelInput) {
			one := `{"ChannelName":"c%d","S3DataSource":{"S3Uri":"s3://b/k%d/","S3DataType":"S3Prefix","CompressionType":"None"}}`
			var l []string
			for i := range 6 {
				l = append(l, fmt.Sprintf(one, i, i))
			}
			m.Containers[1].AdditionalModelDataSources = json.RawMessage("[" + strings.Join(l, ",") + "]")
		}, "1 validation error detected: Value at 'containers.2.member.additionalModelDataSources' failed to satisfy constraint: Member must have length less than or equal to 5"},
		{"additional model data sources: a channel stepping out", func(m *CreateModelInput) {
			m.Containers[1].AdditionalModelDataSources = json.RawMessage(`[{"ChannelName":"..","S3DataSource":{"S3Uri":"s3://b/d/","S3DataType":"S3Prefix","CompressionType":"None"}}]`)
		}, `AdditionalModelDataSources ChannelName ".." is not a folder name (container "german"): each channel becomes /opt/ml/additional-model-data-sources/<ChannelName>.`},
		{"additional model data sources: a slash in the channel", func(m *CreateModelInput) {
			m.Containers[1].AdditionalModelDataSources = json.RawMessage(`[{"ChannelName":"a/b","S3DataSource":{"S3Uri":"s3://b/d/","S3DataType":"S3Prefix","CompressionType":"None"}}]`)
		}, `1 validation error detected: Value 'a/b' at 'containers.2.member.additionalModelDataSources.1.channelName' failed to satisfy constraint: Member must satisfy regular expression pattern: [A-Za-z0-9\.\-_]+`},
		{"additional model data sources: a channel twice", func(m *CreateModelInput) {
			m.Containers[1].AdditionalModelDataSources = json.RawMessage(`[{"ChannelName":"d","S3DataSource":{"S3Uri":"s3://b/d/","S3DataType":"S3Prefix","CompressionType":"None"}},{"ChannelName":"d","S3DataSource":{"S3Uri":"s3://b/e/","S3DataType":"S3Prefix","CompressionType":"None"}}]`)
		}, `AdditionalModelDataSources names channel "d" more than once (container "german").`},
		{"additional model data sources: a folder without its slash", func(m *CreateModelInput) {
			m.Containers[1].AdditionalModelDataSources = json.RawMessage(`[{"ChannelName":"d","S3DataSource":{"S3Uri":"s3://b/d","S3DataType":"S3Prefix","CompressionType":"None"}}]`)
		}, `AdditionalModelDataSources channel "d" S3DataSource.S3Uri must end with a slash for S3DataType S3Prefix (container "german"): it names the folder of the additional model's files.`},
		{"additional model data sources: no S3 source", func(m *CreateModelInput) {
			m.Containers[1].AdditionalModelDataSources = json.RawMessage(`[{"ChannelName":"d"}]`)
		}, "1 validation error detected: Value null at 'containers.2.member.additionalModelDataSources.1.s3DataSource' failed to satisfy constraint: Member must not be null"},
		{"additional model data sources: not a list", func(m *CreateModelInput) {
			m.Containers[1].AdditionalModelDataSources = json.RawMessage(`{"ChannelName":"d"}`)
		}, "1 validation error detected: Value at 'containers.2.member.additionalModelDataSources' failed to satisfy constraint: Member must be a list of AdditionalModelDataSource structures: wrong type: expected a list, got a mapping"},
		{"ModelDataSource: an uncompressed S3 folder", func(m *CreateModelInput) {
			m.Containers[1].ModelDataURL = ""
			m.Containers[1].ModelDataSource = json.RawMessage(`{"S3DataSource":{"S3Uri":"s3://bucket/llm/","S3DataType":"S3Prefix","CompressionType":"None","ModelAccessConfig":{"AcceptEula":true}}}`)
		}, ""},
		{"ModelDataSource: a file:// folder", func(m *CreateModelInput) {
			m.Containers[1].ModelDataURL = ""
			m.Containers[1].ModelDataSource = json.RawMessage(`{"S3DataSource":{"S3Uri":"file://models/llm/","S3DataType":"S3Prefix","CompressionType":"None"}}`)
		}, ""},
		{"ModelDataSource: a gzip archive", func(m *CreateModelInput) {
			m.Containers[1].ModelDataURL = ""
			m.Containers[1].ModelDataSource = json.RawMessage(`{"S3DataSource":{"S3Uri":"s3://bucket/model.tar.gz","S3DataType":"S3Object","CompressionType":"Gzip"}}`)
		}, ""},
		{"ModelDataSource: members missing", func(m *CreateModelInput) {
			m.Containers[1].ModelDataURL = ""
			m.Containers[1].ModelDataSource = json.RawMessage(`{"S3DataSource":{"ModelAccessConfig":{}}}`)
		}, "4 validation errors detected: Value null at 'containers.2.member.modelDataSource.s3DataSource.s3Uri' failed to satisfy constraint: Member must not be null; " +
			"Value null at 'containers.2.member.modelDataSource.s3DataSource.s3DataType' failed to satisfy constraint: Member must not be null; " +
			"Value null at 'containers.2.member.modelDataSource.s3DataSource.compressionType' failed to satisfy constraint: Member must not be null; " +
			"Value null at 'containers.2.member.modelDataSource.s3DataSource.modelAccessConfig.acceptEula' failed to satisfy constraint: Member must not be null"},
		{"ModelDataSource: no S3DataSource", func(m *CreateModelInput) {
			m.Containers[1].ModelDataURL = ""
			m.Containers[1].ModelDataSource = json.RawMessage(`{}`)
		}, "1 validation error detected: Value null at 'containers.2.member.modelDataSource.s3DataSource' failed to satisfy constraint: Member must not be null"},
		{"ModelDataSource: enums", func(m *CreateModelInput) {
			m.Containers[1].ModelDataURL = ""
			m.Containers[1].ModelDataSource = json.RawMessage(`{"S3DataSource":{"S3Uri":"s3://b/p/","S3DataType":"Prefix","CompressionType":"Zip"}}`)
		}, "2 validation errors detected: Value 'Prefix' at 'containers.2.member.modelDataSource.s3DataSource.s3DataType' failed to satisfy constraint: Member must satisfy enum value set: [S3Prefix, S3Object]; " +
			"Value 'Zip' at 'containers.2.member.modelDataSource.s3DataSource.compressionType' failed to satisfy constraint: Member must satisfy enum value set: [None, Gzip]"},
		{"ModelDataSource: a prefix without its slash", func(m *CreateModelInput) {
			m.Containers[1].ModelDataURL = ""
			m.Containers[1].ModelDataSource = json.RawMessage(`{"S3DataSource":{"S3Uri":"s3://b/llm","S3DataType":"S3Prefix","CompressionType":"None"}}`)
		}, `ModelDataSource.S3DataSource.S3Uri must end with a slash for S3DataType S3Prefix (container "german"): it names the folder of the model's files.`},
		{"ModelDataSource: a compressed prefix", func(m *CreateModelInput) {
			m.Containers[1].ModelDataURL = ""
			m.Containers[1].ModelDataSource = json.RawMessage(`{"S3DataSource":{"S3Uri":"s3://b/llm/","S3DataType":"S3Prefix","CompressionType":"Gzip"}}`)
		}, `ModelDataSource.S3DataSource with S3DataType S3Prefix needs CompressionType None (container "german") (an uncompressed folder); for one model.tar.gz use S3Object and Gzip.`},
		{"ModelDataSource: a hub", func(m *CreateModelInput) {
			m.Containers[1].ModelDataURL = ""
			m.Containers[1].ModelDataSource = json.RawMessage(`{"S3DataSource":{"S3Uri":"s3://b/llm/","S3DataType":"S3Prefix","CompressionType":"None","HubAccessConfig":{"HubContentArn":"x"}}}`)
		}, `ModelDataSource.S3DataSource.HubAccessConfig is not supported by mce (container "german"): give the S3Uri of the model data.`},
		{"ModelDataSource and ModelDataUrl", func(m *CreateModelInput) {
			m.Containers[1].ModelDataSource = json.RawMessage(`{"S3DataSource":{"S3Uri":"s3://b/llm/","S3DataType":"S3Prefix","CompressionType":"None"}}`)
		}, `Specify either ModelDataUrl or ModelDataSource, not both (container "german").`},
		{"ModelDataSource with an unknown member", func(m *CreateModelInput) {
			m.Containers[1].ModelDataURL = ""
			m.Containers[1].ModelDataSource = json.RawMessage(`{"S3DataSource":{"S3Uri":"s3://b/llm/","S3DataType":"S3Prefix","CompressionType":"None","Bogus":1}}`)
		}, "1 validation error detected: Value at 'containers.2.member.modelDataSource' failed to satisfy constraint: Member must be a ModelDataSource structure: S3DataSource.Bogus: unknown field"},
		{"null kept-raw members count as absent", func(m *CreateModelInput) {
			m.Containers[1].ModelDataSource = json.RawMessage(`null`)
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := directModel()
			tt.mutate(&m)
			if got := validationMessage(t, m.Validate()); got != tt.want {
				t.Errorf("Validate()\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}
}

func fillTags(tags []Tag) {
	for i := range tags {
		tags[i] = Tag{Key: fmt.Sprintf("k%d", i), Value: "v"}
	}
}

// oneVariantConfig is a valid endpoint configuration; tests mutate copies.
func oneVariantConfig() CreateEndpointConfigInput {
	return CreateEndpointConfigInput{
		EndpointConfigName: "ab-config",
		ProductionVariants: []ProductionVariant{{
			VariantName: "AllTraffic", ModelName: "ab-model", InitialInstanceCount: ptr[int32](1), InstanceType: "ml.m5.large",
		}},
	}
}

func TestCreateEndpointConfigValidate(t *testing.T) {
	const prefix1 = "1 validation error detected: "
	const pv = "productionVariants.1.member."
	tests := []struct {
		name   string
		mutate func(c *CreateEndpointConfigInput)
		want   string
	}{
		{"valid", func(c *CreateEndpointConfigInput) {}, ""},
		{"valid with every honoured member", func(c *CreateEndpointConfigInput) {
			v := &c.ProductionVariants[0]
			v.InitialVariantWeight = ptr(0.0)
			v.ContainerStartupHealthCheckTimeoutInSeconds = ptr[int32](3600)
			v.ModelDataDownloadTimeoutInSeconds = ptr[int32](60)
			v.RoutingConfig = &RoutingConfig{RoutingStrategy: RoutingRandom}
			v.InstanceType = InstanceTypeLocalGPU
		}, ""},
		{"model name as SageMaker reports it", func(c *CreateEndpointConfigInput) { c.ProductionVariants[0].ModelName = "ENTER MODEL NAME" },
			// The exact text a real CreateEndpointConfig returned (https://github.com/aws/amazon-sagemaker-examples/issues/2236).
			prefix1 + "Value 'ENTER MODEL NAME' at 'productionVariants.1.member.modelName' failed to satisfy constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9])*"},
		// A variant without ModelName hosts inference components, which
		// need ExecutionRoleArn on the configuration.
		{"missing model name", func(c *CreateEndpointConfigInput) { c.ProductionVariants[0].ModelName = "" },
			"ExecutionRoleArn is required on the endpoint configuration when its production variants name no ModelName (an endpoint for inference components)."},
		{"inference components", func(c *CreateEndpointConfigInput) {
			c.ProductionVariants[0].ModelName = ""
			c.ExecutionRoleARN = "arn:aws:iam::123456789012:role/ic"
		}, ""},
		{"inference components and a model mixed", func(c *CreateEndpointConfigInput) {
			c.ExecutionRoleARN = "arn:aws:iam::123456789012:role/ic"
			c.ProductionVariants = append(c.ProductionVariants, c.ProductionVariants[0])
			c.ProductionVariants[1].VariantName, c.ProductionVariants[1].ModelName = "Components", ""
		}, "Either every production variant names a ModelName or none does (an endpoint for inference components); this endpoint configuration mixes both."},
		{"missing variant name", func(c *CreateEndpointConfigInput) { c.ProductionVariants[0].VariantName = "" },
			prefix1 + "Value null at '" + pv + "variantName' failed to satisfy constraint: Member must not be null"},
		{"config name pattern", func(c *CreateEndpointConfigInput) { c.EndpointConfigName = "ab_config" },
			prefix1 + "Value 'ab_config' at 'endpointConfigName' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"},
		{"no variants list", func(c *CreateEndpointConfigInput) { c.ProductionVariants = nil },
			prefix1 + "Value null at 'productionVariants' failed to satisfy constraint: Member must not be null"},
		{"empty variants list", func(c *CreateEndpointConfigInput) { c.ProductionVariants = []ProductionVariant{} },
			prefix1 + "Value at 'productionVariants' failed to satisfy constraint: Member must have length greater than or equal to 1"},
		{"11 variants", func(c *CreateEndpointConfigInput) {
			for i := range 10 {
				v := c.ProductionVariants[0]
				v.VariantName = fmt.Sprintf("v%d", i)
				c.ProductionVariants = append(c.ProductionVariants, v)
			}
		}, prefix1 + "Value at 'productionVariants' failed to satisfy constraint: Member must have length less than or equal to 10"},
		{"zero instances", func(c *CreateEndpointConfigInput) { c.ProductionVariants[0].InitialInstanceCount = ptr[int32](0) },
			prefix1 + "Value '0' at '" + pv + "initialInstanceCount' failed to satisfy constraint: Member must have value greater than or equal to 1"},
		{"negative weight", func(c *CreateEndpointConfigInput) { c.ProductionVariants[0].InitialVariantWeight = ptr(-1.0) },
			prefix1 + "Value '-1.0' at '" + pv + "initialVariantWeight' failed to satisfy constraint: Member must have value greater than or equal to 0"},
		{"health check timeout too short", func(c *CreateEndpointConfigInput) {
			c.ProductionVariants[0].ContainerStartupHealthCheckTimeoutInSeconds = ptr[int32](59)
		}, prefix1 + "Value '59' at '" + pv + "containerStartupHealthCheckTimeoutInSeconds' failed to satisfy constraint: Member must have value greater than or equal to 60"},
		{"health check timeout too long", func(c *CreateEndpointConfigInput) {
			c.ProductionVariants[0].ContainerStartupHealthCheckTimeoutInSeconds = ptr[int32](3601)
		}, prefix1 + "Value '3601' at '" + pv + "containerStartupHealthCheckTimeoutInSeconds' failed to satisfy constraint: Member must have value less than or equal to 3600"},
		{"other integer ranges", func(c *CreateEndpointConfigInput) {
			v := &c.ProductionVariants[0]
			v.ModelDataDownloadTimeoutInSeconds = ptr[int32](30)
			v.VolumeSizeInGB = ptr[int32](513)
			v.VariantInstanceProvisionTimeoutInSeconds = ptr[int32](299)
		}, "3 validation errors detected: " +
			"Value '30' at '" + pv + "modelDataDownloadTimeoutInSeconds' failed to satisfy constraint: Member must have value greater than or equal to 60; " +
			"Value '513' at '" + pv + "volumeSizeInGB' failed to satisfy constraint: Member must have value less than or equal to 512; " +
			"Value '299' at '" + pv + "variantInstanceProvisionTimeoutInSeconds' failed to satisfy constraint: Member must have value greater than or equal to 300"},
		{"instance type", func(c *CreateEndpointConfigInput) { c.ProductionVariants[0].InstanceType = "m5.large" },
			prefix1 + "Value 'm5.large' at '" + pv + "instanceType' failed to satisfy constraint: Member must satisfy enum value set: [local, local_gpu, ml.<family>.<size>]"},
		{"routing strategy", func(c *CreateEndpointConfigInput) {
			c.ProductionVariants[0].RoutingConfig = &RoutingConfig{RoutingStrategy: "ROUND_ROBIN"}
		}, prefix1 + "Value 'ROUND_ROBIN' at '" + pv + "routingConfig.routingStrategy' failed to satisfy constraint: Member must satisfy enum value set: [LEAST_OUTSTANDING_REQUESTS, RANDOM, PREFIX_AWARE]"},
		{"prefix aware", func(c *CreateEndpointConfigInput) {
			c.ProductionVariants[0].RoutingConfig = &RoutingConfig{RoutingStrategy: "PREFIX_AWARE",
				PrefixAwareRoutingConfig: &PrefixAwareRoutingConfig{PrefixLength: ptr[int32](1024), ConcurrencyThreshold: ptr[int32](8)}}
		}, ""},
		{"prefix aware out of range", func(c *CreateEndpointConfigInput) {
			c.ProductionVariants[0].RoutingConfig = &RoutingConfig{RoutingStrategy: "PREFIX_AWARE",
				PrefixAwareRoutingConfig: &PrefixAwareRoutingConfig{PrefixLength: ptr[int32](1023), ConcurrencyThreshold: ptr[int32](1025)}}
		}, "2 validation errors detected: " +
			"Value '1023' at '" + pv + "routingConfig.prefixAwareRoutingConfig.prefixLength' failed to satisfy constraint: Member must have value greater than or equal to 1024; " +
			"Value '1025' at '" + pv + "routingConfig.prefixAwareRoutingConfig.concurrencyThreshold' failed to satisfy constraint: Member must have value less than or equal to 1024"},
		{"prefix aware without its configuration", func(c *CreateEndpointConfigInput) {
			c.ProductionVariants[0].RoutingConfig = &RoutingConfig{RoutingStrategy: "PREFIX_AWARE"}
		}, `PrefixAwareRoutingConfig is required when RoutingStrategy is PREFIX_AWARE (variant "AllTraffic").`},
		{"prefix aware configuration with another strategy", func(c *CreateEndpointConfigInput) {
			c.ProductionVariants[0].RoutingConfig = &RoutingConfig{RoutingStrategy: "RANDOM",
				PrefixAwareRoutingConfig: &PrefixAwareRoutingConfig{PrefixLength: ptr[int32](1024), ConcurrencyThreshold: ptr[int32](8)}}
		}, `PrefixAwareRoutingConfig is only valid when RoutingStrategy is PREFIX_AWARE (variant "AllTraffic").`},
		{"prefix aware missing threshold", func(c *CreateEndpointConfigInput) {
			c.ProductionVariants[0].RoutingConfig = &RoutingConfig{RoutingStrategy: "PREFIX_AWARE",
				PrefixAwareRoutingConfig: &PrefixAwareRoutingConfig{PrefixLength: ptr[int32](1024)}}
		}, `PrefixAwareRoutingConfig.ConcurrencyThreshold is required when RoutingStrategy is PREFIX_AWARE (variant "AllTraffic").`},
		{"managed instance scaling", func(c *CreateEndpointConfigInput) {
			c.ProductionVariants[0].ManagedInstanceScaling = json.RawMessage(`{"Status":"ENABLED","MinInstanceCount":1,"MaxInstanceCount":3}`)
		}, ""},
		{"managed instance scaling out of range", func(c *CreateEndpointConfigInput) {
			c.ProductionVariants[0].ManagedInstanceScaling = json.RawMessage(`{"Status":"ON","MinInstanceCount":4,"MaxInstanceCount":3}`)
		}, "2 validation errors detected: " +
			"Value 'ON' at '" + pv + "managedInstanceScaling.status' failed to satisfy constraint: Member must satisfy enum value set: [ENABLED, DISABLED]; " +
			"Value '4' at '" + pv + "managedInstanceScaling.minInstanceCount' failed to satisfy constraint: Member must be less than or equal to MaxInstanceCount"},
		{"managed instance scaling not an object", func(c *CreateEndpointConfigInput) {
			c.ProductionVariants[0].ManagedInstanceScaling = json.RawMessage(`"ENABLED"`)
		}, prefix1 + "Value at '" + pv + "managedInstanceScaling' failed to satisfy constraint: Member must be an object {Status, MinInstanceCount, MaxInstanceCount}"},
		{"KMS key too long", func(c *CreateEndpointConfigInput) { c.KMSKeyID = strings.Repeat("k", 2049) },
			prefix1 + "Value '" + strings.Repeat("k", 2049) + "' at 'kmsKeyId' failed to satisfy constraint: Member must have length less than or equal to 2048"},

		{"serverless is refused", func(c *CreateEndpointConfigInput) {
			v := &c.ProductionVariants[0]
			v.ServerlessConfig = json.RawMessage(`{"MemorySizeInMB":2048,"MaxConcurrency":5}`)
			v.InstanceType, v.InitialInstanceCount = "", nil
		}, `ServerlessConfig is not supported by mce (production variant "AllTraffic"): give InstanceType and InitialInstanceCount instead.`},
		{"async without an output path", func(c *CreateEndpointConfigInput) {
			c.AsyncInferenceConfig = &AsyncInferenceConfig{OutputConfig: &AsyncInferenceOutputConfig{}}
		}, prefix1 + "Value null at 'asyncInferenceConfig.outputConfig.s3OutputPath' failed to satisfy constraint: Member must not be null"},
		{"async without an output config", func(c *CreateEndpointConfigInput) {
			c.AsyncInferenceConfig = &AsyncInferenceConfig{}
		}, prefix1 + "Value null at 'asyncInferenceConfig.outputConfig' failed to satisfy constraint: Member must not be null"},
		{"async paths and concurrency", func(c *CreateEndpointConfigInput) {
			c.AsyncInferenceConfig = &AsyncInferenceConfig{
				ClientConfig: &AsyncInferenceClientConfig{MaxConcurrentInvocationsPerInstance: ptr[int32](1001)},
				OutputConfig: &AsyncInferenceOutputConfig{S3OutputPath: "/tmp/out", S3FailurePath: "s3:///x"}}
		}, "3 validation errors detected: " +
			"Value '1001' at 'asyncInferenceConfig.clientConfig.maxConcurrentInvocationsPerInstance' failed to satisfy constraint: Member must have value less than or equal to 1000; " +
			"Value '/tmp/out' at 'asyncInferenceConfig.outputConfig.s3OutputPath' failed to satisfy constraint: Member must satisfy regular expression pattern: (https|s3)://([^/])/?(.*); " +
			"Value 's3:///x' at 'asyncInferenceConfig.outputConfig.s3FailurePath' failed to satisfy constraint: Member must satisfy regular expression pattern: (https|s3)://([^/])/?(.*)"},
		{"async notifications and https paths are refused", func(c *CreateEndpointConfigInput) {
			c.AsyncInferenceConfig = &AsyncInferenceConfig{OutputConfig: &AsyncInferenceOutputConfig{
				S3OutputPath: "https://b.s3.amazonaws.com/out", NotificationConfig: json.RawMessage(`{"SuccessTopic":"arn:aws:sns:us-east-1:123456789012:t"}`)}}
		}, "NotificationConfig is not supported by mce: it publishes to no SNS topic. Poll the OutputLocation (or FailureLocation) that InvokeEndpointAsync returns. " +
			`mce writes asynchronous results to s3:// locations only; "https://b.s3.amazonaws.com/out" is an https:// URL.`},
		{"the explainer is refused, capture is not", func(c *CreateEndpointConfigInput) {
			c.DataCaptureConfig = &DataCaptureConfig{InitialSamplingPercentage: ptr[int32](100), DestinationS3URI: "s3://b/capture",
				CaptureOptions: []CaptureOption{{CaptureMode: CaptureInputAndOutput}}}
			c.ExplainerConfig = json.RawMessage(`{}`)
		}, "ExplainerConfig is not supported by mce: online explainability needs SageMaker Clarify."},
		{"missing instance type", func(c *CreateEndpointConfigInput) { c.ProductionVariants[0].InstanceType = "" },
			`Production variant "AllTraffic" needs an InstanceType: mce runs instance-based variants only.`},
		{"missing instance count", func(c *CreateEndpointConfigInput) { c.ProductionVariants[0].InitialInstanceCount = nil },
			`Production variant "AllTraffic" needs an InitialInstanceCount.`},
		{"duplicate variant names", func(c *CreateEndpointConfigInput) {
			c.ProductionVariants = append(c.ProductionVariants, c.ProductionVariants[0])
		}, `VariantName must be unique within an endpoint configuration; "AllTraffic" appears more than once.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := oneVariantConfig()
			tt.mutate(&c)
			if got := validationMessage(t, c.Validate()); got != tt.want {
				t.Errorf("Validate()\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}
}

func TestCreateEndpointValidate(t *testing.T) {
	tests := []struct {
		name string
		in   CreateEndpointInput
		want string
	}{
		{"valid", CreateEndpointInput{EndpointName: "ab-test", EndpointConfigName: "ab-config"}, ""},
		{"missing both names", CreateEndpointInput{},
			"2 validation errors detected: Value null at 'endpointName' failed to satisfy constraint: Member must not be null; " +
				"Value null at 'endpointConfigName' failed to satisfy constraint: Member must not be null"},
		{"name pattern", CreateEndpointInput{EndpointName: "ab test", EndpointConfigName: "c"},
			"1 validation error detected: Value 'ab test' at 'endpointName' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"},
		{"tag value too long", CreateEndpointInput{EndpointName: "e", EndpointConfigName: "c", Tags: []Tag{{Key: "k", Value: strings.Repeat("v", 257)}}},
			"1 validation error detected: Value '" + strings.Repeat("v", 257) + "' at 'tags.1.member.value' failed to satisfy constraint: Member must have length less than or equal to 256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := validationMessage(t, tt.in.Validate()); got != tt.want {
				t.Errorf("Validate()\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	m := directModel()
	m.ExecutionRoleARN = "arn:aws:iam::123456789012:role/SageMakerRole"
	m.Tags = []Tag{{Key: "k"}}
	m.VpcConfig = &VpcConfig{Subnets: []string{"subnet-1"}}
	m.EnableNetworkIsolation = ptr(true)
	m.Containers[0].ImageConfig = &ImageConfig{RepositoryAccessMode: "Platform"}
	m.Containers[1].MultiModelConfig = &MultiModelConfig{ModelCacheSetting: "Disabled"}

	primary := CreateModelInput{ModelName: "p", PrimaryContainer: &ContainerDefinition{ContainerHostname: "named", Image: "i"}}

	c := oneVariantConfig()
	c.KMSKeyID = "key"
	c.MetricsConfig = &MetricsConfig{EnableEnhancedMetrics: ptr(true)}
	c.ProductionVariants[0].VolumeSizeInGB = ptr[int32](30)
	c.ProductionVariants[0].ManagedInstanceScaling = json.RawMessage(`{"Status":"ENABLED"}`)
	c.ProductionVariants[0].EnableSSMAccess = ptr(false) // false asks for nothing
	c.DataCaptureConfig = &DataCaptureConfig{InitialSamplingPercentage: ptr[int32](20), DestinationS3URI: "s3://b/capture",
		CaptureOptions: []CaptureOption{{CaptureMode: CaptureInput}}, KMSKeyID: "alias/capture"}

	plain := directModel()

	e := CreateEndpointInput{EndpointName: "ab-test", EndpointConfigName: "ab-config", Tags: []Tag{{Key: "k"}}, DeploymentConfig: json.RawMessage(`{}`)}

	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"model", m.Warnings(), []string{
			`model "ab-model": ExecutionRoleArn ignored locally`,
			`model "ab-model": VpcConfig ignored locally`,
			`model "ab-model": ImageConfig (container "english") ignored locally`,
			`model "ab-model": MultiModelConfig ignored (container "german"): the container is not in MultiModel mode`,
		}},
		{"primary container hostname", primary.Warnings(), []string{
			`model "p": PrimaryContainer.ContainerHostname ignored: a PrimaryContainer is always named "primary"`,
		}},
		{"endpoint configuration", c.Warnings(), []string{
			`endpoint configuration "ab-config": KmsKeyId ignored locally`,
			`endpoint configuration "ab-config": MetricsConfig ignored locally`,
			`endpoint configuration "ab-config": DataCaptureConfig.KmsKeyId ignored locally`,
			`endpoint configuration "ab-config": VolumeSizeInGB (production variant "AllTraffic") ignored locally`,
			`endpoint configuration "ab-config": ManagedInstanceScaling (production variant "AllTraffic") ignored locally`,
		}},
		{"endpoint: DeploymentConfig is honored now", e.Warnings(), nil},
		{"nothing to say", plain.Warnings(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("Warnings()\n got: %q\nwant: %q", tt.got, tt.want)
			}
		})
	}
}

func TestErrorTexts(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantError   string
		wantMessage string
	}{
		{"validation error with its source",
			&ValidationError{Messages: []string{"a", "b"}, Constraints: true, File: "ab.yaml", Path: "Models[1]"},
			"ab.yaml: Models[1]: 2 validation errors detected: a; b", "2 validation errors detected: a; b"},
		{"rule failure from the API",
			&ValidationError{Messages: []string{"One.", "Two."}}, "One. Two.", "One. Two."},
		{"missing model",
			&NotFoundError{Kind: KindModel, Name: "M", ARN: ARN("us-east-1", "123456789012", KindModel, "M"), File: "c.yaml", Path: "EndpointConfigs[0]"},
			`c.yaml: EndpointConfigs[0]: Could not find model "arn:aws:sagemaker:us-east-1:123456789012:model/m".`,
			`Could not find model "arn:aws:sagemaker:us-east-1:123456789012:model/m".`},
		{"missing configuration",
			&NotFoundError{Kind: KindEndpointConfig, Name: "c", ARN: ARN("eu-west-1", "123456789012", KindEndpointConfig, "c")},
			`Could not find endpoint configuration "arn:aws:sagemaker:eu-west-1:123456789012:endpoint-config/c".`,
			`Could not find endpoint configuration "arn:aws:sagemaker:eu-west-1:123456789012:endpoint-config/c".`},
		{"existing endpoint",
			&AlreadyExistsError{Kind: KindEndpoint, Name: "E", ARN: ARN("us-east-1", "123456789012", KindEndpoint, "E"), File: "b.yaml", Path: "Endpoints[0]", Previous: "a.yaml"},
			`b.yaml: Endpoints[0]: Cannot create already existing endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/e". (first defined in a.yaml)`,
			`Cannot create already existing endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/e".`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.wantError {
				t.Errorf("Error()\n got: %s\nwant: %s", got, tt.wantError)
			}
			msg := tt.err.(interface{ Message() string }).Message()
			if msg != tt.wantMessage {
				t.Errorf("Message()\n got: %s\nwant: %s", msg, tt.wantMessage)
			}
		})
	}
}

func TestARN(t *testing.T) {
	tests := []struct {
		region, account string
		kind            Kind
		name, want      string
	}{
		{"us-east-1", "123456789012", KindEndpoint, "DEMO-ImageClassification", "arn:aws:sagemaker:us-east-1:123456789012:endpoint/demo-imageclassification"},
		{"cn-north-1", "123456789012", KindModel, "m", "arn:aws-cn:sagemaker:cn-north-1:123456789012:model/m"},
		{"us-gov-west-1", "123456789012", KindEndpointConfig, "C", "arn:aws-us-gov:sagemaker:us-gov-west-1:123456789012:endpoint-config/c"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := ARN(tt.region, tt.account, tt.kind, tt.name); got != tt.want {
				t.Errorf("ARN() = %s, want %s", got, tt.want)
			}
		})
	}
}
