package docker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/gpu"
)

// Preflight implements containers.Preflighter: the Docker runtime's checks, with GPU
// problems told in the plan's words (which InstanceType or Resources.Gpus
// asked for them).
func (e *Engine) Preflight(ctx context.Context, plan containers.EndpointPlan) []containers.Problem {
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
