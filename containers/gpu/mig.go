package gpu

import (
	"strconv"
	"strings"
)

// MIGDevice is one Multi-Instance GPU partition of a GPU in MIG mode, as
// NVML reports it: what a copy asking for an AcceleratorPartitionType
// ("mig-3g.40gb") is placed on.
type MIGDevice struct {
	Parent      int    // the GPU's index
	Index       int    // the partition's index among its GPU's MIG devices
	UUID        string // "MIG-…"
	Profile     string // NVIDIA's profile name, "3g.40gb" or "1g.10gb+me"; "" when NVML's name does not say
	MemoryTotal uint64
}

// CDIName is the partition's name in the CDI specifications nvidia-ctk
// writes ("nvidia.com/gpu=<gpu>:<partition>").
func (m MIGDevice) CDIName() string {
	return cdiKind + "=" + strconv.Itoa(m.Parent) + ":" + strconv.Itoa(m.Index)
}

// migProfile reads the profile from a MIG device's NVML name, which ends
// with "MIG <profile>" ("NVIDIA H100 80GB HBM3 MIG 3g.40gb").
func migProfile(name string) string {
	i := strings.LastIndex(name, "MIG ")
	if i < 0 {
		return ""
	}
	p := strings.TrimSpace(name[i+len("MIG "):])
	if p == "" || strings.ContainsAny(p, " \t") {
		return ""
	}
	return p
}
