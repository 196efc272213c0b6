// Package gpu owns everything mce knows about NVIDIA GPUs: parsing a
// container definition's GPU request ("all", a count, or device IDs),
// naming its devices for CDI ([Request.CDIDevices]) where the engine hands
// GPUs over that way ([RuntimeInfo.Mode]), discovering the host's GPUs and
// their memory through NVML, and checking — before any container is created —
// that a request can be met by this host and its Docker engine.
//
// NVML is reached only through [nvml.Interface], so the package works (and
// reports [ErrNoDriver]) on machines without libnvidia-ml, and tests use
// go-nvml's mock. The package never talks to the Docker engine itself and
// links none of its types (the Kubernetes engine uses it too): the caller
// reads the engine's runtimes into a [RuntimeInfo] and passes it to [Check],
// and the Docker engine turns a request into its DeviceRequests
// (docker.DeviceRequestsFor).
//
// A typical start-up path:
//
//	req, err := gpu.ParseRequest(spec)      // validate once, at load
//	devs, devErr := inv.Devices()           // inv shared for the process
//	if err := gpu.Check(req, devs, devErr, rt); err != nil {
//		return err                          // nothing has started yet
//	}
//	hostConfig.DeviceRequests = docker.DeviceRequestsFor(req, rt.Mode(), devs)
//
// The multi-model manager reads [Inventory.Memory] before each model load.
package gpu
