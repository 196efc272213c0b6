package docker

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
)

// Placement of inference-component copies on a variant's instances as the
// Docker engine does it (containers.CopyPlacer): every instance of the
// variant is this one machine, with its CPU cores and memory (the engine's
// figures, else what the operating system reports) and the instance
// type's GPUs; a copy takes NumberOfCpuCoresRequired cores and
// MinMemoryRequiredInMb memory of one instance, and
// NumberOfAcceleratorDevicesRequired whole GPUs that no other copy on the
// machine holds (pinned by device ID). Copies spread over the instances
// (the one with fewest copies of the component first), or with BINPACK
// fill them one after the other.
//
// A copy that asks for an accelerator partition (AcceleratorPartitionType)
// takes one free MIG partition of that profile instead, pinned by its UUID.
// The partitions are those NVML lists on this machine: mce does not carve
// GPUs, so a variant's AcceleratorPartitionLayouts describes partitions
// that must exist already. An instance of a type with G GPUs holds at most
// G times as many partitions of a profile as the layout lists (every
// partition of the machine with local_gpu).
//
// What placement holds is in proportion to the copies that exist and to
// the copies being placed, never to the variant's instance count: only the
// instances that hold copies are kept, and every other instance is an
// empty one (the machine's capacity, the type's GPUs). A variant of any
// recorded size (an older mce accepted 2147483647 instances) is placed in
// the same memory and time as one of a single instance.

// Packer places copies on one machine's capacity. The zero value places
// on this machine's cores and memory, with no GPUs.
type Packer struct {
	// Capacity reads what one instance offers (the machine's CPUs, memory
	// and GPUs); nil, or failing: this machine's cores and memory as the
	// operating system reports them, and no GPUs.
	Capacity func(ctx context.Context) (containers.InstanceCapacity, error)
	// Log gets a warning when Capacity fails.
	Log zerolog.Logger
}

var _ containers.CopyPlacer = Packer{}

// PlaceCopies implements containers.CopyPlacer.
func (pk Packer) PlaceCopies(ctx context.Context, req containers.CopyRequest) ([]containers.CopyPlace, string, error) {
	p := pk.newPlacement(ctx, req.Variant, req.Placed)
	var out []containers.CopyPlace
	for range req.Count {
		inst, gpus, short := p.take(req.Needs, req.Binpack)
		if inst < 0 {
			return out, short, nil
		}
		out = append(out, containers.CopyPlace{Instance: inst, GPUs: gpus})
	}
	return out, "", nil
}

// CopyFits implements containers.CopyPlacer: what an empty instance lacks.
func (pk Packer) CopyFits(ctx context.Context, v containers.CopyVariant, n containers.CopyNeeds) (string, error) {
	if inst, _, short := emptyPlacement(pk.capacity(ctx), 1, v).take(n, false); inst < 0 {
		return short, nil
	}
	return "", nil
}

// KeepsCopy implements containers.CopyPlacer: a copy on one of the
// variant's instances. One recorded elsewhere (-1, which the Kubernetes
// engine writes, or an instance the variant no longer has) is placed again.
func (Packer) KeepsCopy(v containers.CopyVariant, p containers.CopyPlace) bool {
	return p.Instance >= 0 && p.Instance < v.Instances
}

// instanceLeft is what one instance of a variant has left, and how many
// copies of the component being placed it holds (SPREAD evens them out).
type instanceLeft struct {
	cpus    float64
	mem     int64
	gpuSlot int // GPUs it may still take (its type's count)
	copies  int
	// parts counts the partitions it holds, by profile (nil: none).
	parts map[string]int
}

// placement is the state placement decides on: the variant's instances
// that hold copies, and the machine's free GPUs.
type placement struct {
	instances int                   // the variant's instances, 0 … instances-1
	used      map[int]*instanceLeft // those holding copies; any other is empty
	empty     instanceLeft          // an instance without copies
	free      []string
	freeParts []containers.Partition
	layout    []string // the variant's partition layout
	allGPUs   bool
	limited   bool // mem is known
	machine   containers.InstanceCapacity
	gpuType   int // GPUs per instance of the type
	order     []int
}

// emptyPlacement is instances instances of variant v, none holding a
// copy yet, on machine m.
func emptyPlacement(m containers.InstanceCapacity, instances int, v containers.CopyVariant) *placement {
	perType := v.InstanceGPUs
	if v.AllGPUs {
		perType = len(m.GPUs)
	}
	return &placement{instances: instances, used: map[int]*instanceLeft{}, machine: m, gpuType: perType,
		limited: m.MemoryMiB > 0, empty: instanceLeft{cpus: m.CPUs, mem: m.MemoryMiB, gpuSlot: perType}, free: slices.Clone(m.GPUs),
		freeParts: slices.Clone(m.Partitions), layout: v.Partitions, allGPUs: v.AllGPUs}
}

// newPlacement computes what is left on a variant's instances and on the
// machine, from every copy placed. A copy recorded on an instance the
// variant does not have (another engine's record: -1 where a cluster's
// scheduler placed it) takes nothing here.
func (pk Packer) newPlacement(ctx context.Context, v containers.CopyVariant, placed []containers.PlacedCopy) *placement {
	p := emptyPlacement(pk.capacity(ctx), v.Instances, v)
	held := map[string]bool{}
	for _, cp := range placed {
		for _, g := range cp.GPUs {
			held[g] = true
		}
		if strings.EqualFold(cp.Endpoint, v.Endpoint) && cp.Variant == v.Variant && p.has(cp.Instance) {
			in := p.at(cp.Instance)
			in.cpus -= cp.Needs.CPUs
			in.mem -= cp.Needs.MemoryMiB
			if cp.Needs.Partition != "" {
				in.holdPart(cp.Needs.Partition, len(cp.GPUs))
			} else {
				in.gpuSlot -= len(cp.GPUs)
			}
			if cp.Own {
				in.copies++
			}
		}
	}
	p.free = slices.DeleteFunc(p.free, func(g string) bool { return held[g] })
	p.freeParts = slices.DeleteFunc(p.freeParts, func(q containers.Partition) bool { return held[q.ID] })
	return p
}

// holdPart counts n more partitions of profile on in.
func (in *instanceLeft) holdPart(profile string, n int) {
	if in.parts == nil {
		in.parts = map[string]int{}
	}
	in.parts[profile] += n
}

// partSlots is how many partitions of profile an instance may hold: its
// type's GPUs times the layout's partitions of that profile, or -1 (the
// machine's, unbounded per instance) with every GPU of the machine or no
// layout known.
func (p *placement) partSlots(profile string) int {
	per := 0
	for _, l := range p.layout {
		if l == profile {
			per++
		}
	}
	if p.allGPUs || per == 0 {
		return -1
	}
	return p.gpuType * per
}

// freePart is the index in p.freeParts of the first free partition of
// profile, or -1.
func (p *placement) freePart(profile string) int {
	return slices.IndexFunc(p.freeParts, func(q containers.Partition) bool { return q.Profile == profile })
}

// has reports whether i is one of the variant's instances.
func (p *placement) has(i int) bool { return i >= 0 && i < p.instances }

// at is instance i's state, kept from now on.
func (p *placement) at(i int) *instanceLeft {
	in := p.used[i]
	if in == nil {
		in = &instanceLeft{}
		*in = p.empty
		p.used[i] = in
	}
	return in
}

// candidates are the instances a copy may go to, in the order tried: those
// holding copies and the first empty one (every other empty one is the
// same), by fewest copies of the component and then by number, or with
// binpack by number alone.
func (p *placement) candidates(binpack bool) []int {
	out := p.order[:0] // reused: one placement may take a thousand copies
	for i := range p.used {
		out = append(out, i)
	}
	if len(p.used) < p.instances {
		first := 0
		for p.used[first] != nil {
			first++
		}
		out = append(out, first)
	}
	slices.SortFunc(out, func(a, b int) int {
		if !binpack {
			if d := p.copiesOn(a) - p.copiesOn(b); d != 0 {
				return d
			}
		}
		return a - b
	})
	p.order = out
	return out
}

func (p *placement) copiesOn(i int) int {
	if in := p.used[i]; in != nil {
		return in.copies
	}
	return 0
}

// fits reports whether a copy with n fits in what in has left.
func (p *placement) fits(in instanceLeft, n containers.CopyNeeds) bool {
	if n.CPUs > 0 && in.cpus+1e-9 < n.CPUs {
		return false
	}
	if p.limited && in.mem < n.MemoryMiB {
		return false
	}
	if n.Partition != "" {
		slots := p.partSlots(n.Partition)
		return p.freePart(n.Partition) >= 0 && (slots < 0 || in.parts[n.Partition] < slots)
	}
	return n.GPUs <= 0 || (in.gpuSlot >= n.GPUs && len(p.free) >= n.GPUs)
}

// take places one copy with n on the instance with the fewest copies of
// the component that fits, or with binpack on the first that fits (the
// instances fill one after the other), or says what is short.
func (p *placement) take(n containers.CopyNeeds, binpack bool) (instance int, gpus []string, short string) {
	for _, i := range p.candidates(binpack) {
		cur := p.empty
		if in := p.used[i]; in != nil {
			cur = *in
		}
		if !p.fits(cur, n) {
			continue
		}
		in := p.at(i)
		in.cpus -= n.CPUs
		in.mem -= n.MemoryMiB
		in.copies++
		if n.Partition != "" {
			j := p.freePart(n.Partition)
			in.holdPart(n.Partition, 1)
			id := p.freeParts[j].ID
			p.freeParts = slices.Delete(p.freeParts, j, j+1)
			return i, []string{id}, ""
		}
		in.gpuSlot -= n.GPUs
		gpus = slices.Clone(p.free[:n.GPUs])
		p.free = p.free[n.GPUs:]
		return i, gpus, ""
	}
	return -1, nil, p.shortage(n)
}

// shortage names what no instance has enough of.
func (p *placement) shortage(n containers.CopyNeeds) string {
	var maxCPU float64
	var maxMem int64
	maxSlot := 0
	minParts := -1 // the fewest partitions of n's profile an instance holds
	widest := func(in instanceLeft) {
		maxCPU = max(maxCPU, in.cpus)
		maxMem = max(maxMem, in.mem)
		maxSlot = max(maxSlot, in.gpuSlot)
		if minParts < 0 || in.parts[n.Partition] < minParts {
			minParts = in.parts[n.Partition]
		}
	}
	for _, in := range p.used {
		widest(*in)
	}
	if len(p.used) < p.instances {
		widest(p.empty)
	}
	var short []string
	if n.CPUs > 0 && maxCPU+1e-9 < n.CPUs {
		short = append(short, fmt.Sprintf("CPU cores (a copy needs %s, an instance has at most %s free of %s)",
			fmtNum(n.CPUs), fmtNum(max(maxCPU, 0)), fmtNum(p.machine.CPUs)))
	}
	if p.limited && maxMem < n.MemoryMiB {
		short = append(short, fmt.Sprintf("memory (a copy needs %d MiB, an instance has at most %d MiB free of %d MiB)",
			n.MemoryMiB, max(maxMem, 0), p.machine.MemoryMiB))
	}
	if n.Partition != "" {
		if w := p.partitionShort(n.Partition, minParts); w != "" {
			short = append(short, w)
		}
	} else if n.GPUs > 0 && (maxSlot < n.GPUs || len(p.free) < n.GPUs) {
		short = append(short, fmt.Sprintf("accelerator devices (a copy needs %d whole GPUs of its own; the instance type has %d per instance, %d of this machine's %d GPUs are free)",
			n.GPUs, p.gpuType, len(p.free), len(p.machine.GPUs)))
	}
	if len(short) == 0 {
		return "capacity"
	}
	return strings.Join(short, ", ")
}

// partitionShort says why no instance has a partition of profile free for
// a copy, held the fewest an instance holds; "" when one has.
func (p *placement) partitionShort(profile string, held int) string {
	all, profiles := 0, map[string]int{}
	for _, q := range p.machine.Partitions {
		profiles[orUnknown(q.Profile)]++
		if q.Profile == profile {
			all++
		}
	}
	switch {
	case len(p.machine.Partitions) == 0:
		return fmt.Sprintf("accelerator partitions (a copy needs one %s partition, and this machine has no MIG partition: NVML lists no GPU in MIG mode with partitions created; "+
			"mce does not carve GPUs, so create them first, for example nvidia-smi -i 0 -mig 1 then nvidia-smi mig -i 0 -cgi %s -C)", profile, containers.NVIDIAProfile(profile))
	case all == 0:
		return fmt.Sprintf("accelerator partitions (a copy needs one %s partition, and this machine's MIG partitions are %s)", profile, countWords(profiles))
	case p.freePart(profile) < 0:
		return fmt.Sprintf("accelerator partitions (a copy needs one %s partition, and all %d of this machine's are held by other copies)", profile, all)
	case p.partSlots(profile) >= 0 && held >= p.partSlots(profile):
		return fmt.Sprintf("accelerator partitions (a copy needs one %s partition, and an instance holds at most %d: %d GPUs per instance, %d per GPU in the layout)",
			profile, p.partSlots(profile), p.gpuType, p.partSlots(profile)/max(p.gpuType, 1))
	}
	return ""
}

func orUnknown(profile string) string {
	if profile == "" {
		return "unknown profile"
	}
	return profile
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// capacity is one instance's capacity: Capacity's, else this machine's
// cores and memory with no GPUs.
func (pk Packer) capacity(ctx context.Context) containers.InstanceCapacity {
	if pk.Capacity != nil {
		c, err := pk.Capacity(ctx)
		if err == nil {
			return c
		}
		if ctx.Err() == nil {
			pk.Log.Warn().Err(err).Msg("reading the machine's capacity for inference components")
		}
	}
	return containers.InstanceCapacity{CPUs: float64(runtime.NumCPU()), MemoryMiB: memTotalMiB()}
}

// memTotalMiB reads MemTotal from /proc/meminfo; 0 (no limit known) elsewhere.
func memTotalMiB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb >> 10
			}
		}
	}
	return 0
}
