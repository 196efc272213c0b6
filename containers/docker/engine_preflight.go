package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/gpu"
)

// Preflight implements containers.Preflighter: the Docker runtime's checks, with GPU
// problems told in the plan's words (which InstanceType or Resources.Gpus
// asked for them).
func (e *Engine) Preflight(ctx context.Context, plan containers.EndpointPlan) []containers.Problem {
	if plan.HostsComponents() {
		// No container of its own; its copies' partitions must exist.
		return e.partitionProblems(ctx, plan)
	}
	es, err := SpecOf(plan)
	if err != nil {
		return []containers.Problem{{What: err.Error()}}
	}
	var out []containers.Problem
	for _, p := range e.Runtime.Preflight(ctx, es, PreflightOptions{}) {
		hp := containers.Problem{Variant: p.Variant, Container: p.Container, What: p.What, Fix: p.Fix}
		if p.Check == CheckGPU {
			hp.What, hp.Fix = gpuProblem(plan, p)
		}
		out = append(out, hp)
	}
	return append(out, e.partitionProblems(ctx, plan)...)
}

// partitionProblems checks each variant's accelerator partition layout
// against the MIG partitions NVML lists: mce does not carve GPUs, so at
// least one GPU must carry every partition of the layout already.
func (e *Engine) partitionProblems(ctx context.Context, plan containers.EndpointPlan) []containers.Problem {
	var out []containers.Problem
	var parts []containers.Partition
	read := false
	for _, v := range plan.Variants {
		if len(v.Partitions) == 0 {
			continue
		}
		if !read {
			c, err := e.InstanceCapacity(ctx)
			if err != nil {
				return append(out, containers.Problem{Variant: v.Name, What: "reading this machine's MIG partitions: " + err.Error()})
			}
			parts, read = c.Partitions, true
		}
		if what := LayoutShort(v.Partitions, parts); what != "" {
			out = append(out, containers.Problem{Variant: v.Name, What: what,
				Fix: "create the partitions on a GPU first (mce does not carve GPUs), for example nvidia-smi -i 0 -mig 1 then nvidia-smi mig -i 0 -cgi " +
					strings.Join(trimMIG(v.Partitions), ",") + " -C; or leave AcceleratorPartitionLayouts out to run on whole GPUs"})
		}
	}
	return out
}

// LayoutShort says why no GPU among parts' carries every partition of
// layout (profiles with "mig-", repeated as the layout repeats them), or ""
// when one does.
func LayoutShort(layout []string, parts []containers.Partition) string {
	want := map[string]int{}
	for _, l := range layout {
		want[l]++
	}
	byGPU := map[int]map[string]int{}
	var gpus []int
	for _, q := range parts {
		if byGPU[q.GPU] == nil {
			byGPU[q.GPU] = map[string]int{}
			gpus = append(gpus, q.GPU)
		}
		byGPU[q.GPU][orUnknown(q.Profile)]++
	}
	for _, g := range gpus {
		ok := true
		for p, n := range want {
			ok = ok && byGPU[g][p] >= n
		}
		if ok {
			return ""
		}
	}
	asks := "AcceleratorPartitionLayouts asks for " + countWords(want) + " on each GPU"
	if len(gpus) == 0 {
		return asks + ", and this machine has no MIG partition: NVML lists no GPU in MIG mode with partitions created"
	}
	var have []string
	slices.Sort(gpus)
	for _, g := range gpus {
		have = append(have, "GPU "+strconv.Itoa(g)+": "+countWords(byGPU[g]))
	}
	return asks + ", and no GPU of this machine carries them (" + strings.Join(have, "; ") + ")"
}

// countWords writes profile counts as "mig-3g.40gb ×2, mig-1g.10gb ×1",
// by name.
func countWords(c map[string]int) string {
	var out []string
	for p, n := range c {
		out = append(out, p+" ×"+strconv.Itoa(n))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// trimMIG is profiles without SageMaker's "mig-" prefix, NVIDIA's names.
func trimMIG(profiles []string) []string {
	out := make([]string, len(profiles))
	for i, p := range profiles {
		out[i] = containers.NVIDIAProfile(p)
	}
	return out
}

// gpuProblem says which setting asked for GPUs this host cannot give.
func gpuProblem(plan containers.EndpointPlan, p Problem) (what, fix string) {
	var v containers.VariantPlan
	var c containers.ContainerPlan
	for _, vp := range plan.Variants {
		if vp.Name != p.Variant {
			continue
		}
		v = vp
		for _, cp := range vp.Containers {
			if cp.Hostname == p.Container {
				c = cp
			}
		}
	}
	why := p.What
	if _, rest, ok := strings.Cut(why, ") but "); ok {
		why = rest
	}
	switch {
	case errors.Is(p.Err, gpu.ErrNoDriver):
		why = "this host has no NVIDIA driver"
	case errors.Is(p.Err, gpu.ErrNoGPU):
		why = "the NVIDIA driver of this host reports no GPU"
	}
	asks := gpuWords(c.GPUs)
	if c.Resources.Gpus != "" {
		return fmt.Sprintf("Resources.Gpus %q asks for %s; %s", c.Resources.Gpus, asks, why),
			p.Fix + ", e.g. set Resources.Gpus: 0"
	}
	what = fmt.Sprintf("InstanceType %s asks for %s (from the instance type); %s", v.InstanceType, asks, why)
	fix = "use a CPU instance type such as ml.m5.xlarge or `local`, or add Resources.Gpus: 0"
	if errors.Is(p.Err, gpu.ErrNoRuntime) {
		fix = p.Fix + "; or " + fix
	}
	return what, fix
}

// gpuWords turns a canonical GPU request into words: "1 GPU", "all GPUs".
func gpuWords(req string) string {
	switch {
	case req == "all":
		return "all GPUs"
	case strings.HasPrefix(req, "device="):
		return "GPUs " + strings.TrimPrefix(req, "device=")
	}
	if n, err := strconv.Atoi(req); err == nil && n == 1 {
		return "1 GPU"
	}
	return req + " GPUs"
}
