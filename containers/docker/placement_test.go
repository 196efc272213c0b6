package docker

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/gpu"
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

// TestPartitionPlacement: a copy asking for an accelerator partition takes
// a free MIG partition of its profile, pinned by UUID, never a whole GPU;
// a GPU in MIG mode is never taken whole; an instance of a type holds at
// most its GPUs times the layout's partitions of the profile; and what is
// short is said: no partition at all, none of the profile, all held.
func TestPartitionPlacement(t *testing.T) {
	machine := containers.InstanceCapacity{CPUs: 8, MemoryMiB: 16384, GPUs: []string{"0"}, Partitions: []containers.Partition{
		{ID: "MIG-a", Profile: "mig-3g.40gb", GPU: 1}, {ID: "MIG-b", Profile: "mig-3g.40gb", GPU: 1}, {ID: "MIG-c", Profile: "mig-1g.10gb", GPU: 1},
		{ID: "MIG-d", Profile: "mig-3g.40gb", GPU: 2}, {ID: "MIG-e", Profile: "mig-3g.40gb", GPU: 2}}}
	pk := Packer{Capacity: func(context.Context) (containers.InstanceCapacity, error) { return machine, nil }}
	ctx := context.Background()
	layout := []string{"mig-3g.40gb", "mig-3g.40gb", "mig-1g.10gb"}
	v := containers.CopyVariant{Endpoint: "e", Variant: "v", InstanceType: "ml.g5.xlarge", Instances: 2, MaxInstances: 2, InstanceGPUs: 1, Partitions: layout}
	big := containers.CopyNeeds{CPUs: 1, MemoryMiB: 256, Partition: "mig-3g.40gb"}
	held := []containers.PlacedCopy{{Endpoint: "other", Variant: "v", CopyPlace: containers.CopyPlace{Instance: 0, GPUs: []string{"MIG-a"}}, Needs: big}}
	places, short, err := pk.PlaceCopies(ctx, containers.CopyRequest{Variant: v, Needs: big, Count: 5, Placed: held})
	if err != nil {
		t.Fatal(err)
	}
	// One GPU per instance, two 3g.40gb partitions per GPU: 4 copies on 2
	// instances, of the 4 partitions free (MIG-a is another endpoint's).
	var got []string
	for _, p := range places {
		got = append(got, strconv.Itoa(p.Instance)+":"+strings.Join(p.GPUs, ","))
	}
	if want := []string{"0:MIG-b", "1:MIG-d", "0:MIG-e"}; !slices.Equal(got, want) {
		t.Errorf("placed %v, want %v", got, want)
	}
	if want := "accelerator partitions (a copy needs one mig-3g.40gb partition, and all 4 of this machine's are held by other copies)"; short != want {
		t.Errorf("short %q\nwant %q", short, want)
	}
	// The per-instance bound: with a layout of one 3g.40gb per GPU and one
	// GPU per instance, an instance holds one: two copies on the two
	// instances, though five partitions are free.
	one := v
	one.Partitions = []string{"mig-3g.40gb"}
	places, short, _ = pk.PlaceCopies(ctx, containers.CopyRequest{Variant: one, Needs: big, Count: 3})
	if len(places) != 2 || !strings.Contains(short, "an instance holds at most 1: 1 GPUs per instance, 1 per GPU in the layout") {
		t.Errorf("one per GPU: %+v %q", places, short)
	}
	// A whole GPU never comes from a GPU in MIG mode.
	whole := containers.CopyNeeds{GPUs: 2}
	if s, _ := pk.CopyFits(ctx, containers.CopyVariant{Instances: 1, AllGPUs: true}, whole); !strings.Contains(s, "1 of this machine's 1 GPUs are free") {
		t.Errorf("two whole GPUs: %q", s)
	}
	if s, _ := pk.CopyFits(ctx, v, containers.CopyNeeds{Partition: "mig-2g.20gb"}); s != "accelerator partitions (a copy needs one mig-2g.20gb partition, and this machine's MIG partitions are mig-1g.10gb ×1, mig-3g.40gb ×4)" {
		t.Errorf("another profile: %q", s)
	}
	bare := Packer{Capacity: func(context.Context) (containers.InstanceCapacity, error) {
		return containers.InstanceCapacity{CPUs: 8, MemoryMiB: 16384, GPUs: []string{"0"}}, nil
	}}
	if s, _ := bare.CopyFits(ctx, v, big); !strings.Contains(s, "this machine has no MIG partition: NVML lists no GPU in MIG mode with partitions created; mce does not carve GPUs, so create them first, for example nvidia-smi -i 0 -mig 1 then nvidia-smi mig -i 0 -cgi 3g.40gb -C") {
		t.Errorf("no partitions: %q", s)
	}
}

// TestLayoutShort: a variant's layout against the partitions NVML lists:
// some GPU must carry all of them.
func TestLayoutShort(t *testing.T) {
	parts := []containers.Partition{{ID: "MIG-a", Profile: "mig-3g.40gb", GPU: 1}, {ID: "MIG-b", Profile: "mig-3g.40gb", GPU: 1},
		{ID: "MIG-c", Profile: "mig-1g.10gb", GPU: 2}, {ID: "MIG-d", GPU: 2}}
	for _, tc := range []struct {
		layout []string
		parts  []containers.Partition
		want   string
	}{
		{[]string{"mig-3g.40gb", "mig-3g.40gb"}, parts, ""},
		{[]string{"mig-1g.10gb"}, parts, ""},
		{[]string{"mig-3g.40gb", "mig-1g.10gb"}, parts, "AcceleratorPartitionLayouts asks for mig-1g.10gb ×1, mig-3g.40gb ×1 on each GPU, and no GPU of this machine carries them (GPU 1: mig-3g.40gb ×2; GPU 2: mig-1g.10gb ×1, unknown profile ×1)"},
		{[]string{"mig-7g.80gb"}, nil, "AcceleratorPartitionLayouts asks for mig-7g.80gb ×1 on each GPU, and this machine has no MIG partition: NVML lists no GPU in MIG mode with partitions created"},
	} {
		if got := LayoutShort(tc.layout, tc.parts); got != tc.want {
			t.Errorf("LayoutShort(%v) = %q\nwant %q", tc.layout, got, tc.want)
		}
	}
}

// fakeLister is NVML's listing as machineGPUs reads it.
type fakeLister struct {
	devs []gpu.Device
	migs []gpu.MIGDevice
	err  error
}

func (f fakeLister) Devices() ([]gpu.Device, error)       { return f.devs, f.err }
func (f fakeLister) MIGDevices() ([]gpu.MIGDevice, error) { return f.migs, f.err }

// TestMachineGPUs: GPUs in MIG mode are offered as their partitions, with
// SageMaker's profile names, and the others whole.
func TestMachineGPUs(t *testing.T) {
	whole, parts := machineGPUs(fakeLister{devs: []gpu.Device{{Index: 0}, {Index: 1}, {Index: 2}},
		migs: []gpu.MIGDevice{{Parent: 1, Index: 0, UUID: "MIG-a", Profile: "3g.40gb"}, {Parent: 1, Index: 1, UUID: "MIG-b"}}})
	if !slices.Equal(whole, []string{"0", "2"}) || !slices.Equal(parts, []containers.Partition{{ID: "MIG-a", Profile: "mig-3g.40gb", GPU: 1}, {ID: "MIG-b", GPU: 1}}) {
		t.Errorf("whole %v, partitions %+v", whole, parts)
	}
	if whole, parts := machineGPUs(fakeLister{err: gpu.ErrNoDriver}); whole != nil || parts != nil {
		t.Errorf("no driver: %v %v", whole, parts)
	}
}
