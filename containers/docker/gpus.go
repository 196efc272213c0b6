package docker

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers/gpu"
)

// GPURuntimeInfo is what the GPU checks need of the engine's /info; engine
// gives the API version when it says which it speaks.
func GPURuntimeInfo(info client.SystemInfoResult, engine any) *gpu.RuntimeInfo {
	ri := &gpu.RuntimeInfo{DefaultRuntime: info.Info.DefaultRuntime, CDISpecDirs: info.Info.CDISpecDirs}
	for name := range info.Info.Runtimes {
		ri.Runtimes = append(ri.Runtimes, name)
	}
	for _, d := range info.Info.DiscoveredDevices {
		if d.Source == "cdi" {
			ri.CDIDevices = append(ri.CDIDevices, d.ID)
		}
	}
	if v, ok := engine.(interface{ ClientVersion() string }); ok {
		ri.APIVersion = v.ClientVersion()
	}
	return ri
}

// gpuDeviceRequests are the DeviceRequests of req on this engine: through
// CDI or the NVIDIA runtime, whichever the engine offers (gpu.RuntimeInfo.Mode).
// Without engine information (never read) it falls back to the runtime's.
func (rt *Runtime) gpuDeviceRequests(req gpu.Request) []container.DeviceRequest {
	if req.IsZero() {
		return nil
	}
	rt.mu.Lock()
	ri, inv := rt.rtInfo, rt.gpus
	rt.mu.Unlock()
	if ri == nil {
		return DeviceRequestsFor(req, gpu.ModeRuntime, nil)
	}
	var devs []gpu.Device
	var migs []gpu.MIGDevice
	if inv != nil && len(req.DeviceIDs) > 0 {
		devs, _ = inv.Devices() // only to turn UUIDs into CDI indexes
		if slices.ContainsFunc(req.DeviceIDs, gpu.IsMIG) {
			migs, _ = inv.MIGDevices() // and MIG UUIDs into "<gpu>:<partition>"
		}
	}
	return DeviceRequestsFor(req, ri.Mode(), devs, migs...)
}

// DeviceRequestsFor is the HostConfig.DeviceRequests of req on an engine
// that hands GPUs over in mode: nil for the zero Request; for ModeCDI one
// request for the "cdi" driver naming req's CDI devices
// (gpu.Request.CDIDevices); otherwise (ModeRuntime, and ModeNone, where the
// engine will refuse it) one request for the "nvidia" driver with the "gpu"
// capability and Count -1 (all), Count N, or DeviceIDs, as `docker run
// --gpus` sends. A MIG partition goes by its UUID to the NVIDIA runtime,
// which takes MIG UUIDs where it takes GPU UUIDs, and by its
// "<gpu>:<partition>" name (from migs) to CDI.
func DeviceRequestsFor(req gpu.Request, mode gpu.Mode, devs []gpu.Device, migs ...gpu.MIGDevice) []container.DeviceRequest {
	if req.IsZero() {
		return nil
	}
	if mode == gpu.ModeCDI {
		return []container.DeviceRequest{{Driver: "cdi", DeviceIDs: req.CDIDevices(devs, migs...)}}
	}
	dr := container.DeviceRequest{Driver: "nvidia", Capabilities: [][]string{{"gpu"}}}
	switch {
	case req.All:
		dr.Count = -1
	case len(req.DeviceIDs) > 0:
		dr.DeviceIDs = append([]string(nil), req.DeviceIDs...)
	default:
		dr.Count = req.Count
	}
	return []container.DeviceRequest{dr}
}

// checkGPUs fails early, naming what is missing, when a spec asks for GPUs the
// host or engine cannot provide.
func (rt *Runtime) checkGPUs(ctx context.Context, req gpu.Request) error {
	if req.IsZero() {
		return nil
	}
	rt.mu.Lock()
	if rt.gpus == nil {
		rt.gpus = gpu.NewInventory(nil)
	}
	inv, ri := rt.gpus, rt.rtInfo
	rt.mu.Unlock()
	if ri == nil {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		info, err := rt.engine.Info(cctx, client.InfoOptions{})
		cancel()
		if err != nil {
			return classify("read Docker engine info", err)
		}
		ri = GPURuntimeInfo(info, rt.engine)
		rt.mu.Lock()
		rt.rtInfo = ri
		rt.mu.Unlock()
	}
	devs, derr := inv.Devices()
	var migs []gpu.MIGDevice
	if derr == nil && slices.ContainsFunc(req.DeviceIDs, gpu.IsMIG) {
		migs, _ = inv.MIGDevices()
	}
	return gpu.Check(req, devs, derr, *ri, migs...)
}

// gpuIndexes resolves a GPU request to NVML device indexes, for the
// multi-model manager's memory accounting; nil when NVML is unavailable.
// A count takes the lowest indexes, as the NVIDIA runtime assigns them.
func (rt *Runtime) gpuIndexes(req gpu.Request) ([]int, *gpu.Inventory) {
	rt.mu.Lock()
	if rt.gpus == nil {
		rt.gpus = gpu.NewInventory(nil)
	}
	inv := rt.gpus
	rt.mu.Unlock()
	devs, err := inv.Devices()
	if err != nil {
		return nil, nil
	}
	var out []int
	switch {
	case req.All:
		for _, d := range devs {
			out = append(out, d.Index)
		}
	case req.Count > 0:
		for _, d := range devs[:min(req.Count, len(devs))] {
			out = append(out, d.Index)
		}
	default:
		for _, id := range req.DeviceIDs {
			for _, d := range devs {
				if strings.EqualFold(id, d.UUID) || id == strconv.Itoa(d.Index) {
					out = append(out, d.Index)
				}
			}
		}
	}
	return out, inv
}
