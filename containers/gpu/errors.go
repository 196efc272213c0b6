package gpu

import "errors"

// Sentinel errors; the errors returned by this package wrap them, so test
// with errors.Is.
var (
	// ErrInvalidRequest: a GPU request string could not be parsed.
	ErrInvalidRequest = errors.New("invalid GPU request")
	// ErrNoDriver: NVML could not be loaded or initialised, so the host has
	// no usable NVIDIA driver. The NVML error is wrapped beside it.
	ErrNoDriver = errors.New("no NVIDIA driver found on this host")
	// ErrNoGPU: the driver is present but reports no GPU.
	ErrNoGPU = errors.New("no GPU found on this host")
	// ErrTooMany: more GPUs were requested by count than the host has.
	ErrTooMany = errors.New("not enough GPUs")
	// ErrUnknownDevice: a requested GPU index or UUID is not on this host.
	ErrUnknownDevice = errors.New("unknown GPU")
	// ErrNoRuntime: the Docker engine has no NVIDIA container runtime.
	ErrNoRuntime = errors.New("the Docker engine has no NVIDIA container runtime")
	// ErrNoCDISpec: the engine takes CDI devices but lists no NVIDIA GPU
	// among them (no spec from `nvidia-ctk cdi generate`). Errors wrapping
	// it wrap ErrNoRuntime too.
	ErrNoCDISpec = errors.New("no NVIDIA CDI device")
	// ErrClosed: the Inventory was used after Close.
	ErrClosed = errors.New("GPU inventory closed")
)
