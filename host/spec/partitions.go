package spec

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// Accelerator partitions (2026-10): a production variant's
// AcceleratorPartitionLayouts carve each GPU of its instances into
// Multi-Instance GPU (MIG) partitions, and an inference component's
// ComputeResourceRequirements.AcceleratorPartitionType names the partition a
// copy occupies. Both name NVIDIA's MIG profiles with SageMaker's "mig-"
// prefix ("mig-3g.40gb", "mig-1g.10gb+me").
var migProfileRe = regexp.MustCompile(`^mig-[1-8]g\.[0-9]+gb(\+me)?$`)

const migProfilePattern = `^mig-[1-8]g\.[0-9]+gb(\+me)?$`

// The most layouts a variant and profiles a layout may list: an NVIDIA GPU
// has at most 7 compute partitions.
const (
	maxPartitionLayouts = 8
	maxPartitionsPerGPU = 7
)

// AcceleratorPartitionLayout is one layout of a variant's
// AcceleratorPartitionLayouts.
type AcceleratorPartitionLayout struct {
	AcceleratorPartitionTypes []string `json:"AcceleratorPartitionTypes"`
}

// checkPartitionLayouts checks a variant's AcceleratorPartitionLayouts as
// the API model shapes them.
func checkPartitionLayouts(c *checker, p string, raw json.RawMessage) {
	if !present(raw) {
		return
	}
	var layouts []AcceleratorPartitionLayout
	if err := json.Unmarshal(raw, &layouts); err != nil {
		c.fail("", p, "Member must be a list of {AcceleratorPartitionTypes: [profile, …]}")
		return
	}
	c.listLen(p, len(layouts), 1, maxPartitionLayouts)
	for i, l := range layouts {
		q := member1(p, i) + ".acceleratorPartitionTypes"
		c.listLen(q, len(l.AcceleratorPartitionTypes), 1, maxPartitionsPerGPU)
		for j, t := range l.AcceleratorPartitionTypes {
			checkPartitionType(c, member1(q, j), &t)
		}
	}
}

// checkPartitionType checks one MIG profile name.
func checkPartitionType(c *checker, p string, t *string) {
	if t == nil {
		return
	}
	if *t == "" {
		c.fail(quote(*t), p, "Member must have length greater than or equal to 1")
		return
	}
	c.str(p, *t, 63, migProfileRe, migProfilePattern)
}

// partitionLayoutProfiles lists the profiles of raw's layouts (raw valid).
func partitionLayoutProfiles(raw json.RawMessage) []string {
	var layouts []AcceleratorPartitionLayout
	json.Unmarshal(raw, &layouts)
	var out []string
	for _, l := range layouts {
		out = append(out, l.AcceleratorPartitionTypes...)
	}
	return out
}

// noPartitions is the refusal of a valid request for MIG partitions: mce
// places no model on a MIG partition yet, and says what the caller can do
// instead rather than giving whole GPUs where partitions were asked for.
func noPartitions(what string, profiles []string) string {
	return what + " asks for MIG partitions (" + strings.Join(profiles, ", ") + "), and mce does not place models on MIG partitions yet: " +
		"leave it out to run on whole GPUs (InstanceType local_gpu, NumberOfAcceleratorDevicesRequired)."
}

// partitionTypeSemantic holds an inference component's
// AcceleratorPartitionType rules beyond its shape: NumberOfAcceleratorDevicesRequired must be 1 with
// it, as SageMaker requires, and mce refuses it (noPartitions).
func partitionTypeSemantic(s *semantic, r *InferenceComponentComputeRequirements) {
	t := r.AcceleratorPartitionType
	if t == nil {
		return
	}
	if a := r.NumberOfAcceleratorDevicesRequired; a != nil && *a != 1 {
		s.add("NumberOfAcceleratorDevicesRequired must be 1 with an AcceleratorPartitionType (" + formatFloat(*a) + " was given).")
		return
	}
	s.add(noPartitions("AcceleratorPartitionType "+strconv.Quote(*t), []string{*t}))
}
