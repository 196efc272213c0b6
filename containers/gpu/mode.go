package gpu

import (
	"slices"
	"strconv"
	"strings"
)

// Mode is how a Docker engine hands GPUs to a container.
type Mode string

const (
	// ModeNone: the engine can give no GPU to a container.
	ModeNone Mode = ""
	// ModeRuntime: the NVIDIA container toolkit's runtime or hook, reached
	// through a DeviceRequest for the "nvidia" driver with the "gpu"
	// capability (what `docker run --gpus` sends).
	ModeRuntime Mode = "nvidia-runtime"
	// ModeCDI: the Container Device Interface (Docker 25 and later, API
	// 1.44, with the "cdi" feature on): a DeviceRequest for the "cdi"
	// driver naming fully qualified devices such as "nvidia.com/gpu=0"
	// (what `docker run --device nvidia.com/gpu=0` sends). The devices come
	// from a CDI spec that `nvidia-ctk cdi generate` writes.
	ModeCDI Mode = "cdi"
)

const (
	// cdiKind is the CDI kind of NVIDIA GPUs in the specs nvidia-ctk writes.
	cdiKind = "nvidia.com/gpu"
	// cdiMinAPI is the first Engine API version whose /info reports
	// CDISpecDirs (Docker 25).
	cdiMinAPI = "1.44"
	// discoveredDevicesAPI is the first Engine API version whose /info lists
	// the CDI devices it found (DiscoveredDevices, Docker 28.3).
	discoveredDevicesAPI = "1.50"
)

// CDIEnabled reports whether the engine takes CDI device requests: it
// reports CDI spec folders (an engine without the "cdi" feature reports
// none) and, when its API version is known, speaks API 1.44 or later.
func (rt RuntimeInfo) CDIEnabled() bool {
	if len(rt.CDISpecDirs) == 0 {
		return false
	}
	return rt.APIVersion == "" || !versionLess(rt.APIVersion, cdiMinAPI)
}

// cdiGPUsListed reports whether the engine lists its CDI devices (API
// 1.50 and later) — then hasCDIGPUs says whether NVIDIA's are among them.
func (rt RuntimeInfo) cdiGPUsListed() bool {
	return rt.APIVersion != "" && !versionLess(rt.APIVersion, discoveredDevicesAPI)
}

func (rt RuntimeInfo) hasCDIGPUs() bool {
	return slices.ContainsFunc(rt.CDIDevices, func(id string) bool { return strings.HasPrefix(id, cdiKind+"=") })
}

// Mode picks how GPUs go to this engine's containers:
//
//  1. CDI, when CDI is enabled and the engine lists NVIDIA CDI devices (a
//     spec from `nvidia-ctk cdi generate` is known to be there);
//  2. the NVIDIA runtime, when the engine has one registered;
//  3. CDI, when it is enabled but the engine cannot list its devices (API
//     before 1.50): the spec is assumed, and a missing one fails at
//     container start with the engine's own message;
//  4. none.
//
// An engine at API 1.50 or later that lists no NVIDIA CDI device and has
// no NVIDIA runtime gets ModeNone: the spec is missing.
func (rt RuntimeInfo) Mode() Mode {
	cdi := rt.CDIEnabled()
	switch {
	case cdi && rt.hasCDIGPUs():
		return ModeCDI
	case rt.hasNVIDIA():
		return ModeRuntime
	case cdi && !rt.cdiGPUsListed():
		return ModeCDI
	default:
		return ModeNone
	}
}

// CDIDevices names r's devices in CDI's fully qualified form, as a "cdi"
// DeviceRequest lists them (ModeCDI): "nvidia.com/gpu=all", the first Count
// GPU indexes, or the requested devices. A UUID is turned into its index
// when devs lists it (the specs nvidia-ctk writes by default name GPUs by
// index), and a MIG partition's UUID into its "<gpu>:<partition>" name
// when migs lists it; any other is passed as given. The zero Request names
// none.
func (r Request) CDIDevices(devs []Device, migs ...MIGDevice) []string {
	var ids []string
	switch {
	case r.All:
		ids = []string{cdiKind + "=all"}
	case len(r.DeviceIDs) > 0:
		for _, id := range r.DeviceIDs {
			ids = append(ids, cdiKind+"="+indexOf(id, devs, migs))
		}
	default:
		for i := range r.Count {
			ids = append(ids, cdiKind+"="+strconv.Itoa(i))
		}
	}
	return ids
}

// indexOf is the index of the device whose UUID is id, the "<gpu>:<partition>"
// name of the MIG partition whose UUID is id, or id itself.
func indexOf(id string, devs []Device, migs []MIGDevice) string {
	if IsMIG(id) {
		for _, m := range migs {
			if strings.EqualFold(m.UUID, id) {
				return strings.TrimPrefix(m.CDIName(), cdiKind+"=")
			}
		}
		return id
	}
	if !hasPrefixFold(id, uuidPrefix) {
		return id
	}
	for _, d := range devs {
		if strings.EqualFold(d.UUID, id) {
			return strconv.Itoa(d.Index)
		}
	}
	return id
}

// versionLess compares Engine API versions such as "1.41" and "1.44".
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}
