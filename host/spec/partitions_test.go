package spec

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAcceleratorPartitions: a variant's AcceleratorPartitionLayouts and an
// inference component's AcceleratorPartitionType are checked the same way
// (the API model's shape, MIG profile names), then held to the developer
// guide's rules: one layout that fits one GPU's seven compute slices, no +me
// profiles, an instance type with GPUs, one device with a partition type.
func TestAcceleratorPartitions(t *testing.T) {
	variant := func(layouts string) error {
		c := oneVariantConfig()
		c.ProductionVariants[0].InstanceType = "ml.g5.xlarge"
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
		want string // "": accepted
	}{
		"variant: a valid layout":         {variant(`[{"AcceleratorPartitionTypes":["mig-3g.40gb","mig-3g.40gb","mig-1g.10gb"]}]`), ""},
		"variant: a bad profile":          {variant(`[{"AcceleratorPartitionTypes":["3g.40gb"]}]`), "productionVariants.1.member.acceleratorPartitionLayouts.1.member.acceleratorPartitionTypes.1.member' failed to satisfy constraint: Member must satisfy regular expression pattern: mig-[0-9]+g\\.[0-9]+gb([+-][a-z0-9.]+)*"},
		"variant: a long profile":         {variant(`[{"AcceleratorPartitionTypes":["mig-1g.10gb-aaaaaaaaaaaaaaaaaaaaaaa"]}]`), "Member must have length less than or equal to 32"},
		"variant: an empty layout":        {variant(`[{"AcceleratorPartitionTypes":[]}]`), `AcceleratorPartitionLayouts of production variant "AllTraffic" must list at least one partition type.`},
		"variant: two layouts":            {variant(`[{"AcceleratorPartitionTypes":["mig-7g.80gb"]},{"AcceleratorPartitionTypes":["mig-7g.80gb"]}]`), "must contain exactly 1 layout (2 were given)"},
		"variant: no layout":              {variant(`[]`), "must contain exactly 1 layout (0 were given)"},
		"variant: eight slices":           {variant(`[{"AcceleratorPartitionTypes":["mig-4g.40gb","mig-4g.40gb"]}]`), "does not fit on one accelerator: an accelerator provides 7 compute slices, and mig-4g.40gb, mig-4g.40gb need 8."},
		"variant: media extensions":       {variant(`[{"AcceleratorPartitionTypes":["mig-1g.10gb+me"]}]`), `partition type "mig-1g.10gb+me" is not supported`},
		"variant: not a list":             {variant(`{"AcceleratorPartitionTypes":["mig-3g.40gb"]}`), "Member must be a list"},
		"component: a valid profile":      {component("mig-3g.40gb", 1), ""},
		"component: a bad profile":        {component("big", 1), "acceleratorPartitionType' failed to satisfy constraint"},
		"component: two devices with one": {component("mig-3g.40gb", 2), "NumberOfAcceleratorDevicesRequired must be 1 with an AcceleratorPartitionType (2.0 was given)"},
	} {
		if tc.want == "" {
			if tc.err != nil {
				t.Errorf("%s: %v", name, tc.err)
			}
			continue
		}
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant it to contain %q", name, tc.err, tc.want)
		}
	}
	c := oneVariantConfig()
	c.ProductionVariants[0].InstanceType = "ml.m5.xlarge"
	c.ProductionVariants[0].AcceleratorPartitionLayouts = json.RawMessage(`[{"AcceleratorPartitionTypes":["mig-3g.40gb"]}]`)
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "instance type ml.m5.xlarge has no accelerator to partition") {
		t.Errorf("a CPU instance type: %v", err)
	}
	// Nothing of the configuration warns about the layouts: they are used.
	c.ProductionVariants[0].InstanceType = "local_gpu"
	for _, w := range c.Warnings() {
		if strings.Contains(w, "AcceleratorPartitionLayouts") {
			t.Errorf("warning %q", w)
		}
	}
}

// TestPartitionTypeFits: a component's type against its variant's layout.
func TestPartitionTypeFits(t *testing.T) {
	layout := []string{"mig-3g.40gb", "mig-3g.40gb", "mig-1g.10gb"}
	for _, tc := range []struct {
		typ    string
		layout []string
		want   string
	}{
		{"", nil, ""},
		{"mig-3g.40gb", layout, ""},
		{"mig-1g.10gb", layout, ""},
		{"", layout, "AcceleratorPartitionType is required: variant v has an accelerator partition layout (mig-3g.40gb, mig-3g.40gb, mig-1g.10gb)."},
		{"mig-2g.20gb", layout, `AcceleratorPartitionType "mig-2g.20gb" is not declared by the layout of variant v: the declared types are mig-1g.10gb, mig-3g.40gb.`},
		{"mig-3g.40gb", nil, `AcceleratorPartitionType "mig-3g.40gb" needs a variant with AcceleratorPartitionLayouts, and variant v has none: omit it to place the inference component on whole accelerators.`},
	} {
		if got := PartitionTypeFits(tc.typ, "v", tc.layout); got != tc.want {
			t.Errorf("PartitionTypeFits(%q, %v) = %q\nwant %q", tc.typ, tc.layout, got, tc.want)
		}
	}
}
