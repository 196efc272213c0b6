package spec

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
)

// Instance types mce knows how to map to GPUs.
const (
	// InstanceTypeLocal is SageMaker local mode's CPU instance type.
	InstanceTypeLocal = "local"
	// InstanceTypeLocalGPU is SageMaker local mode's GPU instance type: all GPUs.
	InstanceTypeLocalGPU = "local_gpu"
)

// instanceGPUs is the number of NVIDIA GPUs of a SageMaker instance type,
// from the AWS instance type pages. known is false for types mce has no
// entry for; CPU, Inferentia and Trainium types report 0 GPUs and known.
func instanceGPUs(instanceType string) (n int, known bool) {
	switch instanceType {
	case "ml.p2.xlarge", "ml.p3.2xlarge",
		"ml.g4dn.xlarge", "ml.g4dn.2xlarge", "ml.g4dn.4xlarge", "ml.g4dn.8xlarge", "ml.g4dn.16xlarge",
		"ml.g5.xlarge", "ml.g5.2xlarge", "ml.g5.4xlarge", "ml.g5.8xlarge", "ml.g5.16xlarge",
		"ml.g6.xlarge", "ml.g6.2xlarge", "ml.g6.4xlarge", "ml.g6.8xlarge", "ml.g6.16xlarge",
		"ml.g6e.xlarge", "ml.g6e.2xlarge", "ml.g6e.4xlarge", "ml.g6e.8xlarge", "ml.g6e.16xlarge":
		return 1, true
	case "ml.p3.8xlarge",
		"ml.g4dn.12xlarge",
		"ml.g5.12xlarge", "ml.g5.24xlarge",
		"ml.g6.12xlarge", "ml.g6.24xlarge",
		"ml.g6e.12xlarge", "ml.g6e.24xlarge":
		return 4, true
	case "ml.p2.8xlarge", "ml.p3.16xlarge", "ml.p3dn.24xlarge",
		"ml.p4d.24xlarge", "ml.p4de.24xlarge",
		"ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p5en.48xlarge",
		"ml.g5.48xlarge", "ml.g6.48xlarge", "ml.g6e.48xlarge":
		return 8, true
	case "ml.p2.16xlarge":
		return 16, true
	}
	family, _, _ := strings.Cut(strings.TrimPrefix(instanceType, "ml."), ".")
	if strings.HasPrefix(family, "g") || strings.HasPrefix(family, "p") {
		return 0, false // a GPU family (or size) missing from the table
	}
	return 0, true
}

// GPURequest is a parsed GPU setting: at most one of its fields is set; the
// zero value asks for no GPUs.
type GPURequest struct {
	All       bool
	Count     int
	DeviceIDs []string // indexes ("0") or UUIDs ("GPU-…", "MIG-…")
}

// String is the canonical form: "" (none), "all", "N", or "device=ID,ID".
func (g GPURequest) String() string {
	switch {
	case g.All:
		return "all"
	case len(g.DeviceIDs) > 0:
		return "device=" + strings.Join(g.DeviceIDs, ",")
	case g.Count > 0:
		return strconv.Itoa(g.Count)
	}
	return ""
}

var gpuIDRe = regexp.MustCompile(`^([0-9]+|(GPU|MIG)-[A-Za-z0-9/-]+)$`)

// ParseGPUs parses Resources.Gpus and ContainerPlan.GPUs: "" or "none" or
// "0" (no GPUs), "all", a count ("2"), or device IDs — "device=1",
// "device=0,1", "0,1", "GPU-<uuid>[,…]". A lone number is a count, as in
// `docker run --gpus`.
func ParseGPUs(s string) (GPURequest, error) {
	switch s {
	case "", "none", "0":
		return GPURequest{}, nil
	case "all":
		return GPURequest{All: true}, nil
	}
	list, explicit := strings.CutPrefix(s, "device=")
	if !explicit && !strings.Contains(s, ",") {
		if n, err := strconv.Atoi(s); err == nil {
			if n < 0 {
				return GPURequest{}, errors.New("negative GPU count")
			}
			return GPURequest{Count: n}, nil
		}
	}
	ids := strings.Split(list, ",")
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !gpuIDRe.MatchString(id) {
			return GPURequest{}, errors.New("bad GPU device ID " + strconv.Quote(id))
		}
		if seen[id] {
			return GPURequest{}, errors.New("GPU device ID " + strconv.Quote(id) + " given twice")
		}
		seen[id] = true
	}
	return GPURequest{DeviceIDs: ids}, nil
}
