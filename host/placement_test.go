package host

import (
	"context"
	"runtime"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/host/spec"
)

// TestPlacementCostsNothingPerInstance: placing copies on a variant of
// 2147483647 instances holds what the copies need, not an entry per
// instance (mce grew by gigabytes and died of it), and SPREAD and BINPACK
// still choose as on a small variant.
func TestPlacementCostsNothingPerInstance(t *testing.T) {
	const instances = 1<<31 - 1
	s := New(Config{Backend: &capBackend{fakeBackend: &fakeBackend{t: t}}, Store: openStore(t), Logger: zerolog.Nop()})
	t.Cleanup(func() { s.Close(context.Background()) })
	sp := spec.InferenceComponentSpecification{ComputeResourceRequirements: &spec.InferenceComponentComputeRequirements{
		NumberOfCpuCoresRequired: new(2.0), MinMemoryRequiredInMb: new(int32(1024))}}
	s.ics.add(&component{name: "held", endpoint: "wide", rec: ComponentRecord{Name: "held", EndpointName: "wide", VariantName: "AllTraffic",
		Spec: sp, SpecVersion: 1, Copies: []CopyRecord{{ID: 1, Instance: 0, SpecVersion: 1}, {ID: 2, Instance: instances - 1, SpecVersion: 1},
			{ID: 3, Instance: -1, SpecVersion: 1}, {ID: 4, Instance: instances, SpecVersion: 1}}}})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p := s.newPlacement(context.Background(), "wide", "AllTraffic", instances, "ml.m5.xlarge")
	for _, cp := range s.ics.get("held").record().Copies {
		p.holds(cp.Instance)
	}
	var spread []int
	for range 1000 {
		inst, _, short := p.take(needsOf(sp), false)
		if inst < 0 {
			t.Fatalf("no room on %d instances: %s", instances, short)
		}
		spread = append(spread, inst)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
		t.Errorf("placing 1000 copies on %d instances allocated %d MiB", instances, grew>>20)
	}
	// Instances 0 and the last hold a copy each (of 8 cores, 2 taken): the
	// empty ones come first, by number.
	if !slices.Equal(spread[:3], []int{1, 2, 3}) || spread[999] != 1000 {
		t.Errorf("SPREAD placed on %v … %d, want 1 2 3 … 1000", spread[:3], spread[999])
	}
	bp := s.newPlacement(context.Background(), "wide", "AllTraffic", instances, "ml.m5.xlarge")
	var packed []int
	for range 5 {
		inst, _, _ := bp.take(needsOf(sp), true)
		packed = append(packed, inst)
	}
	// Instance 0 has 6 cores left (3 copies), then instance 1 takes 4.
	if !slices.Equal(packed, []int{0, 0, 0, 1, 1}) {
		t.Errorf("BINPACK placed on %v, want [0 0 0 1 1]", packed)
	}
	// What no instance has is named from the widest one, an empty one.
	small := s.newPlacement(context.Background(), "wide", "AllTraffic", instances, "ml.m5.xlarge")
	big := needs{cpus: 9}
	if _, _, short := small.take(big, false); short != "CPU cores (a copy needs 9, an instance has at most 8 free of 8)" {
		t.Errorf("shortage %q", short)
	}
}
