package check

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/containers/gpu"
	"github.com/mce-run/mce/internal/wire"
)

// Engine is the part of the Docker Engine API a check uses;
// docker.Client and *client.Client satisfy it.
type Engine interface {
	docker.ImageInspector
	ContainerCreate(ctx context.Context, options client.ContainerCreateOptions) (client.ContainerCreateResult, error)
	ContainerStart(ctx context.Context, id string, options client.ContainerStartOptions) (client.ContainerStartResult, error)
	ContainerRemove(ctx context.Context, id string, options client.ContainerRemoveOptions) (client.ContainerRemoveResult, error)
	ContainerInspect(ctx context.Context, id string, options client.ContainerInspectOptions) (client.ContainerInspectResult, error)
	ContainerList(ctx context.Context, options client.ContainerListOptions) (client.ContainerListResult, error)
	ContainerLogs(ctx context.Context, id string, options client.ContainerLogsOptions) (client.ContainerLogsResult, error)
	NetworkCreate(ctx context.Context, name string, options client.NetworkCreateOptions) (client.NetworkCreateResult, error)
	NetworkRemove(ctx context.Context, id string, options client.NetworkRemoveOptions) (client.NetworkRemoveResult, error)
	NetworkList(ctx context.Context, options client.NetworkListOptions) (client.NetworkListResult, error)
}

var _ Engine = (*client.Client)(nil)
var _ Engine = (docker.Client)(nil)

// MultiModel says how to start an image.
type MultiModel string

const (
	// MultiModelAuto starts the image as a multi-model container when it
	// carries the multi-models label and model data is given, else as a
	// single-model container.
	MultiModelAuto MultiModel = "auto"
	// MultiModelOn always starts it as a multi-model container (the label is
	// then required, and model data too).
	MultiModelOn MultiModel = "on"
	// MultiModelOff always starts it as a single-model container, the model
	// data at /opt/ml/model.
	MultiModelOff MultiModel = "off"
)

// Defaults of [Options].
const (
	// DefaultHealthWindow is how long /ping may take to answer 200.
	// SageMaker allows 4 minutes by default and up to an hour
	// (ContainerStartupHealthCheckTimeoutInSeconds); a container that
	// needs more than 2 minutes on a developer's machine deserves a look.
	DefaultHealthWindow = 2 * time.Minute
	// DefaultTimeout bounds one invocation or model load; SageMaker gives
	// /invocations 60 s.
	DefaultTimeout = 60 * time.Second
	// MaxInput is SageMaker's cap on a request body.
	MaxInput = 6 << 20
	// OversizeBytes is the body of the oversize check: past MaxInput.
	OversizeBytes = 7 << 20
)

// The copies are the first and second container of an instance: their
// ports and safe port ranges are the ones mce hands out
// (containers.SageMakerEnv).
var (
	firstPort  = containers.ContainerPort(firstIndex)
	secondPort = containers.ContainerPort(secondIndex)
)

const (
	firstIndex  = 0
	secondIndex = 1
	readyPoll   = 100 * time.Millisecond
	pingTimeout = 2 * time.Second // SageMaker's /ping request timeout
)

// Options say what to check. Image is required; the rest have usable zero
// values.
type Options struct {
	// Image is the image reference; it must be present on the engine.
	Image string
	// ModelData is the model data: s3://bucket/key, file:///path or a plain
	// path (a .tar.gz or, for a single-model container, a folder). A
	// file's folder is the only model root it may come from. Empty: none.
	ModelData string
	// Env is added to the container's environment; the variables SageMaker
	// sets (SAGEMAKER_BIND_TO_PORT, SAGEMAKER_SAFE_PORT_RANGE,
	// SAGEMAKER_MULTI_MODEL) win.
	Env map[string]string
	// Input is the sample request body; nil means no sample, and the checks
	// that need one are skipped. At most MaxInput bytes.
	Input []byte
	// ContentType and Accept go with the sample.
	ContentType, Accept string
	// HealthWindow bounds the wait for /ping 200. Zero: DefaultHealthWindow.
	HealthWindow time.Duration
	// Timeout bounds each invocation and model load. Zero: DefaultTimeout.
	Timeout time.Duration
	// MultiModel: zero means MultiModelAuto.
	MultiModel MultiModel
	// WorkDir is where model data is extracted (a fresh folder below it,
	// removed afterwards). Empty: the system's temporary folder. The engine
	// must see it, so it has to be on this machine.
	WorkDir string
	// GPUs, when set, gives the container these GPUs and, for a
	// multi-model image, adds the GPU checks: copies of the model are loaded
	// until the container refuses one, then unloaded, and each one's GPU
	// footprint, what running out answers and what unloads give back are
	// reported. The host must list the GPUs (else New fails).
	GPUs gpu.Request
	// GPU reads the host's GPUs; nil means NVML (gpu.NewInventory(nil)).
	GPU GPUInventory
	// GPUThreshold stops the loads once this share of GPU memory is used,
	// in (0, 1]. Zero means 1: load until the container refuses a copy.
	GPUThreshold float64
	// GPUMaxModels bounds the copies loaded. Zero: DefaultGPUMaxModels.
	GPUMaxModels int
	// GPUSettle is how long to wait after an unload for GPU memory to
	// fall. Zero: DefaultGPUSettle.
	GPUSettle time.Duration
	// OnResult, when set, is called with each result as soon as it is known
	// (from the goroutine that called Run).
	OnResult func(Result)
}

var envName = regexp.MustCompile("^" + wire.EnvironmentKeyPattern + "$")

// validate fills defaults and rejects what cannot be run.
func (o *Options) validate() error {
	if o.Image == "" {
		return errors.New("no image given")
	}
	switch o.MultiModel {
	case "":
		o.MultiModel = MultiModelAuto
	case MultiModelAuto, MultiModelOn, MultiModelOff:
	default:
		return fmt.Errorf("multi-model mode %q: want auto, on or off", o.MultiModel)
	}
	if o.MultiModel == MultiModelOn && o.ModelData == "" {
		return errors.New("a multi-model check needs model data: a model artifact (.tar.gz) to load")
	}
	if len(o.Input) > MaxInput {
		return fmt.Errorf("the sample input has %d bytes, over SageMaker's %d-byte limit", len(o.Input), MaxInput)
	}
	if o.Input != nil && o.ContentType == "" {
		return errors.New("a sample input needs its content type")
	}
	for k := range o.Env {
		if !envName.MatchString(k) {
			return fmt.Errorf("environment variable name %q is not valid", k)
		}
	}
	if o.HealthWindow < 0 || o.Timeout < 0 {
		return errors.New("time limits must not be negative")
	}
	if o.GPUThreshold < 0 || o.GPUThreshold > 1 || o.GPUMaxModels < 0 || o.GPUSettle < 0 {
		return errors.New("GPU threshold must be in (0, 1], and the copy limit and settle time not negative")
	}
	if o.GPUThreshold == 0 {
		o.GPUThreshold = 1
	}
	if o.GPUMaxModels == 0 {
		o.GPUMaxModels = DefaultGPUMaxModels
	}
	if o.GPUSettle == 0 {
		o.GPUSettle = DefaultGPUSettle
	}
	if o.HealthWindow == 0 {
		o.HealthWindow = DefaultHealthWindow
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	return nil
}
