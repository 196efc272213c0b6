package spec

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMergeSpecification: each member of an update's specification
// replaces the current one as a whole when given and keeps it when
// absent; ModelName and Container replace each other; the result is held
// to CreateInferenceComponent's rules.
func TestMergeSpecification(t *testing.T) {
	const current = `{"ModelName": "m", "StartupParameters": {"ContainerStartupHealthCheckTimeoutInSeconds": 600},
		"ComputeResourceRequirements": {"NumberOfCpuCoresRequired": 1, "NumberOfAcceleratorDevicesRequired": 1, "MinMemoryRequiredInMb": 1024},
		"SchedulingConfig": {"PlacementStrategy": "BINPACK"}, "DataCacheConfig": {"EnableCaching": true}}`
	decode := func(s string) *InferenceComponentSpecification {
		t.Helper()
		var sp InferenceComponentSpecification
		if err := json.Unmarshal([]byte(s), &sp); err != nil {
			t.Fatal(err)
		}
		return &sp
	}
	encode := func(sp InferenceComponentSpecification) string {
		b, err := json.Marshal(sp)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name, update, want, err string
	}{
		{name: "resources only (update_predictor(resources=…))", update: `{"ComputeResourceRequirements": {"MinMemoryRequiredInMb": 2048}}`,
			want: `{"ModelName":"m","StartupParameters":{"ContainerStartupHealthCheckTimeoutInSeconds":600},"ComputeResourceRequirements":{"MinMemoryRequiredInMb":2048},"DataCacheConfig":{"EnableCaching":true},"SchedulingConfig":{"PlacementStrategy":"BINPACK"}}`},
		{name: "nothing", update: `{}`, want: encode(*decode(current))},
		{name: "nulls are absent", update: `{"ModelName": null, "Container": null, "StartupParameters": null, "SchedulingConfig": null, "DataCacheConfig": null}`, want: encode(*decode(current))},
		{name: "another model", update: `{"ModelName": "m2"}`,
			want: `{"ModelName":"m2","StartupParameters":{"ContainerStartupHealthCheckTimeoutInSeconds":600},"ComputeResourceRequirements":{"NumberOfCpuCoresRequired":1,"NumberOfAcceleratorDevicesRequired":1,"MinMemoryRequiredInMb":1024},"DataCacheConfig":{"EnableCaching":true},"SchedulingConfig":{"PlacementStrategy":"BINPACK"}}`},
		{name: "a container drops the model", update: `{"Container": {"Image": "img", "Environment": {"A": "1"}}}`,
			want: `{"Container":{"Image":"img","Environment":{"A":"1"}},"StartupParameters":{"ContainerStartupHealthCheckTimeoutInSeconds":600},"ComputeResourceRequirements":{"NumberOfCpuCoresRequired":1,"NumberOfAcceleratorDevicesRequired":1,"MinMemoryRequiredInMb":1024},"DataCacheConfig":{"EnableCaching":true},"SchedulingConfig":{"PlacementStrategy":"BINPACK"}}`},
		{name: "startup, scheduling and data cache replaced whole", update: `{"StartupParameters": {"ModelDataDownloadTimeoutInSeconds": 900}, "SchedulingConfig": {"PlacementStrategy": "SPREAD"}, "DataCacheConfig": {"EnableCaching": false}}`,
			want: `{"ModelName":"m","StartupParameters":{"ModelDataDownloadTimeoutInSeconds":900},"ComputeResourceRequirements":{"NumberOfCpuCoresRequired":1,"NumberOfAcceleratorDevicesRequired":1,"MinMemoryRequiredInMb":1024},"DataCacheConfig":{"EnableCaching":false},"SchedulingConfig":{"PlacementStrategy":"SPREAD"}}`},
		{name: "both alternatives", update: `{"ModelName": "m2", "Container": {"Image": "img"}}`, err: "Specify either ModelName or Container in the inference component specification, not both."},
		{name: "a container without an image", update: `{"Container": {"ArtifactUrl": "s3://b/k"}}`, err: "The inference component specification needs a ModelName, or a Container with an Image."},
		{name: "checked as sent", update: `{"ComputeResourceRequirements": {"NumberOfCpuCoresRequired": 1}}`,
			err: "Value null at 'specification.computeResourceRequirements.minMemoryRequiredInMb' failed to satisfy constraint: Member must not be null"},
		{name: "merged, then checked", update: `{"ComputeResourceRequirements": {"MinMemoryRequiredInMb": 256, "MaxMemoryRequiredInMb": 128}}`,
			err: "must not be less than MinMemoryRequiredInMb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := *decode(current)
			curJSON := encode(cur)
			got, err := MergeSpecification(cur, decode(tc.update))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := encode(got); s != tc.want {
				t.Errorf("merged\n%s\nwant\n%s", s, tc.want)
			}
			if encode(cur) != curJSON {
				t.Error("the current specification was changed")
			}
		})
	}
}

// TestMergeKeepsTheBase: an adapter's update may leave its base out;
// SameBase tells a base given from another.
func TestMergeKeepsTheBase(t *testing.T) {
	cur := InferenceComponentSpecification{BaseInferenceComponentName: "Base", Container: &InferenceComponentContainer{ArtifactURL: "s3://b/a1"}}
	u := &InferenceComponentSpecification{Container: &InferenceComponentContainer{ArtifactURL: "s3://b/a2"}}
	got, err := MergeSpecification(cur, u)
	if err != nil || got.BaseInferenceComponentName != "Base" || got.Container.ArtifactURL != "s3://b/a2" {
		t.Fatalf("merged %+v, %v", got, err)
	}
	for base, want := range map[string]bool{"": true, "base": true, "Base": true, "other": false} {
		if got := cur.SameBase(&InferenceComponentSpecification{BaseInferenceComponentName: base}); got != want {
			t.Errorf("SameBase(%q) = %v, want %v", base, got, want)
		}
	}
	if !(InferenceComponentSpecification{}).SameBase(nil) || (InferenceComponentSpecification{}).SameBase(&InferenceComponentSpecification{BaseInferenceComponentName: "b"}) {
		t.Error("a component with a model: no base kept, a base given is a change")
	}
}
