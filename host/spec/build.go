package spec

import (
	"encoding/json"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/mce-run/mce/containers"
)

// ModelLookup finds a model by name for BuildPlan, returning the folder
// relative file:// URLs resolve against. Names compare case-insensitively in
// SageMaker (their ARNs are lower-cased); lookups should too.
type ModelLookup func(name string) (model CreateModelInput, baseDir string, ok bool)

// MapLookup is a ModelLookup over a map keyed by model name (matched
// case-insensitively), all models sharing baseDir.
func MapLookup(models map[string]CreateModelInput, baseDir string) ModelLookup {
	byLower := make(map[string]CreateModelInput, len(models))
	for name, m := range models {
		byLower[strings.ToLower(name)] = m
	}
	return func(name string) (CreateModelInput, string, bool) {
		m, ok := byLower[strings.ToLower(name)]
		return m, baseDir, ok
	}
}

// BuildPlan resolves one endpoint from stored shapes, as the control-plane
// API needs: it validates e, c and each variant's model (found through
// models), and returns the plan with the warnings of all three. A missing
// configuration or model is a *NotFoundError whose ARN uses region and
// account; a broken shape a *ValidationError.
func BuildPlan(region, account string, e CreateEndpointInput, c CreateEndpointConfigInput, models ModelLookup) (containers.EndpointPlan, []string, error) {
	if err := e.Validate(); err != nil {
		return containers.EndpointPlan{}, nil, err
	}
	if !strings.EqualFold(e.EndpointConfigName, c.EndpointConfigName) {
		return containers.EndpointPlan{}, nil, &NotFoundError{Kind: KindEndpointConfig, Name: e.EndpointConfigName,
			ARN: ARN(region, account, KindEndpointConfig, e.EndpointConfigName)}
	}
	if err := c.Validate(); err != nil {
		return containers.EndpointPlan{}, nil, err
	}
	warns := append(e.Warnings(), c.Warnings()...)
	checked := map[string]bool{}
	lookup := func(name string) (CreateModelInput, string, error) {
		m, dir, ok := models(name)
		if !ok {
			return m, "", &NotFoundError{Kind: KindModel, Name: name, ARN: ARN(region, account, KindModel, name)}
		}
		if key := strings.ToLower(name); !checked[key] {
			checked[key] = true
			if err := m.Validate(); err != nil {
				return m, "", err
			}
			warns = append(warns, m.Warnings()...)
		}
		return m, dir, nil
	}
	plan, pw, err := buildPlan(e, c, lookup)
	if err != nil {
		return containers.EndpointPlan{}, nil, err
	}
	return plan, append(warns, pw...), nil
}

// buildPlan resolves an endpoint whose endpoint and configuration are
// valid; lookup must return valid models.
func buildPlan(e CreateEndpointInput, c CreateEndpointConfigInput, lookup func(string) (CreateModelInput, string, error)) (containers.EndpointPlan, []string, error) {
	plan := containers.EndpointPlan{Name: e.EndpointName, ConfigName: c.EndpointConfigName}
	if c.MetricsConfig != nil {
		plan.Described, _ = json.Marshal(struct{ MetricsConfig *MetricsConfig }{c.MetricsConfig})
	}
	if a := c.AsyncInferenceConfig; a != nil && a.OutputConfig != nil {
		ap := &containers.AsyncPlan{OutputPath: strings.TrimRight(a.OutputConfig.S3OutputPath, "/"),
			FailurePath: strings.TrimRight(a.OutputConfig.S3FailurePath, "/"), MaxConcurrentPerInstance: DefaultAsyncConcurrency}
		if ap.FailurePath == "" {
			ap.FailurePath = ap.OutputPath
		}
		if cc := a.ClientConfig; cc != nil && cc.MaxConcurrentInvocationsPerInstance != nil {
			ap.MaxConcurrentPerInstance = int(*cc.MaxConcurrentInvocationsPerInstance)
		}
		plan.Async = ap
	}
	var warns []string
	modeOf := ""
	for _, v := range c.variants() {
		if v.ComponentVariant() { // hosts inference components: no containers of its own
			vp, w := variantPlan(v.ProductionVariant, CreateModelInput{}, "")
			warns = append(warns, w...)
			plan.Variants, plan.Mode = append(plan.Variants, vp), ModeSerial
			continue
		}
		m, dir, err := lookup(v.ModelName)
		if err != nil {
			return containers.EndpointPlan{}, nil, err
		}
		if c.HasShadows() {
			if err := CheckShadowModel(v.VariantName, m); err != nil {
				return containers.EndpointPlan{}, nil, err
			}
		}
		mode := m.ExecutionMode()
		if plan.Mode == "" {
			plan.Mode, modeOf = mode, v.VariantName
		} else if mode != plan.Mode {
			return containers.EndpointPlan{}, nil, &ValidationError{Messages: []string{
				"All production variants of an endpoint must share one InferenceExecutionConfig Mode in mce; variant " +
					strconv.Quote(modeOf) + " is " + plan.Mode + " and variant " + strconv.Quote(v.VariantName) + " is " + mode + ".",
			}}
		}
		vp, w := variantPlan(v.ProductionVariant, m, dir)
		vp.NetworkIsolation = isTrue(m.EnableNetworkIsolation) || isTrue(c.EnableNetworkIsolation)
		vp.Shadow = v.shadow
		warns = append(warns, w...)
		plan.Variants = append(plan.Variants, vp)
	}
	return plan, warns, nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// described are the members of v that DescribeEndpoint's
// ProductionVariantSummary has in the same shape, as v gives them (nil when
// it gives none). The summary's CapacityReservationConfig and
// InstancePools are summaries of a different shape, not echoes: mce
// reserves no capacity and has no pools, so it leaves them out.
func described(v ProductionVariant) json.RawMessage {
	d := struct {
		RoutingConfig               *RoutingConfig  `json:",omitempty"`
		ManagedInstanceScaling      json.RawMessage `json:",omitempty"`
		AcceleratorPartitionLayouts json.RawMessage `json:",omitempty"`
	}{v.RoutingConfig, v.ManagedInstanceScaling, v.AcceleratorPartitionLayouts}
	if d.RoutingConfig == nil && !present(d.ManagedInstanceScaling) && !present(d.AcceleratorPartitionLayouts) {
		return nil
	}
	b, _ := json.Marshal(d)
	return b
}

func variantPlan(v ProductionVariant, m CreateModelInput, dir string) (containers.VariantPlan, []string) {
	vp := containers.VariantPlan{
		Name:               v.VariantName,
		ModelName:          v.ModelName,
		InstanceType:       v.InstanceType,
		InstanceCount:      1,
		Weight:             1.0,
		HealthCheckTimeout: containers.DefaultHealthCheckTimeout,
	}
	if v.InitialInstanceCount != nil {
		vp.InstanceCount = int(*v.InitialInstanceCount)
	}
	if v.InitialVariantWeight != nil {
		vp.Weight = *v.InitialVariantWeight
	}
	if t := v.ContainerStartupHealthCheckTimeoutInSeconds; t != nil {
		vp.HealthCheckTimeout = time.Duration(*t) * time.Second
	}
	if t := v.ModelDataDownloadTimeoutInSeconds; t != nil {
		vp.DownloadTimeout = time.Duration(*t) * time.Second
	}
	if v.RoutingConfig != nil {
		vp.RoutingStrategy = v.RoutingConfig.RoutingStrategy
		if pa := v.RoutingConfig.PrefixAwareRoutingConfig; pa != nil && pa.PrefixLength != nil && pa.ConcurrencyThreshold != nil {
			vp.PrefixLength, vp.ConcurrencyThreshold = int(*pa.PrefixLength), int(*pa.ConcurrencyThreshold)
		}
	}
	if present(v.AcceleratorPartitionLayouts) {
		vp.Partitions = partitionLayoutProfiles(v.AcceleratorPartitionLayouts)
	}
	if m, ok := v.managedScaling(); ok && m.Status == ManagedScalingEnabled && m.MaxInstanceCount != nil {
		vp.MaxInstanceCount = int(*m.MaxInstanceCount)
	}
	vp.Described = described(v)

	var warns []string
	instanceGPU := ""
	switch v.InstanceType {
	case InstanceTypeLocal:
	case InstanceTypeLocalGPU:
		instanceGPU = "all"
	default:
		n, known := instanceGPUs(v.InstanceType)
		if !known {
			warns = append(warns, "production variant "+strconv.Quote(v.VariantName)+": mce does not know how many GPUs instance type "+
				strconv.Quote(v.InstanceType)+" has and gives it none; set Resources.Gpus on its containers")
		}
		instanceGPU = GPURequest{Count: n}.String()
	}

	defs, names := m.containers()
	for i, d := range defs {
		cp := containers.ContainerPlan{
			Hostname:     names[i],
			Image:        d.Image,
			ModelDataURL: d.ModelData(),
			BaseDir:      dir,
			// More model data, each channel at its folder.
			AdditionalModelData: d.AdditionalModelData(),
			Mode:                ModeSingleModel,
			GPUs:                instanceGPU,
		}
		if len(d.Environment) > 0 {
			cp.Environment = maps.Clone(d.Environment)
		}
		if d.Mode == ModeMultiModel {
			cp.Mode = ModeMultiModel
			cp.ModelCacheSetting = "Enabled"
			if d.MultiModelConfig != nil && d.MultiModelConfig.ModelCacheSetting != "" {
				cp.ModelCacheSetting = d.MultiModelConfig.ModelCacheSetting
			}
		}
		if d.Resources != nil {
			cp.Resources = *d.Resources
			if d.Resources.Gpus != "" {
				g, _ := ParseGPUs(d.Resources.Gpus) // valid: checked by Validate
				cp.GPUs = g.String()
			}
		}
		vp.Containers = append(vp.Containers, cp)
	}
	return vp, warns
}
