package deploy

import (
	"context"
	"slices"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// Settle is how long instances out of a route (or a route out of the
// split) wait before they drain: a call that picked them just before has
// reached them by then, and Drain sees it.
const Settle = 50 * time.Millisecond

// FirstFleet is the plan the new fleet is launched with: the whole plan,
// or under a RollingUpdatePolicy its first batch.
func FirstFleet(d *spec.DeploymentConfig, old, plan containers.EndpointPlan) containers.EndpointPlan {
	if d == nil || d.RollingUpdatePolicy == nil {
		return plan
	}
	p := plan
	p.Variants = slices.Clone(plan.Variants)
	for i, n := range RollingSteps(d.RollingUpdatePolicy, Counts(old), Counts(plan))[0].Green {
		p.Variants[i].InstanceCount = n
	}
	return p
}

// Counts are a plan's instance counts, by variant.
func Counts(p containers.EndpointPlan) []int {
	var out []int
	for _, v := range p.Variants {
		out = append(out, v.InstanceCount)
	}
	return out
}

// Sizes are the instance counts a route runs now, by variant of plan.
func Sizes(route *pipeline.Route, plan containers.EndpointPlan) []int {
	out := make([]int, len(plan.Variants))
	for i, v := range plan.Variants {
		if route != nil && route.Variant(v.Name) != nil {
			out[i] = len(route.Variant(v.Name).Instances())
		}
	}
	return out
}

// Resize sizes a fleet's variants (route, launched as l from plan) to
// counts (nil: as they are): new instances are ready before they take
// calls; surplus ones leave the route and drain (at most within) before
// the engine stops them.
func Resize(ctx context.Context, route *pipeline.Route, l containers.Launched, plan containers.EndpointPlan, counts []int, within time.Duration) error {
	if counts == nil || route == nil || l == nil {
		return nil
	}
	for i, v := range plan.Variants {
		pv := route.Variant(v.Name)
		if pv == nil {
			continue
		}
		cur := pv.Instances()
		switch n := counts[i]; {
		case n > len(cur):
			if err := l.Scale(ctx, v.Name, n); err != nil {
				return err
			}
			var insts []*pipeline.Instance
			for _, cp := range l.Copies(v.Name) {
				insts = append(insts, pipeline.NewInstance(cp))
			}
			pv.SetInstances(insts)
		case n < len(cur):
			pv.SetInstances(cur[:n])
			time.Sleep(Settle)
			pipeline.Drain(ctx, cur[n:], within)
			if err := l.Scale(ctx, v.Name, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// Schedule is what a DeploymentConfig makes of an update from old to plan.
type Schedule struct {
	Steps       []Step
	Timeout     time.Duration // MaximumExecutionTimeoutInSeconds; 0: none
	Termination time.Duration // TerminationWaitInSeconds
}

// ScheduleOf is d's schedule (a BlueGreenUpdatePolicy or a
// RollingUpdatePolicy) for an update from old to plan.
func ScheduleOf(d *spec.DeploymentConfig, old, plan containers.EndpointPlan) Schedule {
	if bg := d.BlueGreenUpdatePolicy; bg != nil {
		return Schedule{Steps: BlueGreenSteps(bg, Capacity(plan)), Timeout: spec.Seconds(bg.MaximumExecutionTimeoutInSeconds),
			Termination: spec.Seconds(bg.TerminationWaitInSeconds)}
	}
	r := d.RollingUpdatePolicy
	return Schedule{Steps: RollingSteps(r, Counts(old), Counts(plan)), Timeout: spec.Seconds(r.MaximumExecutionTimeoutInSeconds)}
}

// RolledBack is the FailureReason of an update to configName rolled back
// for reason; err is why removing the new fleet failed (nil: it did not).
func RolledBack(configName, reason string, err error) string {
	if err != nil {
		return apierr.Truncate("Update to endpoint configuration "+configName+" was being rolled back because "+reason+
			", and removing the new fleet failed: "+apierr.RedactPaths(err.Error())+". The previous configuration serves.", spec.MaxFailureReason)
	}
	return apierr.Truncate("Update to endpoint configuration "+configName+" was rolled back to the previous configuration because "+reason+".", spec.MaxFailureReason)
}
