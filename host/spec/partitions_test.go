package spec

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAcceleratorPartitions: a variant's AcceleratorPartitionLayouts and an
// inference component's AcceleratorPartitionType are checked the same way
// (the API model's shape, MIG profile names), and a valid request for MIG
// partitions is refused with a message that names the profiles and what to
// do instead, rather than accepted and ignored.
func TestAcceleratorPartitions(t *testing.T) {
	variant := func(layouts string) error {
		c := oneVariantConfig()
		c.ProductionVariants[0].AcceleratorPartitionLayouts = json.RawMessage(layouts)
		return c.Validate()
	}
	mem := int32(1024)
	component := func(typ string, devices float64) error {
		in := &CreateInferenceComponentInput{InferenceComponentName: "ic", EndpointName: "ep", VariantName: "AllTraffic",
			Specification: &InferenceComponentSpecification{ModelName: "m", ComputeResourceRequirements: &InferenceComponentComputeRequirements{
				MinMemoryRequiredInMb: &mem, NumberOfAcceleratorDevicesRequired: &devices, AcceleratorPartitionType: &typ}},
			RuntimeConfig: &InferenceComponentRuntimeConfig{CopyCount: ptr[int32](1)}}
		return in.Validate()
	}
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"variant: a valid layout":         {variant(`[{"AcceleratorPartitionTypes":["mig-3g.40gb","mig-3g.40gb","mig-1g.10gb+me"]}]`), "asks for MIG partitions (mig-3g.40gb, mig-3g.40gb, mig-1g.10gb+me), and mce does not place models on MIG partitions yet"},
		"variant: a bad profile":          {variant(`[{"AcceleratorPartitionTypes":["3g.40gb"]}]`), "productionVariants.1.member.acceleratorPartitionLayouts.1.member.acceleratorPartitionTypes.1.member' failed to satisfy constraint: Member must satisfy regular expression pattern"},
		"variant: an empty layout":        {variant(`[{"AcceleratorPartitionTypes":[]}]`), "Member must have length greater than or equal to 1"},
		"variant: eight partitions":       {variant(`[{"AcceleratorPartitionTypes":["mig-1g.10gb","mig-1g.10gb","mig-1g.10gb","mig-1g.10gb","mig-1g.10gb","mig-1g.10gb","mig-1g.10gb","mig-1g.10gb"]}]`), "less than or equal to 7"},
		"variant: not a list":             {variant(`{"AcceleratorPartitionTypes":["mig-3g.40gb"]}`), "Member must be a list"},
		"component: a valid profile":      {component("mig-3g.40gb", 1), `AcceleratorPartitionType "mig-3g.40gb" asks for MIG partitions (mig-3g.40gb), and mce does not place models on MIG partitions yet`},
		"component: a bad profile":        {component("big", 1), "acceleratorPartitionType' failed to satisfy constraint"},
		"component: two devices with one": {component("mig-3g.40gb", 2), "NumberOfAcceleratorDevicesRequired must be 1 with an AcceleratorPartitionType"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant it to contain %q", name, tc.err, tc.want)
		}
	}
	// Nothing else of the configuration warns about the layouts any more.
	c := oneVariantConfig()
	c.ProductionVariants[0].AcceleratorPartitionLayouts = json.RawMessage(`[{"AcceleratorPartitionTypes":["mig-3g.40gb"]}]`)
	for _, w := range c.Warnings() {
		if strings.Contains(w, "AcceleratorPartitionLayouts") {
			t.Errorf("warning %q", w)
		}
	}
}
