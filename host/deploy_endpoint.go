package host

import (
	"context"
	"errors"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/cloudwatch"
	"github.com/mce-run/mce/host/deploy"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// Deployment guardrails (docs/deployment-guardrails.md): host's side of an
// UpdateEndpoint with a DeploymentConfig. host/deploy decides the steps and
// when to complete or roll back; this file launches, splits, drains and
// removes, and keeps the record DescribeEndpoint shows.

// deploymentFor is the DeploymentConfig an UpdateEndpoint runs under:
// its own, or with RetainDeploymentConfig the endpoint's last one; checked
// against the new fleet and the CloudWatch alarms it names.
func deploymentFor(cw *cloudwatch.Service, raw []byte, retain bool, last *spec.DeploymentConfig, plan containers.EndpointPlan) (*spec.DeploymentConfig, error) {
	d, err := spec.ParseDeploymentConfig(raw)
	if err != nil {
		return nil, err
	}
	if d == nil && retain {
		d = last
	}
	if d == nil {
		return nil, nil
	}
	return d, deploy.Check(d, plan, deploy.CloudWatch(cw))
}

// guarded reports whether an update runs under guardrails: a
// DeploymentConfig, an old fleet that serves, a new one of containers.
func guarded(d *spec.DeploymentConfig, wasFailed bool, plan containers.EndpointPlan) bool {
	return d != nil && !wasFailed && !plan.HostsComponents()
}

// pickFleet is the fleet a call takes during a deployment: drawn by the
// split, except that a call for a TargetVariant only the old fleet has
// stays on it (the new configuration may name its variants otherwise).
func pickFleet(sp *deploy.Split[pipeline.Route], blue *pipeline.Route, target string) *pipeline.Route {
	r := sp.Pick(blue)
	if target != "" && r != blue && r.Variant(target) == nil && blue.Variant(target) != nil {
		return blue
	}
	return r
}

// rollout is one deployment under guardrails; deploy.Run drives it.
type rollout struct {
	s             *Server
	e             *Endpoint
	split         *deploy.Split[pipeline.Route]
	green, blue   containers.Launched
	plan, oldPlan containers.EndpointPlan
}

// Shift implements deploy.Target: the new fleet grows to its size first,
// the old one shrinks once the share moved away from it.
func (r *rollout) Shift(st deploy.Step) error {
	if err := deploy.Resize(r.s.ctx, r.split.Green(), r.green, r.plan, st.Green, r.s.cfg.ContainerTimeout); err != nil {
		return err
	}
	r.split.Set(st.Share)
	return deploy.Resize(r.s.ctx, r.e.route.Load(), r.blue, r.oldPlan, st.Blue, r.s.cfg.ContainerTimeout)
}

// Phase implements deploy.Target.
func (r *rollout) Phase(status, msg string) {
	r.s.save(r.e, func(rec *EndpointRecord) {
		if rec.Deploying != nil {
			rec.Deploying = rec.Deploying.With(status, msg, time.Now())
		}
	})
}

// runRollout shifts the endpoint's traffic to l (launched from plan as
// generation gen) under d, with the alarms watched; then completes (green
// becomes the endpoint's, blue drains and goes after
// TerminationWaitInSeconds) or rolls back (blue takes every call again at
// once, green drains and goes). It runs under e.ops, as updateEndpoint's
// operation.
func runRollout(ctx context.Context, s *Server, e *Endpoint, d *spec.DeploymentConfig, plan containers.EndpointPlan, l containers.Launched,
	gen int, configName string, dc *spec.DataCaptureConfig, started time.Time) {
	log := s.log.With().Str("endpoint", e.name).Str("config", configName).Logger()
	e.mu.Lock()
	old, oldPlan := e.launched, e.rec.Plan
	e.mu.Unlock()
	green := newRoute(e.name, deploy.FirstFleet(d, oldPlan, plan), l)
	r := &rollout{s: s, e: e, split: deploy.NewSplit(green), green: l, blue: old, plan: plan, oldPlan: oldPlan}
	e.split.Store(r.split)
	var alarms deploy.Alarms
	if src := deploy.CloudWatch(s.cfg.CloudWatch); src != nil && len(d.Alarms()) > 0 {
		w := deploy.Watch(src, d.Alarms())
		defer w.Close()
		alarms = w
	}
	sc := deploy.ScheduleOf(d, oldPlan, plan)
	out := deploy.Run(ctx, s.cfg.Clock, sc.Steps, started, sc.Timeout, alarms, r)
	// leave takes green out of the split, lets the calls it took finish
	// and removes it.
	leave := func() error {
		r.split.Set(0)
		e.split.Store(nil)
		time.Sleep(deploy.Settle)
		s.drain(s.ctx, green)
		return l.Close(context.WithoutCancel(s.ctx))
	}
	switch {
	case out.Canceled:
		// Deleted (finishDelete removes blue next) or mce stops (the
		// record stays Updating: the next start comes back on blue).
		if err := leave(); err != nil {
			log.Warn().Err(err).Msg("removing the new fleet of a deployment that was stopped")
		}
		return
	case !out.Completed:
		log.Warn().Str("why", out.Reason).Msg("deployment rolls back")
		s.save(e, func(rec *EndpointRecord) {
			rec.Status = spec.StatusRollingBack
			if rec.Deploying != nil {
				rec.Deploying = rec.Deploying.With("Deleting", "Rolling back: "+out.Reason+".", time.Now())
			}
		})
		// A rolling update brings the old fleet back to its size first, in
		// batches, while the new one still serves its share.
		var err error
		if p := d.RollingUpdatePolicy; p != nil {
			from := deploy.Sizes(e.route.Load(), oldPlan)
			for _, st := range deploy.RollbackSteps(p, from, deploy.Counts(oldPlan), deploy.Capacity(plan)) {
				if err = r.Shift(st); err != nil {
					break
				}
			}
		}
		err = errors.Join(err, leave())
		s.save(e, func(rec *EndpointRecord) {
			rec.Deploying = nil
			rec.Status = spec.StatusInService
			rec.FailureReason = deploy.RolledBack(configName, out.Reason, err)
			if err != nil {
				rec.Status = spec.StatusUpdateRollbackFailed
			}
		})
		return
	}
	// Completed: green is the endpoint's own.
	oldRoute := e.route.Load()
	if !installRoute(e, plan, l, green) {
		e.split.Store(nil)
		if old != nil {
			old.Close(context.WithoutCancel(s.ctx)) // deleted meanwhile: finishDelete removes l
		}
		return
	}
	e.split.Store(nil)
	s.captures.attach(e, dc)
	s.save(e, func(rec *EndpointRecord) {
		rec.Status, rec.Generation, rec.Plan, rec.ConfigName, rec.Pending, rec.FailureReason = spec.StatusInService, gen, plan, configName, "", ""
		rec.DataCapture, rec.Deploying = dc, nil
	})
	log.Info().Int("generation", gen).Msg("deployment completed; the previous fleet goes after TerminationWaitInSeconds")
	if sc.Termination > 0 {
		t := s.cfg.Clock.NewTimer(sc.Termination)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	time.Sleep(deploy.Settle)
	s.drain(s.ctx, oldRoute)
	if old != nil {
		if err := old.Close(context.WithoutCancel(s.ctx)); err != nil {
			log.Warn().Err(err).Msg("removing the previous generation")
		}
	}
}
