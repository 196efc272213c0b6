package spec

import (
	"encoding/json"

	"github.com/mce-run/mce/containers"
)

// The request shapes below carry SageMaker's member names as JSON keys
// (PascalCase, as boto3 sends them) so that the file format, awsJson1_1
// request bodies and Describe* responses share them. Members that mce only
// accepts and ignores, or refuses, but never reads are kept as
// json.RawMessage so that they round-trip unchanged. Optional members whose
// absence differs from their zero value are pointers; all members are
// omitempty. Validate, Warnings and BuildPlan only read the shapes, so one
// value may be shared by concurrent readers.

// CreateModelInput is the CreateModel request (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateModel.html).
type CreateModelInput struct {
	ModelName                string                    `json:"ModelName,omitempty"`
	PrimaryContainer         *ContainerDefinition      `json:"PrimaryContainer,omitempty"`
	Containers               []ContainerDefinition     `json:"Containers,omitempty"`
	InferenceExecutionConfig *InferenceExecutionConfig `json:"InferenceExecutionConfig,omitempty"`
	ExecutionRoleARN         string                    `json:"ExecutionRoleArn,omitempty"` // ignored locally
	Tags                     []Tag                     `json:"Tags,omitempty"`             // kept: ListTags
	VpcConfig                *VpcConfig                `json:"VpcConfig,omitempty"`        // ignored locally
	EnableNetworkIsolation   *bool                     `json:"EnableNetworkIsolation,omitempty"`
}

// ContainerDefinition is one container of a model
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ContainerDefinition.html).
type ContainerDefinition struct {
	// ContainerHostname is the container's DNS name and its name in
	// TargetContainerHostname, logs and metrics. When no container of a
	// model names one, mce assigns container-1, container-2, … by position;
	// a PrimaryContainer is always "primary".
	ContainerHostname string       `json:"ContainerHostname,omitempty"`
	Image             string       `json:"Image,omitempty"`
	ImageConfig       *ImageConfig `json:"ImageConfig,omitempty"` // ignored locally
	// Mode is "SingleModel" (default) or "MultiModel".
	Mode string `json:"Mode,omitempty"`
	// ModelDataURL is an s3:// or https:// URL, or mce's file:// for local
	// artifacts: file:///abs/path, or file://rel/path relative to the folder
	// of the file that defines the model. For MultiModel it is a prefix.
	ModelDataURL               string            `json:"ModelDataUrl,omitempty"`
	ModelDataSource            json.RawMessage   `json:"ModelDataSource,omitempty"`            // see ModelData
	AdditionalModelDataSources json.RawMessage   `json:"AdditionalModelDataSources,omitempty"` // see AdditionalModelData
	Environment                map[string]string `json:"Environment,omitzero"`                 // {} is kept: Describe echoes it
	ModelPackageName           string            `json:"ModelPackageName,omitempty"`           // refused
	InferenceSpecificationName string            `json:"InferenceSpecificationName,omitempty"` // refused
	MultiModelConfig           *MultiModelConfig `json:"MultiModelConfig,omitempty"`
	ContainerMetricsConfig     json.RawMessage   `json:"ContainerMetricsConfig,omitempty"` // ignored locally

	// Resources is an mce extension, not part of SageMaker's shape: local
	// limits for the container. SageMaker clients ignore it in responses.
	Resources *containers.Resources `json:"Resources,omitempty"`
}

// ImageConfig says how SageMaker pulls an image; mce uses local images.
type ImageConfig struct {
	RepositoryAccessMode string                `json:"RepositoryAccessMode,omitempty"`
	RepositoryAuthConfig *RepositoryAuthConfig `json:"RepositoryAuthConfig,omitempty"`
}

// RepositoryAuthConfig is part of ImageConfig.
type RepositoryAuthConfig struct {
	RepositoryCredentialsProviderARN string `json:"RepositoryCredentialsProviderArn,omitempty"`
}

// MultiModelConfig configures a MultiModel container.
type MultiModelConfig struct {
	// ModelCacheSetting is "Enabled" (default) or "Disabled".
	ModelCacheSetting string `json:"ModelCacheSetting,omitempty"`
}

// InferenceExecutionConfig chooses how a multi-container model is invoked.
type InferenceExecutionConfig struct {
	// Mode is "Serial" (the default when the config is absent) or "Direct".
	Mode string `json:"Mode,omitempty"`
}

// Tag is a resource tag; mce keeps tags (AddTags, ListTags, DeleteTags) but
// gives them no meaning.
type Tag struct {
	Key   string `json:"Key"`
	Value string `json:"Value"` // may be empty, and is then still sent
}

// VpcConfig is accepted and ignored: local containers run on mce's networks.
type VpcConfig struct {
	SecurityGroupIDs []string `json:"SecurityGroupIds,omitempty"`
	Subnets          []string `json:"Subnets,omitempty"`
}

// CreateEndpointConfigInput is the CreateEndpointConfig request
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateEndpointConfig.html).
type CreateEndpointConfigInput struct {
	EndpointConfigName       string                `json:"EndpointConfigName,omitempty"`
	ProductionVariants       []ProductionVariant   `json:"ProductionVariants,omitempty"`
	DataCaptureConfig        *DataCaptureConfig    `json:"DataCaptureConfig,omitempty"`        // host/capture carries it out
	Tags                     []Tag                 `json:"Tags,omitempty"`                     // kept: ListTags
	KMSKeyID                 string                `json:"KmsKeyId,omitempty"`                 // ignored locally
	AsyncInferenceConfig     *AsyncInferenceConfig `json:"AsyncInferenceConfig,omitempty"`     // asynchronous inference
	ExplainerConfig          json.RawMessage       `json:"ExplainerConfig,omitempty"`          // refused
	ShadowProductionVariants []ProductionVariant   `json:"ShadowProductionVariants,omitempty"` // shadow.go
	ExecutionRoleARN         string                `json:"ExecutionRoleArn,omitempty"`         // ignored locally
	VpcConfig                *VpcConfig            `json:"VpcConfig,omitempty"`                // ignored locally
	EnableNetworkIsolation   *bool                 `json:"EnableNetworkIsolation,omitempty"`   // isolates every variant
	MetricsConfig            *MetricsConfig        `json:"MetricsConfig,omitempty"`            // ignored locally
}

// AsyncInferenceConfig makes an endpoint asynchronous: InvokeEndpointAsync
// queues requests whose input and output live in S3.
type AsyncInferenceConfig struct {
	ClientConfig *AsyncInferenceClientConfig `json:"ClientConfig,omitempty"`
	OutputConfig *AsyncInferenceOutputConfig `json:"OutputConfig,omitempty"`
}

// AsyncInferenceClientConfig bounds the requests sent to each instance.
type AsyncInferenceClientConfig struct {
	// MaxConcurrentInvocationsPerInstance is 1–1000; unset means
	// DefaultAsyncConcurrency.
	MaxConcurrentInvocationsPerInstance *int32 `json:"MaxConcurrentInvocationsPerInstance,omitempty"`
}

// AsyncInferenceOutputConfig says where answers and failures go.
type AsyncInferenceOutputConfig struct {
	S3OutputPath  string `json:"S3OutputPath,omitempty"`
	S3FailurePath string `json:"S3FailurePath,omitempty"`
	KMSKeyID      string `json:"KmsKeyId,omitempty"` // ignored locally
	// NotificationConfig (SNS topics) is refused: mce publishes to no SNS.
	NotificationConfig json.RawMessage `json:"NotificationConfig,omitempty"`
}

// ProductionVariant is one variant of an endpoint configuration
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ProductionVariant.html).
type ProductionVariant struct {
	VariantName          string   `json:"VariantName,omitempty"`
	ModelName            string   `json:"ModelName,omitempty"`
	InitialInstanceCount *int32   `json:"InitialInstanceCount,omitempty"`
	InstanceType         string   `json:"InstanceType,omitempty"`
	InitialVariantWeight *float64 `json:"InitialVariantWeight,omitempty"` // default 1.0
	// ContainerStartupHealthCheckTimeoutInSeconds is 60–3600; default 240.
	ContainerStartupHealthCheckTimeoutInSeconds *int32          `json:"ContainerStartupHealthCheckTimeoutInSeconds,omitempty"`
	ModelDataDownloadTimeoutInSeconds           *int32          `json:"ModelDataDownloadTimeoutInSeconds,omitempty"`
	RoutingConfig                               *RoutingConfig  `json:"RoutingConfig,omitempty"`
	VolumeSizeInGB                              *int32          `json:"VolumeSizeInGB,omitempty"`  // ignored locally
	AcceleratorType                             string          `json:"AcceleratorType,omitempty"` // ignored locally
	ServerlessConfig                            json.RawMessage `json:"ServerlessConfig,omitempty"`
	CoreDumpConfig                              *CoreDumpConfig `json:"CoreDumpConfig,omitempty"` // ignored locally
	EnableSSMAccess                             *bool           `json:"EnableSSMAccess,omitempty"`
	ManagedInstanceScaling                      json.RawMessage `json:"ManagedInstanceScaling,omitempty"`
	InferenceAmiVersion                         string          `json:"InferenceAmiVersion,omitempty"`
	InstancePools                               json.RawMessage `json:"InstancePools,omitempty"`
	VariantInstanceProvisionTimeoutInSeconds    *int32          `json:"VariantInstanceProvisionTimeoutInSeconds,omitempty"`
	CapacityReservationConfig                   json.RawMessage `json:"CapacityReservationConfig,omitempty"`
	AcceleratorPartitionLayouts                 json.RawMessage `json:"AcceleratorPartitionLayouts,omitempty"`
}

// ManagedInstanceScaling is a variant's ManagedInstanceScaling: kept as
// written (the raw member) and read through ProductionVariant.managedScaling.
// On the kubernetes engine an ENABLED MaxInstanceCount bounds the nodes the
// variant's inference-component copies may occupy.
type ManagedInstanceScaling struct {
	Status           string `json:"Status,omitempty"` // ENABLED or DISABLED
	MinInstanceCount *int32 `json:"MinInstanceCount,omitempty"`
	MaxInstanceCount *int32 `json:"MaxInstanceCount,omitempty"`
}

// ManagedInstanceScaling's statuses.
const (
	ManagedScalingEnabled  = "ENABLED"
	ManagedScalingDisabled = "DISABLED"
)

// managedScaling decodes the variant's ManagedInstanceScaling; ok is false
// when it is absent or not an object of that shape.
func (v ProductionVariant) managedScaling() (ManagedInstanceScaling, bool) {
	var m ManagedInstanceScaling
	if !present(v.ManagedInstanceScaling) || json.Unmarshal(v.ManagedInstanceScaling, &m) != nil {
		return m, false
	}
	return m, true
}

// RoutingConfig chooses how requests spread over a variant's instances.
type RoutingConfig struct {
	// RoutingStrategy is "LEAST_OUTSTANDING_REQUESTS", "RANDOM" or
	// "PREFIX_AWARE".
	RoutingStrategy string `json:"RoutingStrategy,omitempty"`
	// PrefixAwareRoutingConfig is required with PREFIX_AWARE, and only
	// valid with it.
	PrefixAwareRoutingConfig *PrefixAwareRoutingConfig `json:"PrefixAwareRoutingConfig,omitempty"`
}

// PrefixAwareRoutingConfig configures RoutingStrategy PREFIX_AWARE
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_PrefixAwareRoutingConfig.html):
// the body bytes hashed (1024-65536) and the calls in flight at which the
// prefix's instance is passed over (1-1024). Both are required.
type PrefixAwareRoutingConfig struct {
	PrefixLength         *int32 `json:"PrefixLength,omitempty"`
	ConcurrencyThreshold *int32 `json:"ConcurrencyThreshold,omitempty"`
}

// CoreDumpConfig is accepted and ignored.
type CoreDumpConfig struct {
	DestinationS3URI string `json:"DestinationS3Uri,omitempty"`
	KMSKeyID         string `json:"KmsKeyId,omitempty"`
}

// MetricsConfig is validated, echoed by DescribeEndpoint and otherwise
// ignored: mce publishes every metric at every call (/metrics, and its
// CloudWatch API at one-minute periods or finer).
type MetricsConfig struct {
	EnableEnhancedMetrics           *bool  `json:"EnableEnhancedMetrics,omitempty"`
	EnableDetailedObservability     *bool  `json:"EnableDetailedObservability,omitempty"`
	MetricPublishFrequencyInSeconds *int32 `json:"MetricPublishFrequencyInSeconds,omitempty"`
}

// CreateEndpointInput is the CreateEndpoint request
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateEndpoint.html).
type CreateEndpointInput struct {
	EndpointName       string          `json:"EndpointName,omitempty"`
	EndpointConfigName string          `json:"EndpointConfigName,omitempty"`
	DeploymentConfig   json.RawMessage `json:"DeploymentConfig,omitempty"` // kept: the later updates' LastDeploymentConfig (ParseDeploymentConfig)
	Tags               []Tag           `json:"Tags,omitempty"`             // kept: ListTags
}

// File is the content of one endpoint file: lists of the three requests.
type File struct {
	Models          []CreateModelInput          `json:"Models,omitempty"`
	EndpointConfigs []CreateEndpointConfigInput `json:"EndpointConfigs,omitempty"`
	Endpoints       []CreateEndpointInput       `json:"Endpoints,omitempty"`
	// InferenceComponents are created after the endpoints, on an endpoint
	// of the files or one that exists.
	InferenceComponents []CreateInferenceComponentInput `json:"InferenceComponents,omitempty"`
}
