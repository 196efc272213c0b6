package spec

import (
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultHealthCheckTimeout is how long a container may take to pass its
// first /ping when ContainerStartupHealthCheckTimeoutInSeconds is unset:
// SageMaker's documented 4-minute window (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html).
const DefaultHealthCheckTimeout = 240 * time.Second

// EndpointPlan is what the runtime needs to start one endpoint. Plans are
// plain values, safe to copy and share once built.
type EndpointPlan struct {
	Name       string
	ConfigName string
	Mode       string // "Serial" or "Direct", shared by all variants
	Variants   []VariantPlan
	// Async is set for an asynchronous endpoint (AsyncInferenceConfig).
	Async *AsyncPlan `json:",omitempty"`
}

// AsyncPlan is an asynchronous endpoint's queue settings.
type AsyncPlan struct {
	OutputPath  string // s3://bucket/prefix, without a trailing slash
	FailurePath string // the same; OutputPath when the configuration has none
	// MaxConcurrentPerInstance bounds the requests in flight per instance.
	MaxConcurrentPerInstance int
}

// VariantPlan is one production variant with its model resolved.
type VariantPlan struct {
	Name          string
	ModelName     string
	InstanceType  string
	InstanceCount int
	Weight        float64 // InitialVariantWeight, 1.0 when unset
	// HealthCheckTimeout is the startup /ping window, DefaultHealthCheckTimeout when unset.
	HealthCheckTimeout time.Duration
	// DownloadTimeout bounds fetching model artifacts; 0 when unset (the
	// runtime's default applies).
	DownloadTimeout time.Duration
	// RoutingStrategy is RoutingConfig's strategy; "" when unset (the
	// runtime's default applies).
	RoutingStrategy string
	// NetworkIsolation runs the variant's containers with no route out of
	// the machine: the model's (or the endpoint configuration's)
	// EnableNetworkIsolation.
	NetworkIsolation bool `json:",omitempty"`
	// MaxInstanceCount is ManagedInstanceScaling's MaxInstanceCount when its
	// Status is ENABLED, 0 otherwise.
	MaxInstanceCount int `json:",omitempty"`
	// CopyInstances is set on the plan of an inference-component copy only:
	// how many instances the copies of all components on the variant may
	// occupy together (MaxInstanceCount when set, else the variant's
	// InstanceCount). An engine whose scheduler places copies (on
	// Kubernetes an instance is a node) keeps them within that many.
	CopyInstances int             `json:",omitempty"`
	Containers    []ContainerPlan // in invocation order for Serial
}

// ContainerPlan is one container of a variant.
type ContainerPlan struct {
	Hostname     string
	Image        string
	Environment  map[string]string // a copy; nil when empty
	ModelDataURL string            // as written, or ModelDataSource's S3Uri; see ModelDataPath for file:// URLs
	BaseDir      string            // absolute folder of the defining file; relative file:// URLs start here
	// Mode is "SingleModel" or "MultiModel".
	Mode string
	// ModelCacheSetting is "Enabled" or "Disabled" for MultiModel, "" otherwise.
	ModelCacheSetting string
	// Adapters gives the container (a copy of an inference component that
	// is no adapter) its component's folder of adapters, read-only at
	// /opt/ml/adapters (containers.AdapterStore).
	Adapters  bool      `json:",omitempty"`
	Resources Resources // as written (mce extension)
	// MemoryRequestMiB is the memory a scheduler reserves for the container
	// when it is less than Resources.MemoryMiB (an inference component's
	// MinMemoryRequiredInMb below its MaxMemoryRequiredInMb); 0 means
	// Resources.MemoryMiB.
	MemoryRequestMiB int64 `json:",omitempty"`
	// GPUs is the resolved GPU request in ParseGPUs' canonical form: "" for
	// none, "all", a count, or "device=ID,…". Resources.Gpus wins; otherwise
	// the variant's InstanceType decides (local_gpu → all, ml.g5.12xlarge → 4).
	GPUs string
}

// ModelDataPath is the local path of a file:// ModelDataURL: absolute as
// written, or relative to BaseDir. ok is false for other URLs.
func (c ContainerPlan) ModelDataPath() (path string, ok bool) {
	rest, ok := strings.CutPrefix(c.ModelDataURL, "file://")
	if !ok {
		return "", false
	}
	p := filepath.FromSlash(rest)
	if !filepath.IsAbs(p) {
		p = filepath.Join(c.BaseDir, p)
	}
	return filepath.Clean(p), true
}

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
func BuildPlan(region, account string, e CreateEndpointInput, c CreateEndpointConfigInput, models ModelLookup) (EndpointPlan, []string, error) {
	if err := e.Validate(); err != nil {
		return EndpointPlan{}, nil, err
	}
	if !strings.EqualFold(e.EndpointConfigName, c.EndpointConfigName) {
		return EndpointPlan{}, nil, &NotFoundError{Kind: KindEndpointConfig, Name: e.EndpointConfigName,
			ARN: ARN(region, account, KindEndpointConfig, e.EndpointConfigName)}
	}
	if err := c.Validate(); err != nil {
		return EndpointPlan{}, nil, err
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
		return EndpointPlan{}, nil, err
	}
	return plan, append(warns, pw...), nil
}

// buildPlan resolves an endpoint whose endpoint and configuration are
// valid; lookup must return valid models.
func buildPlan(e CreateEndpointInput, c CreateEndpointConfigInput, lookup func(string) (CreateModelInput, string, error)) (EndpointPlan, []string, error) {
	plan := EndpointPlan{Name: e.EndpointName, ConfigName: c.EndpointConfigName}
	if a := c.AsyncInferenceConfig; a != nil && a.OutputConfig != nil {
		ap := &AsyncPlan{OutputPath: strings.TrimRight(a.OutputConfig.S3OutputPath, "/"),
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
	for _, v := range c.ProductionVariants {
		if v.ComponentVariant() { // hosts inference components: no containers of its own
			vp, w := variantPlan(v, CreateModelInput{}, "")
			warns = append(warns, w...)
			plan.Variants, plan.Mode = append(plan.Variants, vp), ModeSerial
			continue
		}
		m, dir, err := lookup(v.ModelName)
		if err != nil {
			return EndpointPlan{}, nil, err
		}
		mode := m.ExecutionMode()
		if plan.Mode == "" {
			plan.Mode, modeOf = mode, v.VariantName
		} else if mode != plan.Mode {
			return EndpointPlan{}, nil, &ValidationError{Messages: []string{
				"All production variants of an endpoint must share one InferenceExecutionConfig Mode in mce; variant " +
					strconv.Quote(modeOf) + " is " + plan.Mode + " and variant " + strconv.Quote(v.VariantName) + " is " + mode + ".",
			}}
		}
		vp, w := variantPlan(v, m, dir)
		vp.NetworkIsolation = isTrue(m.EnableNetworkIsolation) || isTrue(c.EnableNetworkIsolation)
		warns = append(warns, w...)
		plan.Variants = append(plan.Variants, vp)
	}
	return plan, warns, nil
}

func isTrue(b *bool) bool { return b != nil && *b }

func variantPlan(v ProductionVariant, m CreateModelInput, dir string) (VariantPlan, []string) {
	vp := VariantPlan{
		Name:               v.VariantName,
		ModelName:          v.ModelName,
		InstanceType:       v.InstanceType,
		InstanceCount:      1,
		Weight:             1.0,
		HealthCheckTimeout: DefaultHealthCheckTimeout,
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
	}
	if m, ok := v.managedScaling(); ok && m.Status == ManagedScalingEnabled && m.MaxInstanceCount != nil {
		vp.MaxInstanceCount = int(*m.MaxInstanceCount)
	}

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
		cp := ContainerPlan{
			Hostname:     names[i],
			Image:        d.Image,
			ModelDataURL: d.ModelData(),
			BaseDir:      dir,
			Mode:         ModeSingleModel,
			GPUs:         instanceGPU,
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
