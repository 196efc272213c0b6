package host

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/spec"
)

// Placement of inference-component copies on a variant's instances (on an
// engine whose scheduler does not place them: Docker).
//
// What placement holds is in proportion to the copies that exist and to
// the copies being placed, never to the variant's instance count: only the
// instances that hold copies are kept, and every other instance is an
// empty one (the machine's capacity, the type's GPUs). A variant of any
// recorded size (an older mce accepted 2147483647 instances) is placed in
// the same memory and time as one of a single instance.

// needs is what one copy of a component takes.
type needs struct {
	cpus      float64
	memoryMiB int64
	gpus      int
}

// instanceLeft is what one instance of a variant has left, and how many
// copies of the component being placed it holds (SPREAD evens them out).
type instanceLeft struct {
	cpus    float64
	mem     int64
	gpuSlot int // GPUs it may still take (its type's count)
	copies  int
}

// placement is the state placement decides on: the variant's instances
// that hold copies, and the machine's free GPUs.
type placement struct {
	instances int                   // the variant's instances, 0 … instances-1
	used      map[int]*instanceLeft // those holding copies; any other is empty
	empty     instanceLeft          // an instance without copies
	free      []string
	limited   bool // mem is known
	machine   containers.InstanceCapacity
	gpuType   int // GPUs per instance of the type
	order     []int
}

// emptyPlacement is a variant of instances instances of instanceType, none
// holding a copy yet, on machine m.
func emptyPlacement(m containers.InstanceCapacity, instances int, instanceType string) *placement {
	perType, all := spec.InstanceGPUCount(instanceType)
	if all {
		perType = len(m.GPUs)
	}
	return &placement{instances: instances, used: map[int]*instanceLeft{}, machine: m, gpuType: perType,
		limited: m.MemoryMiB > 0, empty: instanceLeft{cpus: m.CPUs, mem: m.MemoryMiB, gpuSlot: perType}, free: slices.Clone(m.GPUs)}
}

// newPlacement computes what is left on an endpoint variant's instances
// and on the machine, from every component's copies. The caller holds
// s.ics.place. A copy recorded on an instance the variant does not have
// (another engine's record: -1 where a cluster's scheduler placed it)
// takes nothing here.
func (s *Server) newPlacement(ctx context.Context, endpoint, variant string, instances int, instanceType string) *placement {
	p := emptyPlacement(s.capacity(ctx), instances, instanceType)
	held := map[string]bool{}
	for _, c := range s.ics.all() {
		rec := c.record()
		n := needsOf(rec.Spec)
		same := strings.EqualFold(rec.EndpointName, endpoint) && rec.VariantName == variant
		for _, cp := range rec.Copies {
			for _, g := range cp.GPUs {
				held[g] = true
			}
			if same && p.has(cp.Instance) {
				in := p.at(cp.Instance)
				in.cpus -= n.cpus
				in.mem -= n.memoryMiB
				in.gpuSlot -= len(cp.GPUs)
			}
		}
	}
	p.free = slices.DeleteFunc(p.free, func(g string) bool { return held[g] })
	return p
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

// holds counts a copy of the component being placed on instance i.
func (p *placement) holds(i int) {
	if p.has(i) {
		p.at(i).copies++
	}
}

// candidates are the instances a copy may go to, in the order tried: those
// holding copies and the first empty one (every other empty one is the
// same), by fewest copies of the component and then by number, or with
// binpack by number alone.
func (p *placement) candidates(binpack bool) []int {
	out := p.order[:0] // reused: one placement takes up to MaxComponentCopies copies
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
func (p *placement) fits(in instanceLeft, n needs) bool {
	if n.cpus > 0 && in.cpus+1e-9 < n.cpus {
		return false
	}
	if p.limited && in.mem < n.memoryMiB {
		return false
	}
	return n.gpus <= 0 || (in.gpuSlot >= n.gpus && len(p.free) >= n.gpus)
}

// take places one copy with n on the instance with the fewest copies of
// the component that fits, or with binpack on the first that fits (the
// instances fill one after the other), or says what is short.
func (p *placement) take(n needs, binpack bool) (instance int, gpus []string, short string) {
	for _, i := range p.candidates(binpack) {
		cur := p.empty
		if in := p.used[i]; in != nil {
			cur = *in
		}
		if !p.fits(cur, n) {
			continue
		}
		in := p.at(i)
		in.cpus -= n.cpus
		in.mem -= n.memoryMiB
		in.gpuSlot -= n.gpus
		in.copies++
		gpus = slices.Clone(p.free[:n.gpus])
		p.free = p.free[n.gpus:]
		return i, gpus, ""
	}
	return -1, nil, p.shortage(n)
}

// shortage names what no instance has enough of.
func (p *placement) shortage(n needs) string {
	var maxCPU float64
	var maxMem int64
	maxSlot := 0
	widest := func(in instanceLeft) {
		maxCPU = max(maxCPU, in.cpus)
		maxMem = max(maxMem, in.mem)
		maxSlot = max(maxSlot, in.gpuSlot)
	}
	for _, in := range p.used {
		widest(*in)
	}
	if len(p.used) < p.instances {
		widest(p.empty)
	}
	var short []string
	if n.cpus > 0 && maxCPU+1e-9 < n.cpus {
		short = append(short, fmt.Sprintf("CPU cores (a copy needs %s, an instance has at most %s free of %s)",
			fmtNum(n.cpus), fmtNum(max(maxCPU, 0)), fmtNum(p.machine.CPUs)))
	}
	if p.limited && maxMem < n.memoryMiB {
		short = append(short, fmt.Sprintf("memory (a copy needs %d MiB, an instance has at most %d MiB free of %d MiB)",
			n.memoryMiB, max(maxMem, 0), p.machine.MemoryMiB))
	}
	if n.gpus > 0 && (maxSlot < n.gpus || len(p.free) < n.gpus) {
		short = append(short, fmt.Sprintf("accelerator devices (a copy needs %d whole GPUs of its own; the instance type has %d per instance, %d of this machine's %d GPUs are free)",
			n.gpus, p.gpuType, len(p.free), len(p.machine.GPUs)))
	}
	if len(short) == 0 {
		return "capacity"
	}
	return strings.Join(short, ", ")
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// capacity is one instance's capacity: the backend's, else this machine's
// cores and memory with no GPUs.
func (s *Server) capacity(ctx context.Context) containers.InstanceCapacity {
	if cs, ok := s.cfg.Backend.(containers.CapacitySource); ok {
		if c, err := cs.InstanceCapacity(ctx); err == nil {
			return c
		} else {
			s.log.Warn().Err(err).Msg("reading the machine's capacity for inference components")
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
