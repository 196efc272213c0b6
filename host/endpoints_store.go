package host

import (
	"context"
	"fmt"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
)

// save changes the record, publishes its status and persists it. Once the
// endpoint is being deleted its status stays Deleting, whatever change says.
func (s *Server) save(e *Endpoint, change func(*EndpointRecord)) {
	s.saveIf(e, nil, change)
}

// saveIf is save when ok (nil: always) accepts the current record, checked
// and changed in one step under the endpoint's lock; otherwise it returns
// ok's error and changes nothing. An endpoint being deleted accepts no
// change but its deletion: saveIf with a non-nil ok refuses it. ok runs
// under the lock, so it must not call record() or anything else that locks.
func (s *Server) saveIf(e *Endpoint, ok func(EndpointRecord) error, change func(*EndpointRecord)) error {
	e.mu.Lock()
	if ok != nil {
		err := ok(e.rec)
		if err == nil && e.deleting.Load() {
			err = apierr.ValidationException("Cannot update in-progress endpoint %q.", e.rec.ARN)
		}
		if err != nil {
			e.mu.Unlock()
			return err
		}
	}
	change(&e.rec)
	if e.deleting.Load() {
		e.rec.Status = spec.StatusDeleting
	}
	e.rec.Modified = time.Now()
	rec := e.rec
	e.status.Store(rec.Status)
	// Persisting under mu keeps the durable record in the order of the
	// changes (a later change never overwritten by an earlier one).
	if err := s.store.Put(store.Endpoints, rec.Name, rec); err != nil {
		s.log.Error().Err(err).Str("endpoint", rec.Name).Msg("could not persist the endpoint's state")
	}
	e.mu.Unlock()
	return nil
}

// inService accepts an endpoint that is InService (saveIf's ok).
func inService(rec EndpointRecord) error {
	if rec.Status == spec.StatusFailed {
		return errFailedScale(rec.ARN)
	}
	if rec.Status != spec.StatusInService {
		return apierr.ValidationException("Cannot update in-progress endpoint %q.", rec.ARN)
	}
	return nil
}

// updatable accepts an endpoint UpdateEndpoint may change: InService, or
// Failed (saveIf's ok).
func updatable(rec EndpointRecord) error {
	if rec.Status != spec.StatusInService && rec.Status != spec.StatusFailed && rec.Status != spec.StatusUpdateRollbackFailed {
		return apierr.ValidationException("Cannot update in-progress endpoint %q.", rec.ARN)
	}
	return nil
}

// planOutOfBounds says why an endpoint's recorded plan is not launched
// again: a variant of containers with more instances than
// spec.MaxInstances. An endpoint for inference components runs nothing of
// its own; its components fail instead (variantOutOfBounds).
func planOutOfBounds(p containers.EndpointPlan) string {
	if p.HostsComponents() {
		return ""
	}
	for _, v := range p.Variants {
		if v.InstanceCount > spec.MaxInstances {
			return fmt.Sprintf("Variant %s has %d instances in its recorded configuration; mce runs 1 to %d instances per variant. Update the endpoint to a configuration within that limit.",
				v.Name, v.InstanceCount, spec.MaxInstances)
		}
	}
	return ""
}

// Recover brings back every endpoint of the durable state after a restart:
// containers an earlier run left running are adopted when they match and
// answer /ping; everything else that runs is removed; endpoints that could not
// be adopted are relaunched (SystemUpdating, then InService).
func (s *Server) Recover(ctx context.Context) error {
	var recs []EndpointRecord
	if err := store.List(s.store, store.Endpoints, func(r EndpointRecord) error { recs = append(recs, r); return nil }); err != nil {
		return fmt.Errorf("read endpoints from the state: %w", err)
	}
	var relaunch []*Endpoint
	for _, rec := range recs {
		switch rec.Status {
		case spec.StatusDeleting:
			s.store.Delete(store.Endpoints, rec.Name) // its containers go with Reconcile
			continue
		case spec.StatusFailed:
			s.reg.add(s.newEndpoint(rec))
			continue
		case spec.StatusUpdating, spec.StatusRollingBack:
			rec.FailureReason = "An update was interrupted by a restart of mce; the endpoint kept its previous configuration."
			if rec.Deploying != nil { // its new fleet is not adopted: Reconcile removes it
				rec.FailureReason = "Update to endpoint configuration " + rec.Deploying.ConfigName +
					" was rolled back to the previous configuration because mce restarted during its deployment."
			}
			rec.Pending, rec.Desired, rec.Deploying, rec.Status = "", nil, nil, spec.StatusInService
		}
		if why := planOutOfBounds(rec.Plan); why != "" {
			// A record of an older mce, which accepted any count: its
			// containers are neither adopted nor launched (one per
			// instance); those running go with Reconcile.
			rec.Status, rec.FailureReason = spec.StatusFailed, why
			e := s.newEndpoint(rec)
			s.reg.add(e)
			s.save(e, func(r *EndpointRecord) { *r = rec })
			s.log.Error().Str("endpoint", rec.Name).Msg("endpoint not recovered: " + why)
			continue
		}
		e := s.newEndpoint(rec)
		s.reg.add(e)
		l, err := s.adoptPlan(ctx, rec.Plan, rec.Generation)
		if err == nil {
			s.install(e, rec.Plan, l)
			s.save(e, func(r *EndpointRecord) { *r = rec; r.Status = spec.StatusInService })
			s.log.Info().Str("endpoint", rec.Name).Msg("endpoint recovered: its running containers were adopted")
			continue
		}
		s.log.Info().Str("endpoint", rec.Name).Str("why", err.Error()).Msg("endpoint will be relaunched")
		relaunch = append(relaunch, e)
	}
	relaunchComponents := s.ics.Recover(ctx) // their copies adopted before Reconcile
	if err := s.cfg.Backend.Reconcile(ctx); err != nil {
		return err
	}
	relaunchComponents()
	for _, e := range relaunch {
		rec := e.record()
		from := spec.StatusSystemUpdating
		if rec.Status == spec.StatusCreating {
			from = spec.StatusCreating
		}
		gen := rec.Generation + 1
		s.save(e, func(r *EndpointRecord) { r.Status, r.Generation = from, gen })
		s.bg.GoOr(func() { s.runLaunch(e, rec.Plan, gen, from) }, func(v any) { s.endpointPanicked(e, v) })
	}
	return s.async.Recover()
}
