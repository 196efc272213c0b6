package spec

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
)

// Inference components (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateInferenceComponent.html):
// an endpoint whose production variants name no model hosts components,
// each with its own model, resources and number of copies.

// CreateInferenceComponentInput is the CreateInferenceComponent request.
type CreateInferenceComponentInput struct {
	InferenceComponentName string                           `json:"InferenceComponentName,omitempty"`
	EndpointName           string                           `json:"EndpointName,omitempty"`
	VariantName            string                           `json:"VariantName,omitempty"`
	Specification          *InferenceComponentSpecification `json:"Specification,omitempty"`
	// Specifications (one per instance type of a variant with
	// InstancePools) is refused: mce's variants have one instance type.
	Specifications json.RawMessage                  `json:"Specifications,omitempty"`
	RuntimeConfig  *InferenceComponentRuntimeConfig `json:"RuntimeConfig,omitempty"`
	Tags           []Tag                            `json:"Tags,omitempty"`
}

// InferenceComponentSpecification is what one copy of a component runs.
type InferenceComponentSpecification struct {
	InstanceType                string                                 `json:"InstanceType,omitempty"`
	ModelName                   string                                 `json:"ModelName,omitempty"`
	Container                   *InferenceComponentContainer           `json:"Container,omitempty"`
	StartupParameters           *InferenceComponentStartupParameters   `json:"StartupParameters,omitempty"`
	ComputeResourceRequirements *InferenceComponentComputeRequirements `json:"ComputeResourceRequirements,omitempty"`
	// BaseInferenceComponentName makes an adapter component: its
	// Container.ArtifactUrl is an adapter that its base's copies load
	// (host/components/adapters.go).
	BaseInferenceComponentName string          `json:"BaseInferenceComponentName,omitempty"`
	DataCacheConfig            json.RawMessage `json:"DataCacheConfig,omitempty"` // accepted and echoed
	// SchedulingConfig is echoed as given; its PlacementStrategy decides
	// which instance a new copy goes to on Docker (PlacementStrategy).
	SchedulingConfig json.RawMessage `json:"SchedulingConfig,omitempty"`
}

// The PlacementStrategy values of SchedulingConfig.
const (
	PlacementSpread  = "SPREAD"
	PlacementBinpack = "BINPACK"
)

// componentScheduling is InferenceComponentSchedulingConfig.
// AvailabilityZoneBalance is echoed only: mce's instances are in one zone.
type componentScheduling struct {
	PlacementStrategy       *string         `json:"PlacementStrategy"`
	AvailabilityZoneBalance json.RawMessage `json:"AvailabilityZoneBalance,omitempty"`
}

// PlacementStrategy is the SchedulingConfig's PlacementStrategy, "" when
// there is none (mce then spreads, as with SPREAD).
func (sp *InferenceComponentSpecification) PlacementStrategy() string {
	var sc componentScheduling
	if !present(sp.SchedulingConfig) || json.Unmarshal(sp.SchedulingConfig, &sc) != nil || sc.PlacementStrategy == nil {
		return ""
	}
	return *sc.PlacementStrategy
}

// InferenceComponentContainer is a component's own container, when it names
// no model.
type InferenceComponentContainer struct {
	Image                  string            `json:"Image,omitempty"`
	ArtifactURL            string            `json:"ArtifactUrl,omitempty"`
	Environment            map[string]string `json:"Environment,omitzero"`
	ContainerMetricsConfig json.RawMessage   `json:"ContainerMetricsConfig,omitempty"` // ignored locally
}

// InferenceComponentStartupParameters bounds a copy's start.
type InferenceComponentStartupParameters struct {
	ModelDataDownloadTimeoutInSeconds           *int32 `json:"ModelDataDownloadTimeoutInSeconds,omitempty"`
	ContainerStartupHealthCheckTimeoutInSeconds *int32 `json:"ContainerStartupHealthCheckTimeoutInSeconds,omitempty"`
}

// InferenceComponentComputeRequirements is what one copy needs.
type InferenceComponentComputeRequirements struct {
	NumberOfCpuCoresRequired           *float64 `json:"NumberOfCpuCoresRequired,omitempty"`
	NumberOfAcceleratorDevicesRequired *float64 `json:"NumberOfAcceleratorDevicesRequired,omitempty"`
	MinMemoryRequiredInMb              *int32   `json:"MinMemoryRequiredInMb,omitempty"`
	MaxMemoryRequiredInMb              *int32   `json:"MaxMemoryRequiredInMb,omitempty"`
	// AcceleratorPartitionType is the MIG partition a copy occupies
	// (partitions.go).
	AcceleratorPartitionType *string `json:"AcceleratorPartitionType,omitempty"`
}

// InferenceComponentRuntimeConfig is a component's number of copies.
type InferenceComponentRuntimeConfig struct {
	CopyCount *int32 `json:"CopyCount,omitempty"`
}

// KindInferenceComponent is the ARN resource type of inference components.
const KindInferenceComponent Kind = "inference-component"

const (
	maxArtifactURLLen = 1024
	maxICImageLen     = 255
)

var artifactURLRe = regexp.MustCompile(`^(https|s3)://([^/]+)/?(.*)$|^file://(.+)$`)

const artifactURLPattern = `(https|s3)://([^/]+)/?(.*)`

// ValidateComponentName checks an InferenceComponentName member.
func ValidateComponentName(path, name string) error {
	var c checker
	c.requiredStr(path, name, maxNameLen, modelNameRe, modelNamePattern)
	return c.err()
}

// Validate checks a CreateInferenceComponent request against the service
// model and refuses what mce does not run. The error is a *ValidationError.
func (in *CreateInferenceComponentInput) Validate() error {
	var c checker
	c.requiredStr("inferenceComponentName", in.InferenceComponentName, maxNameLen, modelNameRe, modelNamePattern)
	c.requiredStr("endpointName", in.EndpointName, maxNameLen, entityNameRe, entityNamePattern)
	c.str("variantName", in.VariantName, maxNameLen, entityNameRe, entityNamePattern)
	if in.Specification != nil {
		in.Specification.check(&c, "specification")
	}
	if in.RuntimeConfig != nil {
		checkCopyCount(&c, "runtimeConfig.copyCount", in.RuntimeConfig.CopyCount)
	}
	c.tags("tags", in.Tags)
	if err := c.err(); err != nil {
		return err
	}
	var s semantic
	switch {
	case present(in.Specifications):
		s.add("Specifications (one specification per instance type) is not supported by mce: its variants have one instance type. Give Specification instead.")
	case in.Specification == nil:
		s.add("Specification is required: give the component's ModelName or Container, and its ComputeResourceRequirements.")
	default:
		in.Specification.semantic(&s)
	}
	if in.Specification != nil && in.Specification.BaseInferenceComponentName != "" && in.RuntimeConfig != nil {
		s.add("Omit RuntimeConfig for an adapter inference component (BaseInferenceComponentName): it has no copies of its own and is served by the copies of its base inference component.")
	}
	if in.Specification != nil && in.Specification.BaseInferenceComponentName == "" {
		if in.VariantName == "" {
			s.add("VariantName is required: name the production variant of the endpoint that hosts the inference component.")
		}
		switch {
		case in.RuntimeConfig == nil || in.RuntimeConfig.CopyCount == nil:
			s.add("RuntimeConfig.CopyCount is required.")
		case *in.RuntimeConfig.CopyCount < 1:
			s.add("Inference components copy count must be an integer larger than 0 when the inference component is created; scale it to 0 with UpdateInferenceComponentRuntimeConfig.")
		}
	}
	return s.err()
}

func checkCopyCount(c *checker, path string, n *int32) {
	if n == nil {
		c.fail("null", path, "Member must not be null")
		return
	}
	c.intRange(path, n, 0, -1)
}

// CheckCopyCount checks the CopyCount of UpdateInferenceComponentRuntimeConfig.
func CheckCopyCount(path string, n *int32) error {
	var c checker
	checkCopyCount(&c, path, n)
	return c.err()
}

func (sp *InferenceComponentSpecification) check(c *checker, p string) {
	if sp.InstanceType != "" && !instanceTypeRe.MatchString(sp.InstanceType) {
		c.fail(quote(sp.InstanceType), p+".instanceType", "Member must satisfy enum value set: [local, local_gpu, ml.<family>.<size>]")
	}
	c.str(p+".modelName", sp.ModelName, maxNameLen, modelNameRe, modelNamePattern)
	c.str(p+".baseInferenceComponentName", sp.BaseInferenceComponentName, maxNameLen, modelNameRe, modelNamePattern)
	if k := sp.Container; k != nil {
		c.str(p+".container.image", k.Image, maxICImageLen, imageRe, imagePattern)
		c.str(p+".container.artifactUrl", k.ArtifactURL, maxArtifactURLLen, artifactURLRe, artifactURLPattern)
		if len(k.Environment) > maxEnvEntries {
			c.fail("", p+".container.environment", "Member must have length less than or equal to "+strconv.Itoa(maxEnvEntries))
		}
		for key, v := range k.Environment {
			c.str(p+".container.environment.key", key, maxEnvKeyLen, envKeyRe, envKeyPattern)
			c.str(p+".container.environment.value", v, maxEnvValueLen, nil, "")
		}
	}
	if present(sp.SchedulingConfig) {
		var sc componentScheduling
		switch err := json.Unmarshal(sp.SchedulingConfig, &sc); {
		case err != nil:
			c.fail("", p+".schedulingConfig", "Member must be a structure with PlacementStrategy and AvailabilityZoneBalance")
		case sc.PlacementStrategy == nil:
			c.fail("null", p+".schedulingConfig.placementStrategy", "Member must not be null")
		default:
			c.enum(p+".schedulingConfig.placementStrategy", *sc.PlacementStrategy, PlacementSpread, PlacementBinpack)
			if *sc.PlacementStrategy == "" {
				c.fail(quote(""), p+".schedulingConfig.placementStrategy", "Member must satisfy enum value set: [SPREAD, BINPACK]")
			}
		}
	}
	if st := sp.StartupParameters; st != nil {
		c.intRange(p+".startupParameters.modelDataDownloadTimeoutInSeconds", st.ModelDataDownloadTimeoutInSeconds, 60, 3600)
		c.intRange(p+".startupParameters.containerStartupHealthCheckTimeoutInSeconds", st.ContainerStartupHealthCheckTimeoutInSeconds, 60, 3600)
	}
	if r := sp.ComputeResourceRequirements; r != nil {
		q := p + ".computeResourceRequirements"
		floatMin(c, q+".numberOfCpuCoresRequired", r.NumberOfCpuCoresRequired, 0.25)
		floatMin(c, q+".numberOfAcceleratorDevicesRequired", r.NumberOfAcceleratorDevicesRequired, 1)
		if r.MinMemoryRequiredInMb == nil {
			c.fail("null", q+".minMemoryRequiredInMb", "Member must not be null")
		} else {
			c.intRange(q+".minMemoryRequiredInMb", r.MinMemoryRequiredInMb, 128, -1)
		}
		c.intRange(q+".maxMemoryRequiredInMb", r.MaxMemoryRequiredInMb, 128, -1)
		checkPartitionType(c, q+".acceleratorPartitionType", r.AcceleratorPartitionType)
	}
}

func floatMin(c *checker, path string, v *float64, minV float64) {
	if v == nil {
		return
	}
	if !(*v >= minV) || math.IsInf(*v, 0) {
		c.fail(quote(formatFloat(*v)), path, "Member must have value greater than or equal to "+formatFloat(minV))
	}
}

func (sp *InferenceComponentSpecification) semantic(s *semantic) {
	if k := sp.Container; k != nil {
		checkS3Key(s, "Container.ArtifactUrl", k.ArtifactURL)
		checkS3Key(s, "Container.Environment "+SubmitDirEnv, k.Environment[SubmitDirEnv])
	}
	if sp.BaseInferenceComponentName != "" {
		sp.adapterSemantic(s)
		return
	}
	hasImage := sp.Container != nil && sp.Container.Image != ""
	switch {
	case sp.ModelName != "" && sp.Container != nil:
		s.add("Specify either ModelName or Container in the inference component specification, not both.")
	case sp.ModelName == "" && !hasImage:
		s.add("The inference component specification needs a ModelName, or a Container with an Image.")
	}
	r := sp.ComputeResourceRequirements
	if r == nil {
		s.add("ComputeResourceRequirements is required for an inference component that is not an adapter.")
		return
	}
	if a := r.NumberOfAcceleratorDevicesRequired; a != nil && *a != math.Trunc(*a) {
		s.add("NumberOfAcceleratorDevicesRequired must be a whole number of devices in mce (" + formatFloat(*a) + " was given): each copy holds whole GPUs of its own.")
	}
	partitionTypeSemantic(s, r)
	if r.MinMemoryRequiredInMb != nil && r.MaxMemoryRequiredInMb != nil && *r.MaxMemoryRequiredInMb < *r.MinMemoryRequiredInMb {
		s.add("MaxMemoryRequiredInMb (" + strconv.Itoa(int(*r.MaxMemoryRequiredInMb)) + ") must not be less than MinMemoryRequiredInMb (" + strconv.Itoa(int(*r.MinMemoryRequiredInMb)) + ").")
	}
}

// adapterSemantic holds the rules of an adapter inference component: an
// adapter's artifacts (Container.ArtifactUrl) and nothing that would run a
// container or take resources of its own
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_InferenceComponentSpecification.html).
func (sp *InferenceComponentSpecification) adapterSemantic(s *semantic) {
	const is = "An adapter inference component (BaseInferenceComponentName) "
	if sp.ModelName != "" {
		s.add(is + "is served by its base inference component's model: omit ModelName.")
	}
	switch k := sp.Container; {
	case k == nil || k.ArtifactURL == "":
		s.add(is + "needs Container.ArtifactUrl: the location of the adapter's artifacts.")
	default:
		if k.Image != "" {
			s.add(is + "runs in its base inference component's container: omit Container.Image.")
		}
		if len(k.Environment) > 0 {
			s.add(is + "runs in its base inference component's container: omit Container.Environment.")
		}
	}
	if sp.ComputeResourceRequirements != nil {
		s.add(is + "uses the compute resources of its base inference component: omit ComputeResourceRequirements.")
	}
	if sp.StartupParameters != nil {
		s.add(is + "starts no container of its own: omit StartupParameters.")
	}
}

// IsAdapter reports whether the specification is that of an adapter
// inference component.
func (sp *InferenceComponentSpecification) IsAdapter() bool {
	return sp != nil && sp.BaseInferenceComponentName != ""
}

// ValidateSpecification checks the Specification of UpdateInferenceComponent.
func ValidateSpecification(sp *InferenceComponentSpecification) error {
	var c checker
	sp.check(&c, "specification")
	if err := c.err(); err != nil {
		return err
	}
	var s semantic
	sp.semantic(&s)
	return s.err()
}

// ComponentVariant reports whether a production variant hosts inference
// components: it names no model.
func (v ProductionVariant) ComponentVariant() bool { return v.ModelName == "" }

// InstanceGPUCount is how many GPUs an instance of the type has: all is
// true for local_gpu and for GPU types mce does not know (the machine's
// GPUs then); n is 0 for CPU types.
func InstanceGPUCount(instanceType string) (n int, all bool) {
	switch instanceType {
	case InstanceTypeLocal:
		return 0, false
	case InstanceTypeLocalGPU:
		return 0, true
	}
	n, known := instanceGPUs(instanceType)
	return n, !known
}

// checkComponentVariants holds the rules of endpoint configurations whose
// variants name no model (inference components).
func checkComponentVariants(s *semantic, c *CreateEndpointConfigInput) {
	withModel, without := 0, 0
	for _, v := range c.ProductionVariants {
		if v.ComponentVariant() {
			without++
		} else {
			withModel++
		}
	}
	if without == 0 {
		return
	}
	if withModel > 0 {
		s.add("Either every production variant names a ModelName or none does (an endpoint for inference components); this endpoint configuration mixes both.")
	}
	if c.ExecutionRoleARN == "" {
		s.add("ExecutionRoleArn is required on the endpoint configuration when its production variants name no ModelName (an endpoint for inference components).")
	}
	if c.AsyncInferenceConfig != nil {
		s.add("AsyncInferenceConfig is not supported by mce on an endpoint for inference components (production variants without ModelName).")
	}
}
