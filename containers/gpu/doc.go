// Package gpu owns everything mce knows about NVIDIA GPUs: parsing a
// container definition's GPU request ("all", a count, or device IDs),
// turning it into Docker DeviceRequests (for the NVIDIA runtime, or through
// CDI where the engine offers that: [RuntimeInfo.Mode]), discovering the host's GPUs and
// their memory through NVML, and checking — before any container is created —
// that a request can be met by this host and its Docker engine.
//
// NVML is reached only through [nvml.Interface], so the package works (and
// reports [ErrNoDriver]) on machines without libnvidia-ml, and tests use
// go-nvml's mock. The package never talks to the Docker engine itself: the
// caller reads the engine's runtimes into a [RuntimeInfo] and passes it to
// [Check].
//
// A typical start-up path:
//
//	req, err := gpu.ParseRequest(spec)      // validate once, at load
//	devs, devErr := inv.Devices()           // inv shared for the process
//	if err := gpu.Check(req, devs, devErr, rt); err != nil {
//		return err                          // nothing has started yet
//	}
//	hostConfig.DeviceRequests = req.DeviceRequestsFor(rt.Mode(), devs)
//
// The multi-model manager reads [Inventory.Memory] before each model load.
package gpu
