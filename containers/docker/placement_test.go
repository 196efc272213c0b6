package docker

import (
	"context"
	"runtime"
	"slices"
	"testing"

	"github.com/mce-run/mce/containers"
)

// TestPlacementCostsNothingPerInstance: placing copies on a variant of
// 2147483647 instances holds what the copies need, not an entry per
// instance (mce grew by gigabytes and died of it), and SPREAD and BINPACK
// still choose as on a small variant.
func TestPlacementCostsNothingPerInstance(t *testing.T) {
	const instances = 1<<31 - 1
	pk := Packer{Capacity: func(context.Context) (containers.InstanceCapacity, error) {
		return containers.InstanceCapacity{CPUs: 8, MemoryMiB: 16384, GPUs: []string{"0", "1", "2", "3"}}, nil
	}}
	ctx := context.Background()
	n := containers.CopyNeeds{CPUs: 2, MemoryMiB: 1024}
	v := containers.CopyVariant{Endpoint: "wide", Variant: "AllTraffic", InstanceType: "ml.m5.xlarge", Instances: instances, MaxInstances: instances}
	var held []containers.PlacedCopy // a component's copies, one recorded at -1 and one beyond the variant
	for _, inst := range []int{0, instances - 1, -1, instances} {
		held = append(held, containers.PlacedCopy{Endpoint: "wide", Variant: "AllTraffic", CopyPlace: containers.CopyPlace{Instance: inst}, Needs: n, Own: true})
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p := pk.newPlacement(ctx, v, held)
	var spread []int
	for range 1000 {
		inst, _, short := p.take(n, false)
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
	bp := pk.newPlacement(ctx, v, held)
	var packed []int
	for range 5 {
		inst, _, _ := bp.take(n, true)
		packed = append(packed, inst)
	}
	// Instance 0 has 6 cores left (3 copies), then instance 1 takes 4.
	if !slices.Equal(packed, []int{0, 0, 0, 1, 1}) {
		t.Errorf("BINPACK placed on %v, want [0 0 0 1 1]", packed)
	}
	// What no instance has is named from the widest one, an empty one.
	small := pk.newPlacement(ctx, v, held)
	big := containers.CopyNeeds{CPUs: 9}
	if _, _, short := small.take(big, false); short != "CPU cores (a copy needs 9, an instance has at most 8 free of 8)" {
		t.Errorf("shortage %q", short)
	}
}
