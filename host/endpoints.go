package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/capture"
	"github.com/mce-run/mce/host/deploy"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/pipeline"
)

// Endpoint is one endpoint known to the host. Invocations read its status
// and route without locks; lifecycle operations run one at a time (ops) in
// the background and publish their outcome to the durable record.
//
// State changes are check-and-act under mu: an operation that starts
// (Update, UpdateEndpointWeightsAndCapacities) checks the status and sets
// Updating in one step (saveIf), and DeleteEndpoint sets deleting, takes the
// route and cancels the operation in progress in one step. Once deleting is
// set it stays set, no route is installed again and every later save keeps
// the status Deleting; background operations that were waiting (ops) see it
// and stop, and finishDelete removes whatever they launched.
type Endpoint struct {
	name       string
	status     atomic.Value // Status
	route      atomic.Pointer[pipeline.Route]
	multiModel atomic.Bool
	async      atomic.Bool // the serving plan has AsyncInferenceConfig
	deleting   atomic.Bool // set under mu, never cleared; read anywhere
	// capturer is the endpoint's data capture (datacapture.go); nil: none.
	capturer atomic.Pointer[capture.Capturer]
	// split is the traffic split of a deployment in progress under
	// guardrails (deploy_endpoint.go): a call takes split.Pick(route);
	// nil: none.
	split atomic.Pointer[deploy.Split[pipeline.Route]]

	ops      sync.Mutex // one lifecycle operation at a time
	mu       sync.Mutex // guards rec, launched, cancelOp and the setting of deleting and route
	rec      EndpointRecord
	launched containers.Launched
	cancelOp context.CancelFunc // cancels the launch in progress, for DeleteEndpoint
}

// opContext is the context of a lifecycle operation: cancelled when the
// server closes or the endpoint is deleted (already cancelled when the
// deletion began first).
func (s *Server) opContext(e *Endpoint) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(s.ctx)
	e.mu.Lock()
	e.cancelOp = cancel
	if e.deleting.Load() {
		cancel()
	}
	e.mu.Unlock()
	return ctx, cancel
}

// errInProgress is SageMaker's answer to a change of an endpoint that is
// being created, updated or deleted.
func errInProgress(e *Endpoint) error {
	return apierr.ValidationException("Cannot update in-progress endpoint %q.", e.record().ARN)
}

// errFailedScale answers UpdateEndpointWeightsAndCapacities on a Failed
// endpoint: nothing runs to re-weight or scale.
func errFailedScale(arn string) error {
	return apierr.ValidationException("Cannot update the weights and capacities of endpoint %q: it is Failed (see FailureReason in DescribeEndpoint) and runs nothing. Update it with UpdateEndpoint to a working endpoint configuration, or delete it.", arn)
}

// Status is the endpoint's current state.
func (e *Endpoint) Status() spec.Status { return e.status.Load().(spec.Status) }

func (e *Endpoint) record() EndpointRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rec
}

func (s *Server) newEndpoint(rec EndpointRecord) *Endpoint {
	e := &Endpoint{name: rec.Name, rec: rec}
	e.status.Store(rec.Status)
	e.multiModel.Store(planIsMultiModel(rec.Plan))
	e.async.Store(rec.Plan.Async != nil)
	s.captures.attach(e, rec.DataCapture)
	return e
}

func planIsMultiModel(p containers.EndpointPlan) bool {
	for _, v := range p.Variants {
		for _, c := range v.Containers {
			if c.Mode == "MultiModel" {
				return true
			}
		}
	}
	return false
}

// startEndpoint registers a new endpoint (with its tags and data capture,
// if any) as Creating and launches it in the background.
func (s *Server) startEndpoint(plan containers.EndpointPlan, dc *spec.DataCaptureConfig, configName string, tags []spec.Tag) (*Endpoint, error) {
	if err := s.checkCapacity(planContainers(plan), nil); err != nil {
		return nil, err
	}
	if err := s.captures.check(dc); err != nil {
		return nil, err
	}
	now := time.Now()
	rec := EndpointRecord{
		Name: plan.Name, ARN: spec.ARN(s.cfg.Region, s.cfg.Account, spec.KindEndpoint, plan.Name),
		ConfigName: configName, Status: spec.StatusCreating, Created: now, Modified: now, Generation: 1, Plan: plan,
		Tags: slices.Clone(tags), DataCapture: dc,
	}
	e := s.newEndpoint(rec)
	if !s.reg.add(e) {
		return nil, &spec.AlreadyExistsError{Kind: spec.KindEndpoint, Name: plan.Name, ARN: rec.ARN}
	}
	if err := s.store.Put(store.Endpoints, rec.Name, rec); err != nil {
		s.reg.remove(e)
		return nil, err
	}
	s.bg.GoOr(func() { s.runLaunch(e, rec.Plan, rec.Generation, spec.StatusCreating) }, func(v any) { s.endpointPanicked(e, v) })
	return e, nil
}

// endpointPanicked reports a panic met while working on e: logged with its
// stack; e goes on serving what it ran before, with a FailureReason, or is
// Failed when it runs nothing.
func (s *Server) endpointPanicked(e *Endpoint, v any) {
	s.bg.LogPanic(v, "endpoint", e.name)
	serving := e.route.Load() != nil
	s.save(e, func(r *EndpointRecord) {
		r.Pending, r.Desired = "", nil
		r.Status, r.FailureReason = spec.StatusFailed, "mce met an internal error while changing this endpoint (its log has the details)."
		if serving {
			r.Status, r.FailureReason = spec.StatusInService, "mce met an internal error while changing this endpoint (its log has the details); what ran before keeps serving."
		}
	})
}

// runLaunch launches generation gen of the plan and puts the endpoint in
// service, or marks it Failed.
func (s *Server) runLaunch(e *Endpoint, plan containers.EndpointPlan, gen int, from spec.Status) {
	e.ops.Lock()
	defer e.ops.Unlock()
	log := s.log.With().Str("endpoint", e.name).Logger()
	if e.deleting.Load() {
		return
	}
	log.Info().Str("status", string(from)).Str("mode", endpointMode(EndpointRecord{Plan: plan}, false)).Int("generation", gen).Msg("launching endpoint")
	start := time.Now()
	ctx, cancel := s.opContext(e)
	defer cancel()
	if problems := s.preflight(ctx, e, plan); len(problems) > 0 {
		if e.deleting.Load() || s.ctx.Err() != nil {
			return
		}
		log.Error().Int("problems", len(problems)).Msg("endpoint failed its pre-flight; no container was started")
		s.save(e, func(r *EndpointRecord) {
			r.Status, r.FailureReason = spec.StatusFailed, apierr.PreflightReason("", problems, maxFailureReason)
		})
		return
	}
	l, err := s.launchPlan(ctx, plan, gen)
	if err != nil {
		if e.deleting.Load() || s.ctx.Err() != nil {
			return
		}
		log.Error().Err(err).Msg("endpoint failed")
		s.save(e, func(r *EndpointRecord) {
			r.Status, r.FailureReason = spec.StatusFailed, apierr.Truncate(apierr.RedactPaths(err.Error()), 1024)
		})
		return
	}
	if !s.install(e, plan, l) {
		return // being deleted: finishDelete removes l
	}
	s.save(e, func(r *EndpointRecord) {
		r.Status, r.Generation, r.Plan = spec.StatusInService, gen, plan
		if from != spec.StatusSystemUpdating {
			r.FailureReason = ""
		}
	})
	log.Info().Dur("took_ms", time.Since(start)).Msg("endpoint InService")
}

// install makes a launched generation the endpoint's own (finishDelete
// removes it) and points the route at it, unless the endpoint is being
// deleted: then it reports false and leaves the route empty.
func (s *Server) install(e *Endpoint, plan containers.EndpointPlan, l containers.Launched) bool {
	return installRoute(e, plan, l, newRoute(e.name, plan, l))
}

// newRoute is the route of a launched generation of plan.
func newRoute(name string, plan containers.EndpointPlan, l containers.Launched) *pipeline.Route {
	mode := pipeline.Serial
	if plan.Mode == "Direct" {
		mode = pipeline.Direct
	}
	var vs, shadows []*pipeline.Variant
	for _, v := range plan.Variants {
		pv := pipeline.NewVariant(v.Name, v.Weight, instances(l, v.Name))
		pv.SetStrategy(pipeline.StrategyOf(v.RoutingStrategy))
		pv.SetPrefixAware(v.PrefixLength, v.ConcurrencyThreshold)
		if v.Shadow { // takes copies only (pipeline.Mirror)
			shadows = append(shadows, pv)
			continue
		}
		vs = append(vs, pv)
	}
	route := pipeline.NewRoute(name, mode, vs)
	route.SetShadows(shadows)
	return route
}

// installRoute is install with the route already built (a deployment's
// green route, which took calls before it became the endpoint's own).
func installRoute(e *Endpoint, plan containers.EndpointPlan, l containers.Launched, route *pipeline.Route) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.launched = l
	if e.deleting.Load() {
		return false
	}
	e.multiModel.Store(planIsMultiModel(plan))
	e.async.Store(plan.Async != nil)
	e.route.Store(route)
	return true
}

func instances(l containers.Launched, variant string) []*pipeline.Instance {
	var out []*pipeline.Instance
	for _, cp := range l.Copies(variant) {
		out = append(out, pipeline.NewInstance(cp))
	}
	return out
}

// drain waits until no request is in flight on the route's instances, the
// container timeout passes, or ctx is done. The callers drain under the
// server's lifetime (s.ctx), not an operation's: a deletion that cancels an
// update does not cut the calls the previous generation still serves, and
// Close (which runs after the HTTP server stopped, with nothing in flight)
// does not wait out the timeout.
func (s *Server) drain(ctx context.Context, r *pipeline.Route) {
	if r == nil {
		return
	}
	var insts []*pipeline.Instance
	for _, v := range slices.Concat(r.Variants(), r.Shadows()) {
		insts = append(insts, v.Instances()...)
	}
	pipeline.Drain(ctx, insts, s.cfg.ContainerTimeout)
}

// updateEndpoint moves an InService endpoint to a new configuration: the new
// generation comes up beside the old, traffic moves to it, then the old one
// drains and goes. If the new one fails, the old one keeps serving.
//
// A Failed endpoint may be updated too (it runs nothing): it is Updating
// while the new configuration launches, then InService, or Failed again
// with the new reason.
//
// Under a DeploymentConfig with a BlueGreenUpdatePolicy (d), the traffic
// shifts as the policy says, with its alarms watched (runRollout).
func (s *Server) updateEndpoint(e *Endpoint, plan containers.EndpointPlan, dc *spec.DataCaptureConfig, configName string, d *spec.DeploymentConfig) error {
	if st := e.Status(); st != spec.StatusInService && st != spec.StatusFailed {
		return errInProgress(e)
	}
	if err := s.checkCapacity(planContainers(plan), nil); err != nil {
		return err
	}
	if err := s.captures.check(dc); err != nil {
		return err
	}
	var wasFailed bool
	started := s.cfg.Clock.Now()
	if err := s.saveIf(e, func(r EndpointRecord) error {
		wasFailed = r.Status == spec.StatusFailed
		return updatable(r)
	}, func(r *EndpointRecord) {
		r.Status, r.Pending = spec.StatusUpdating, configName
		if d != nil {
			r.LastDeployment = d
		}
		if guarded(d, wasFailed, plan) {
			r.Deploying = deploy.NewPending(configName, plan, time.Now())
		}
	}); err != nil {
		return err
	}
	s.bg.GoOr(func() {
		e.ops.Lock()
		defer e.ops.Unlock()
		if e.deleting.Load() {
			return
		}
		log := s.log.With().Str("endpoint", e.name).Logger()
		rec := e.record()
		gen := rec.Generation + 1
		ctx, cancel := s.opContext(e)
		defer cancel()
		// failed records an update that did not happen: a Failed endpoint
		// stays Failed with the new configuration's reason; an InService
		// one keeps serving its previous configuration.
		failed := func(reason string) {
			if wasFailed {
				s.captures.attach(e, dc)
			}
			s.save(e, func(r *EndpointRecord) {
				r.Pending, r.Deploying = "", nil
				if wasFailed {
					r.Status, r.ConfigName, r.Plan, r.FailureReason = spec.StatusFailed, configName, plan, apierr.Truncate(reason, maxFailureReason)
					r.DataCapture = dc
					return
				}
				r.Status = spec.StatusInService
				r.FailureReason = apierr.Truncate("Update to endpoint configuration "+configName+" failed: "+reason, maxFailureReason)
			})
		}
		if problems := s.preflight(ctx, e, plan); len(problems) > 0 {
			if e.deleting.Load() || s.ctx.Err() != nil {
				return
			}
			log.Error().Int("problems", len(problems)).Bool("was_failed", wasFailed).Msg("update failed its pre-flight; no container was started")
			prefix := ""
			if !wasFailed {
				prefix = "Update to endpoint configuration " + configName + " failed: "
			}
			reason := apierr.PreflightReason(prefix, problems, maxFailureReason)
			if wasFailed {
				s.captures.attach(e, dc)
			}
			s.save(e, func(r *EndpointRecord) {
				r.Pending, r.FailureReason, r.Deploying = "", reason, nil
				r.Status = spec.StatusInService
				if wasFailed {
					r.Status, r.ConfigName, r.Plan, r.DataCapture = spec.StatusFailed, configName, plan, dc
				}
			})
			return
		}
		var l containers.Launched
		var err error
		if guarded(d, wasFailed, plan) {
			l, err = s.cfg.Backend.Launch(ctx, deploy.FirstFleet(d, rec.Plan, plan), gen)
		} else {
			l, err = s.cfg.Backend.Launch(ctx, plan, gen)
		}
		if err != nil {
			if e.deleting.Load() || s.ctx.Err() != nil {
				return
			}
			if wasFailed {
				log.Error().Err(err).Msg("update of the Failed endpoint failed")
			} else {
				log.Error().Err(err).Msg("update failed; the endpoint keeps its previous configuration")
			}
			failed(apierr.RedactPaths(err.Error()))
			return
		}
		if guarded(d, wasFailed, plan) {
			runRollout(ctx, s, e, d, plan, l, gen, configName, dc, started)
			return
		}
		oldRoute := e.route.Load()
		e.mu.Lock()
		old := e.launched
		e.mu.Unlock()
		if !s.install(e, plan, l) {
			// Deleted meanwhile: l is now the endpoint's and finishDelete
			// removes it; the previous generation is removed here.
			if old != nil {
				old.Close(context.WithoutCancel(s.ctx))
			}
			return
		}
		s.captures.attach(e, dc) // the next call is the new configuration's
		s.save(e, func(r *EndpointRecord) {
			r.Status, r.Generation, r.Plan, r.ConfigName, r.Pending, r.FailureReason = spec.StatusInService, gen, plan, configName, "", ""
			r.DataCapture = dc
		})
		s.drain(s.ctx, oldRoute)
		if old != nil {
			if err := old.Close(context.WithoutCancel(s.ctx)); err != nil {
				log.Warn().Err(err).Msg("removing the previous generation")
			}
		}
		log.Info().Int("generation", gen).Str("config", configName).Msg("endpoint updated")
	}, func(v any) { s.endpointPanicked(e, v) })
	return nil
}

// updateWeightsAndCapacities changes variants' weights at once and their
// instance counts by scaling (new copies ready before they take traffic;
// surplus copies out of routing before they stop).
func (s *Server) updateWeightsAndCapacities(e *Endpoint, targets map[string]VariantTarget) error {
	if st := e.Status(); st == spec.StatusFailed {
		return errFailedScale(e.record().ARN)
	} else if st != spec.StatusInService {
		return errInProgress(e)
	}
	rec := e.record()
	delta := 0
	for _, v := range rec.Plan.Variants {
		if t, ok := targets[v.Name]; ok {
			delta += (t.Count - v.InstanceCount) * len(v.Containers)
		}
	}
	if err := s.checkCapacity(delta, nil); err != nil {
		return err
	}
	// The plan that was checked must still be the endpoint's when Updating
	// is set; the check and the change are one step.
	if err := s.saveIf(e, func(r EndpointRecord) error {
		if err := inService(r); err != nil {
			return err
		}
		if r.Generation != rec.Generation {
			return apierr.ValidationException("Cannot update in-progress endpoint %q.", r.ARN)
		}
		return nil
	}, func(r *EndpointRecord) { r.Status, r.Desired = spec.StatusUpdating, targets }); err != nil {
		return err
	}
	s.bg.GoOr(func() {
		e.ops.Lock()
		defer e.ops.Unlock()
		// What to scale, read in one step with the deletion flag: a
		// deletion that begins later waits for ops before it removes l,
		// and route stays valid here (it is only out of routing).
		e.mu.Lock()
		deleting, l, route := e.deleting.Load(), e.launched, e.route.Load()
		plan := e.rec.Plan
		plan.Variants = append([]containers.VariantPlan(nil), plan.Variants...) // the record keeps its own until saved
		e.mu.Unlock()
		if deleting || l == nil || route == nil {
			if !deleting {
				s.log.Error().Str("endpoint", e.name).Msg("updating weights and capacities: the endpoint has no running generation")
				s.save(e, func(r *EndpointRecord) { r.Status, r.Desired = spec.StatusInService, nil })
			}
			return
		}
		// Scaling runs under the server's lifetime on purpose, not the
		// request's (answered already) nor the operation's: a deletion
		// waits for it (ops), and a scale-down cut short would stop
		// tracking containers it had not removed yet.
		var errs []error
		for i, v := range plan.Variants {
			t, ok := targets[v.Name]
			if !ok {
				continue
			}
			pv := route.Variant(v.Name) // a shadow's weight is its share of the copies
			if pv == nil {
				errs = append(errs, fmt.Errorf("variant %s is not running", v.Name))
				continue
			}
			pv.SetWeight(t.Weight)
			plan.Variants[i].Weight = t.Weight
			switch {
			case t.Count > v.InstanceCount:
				if err := l.Scale(s.ctx, v.Name, t.Count); err != nil {
					errs = append(errs, err)
					continue
				}
				pv.SetInstances(instances(l, v.Name))
			case t.Count < v.InstanceCount:
				current := pv.Instances()
				pv.SetInstances(current[:t.Count])
				pipeline.Drain(s.ctx, current[t.Count:], s.cfg.ContainerTimeout)
				if err := l.Scale(s.ctx, v.Name, t.Count); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			plan.Variants[i].InstanceCount = len(l.Copies(v.Name))
		}
		s.save(e, func(r *EndpointRecord) {
			r.Status, r.Plan, r.Desired = spec.StatusInService, plan, nil
			if err := errors.Join(errs...); err != nil {
				r.FailureReason = apierr.Truncate("Updating weights and capacities failed: "+apierr.RedactPaths(err.Error()), 1024)
			}
		})
	}, func(v any) { s.endpointPanicked(e, v) })
	return nil
}

// deleteEndpoint takes the endpoint out of service at once and removes its
// containers and record in the background.
func (s *Server) deleteEndpoint(e *Endpoint) {
	s.deleteEndpointIf(e, nil)
}

// deleteEndpointIf is deleteEndpoint when ok (nil: always), called under
// the endpoint's lock, accepts; it reports whether the endpoint is being
// deleted. Components are registered under the same lock
// (componentHost.UnlessDeleting), so ok sees every component the deletion
// collects.
func (s *Server) deleteEndpointIf(e *Endpoint, ok func() bool) bool {
	e.mu.Lock()
	if e.deleting.Load() {
		e.mu.Unlock()
		return true
	}
	if ok != nil && !ok() {
		e.mu.Unlock()
		return false
	}
	e.deleting.Store(true)
	route := e.route.Swap(nil)
	if e.cancelOp != nil {
		e.cancelOp() // a launch in progress stops and removes what it started
	}
	e.mu.Unlock()
	s.save(e, func(r *EndpointRecord) { r.Status = spec.StatusDeleting })
	s.bg.Go(func() { s.finishDelete(e, route) })
	return true
}

func (s *Server) finishDelete(e *Endpoint, route *pipeline.Route) {
	e.ops.Lock() // wait for a launch or update in progress to notice
	defer e.ops.Unlock()
	s.drain(s.ctx, route)
	s.ics.RemoveAll(e.name)
	e.mu.Lock()
	l := e.launched
	e.launched = nil
	e.mu.Unlock()
	if l != nil {
		if err := l.Close(context.WithoutCancel(s.ctx)); err != nil {
			s.log.Error().Err(err).Str("endpoint", e.name).Msg("removing the endpoint's containers")
		}
	}
	if _, err := s.store.Delete(store.Endpoints, e.name); err != nil {
		s.log.Error().Err(err).Str("endpoint", e.name).Msg("could not remove the endpoint's record")
	}
	s.captures.drop(e)
	s.metrics.Forget(e.name) // before the name is free for a new endpoint
	s.reg.remove(e)
	s.series.Drop(e.name)
	s.async.EndpointGone(e.name)
	s.sessions.DropEndpoint(e.name) // their containers are gone
	s.log.Info().Str("endpoint", e.name).Msg("endpoint deleted")
}
