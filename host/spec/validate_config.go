package spec

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mce-run/mce/internal/wire"
)

// MaxInstances bounds the instances of one production variant:
// InitialInstanceCount, ManagedInstanceScaling's MinInstanceCount and
// MaxInstanceCount, and UpdateEndpointWeightsAndCapacities'
// DesiredInstanceCount. SageMaker's API reference gives these members only a
// minimum; what bounds them there is the account's quotas of instances for
// endpoint usage (in the tens by default, raised on request), refused as
// ResourceLimitExceeded. mce has no quotas to ask, so it takes one fixed
// bound, far above what one machine runs and above SageMaker's default
// quotas, and refuses more when the configuration is created: nothing
// downstream (instances launched on Docker, nodes allowed on Kubernetes,
// placement of inference-component copies) then sees a count it would
// have to hold in memory.
const MaxInstances = 100

// Routing strategies of RoutingConfig.
const (
	RoutingLeastOutstanding = "LEAST_OUTSTANDING_REQUESTS"
	RoutingRandom           = "RANDOM"
	RoutingPrefixAware      = "PREFIX_AWARE"
)

// metricPublishFrequencies are MetricsConfig.MetricPublishFrequencyInSeconds'
// values.
var metricPublishFrequencies = []int32{10, 30, 60, 120, 180, 240, 300}

// Validate checks a CreateEndpointConfig request against SageMaker's rules
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateEndpointConfig.html)
// and refuses what mce cannot run locally. The error is a
// *ValidationError.
func (c *CreateEndpointConfigInput) Validate() error {
	var ck checker
	ck.requiredStr("endpointConfigName", c.EndpointConfigName, maxNameLen, entityNameRe, entityNamePattern)
	if c.ProductionVariants == nil {
		ck.fail("null", "productionVariants", "Member must not be null")
	} else {
		ck.listLen("productionVariants", len(c.ProductionVariants), 1, maxVariants)
	}
	for i := range c.ProductionVariants {
		checkVariant(&ck, member1("productionVariants", i), &c.ProductionVariants[i])
	}
	if c.ShadowProductionVariants != nil {
		ck.listLen("shadowProductionVariants", len(c.ShadowProductionVariants), 1, maxVariants)
	}
	for i := range c.ShadowProductionVariants {
		checkVariant(&ck, member1("shadowProductionVariants", i), &c.ShadowProductionVariants[i])
	}
	ck.tags("tags", c.Tags)
	ck.str("kmsKeyId", c.KMSKeyID, maxKMSKeyIDLen, nil, "")
	ck.roleARN("executionRoleArn", c.ExecutionRoleARN)
	checkAsync(&ck, c.AsyncInferenceConfig)
	checkDataCapture(&ck, c.DataCaptureConfig)
	if m := c.MetricsConfig; m != nil && m.MetricPublishFrequencyInSeconds != nil &&
		!slices.Contains(metricPublishFrequencies, *m.MetricPublishFrequencyInSeconds) {
		ck.fail(strconv.Itoa(int(*m.MetricPublishFrequencyInSeconds)), "metricsConfig.metricPublishFrequencyInSeconds",
			"Member must satisfy enum value set: [10, 30, 60, 120, 180, 240, 300]")
	}
	if err := ck.err(); err != nil {
		return err
	}

	var s semantic
	for _, r := range []struct {
		set   bool
		field string
		why   string
	}{
		{present(c.ExplainerConfig), "ExplainerConfig", "online explainability needs SageMaker Clarify"},
	} {
		if r.set {
			s.add(r.field + " is not supported by mce: " + r.why + ".")
		}
	}
	checkDataCaptureSemantics(&s, c.DataCaptureConfig)
	if a := c.AsyncInferenceConfig; a != nil { // checkAsync made sure OutputConfig is set
		if present(a.OutputConfig.NotificationConfig) {
			s.add("NotificationConfig is not supported by mce: it publishes to no SNS topic. Poll the OutputLocation (or FailureLocation) that InvokeEndpointAsync returns.")
		}
		for _, p := range []string{a.OutputConfig.S3OutputPath, a.OutputConfig.S3FailurePath} {
			if strings.HasPrefix(p, "https://") {
				s.add("mce writes asynchronous results to s3:// locations only; " + strconv.Quote(p) + " is an https:// URL.")
			}
			checkS3Key(&s, "The asynchronous output path", p)
		}
	}
	first := map[string]bool{}
	for _, v := range c.variants() {
		name := strconv.Quote(v.VariantName)
		kind, Kind := "production variant ", "Production variant "
		if v.shadow {
			kind, Kind = "shadow variant ", "Shadow variant "
		}
		partitionLayoutSemantic(&s, v.ProductionVariant, kind)
		if present(v.ServerlessConfig) {
			s.add("ServerlessConfig is not supported by mce (" + kind + name + "): give InstanceType and InitialInstanceCount instead.")
		} else {
			if v.InstanceType == "" {
				s.add(Kind + name + " needs an InstanceType: mce runs instance-based variants only.")
			}
			if v.InitialInstanceCount == nil {
				s.add(Kind + name + " needs an InitialInstanceCount.")
			}
		}
		// Names are unique across production and shadow variants: both
		// are variants of the endpoint, named alike in its metrics.
		if first[v.VariantName] {
			s.add("VariantName must be unique within an endpoint configuration; " + name + " appears more than once.")
		}
		first[v.VariantName] = true
		checkPrefixAware(&s, name, v.RoutingConfig)
	}
	checkComponentVariants(&s, c)
	checkShadowVariants(&s, c)
	return s.err()
}

func checkVariant(c *checker, p string, v *ProductionVariant) {
	c.requiredStr(p+".variantName", v.VariantName, maxNameLen, entityNameRe, entityNamePattern)
	// ModelName is optional: a variant without one hosts inference
	// components (checkComponentVariants).
	c.str(p+".modelName", v.ModelName, maxNameLen, modelNameRe, modelNamePattern)
	c.intRange(p+".initialInstanceCount", v.InitialInstanceCount, 1, MaxInstances)
	if v.InstanceType != "" && !instanceTypeRe.MatchString(v.InstanceType) {
		c.fail(quote(v.InstanceType), p+".instanceType", "Member must satisfy enum value set: [local, local_gpu, ml.<family>.<size>]")
	}
	if w := v.InitialVariantWeight; w != nil && !(*w >= 0) {
		c.fail(quote(formatFloat(*w)), p+".initialVariantWeight", "Member must have value greater than or equal to 0")
	}
	c.intRange(p+".containerStartupHealthCheckTimeoutInSeconds", v.ContainerStartupHealthCheckTimeoutInSeconds, minHealthTimeoutSec, maxHealthTimeoutSec)
	c.intRange(p+".modelDataDownloadTimeoutInSeconds", v.ModelDataDownloadTimeoutInSeconds, 60, 3600)
	c.intRange(p+".volumeSizeInGB", v.VolumeSizeInGB, 1, 512)
	checkPartitionLayouts(c, p+".acceleratorPartitionLayouts", v.AcceleratorPartitionLayouts)
	if present(v.ManagedInstanceScaling) {
		m, ok := v.managedScaling()
		if !ok {
			c.fail("", p+".managedInstanceScaling", "Member must be an object {Status, MinInstanceCount, MaxInstanceCount}")
		} else {
			c.enum(p+".managedInstanceScaling.status", m.Status, ManagedScalingEnabled, ManagedScalingDisabled)
			c.intRange(p+".managedInstanceScaling.minInstanceCount", m.MinInstanceCount, 0, MaxInstances)
			c.intRange(p+".managedInstanceScaling.maxInstanceCount", m.MaxInstanceCount, 1, MaxInstances)
			if m.MinInstanceCount != nil && m.MaxInstanceCount != nil && *m.MinInstanceCount > *m.MaxInstanceCount {
				c.fail(quote(strconv.Itoa(int(*m.MinInstanceCount))), p+".managedInstanceScaling.minInstanceCount",
					"Member must be less than or equal to MaxInstanceCount")
			}
		}
	}
	c.intRange(p+".variantInstanceProvisionTimeoutInSeconds", v.VariantInstanceProvisionTimeoutInSeconds, 300, 3600)
	if v.RoutingConfig != nil {
		if c.required(p+".routingConfig.routingStrategy", v.RoutingConfig.RoutingStrategy) {
			c.enum(p+".routingConfig.routingStrategy", v.RoutingConfig.RoutingStrategy, RoutingLeastOutstanding, RoutingRandom, RoutingPrefixAware)
		}
		if pa := v.RoutingConfig.PrefixAwareRoutingConfig; pa != nil {
			c.intRange(p+".routingConfig.prefixAwareRoutingConfig.prefixLength", pa.PrefixLength, 1024, 65536)
			c.intRange(p+".routingConfig.prefixAwareRoutingConfig.concurrencyThreshold", pa.ConcurrencyThreshold, 1, 1024)
		}
	}
}

// checkPrefixAware says what PREFIX_AWARE needs: its configuration, with
// both members, and nothing of it under another strategy. SageMaker's
// wording for these is not published; these messages are mce's.
func checkPrefixAware(s *semantic, name string, rc *RoutingConfig) {
	if rc == nil {
		return
	}
	pa := rc.PrefixAwareRoutingConfig
	switch {
	case rc.RoutingStrategy != RoutingPrefixAware && pa != nil:
		s.add("PrefixAwareRoutingConfig is only valid when RoutingStrategy is PREFIX_AWARE (variant " + name + ").")
	case rc.RoutingStrategy == RoutingPrefixAware && pa == nil:
		s.add("PrefixAwareRoutingConfig is required when RoutingStrategy is PREFIX_AWARE (variant " + name + ").")
	case rc.RoutingStrategy == RoutingPrefixAware:
		if pa.PrefixLength == nil {
			s.add("PrefixAwareRoutingConfig.PrefixLength is required when RoutingStrategy is PREFIX_AWARE (variant " + name + ").")
		}
		if pa.ConcurrencyThreshold == nil {
			s.add("PrefixAwareRoutingConfig.ConcurrencyThreshold is required when RoutingStrategy is PREFIX_AWARE (variant " + name + ").")
		}
	}
}

// Warnings lists the members of a valid request that mce accepts but does
// not act on, e.g. `endpoint configuration "c": KmsKeyId ignored locally`.
func (c *CreateEndpointConfigInput) Warnings() []string {
	var w warnings
	w.prefix = "endpoint configuration " + strconv.Quote(c.EndpointConfigName) + ": "
	w.ifSet(c.KMSKeyID != "", "KmsKeyId")
	w.ifSet(c.ExecutionRoleARN != "", "ExecutionRoleArn")
	w.ifSet(c.VpcConfig != nil, "VpcConfig")
	w.ifSet(c.MetricsConfig != nil, "MetricsConfig")
	w.ifSet(c.AsyncInferenceConfig != nil && c.AsyncInferenceConfig.OutputConfig != nil && c.AsyncInferenceConfig.OutputConfig.KMSKeyID != "", "AsyncInferenceConfig.OutputConfig.KmsKeyId")
	w.ifSet(c.DataCaptureConfig != nil && c.DataCaptureConfig.KMSKeyID != "", "DataCaptureConfig.KmsKeyId")
	for _, v := range c.variants() {
		in := " (production variant " + strconv.Quote(v.VariantName) + ")"
		if v.shadow {
			in = " (shadow variant " + strconv.Quote(v.VariantName) + ")"
		}
		w.ifSet(v.VolumeSizeInGB != nil, "VolumeSizeInGB"+in)
		w.ifSet(v.AcceleratorType != "", "AcceleratorType"+in)
		w.ifSet(v.CoreDumpConfig != nil, "CoreDumpConfig"+in)
		w.ifSet(v.EnableSSMAccess != nil && *v.EnableSSMAccess, "EnableSSMAccess"+in)
		// A variant of inference components honours it on the kubernetes
		// engine (it bounds the nodes their copies occupy).
		w.ifSet(present(v.ManagedInstanceScaling) && v.ModelName != "", "ManagedInstanceScaling"+in)
		w.ifSet(v.InferenceAmiVersion != "", "InferenceAmiVersion"+in)
		w.ifSet(present(v.InstancePools), "InstancePools"+in)
		w.ifSet(v.VariantInstanceProvisionTimeoutInSeconds != nil, "VariantInstanceProvisionTimeoutInSeconds"+in)
		w.ifSet(present(v.CapacityReservationConfig), "CapacityReservationConfig"+in)
	}
	return w.list
}

// Validate checks a CreateEndpoint request
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateEndpoint.html). The error is a
// *ValidationError.
func (e *CreateEndpointInput) Validate() error {
	var c checker
	c.requiredStr("endpointName", e.EndpointName, maxNameLen, entityNameRe, entityNamePattern)
	c.requiredStr("endpointConfigName", e.EndpointConfigName, maxNameLen, entityNameRe, entityNamePattern)
	c.tags("tags", e.Tags)
	if err := c.err(); err != nil {
		return err
	}
	d, err := ParseDeploymentConfig(e.DeploymentConfig)
	if err != nil || d == nil {
		return err
	}
	return d.Validate()
}

// Warnings lists the members mce accepts but does not act on: none now
// (DeploymentConfig is kept and shown as LastDeploymentConfig).
func (e *CreateEndpointInput) Warnings() []string { return nil }

// DefaultAsyncConcurrency is MaxConcurrentInvocationsPerInstance when the
// configuration leaves it unset. SageMaker "chooses an optimal value" it
// does not publish; mce takes 4.
const DefaultAsyncConcurrency = 4

const s3PathPattern = `(https|s3)://([^/])/?(.*)`

var s3PathRe = regexp.MustCompile(wire.S3URIPattern)

// checkAsync checks AsyncInferenceConfig: OutputConfig with its
// S3OutputPath is required (mce has nowhere else to put answers).
func checkAsync(c *checker, a *AsyncInferenceConfig) {
	if a == nil {
		return
	}
	const p = "asyncInferenceConfig"
	if a.ClientConfig != nil {
		c.intRange(p+".clientConfig.maxConcurrentInvocationsPerInstance", a.ClientConfig.MaxConcurrentInvocationsPerInstance, 1, 1000)
	}
	if a.OutputConfig == nil {
		c.fail("null", p+".outputConfig", "Member must not be null")
		return
	}
	o := a.OutputConfig
	c.requiredStr(p+".outputConfig.s3OutputPath", o.S3OutputPath, 512, s3PathRe, s3PathPattern)
	c.str(p+".outputConfig.s3FailurePath", o.S3FailurePath, 512, s3PathRe, s3PathPattern)
	c.str(p+".outputConfig.kmsKeyId", o.KMSKeyID, 2048, nil, "")
}
