package containers

import (
	"encoding/json"
	"path/filepath"
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
	// Variants are the production variants, then the shadow variants
	// (VariantPlan.Shadow).
	Variants []VariantPlan
	// Async is set for an asynchronous endpoint (AsyncInferenceConfig).
	Async *AsyncPlan `json:",omitempty"`
	// Described holds the members of the endpoint's configuration that
	// DescribeEndpoint echoes at its top level (MetricsConfig), as JSON;
	// no engine reads it.
	Described json.RawMessage `json:",omitempty"`
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
	// PrefixLength and ConcurrencyThreshold configure RoutingStrategy
	// PREFIX_AWARE (PrefixAwareRoutingConfig); 0 otherwise.
	PrefixLength, ConcurrencyThreshold int
	// NetworkIsolation runs the variant's containers with no route out of
	// the machine: the model's (or the endpoint configuration's)
	// EnableNetworkIsolation.
	NetworkIsolation bool `json:",omitempty"`
	// MaxInstanceCount is ManagedInstanceScaling's MaxInstanceCount when its
	// Status is ENABLED, 0 otherwise.
	MaxInstanceCount int `json:",omitempty"`
	// Shadow marks a shadow variant (ShadowProductionVariants): launched,
	// scaled, adopted and removed as every variant is, it receives only
	// sampled copies of the production variant's requests and never
	// answers a caller. An engine may label what it runs for it; it needs
	// nothing else.
	Shadow bool `json:",omitempty"`
	// CopyInstances is set on the plan of an inference-component copy only:
	// how many instances the copies of all components on the variant may
	// occupy together (MaxInstanceCount when set, else the variant's
	// InstanceCount). An engine whose scheduler places copies (on
	// Kubernetes an instance is a node) keeps them within that many.
	CopyInstances int `json:",omitempty"`
	// Partitions is the variant's accelerator partition layout
	// (AcceleratorPartitionLayouts): the MIG profiles, with SageMaker's
	// "mig-" prefix, that each of its GPUs is carved into, repeated as
	// often as the layout repeats them; none for whole GPUs. The copies of
	// inference components on such a variant each occupy one partition of
	// a profile listed here.
	Partitions []string        `json:",omitempty"`
	Containers []ContainerPlan // in invocation order for Serial
	// Described holds the members of the variant's configuration that
	// DescribeEndpoint's variant summary echoes (RoutingConfig,
	// ManagedInstanceScaling, …), as a JSON object; engines ignore it.
	Described json.RawMessage `json:",omitempty"`
}

// AdditionalModelDataDir is where SageMaker puts a container's
// AdditionalModelDataSources, one folder a channel.
const AdditionalModelDataDir = "/opt/ml/additional-model-data-sources"

// ModelDataChannel is one of AdditionalModelDataSources: its channel name
// (a folder name: [A-Za-z0-9._-]+, not . or ..) and the URL of its data,
// as ModelDataURL.
type ModelDataChannel struct {
	Channel string
	URL     string
}

// ContainerPlan is one container of a variant.
type ContainerPlan struct {
	Hostname     string
	Image        string
	Environment  map[string]string // a copy; nil when empty
	ModelDataURL string            // as written, or ModelDataSource's S3Uri; see ModelDataPath for file:// URLs
	BaseDir      string            // absolute folder of the defining file; relative file:// URLs start here
	// AdditionalModelData is the container's AdditionalModelDataSources:
	// each channel's data fetched as ModelDataURL is (same limits, same
	// extraction) and mounted read-only at
	// AdditionalModelDataDir/<Channel>.
	AdditionalModelData []ModelDataChannel `json:",omitempty"`
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
	// A MIG partition pinned to an inference component's copy is named by
	// its UUID ("device=MIG-…").
	GPUs string
	// Partition is the MIG profile, SageMaker's name ("mig-3g.40gb"), of
	// which a copy of an inference component gets one partition where its
	// launch decides which (on Kubernetes the nvidia.com/mig-<profile>
	// resource); GPUs is then "". Engines that pin partitions leave it
	// empty and name the partition in GPUs.
	Partition string `json:",omitempty"`
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

// HostsComponents reports whether the endpoint's variants host inference
// components (they name no model and run no containers of their own).
func (p EndpointPlan) HostsComponents() bool {
	return len(p.Variants) > 0 && p.Variants[0].ModelName == "" && len(p.Variants[0].Containers) == 0
}

// Resources is mce-only: what the local container may use. Zero values mean
// "no limit" (Cpus, MemoryMiB) and "decided by the variant's InstanceType"
// (Gpus).
type Resources struct {
	// Gpus is "all", "none" or "0", a count such as "2", or device IDs:
	// "device=1", "0,1", "GPU-<uuid>,GPU-<uuid>" (a lone number is a count;
	// write "device=N" for a single index). It overrides the InstanceType.
	Gpus      string  `json:"Gpus,omitempty"`
	Cpus      float64 `json:"Cpus,omitempty"`      // CPU cores, e.g. 1.5
	MemoryMiB int64   `json:"MemoryMiB,omitempty"` // memory limit in MiB
}
