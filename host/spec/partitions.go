package spec

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mce-run/mce/containers"
)

// Accelerator partitions (2026-10): a production variant's
// AcceleratorPartitionLayouts carve each GPU of its instances into
// Multi-Instance GPU (MIG) partitions, and an inference component's
// ComputeResourceRequirements.AcceleratorPartitionType names the partition a
// copy occupies. Both name NVIDIA's MIG profiles with SageMaker's "mig-"
// prefix ("mig-3g.40gb"). The shapes are the API model's (pattern, at most
// 32 characters, at most 32 profiles a layout); the rules beyond them are
// the developer guide's ("Create an endpoint with GPU partitions", "Deploy
// models to GPU partitions with inference components").
var migProfileRe = regexp.MustCompile(`^mig-[0-9]+g\.[0-9]+gb([+-][a-z0-9.]+)*$`)

const migProfilePattern = `mig-[0-9]+g\.[0-9]+gb([+-][a-z0-9.]+)*`

const (
	// maxPartitionLayouts and maxPartitionsPerLayout bound the lists as
	// the API model does; SageMaker then takes exactly one layout.
	maxPartitionLayouts    = 32
	maxPartitionsPerLayout = 32
	maxPartitionTypeLen    = 32
	// computeSlices is what one NVIDIA GPU has: a layout's profiles
	// ("<slices>g.<memory>gb") must fit in them.
	computeSlices = 7
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
	c.listLen(p, len(layouts), 0, maxPartitionLayouts)
	for i, l := range layouts {
		q := member1(p, i) + ".acceleratorPartitionTypes"
		c.listLen(q, len(l.AcceleratorPartitionTypes), 0, maxPartitionsPerLayout)
		for j, t := range l.AcceleratorPartitionTypes {
			checkPartitionType(c, member1(q, j), &t)
		}
	}
}

// checkPartitionType checks one MIG profile name's shape.
func checkPartitionType(c *checker, p string, t *string) {
	if t == nil {
		return
	}
	c.str(p, *t, maxPartitionTypeLen, migProfileRe, migProfilePattern)
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

// partitionLayoutSemantic holds a variant's layout to SageMaker's rules:
// exactly one layout (applied to every GPU of every instance) of at least
// one profile, no media-extension profiles, profiles that fit on one GPU's
// seven compute slices, and an instance type with GPUs.
func partitionLayoutSemantic(s *semantic, v ProductionVariant, kind string) {
	if !present(v.AcceleratorPartitionLayouts) {
		return
	}
	var layouts []AcceleratorPartitionLayout
	if json.Unmarshal(v.AcceleratorPartitionLayouts, &layouts) != nil {
		return // the shape's error says it
	}
	of := "AcceleratorPartitionLayouts of " + kind + strconv.Quote(v.VariantName)
	if len(layouts) != 1 {
		s.add(of + " must contain exactly 1 layout (" + strconv.Itoa(len(layouts)) + " were given): it describes how to divide one accelerator, and applies to every accelerator of the variant.")
		return
	}
	types := layouts[0].AcceleratorPartitionTypes
	if len(types) == 0 {
		s.add(of + " must list at least one partition type.")
		return
	}
	used := 0 // compute slices
	for _, t := range types {
		if strings.Contains(t, "+me") {
			s.add(of + ": partition type " + strconv.Quote(t) + " is not supported: SageMaker does not support the +me (media extensions) profiles.")
			return
		}
		used += profileSlices(t)
	}
	if used > computeSlices {
		s.add(of + " does not fit on one accelerator: an accelerator provides " + strconv.Itoa(computeSlices) + " compute slices, and " +
			strings.Join(types, ", ") + " need " + strconv.Itoa(used) + ". Remove a partition or choose smaller types.")
	}
	if n, all := InstanceGPUCount(v.InstanceType); n == 0 && !all && v.InstanceType != "" {
		s.add(of + ": instance type " + v.InstanceType + " has no accelerator to partition.")
	}
}

// profileSlices is the compute slices of a profile ("mig-3g.40gb": 3).
func profileSlices(t string) int {
	g, _, _ := strings.Cut(containers.NVIDIAProfile(t), "g.")
	n, err := strconv.Atoi(g)
	if err != nil || n < 0 {
		return computeSlices + 1 // the shape's error says it
	}
	return n
}

// partitionTypeSemantic holds an inference component's
// AcceleratorPartitionType rules beyond its shape: NumberOfAcceleratorDevicesRequired must be 1 with
// it, as SageMaker requires. Whether the endpoint's variant declares the
// type is PartitionTypeFits's, where the variant is known.
func partitionTypeSemantic(s *semantic, r *InferenceComponentComputeRequirements) {
	t := r.AcceleratorPartitionType
	if t == nil || *t == "" {
		return
	}
	if a := r.NumberOfAcceleratorDevicesRequired; a != nil && *a != 1 {
		s.add("NumberOfAcceleratorDevicesRequired must be 1 with an AcceleratorPartitionType (" + formatFloat(*a) + " was given): it refers to one partition.")
	}
}

// PartitionTypeFits holds an inference component's AcceleratorPartitionType
// t ("" when not given) against the partition layout of the variant it
// goes on (layout: the variant's profiles, none without a layout), as
// SageMaker does: required on a variant with a layout, one of the types it
// declares, and not given on a variant without one. It returns the
// refusal, or "".
func PartitionTypeFits(t string, variant string, layout []string) string {
	switch {
	case len(layout) == 0 && t != "":
		return "AcceleratorPartitionType " + strconv.Quote(t) + " needs a variant with AcceleratorPartitionLayouts, and variant " + variant +
			" has none: omit it to place the inference component on whole accelerators."
	case len(layout) > 0 && t == "":
		return "AcceleratorPartitionType is required: variant " + variant + " has an accelerator partition layout (" + strings.Join(layout, ", ") + ")."
	case len(layout) > 0 && !slices.Contains(layout, t):
		declared := slices.Compact(slices.Sorted(slices.Values(layout)))
		return "AcceleratorPartitionType " + strconv.Quote(t) + " is not declared by the layout of variant " + variant + ": the declared types are " + strings.Join(declared, ", ") + "."
	}
	return ""
}
