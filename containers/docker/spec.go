package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/gpu"
	"github.com/mce-run/mce/internal/wire"
)

// MaxContainers is SageMaker's limit of containers in one model: a pipeline or
// multi-container endpoint holds 1 to 15 (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateModel.html).
const MaxContainers = 15

// hostnamePattern is ContainerHostname's pattern, anchored (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ContainerDefinition.html).
var hostnamePattern = regexp.MustCompile("^" + wire.EntityNamePattern + "$")

// channelPattern is AdditionalModelDataSource.ChannelName's pattern, anchored.
var channelPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ContainerSpec is one container of a variant: a SageMaker ContainerDefinition
// resolved for the local engine.
type ContainerSpec struct {
	Hostname     string            // ContainerHostname; DNS name on the endpoint network
	Image        string            // pulled per Options.PullPolicy (default never)
	Environment  map[string]string // the definition's Environment
	ModelDataURL string            // file:// or s3://; empty for none
	BaseDir      string            // folder that relative file:// URLs are resolved against
	MultiModel   bool              // Mode: MultiModel (adds SAGEMAKER_MULTI_MODEL=true); ModelDataURL is then a prefix
	// ModelCacheDisabled unloads and deletes a multi-model container's model
	// after each call (MultiModelConfig.ModelCacheSetting: Disabled).
	ModelCacheDisabled bool
	GPUs               gpu.Request // zero: no GPU
	CPUs               float64     // 0: no limit
	MemoryBytes        int64       // 0: no limit
	// Adapters mounts the folder StageAdapter fills for this container
	// (its endpoint and hostname) read-only at containers.AdapterMount.
	Adapters bool `json:",omitempty"`
	// AdditionalModelData is fetched as ModelDataURL is, each channel
	// mounted read-only at containers.AdditionalModelDataDir/<Channel>.
	AdditionalModelData []containers.ModelDataChannel `json:",omitempty"`
}

// VariantSpec is one production variant: Copies copies of the same ordered
// container set.
type VariantSpec struct {
	Name       string
	Copies     int             // InitialInstanceCount; at least 1
	Containers []ContainerSpec // 1 to MaxContainers, in chain order
	// HealthTimeout is how long each container may take to answer GET /ping
	// with 200 after it starts (ContainerStartupHealthCheckTimeoutInSeconds).
	// Zero means DefaultHealthTimeout.
	HealthTimeout time.Duration
	// DownloadTimeout bounds fetching and extracting the variant's model
	// data (ModelDataDownloadTimeoutInSeconds); zero means no bound.
	DownloadTimeout time.Duration `json:",omitempty"`
	// NetworkIsolation runs the variant's containers on the endpoint's
	// internal network, with no route out of the machine
	// (CreateModel's EnableNetworkIsolation).
	NetworkIsolation bool `json:",omitempty"`
	// Shadow marks a shadow variant (containers.VariantPlan.Shadow): its
	// containers are labelled LabelShadow; it runs as every variant does.
	Shadow bool `json:",omitempty"`
}

// EndpointSpec is everything needed to bring up one endpoint's containers.
type EndpointSpec struct {
	Name string
	// Generation tells apart container sets of the same endpoint: an update
	// starts generation n+1 beside n and removes n once n+1 is ready.
	Generation int
	Variants   []VariantSpec
}

// fingerprint identifies the variant's container definitions (not its copy
// count, which scaling changes).
func (v VariantSpec) fingerprint() string {
	c := v
	c.Copies = 0
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// networks lists the endpoint's networks its variants need: false for the
// bridge network, true for the internal one.
func (s *EndpointSpec) networks() []bool {
	var open, isolated bool
	for _, v := range s.Variants {
		open = open || !v.NetworkIsolation
		isolated = isolated || v.NetworkIsolation
	}
	var out []bool
	if open {
		out = append(out, false)
	}
	if isolated {
		out = append(out, true)
	}
	return out
}

// DefaultHealthTimeout is SageMaker's documented window for a container to
// start passing /ping (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html).
const DefaultHealthTimeout = 4 * time.Minute

// ErrInvalidSpec is wrapped by every validation error from Validate.
var ErrInvalidSpec = errors.New("invalid endpoint specification")

// Validate checks the spec before anything is created: names, container
// counts, hostnames and their uniqueness within a variant.
func (s *EndpointSpec) Validate() error {
	var problems []string
	if !hostnamePattern.MatchString(s.Name) {
		problems = append(problems, fmt.Sprintf("endpoint name %q must match %s", s.Name, hostnamePattern))
	}
	if len(s.Variants) == 0 {
		problems = append(problems, "an endpoint needs at least one variant")
	}
	seenVariant := map[string]bool{}
	for _, v := range s.Variants {
		if !hostnamePattern.MatchString(v.Name) {
			problems = append(problems, fmt.Sprintf("variant name %q must match %s", v.Name, hostnamePattern))
		}
		if seenVariant[v.Name] {
			problems = append(problems, fmt.Sprintf("variant %q appears twice", v.Name))
		}
		seenVariant[v.Name] = true
		if v.Copies < 1 {
			problems = append(problems, fmt.Sprintf("variant %q: instance count %d must be at least 1", v.Name, v.Copies))
		}
		if v.HealthTimeout < 0 {
			problems = append(problems, fmt.Sprintf("variant %q: negative health-check timeout", v.Name))
		}
		switch n := len(v.Containers); {
		case n == 0:
			problems = append(problems, fmt.Sprintf("variant %q has no containers", v.Name))
		case n > MaxContainers:
			problems = append(problems, fmt.Sprintf("variant %q has %d containers; SageMaker allows at most %d", v.Name, n, MaxContainers))
		}
		seenHost := map[string]bool{}
		multi := 0
		for i, c := range v.Containers {
			if !hostnamePattern.MatchString(c.Hostname) {
				problems = append(problems, fmt.Sprintf("variant %q container %d: hostname %q must match %s", v.Name, i+1, c.Hostname, hostnamePattern))
			}
			if seenHost[c.Hostname] {
				problems = append(problems, fmt.Sprintf("variant %q: container hostname %q appears twice", v.Name, c.Hostname))
			}
			seenHost[c.Hostname] = true
			if strings.TrimSpace(c.Image) == "" {
				problems = append(problems, fmt.Sprintf("variant %q container %q: no image", v.Name, c.Hostname))
			}
			if c.CPUs < 0 || c.MemoryBytes < 0 {
				problems = append(problems, fmt.Sprintf("variant %q container %q: negative resource limit", v.Name, c.Hostname))
			}
			if c.MultiModel {
				multi++
			}
			seenCh := map[string]bool{}
			for _, ch := range c.AdditionalModelData {
				// Each channel is a folder under AdditionalModelDataDir.
				if !channelPattern.MatchString(ch.Channel) || ch.Channel == "." || ch.Channel == ".." || seenCh[ch.Channel] || ch.URL == "" {
					problems = append(problems, fmt.Sprintf("variant %q container %q: additional model data channel %q must be a folder name ([A-Za-z0-9._-]+, not . or ..), once, with a URL", v.Name, c.Hostname, ch.Channel))
				}
				seenCh[ch.Channel] = true
			}
		}
		if multi > 1 {
			problems = append(problems, fmt.Sprintf("variant %q: more than one container in MultiModel mode is not supported", v.Name))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidSpec, strings.Join(problems, "; "))
	}
	return nil
}
