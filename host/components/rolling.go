package components

import (
	"encoding/json"
	"fmt"
	"github.com/mce-run/mce/host/deploy"
	"path/filepath"
	"strings"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
)

// Rolling updates: UpdateInferenceComponent with a specification that
// changes what the copies run replaces them in batches, as SageMaker's
// rolling update of inference components does
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_InferenceComponentRollingUpdatePolicy.html):
// for each batch, new copies are placed and launched, take calls once
// their health check passed, then as many copies of the previous
// specification leave the route, drain (their calls in flight end) and
// stop. It needs room for one batch beside the copies, never for all of
// them twice. An update whose specification (merged, and resolved into
// what a copy runs) equals the current one replaces nothing: it only
// adds or removes copies, as UpdateInferenceComponentRuntimeConfig does.
//
// A new copy that does not start (no room, a failed launch or health
// check) stops the update: the batch's new copies go, and the update is
// rolled back the same way, batch by batch (copies of the previous
// specification replace the new ones already serving). The component then
// serves its previous specification and copy count: InService, with a
// FailureReason saying that the update was rolled back and why, as an
// endpoint whose update failed keeps its previous configuration (Failed
// instead when it had fewer copies than it asked for before the update).
// Should the rollback's own copies not start either, the component ends
// Failed, the copies of both specifications that run keep serving, and
// the record keeps the Rollout: the next UpdateInferenceComponent or
// UpdateInferenceComponentRuntimeConfig resumes replacing the other
// specification's copies by the record's.
//
// Every step is in the durable record (the Rollout, each copy with the
// version of the specification it runs), so a restart of mce in the
// middle comes back Updating: the copies still running are adopted with
// the specification they run, and the update (or its rollback) goes on
// from where it stopped.

// DefaultBatch is how many copies a rolling update replaces at a time when
// the update names no batch (no DeploymentConfig: its MaximumBatchSize is
// Update.Batch, spec.ComponentBatch): one, mce's choice.
const DefaultBatch = 1

// Rollout is a rolling update in progress, in the record of its component.
type Rollout struct {
	// FromSpec, FromTemplate and FromVersion are the specification being
	// replaced and what its copies run; its copies carry FromVersion. In a
	// rollback they are the failed specification's.
	FromSpec     spec.InferenceComponentSpecification
	FromTemplate containers.VariantPlan
	FromVersion  int
	// FromDesired is the copy count asked for before the update, and
	// Restore how many copies of the previous specification a rollback
	// brings back: those placed when the update began, at most
	// FromDesired.
	FromDesired int
	Restore     int
	// FromApplied is the record's Applied before the update (a rollback
	// puts it back: the endpoint files' definition was not applied).
	FromApplied string `json:",omitempty"`
	// Batch is how many copies are replaced at a time (at least 1).
	Batch int
	// Wait is the bake after each batch, Alarms what it watches (the
	// update's DeploymentConfig); a rollback neither waits nor watches.
	Wait   time.Duration `json:",omitempty"`
	Alarms []string      `json:",omitempty"`
	// RollbackBatch is how many copies a rollback brings back at a time
	// (RollbackMaximumBatchSize, or all of them when a DeploymentConfig
	// gave none; 0: Batch, the update had no DeploymentConfig). Deadline, when set, is
	// when an update still rolling is rolled back
	// (MaximumExecutionTimeoutInSeconds), on the Manager's clock.
	RollbackBatch int           `json:",omitempty"`
	Timeout       time.Duration `json:",omitempty"`
	Deadline      time.Time     `json:",omitzero"`
	// RollingBack is set once a new copy failed to start; Failure says
	// why it did not.
	RollingBack bool   `json:",omitempty"`
	Failure     string `json:",omitempty"`
}

// specOf is the specification and template of the copies of a version:
// the record's own, or the one a Rollout replaces; ok is false for a
// version the record no longer knows (the record's are returned).
func (r Record) specOf(version int) (sp spec.InferenceComponentSpecification, tpl containers.VariantPlan, ok bool) {
	if version == r.SpecVersion {
		return r.Spec, r.Template, true
	}
	if ro := r.Rollout; ro != nil && version == ro.FromVersion {
		return ro.FromSpec, ro.FromTemplate, true
	}
	return r.Spec, r.Template, false
}

// nextSpecVersion is a version no copy of the record runs and no Rollout
// names.
func (r Record) nextSpecVersion() int {
	n := r.SpecVersion
	if r.Rollout != nil {
		n = max(n, r.Rollout.FromVersion)
	}
	for _, cp := range r.Copies {
		n = max(n, cp.SpecVersion)
	}
	return n + 1
}

// split divides the record's copies into those of its specification and
// the others (of the specification a Rollout replaces, or older).
func (r Record) split() (fresh, old []CopyRecord) {
	for _, cp := range r.Copies {
		if cp.SpecVersion == r.SpecVersion {
			fresh = append(fresh, cp)
		} else {
			old = append(old, cp)
		}
	}
	return fresh, old
}

// startRollout is the change of a record that a new specification (and
// its template) makes: the copies of the current one are to be replaced,
// batch at a time, by copies of sp.
func startRollout(r *Record, sp spec.InferenceComponentSpecification, tpl containers.VariantPlan, batch int) {
	fresh, _ := r.split()
	r.Rollout = &Rollout{FromSpec: r.Spec, FromTemplate: r.Template, FromVersion: r.SpecVersion, FromDesired: r.Desired,
		Restore: min(len(fresh), r.Desired), FromApplied: r.Applied, Batch: max(batch, 1)}
	r.Spec, r.Template, r.SpecVersion = sp, tpl, r.nextSpecVersion()
}

// resumeRollout is the change of a record that a new copy count (and no
// new specification) makes while a Rollout is left in it (a rollback that
// could not finish, or a panic): the roll goes on towards the record's
// specification at the new count.
func resumeRollout(r *Record) {
	if ro := r.Rollout; ro != nil {
		ro.RollingBack, ro.Failure = false, ""
	}
}

// roll carries a component's rolling update out, batch after batch, until
// the record's specification has its copies (or a batch fails: then it is
// rolled back the same way). It runs under c.ops; it stops where it is,
// the record saying so, when the component is deleted or the Manager
// stops (a restart goes on from the record).
func (m *Manager) roll(c *Component, e HostEndpoint, v containers.VariantPlan) {
	log := m.log.With().Str("inference_component", c.name).Logger()
	for !c.deleting.Load() && m.ctx.Err() == nil {
		rec := c.Record()
		ro := rec.Rollout
		target := rec.Desired
		if ro.RollingBack {
			target = min(target, ro.Restore)
		}
		fresh, old := rec.split()
		if len(fresh) >= target {
			// Every copy it needs serves: the others go (the newest of
			// the record's specification stay).
			m.removeCopies(c, append(old, fresh[:len(fresh)-target]...))
			if !c.deleting.Load() && m.ctx.Err() == nil {
				m.endRollout(c)
			}
			return
		}
		if !ro.RollingBack && !ro.Deadline.IsZero() && !m.clock.Now().Before(ro.Deadline) {
			m.rollBack(c, fmt.Sprintf("The update did not complete within its MaximumExecutionTimeoutInSeconds (%d).", int(ro.Timeout/time.Second)))
			log.Warn().Msg("the inference component's update ran out of time; rolling it back")
			continue
		}
		n := min(ro.Batch, target-len(fresh))
		if ro.RollingBack && ro.RollbackBatch > 0 {
			n = min(ro.RollbackBatch, target-len(fresh))
		}
		got := m.launchCopies(c, rec, e, v, n)
		if c.deleting.Load() || m.ctx.Err() != nil {
			return
		}
		if len(got.ready) < n {
			m.removeCopies(c, got.ready)
			if ro.RollingBack {
				m.rollbackFailed(c, got, v)
				log.Error().Msg("rolling back the inference component's update failed: the copies of both specifications that run keep serving")
				return
			}
			m.rollBack(c, strings.TrimSpace(got.why("The new copies", v)))
			log.Error().Int("ready", len(got.ready)).Int("batch", n).Msg("a batch of the inference component's rolling update did not start; rolling it back")
			continue
		}
		// The batch serves: as many copies of the other specification
		// leave the route, drain and stop (more when the update lowered
		// the count: those beyond the copies still to be replaced).
		drop := max(min(n, len(old)), len(old)-(target-len(fresh)-n))
		m.removeCopies(c, old[:drop])
		log.Info().Int("batch", n).Int("replaced", drop).Bool("rolling_back", ro.RollingBack).Msg("inference component: a batch of its rolling update serves")
		if !ro.RollingBack {
			if alarm := m.bake(c, ro); alarm != "" {
				m.rollBack(c, "CloudWatch alarm "+alarm+" went into the ALARM state during the update.")
				log.Warn().Str("alarm", alarm).Msg("an alarm rolls the inference component's update back")
			}
		}
	}
}

// rollBack turns the record's rolling update into its rollback, for why.
func (m *Manager) rollBack(c *Component, why string) {
	m.saveComponent(c, func(r *Record) {
		ro := r.Rollout
		r.Spec, ro.FromSpec = ro.FromSpec, r.Spec
		r.Template, ro.FromTemplate = ro.FromTemplate, r.Template
		r.SpecVersion, ro.FromVersion = ro.FromVersion, r.SpecVersion
		r.Desired, ro.FromDesired = ro.FromDesired, r.Desired
		r.Applied = ro.FromApplied
		ro.RollingBack, ro.Failure = true, apierr.Truncate(why, spec.MaxFailureReason)
	})
}

// bake waits out a batch's WaitIntervalInSeconds on the Manager's clock
// with the update's alarms watched, and returns the first in ALARM ("":
// none; the bake also ends early when the component is deleted or the
// Manager stops).
func (m *Manager) bake(c *Component, ro *Rollout) string {
	var w *deploy.Watcher
	if len(ro.Alarms) > 0 && m.alarms != nil {
		w = deploy.Watch(m.alarms, ro.Alarms)
		defer w.Close()
	}
	if ro.Wait <= 0 {
		if w != nil {
			return w.Tripped()
		}
		return ""
	}
	var changed <-chan struct{}
	if w != nil {
		changed = w.Changed()
	}
	wait := ro.Wait
	if !ro.Deadline.IsZero() { // the bake ends at the deadline; roll then rolls back
		wait = min(wait, max(ro.Deadline.Sub(m.clock.Now()), 0))
	}
	t := m.clock.NewTimer(wait)
	defer t.Stop()
	tick := time.NewTicker(100 * time.Millisecond) // a deletion is a flag
	defer tick.Stop()
	for {
		if w != nil {
			if a := w.Tripped(); a != "" {
				return a
			}
		}
		if c.deleting.Load() {
			return ""
		}
		select {
		case <-t.C:
			return ""
		case <-m.ctx.Done():
			return ""
		case <-changed:
		case <-tick.C:
		}
	}
}

// endRollout ends a rolling update whose copies all serve: InService on the
// new specification, or after a rollback on the previous one, with why the
// update failed (Failed when fewer copies serve than it asks for).
func (m *Manager) endRollout(c *Component) {
	m.saveComponent(c, func(r *Record) {
		ro := r.Rollout
		r.Rollout = nil
		fresh, _ := r.split()
		switch {
		case !ro.RollingBack:
			r.Status, r.FailureReason = spec.StatusInService, ""
		case len(fresh) >= r.Desired:
			r.Status = spec.StatusInService
			r.FailureReason = apierr.Truncate("The update of the inference component's specification failed and was rolled back: the previous specification serves. "+ro.Failure, spec.MaxFailureReason)
		default:
			r.Status = spec.StatusFailed
			r.FailureReason = apierr.Truncate(fmt.Sprintf("%d of %d copies of the inference component are running. The update of its specification failed and was rolled back. %s",
				len(fresh), r.Desired, ro.Failure), spec.MaxFailureReason)
		}
	})
}

// rollbackFailed records a rollback whose copies did not start: Failed,
// the Rollout kept (so that the copies of both specifications are known,
// and adopted after a restart), every copy that runs serving.
func (m *Manager) rollbackFailed(c *Component, got launchResult, v containers.VariantPlan) {
	m.saveComponent(c, func(r *Record) {
		fresh, old := r.split()
		reason := fmt.Sprintf("%d of %d copies of the inference component are running. The update of its specification failed (%s), and rolling it back did not finish: copies of the previous specification did not start either (%s). %d copies of the failed specification keep serving; update the inference component to try again.",
			len(fresh), r.Desired, r.Rollout.Failure, strings.TrimSpace(got.why("The copies", v)), len(old))
		r.Status, r.FailureReason = spec.StatusFailed, apierr.Truncate(reason, spec.MaxFailureReason)
	})
}

// rollCapacity is how many more containers than the placed copies a
// rolling update to desired copies takes at its peak, batch copies at a
// time: a batch started beside the copies there are, or the copies it
// adds when it adds more.
func rollCapacity(placed, desired, batch int) int {
	return max(min(batch, desired), desired-placed)
}

// sameDeployment reports whether a specification and its template are
// what a component's copies run already: compared as their canonical JSON
// (members in order, absent, null and empty alike), and a template's
// folder of a model's files counting only where a relative file:// URL
// resolves against it.
func sameDeployment(rec Record, sp spec.InferenceComponentSpecification, tpl containers.VariantPlan) bool {
	return canonicalJSON(rec.Spec) == canonicalJSON(sp) && canonicalJSON(withoutIdleBaseDir(rec.Template)) == canonicalJSON(withoutIdleBaseDir(tpl))
}

// withoutIdleBaseDir is t without the BaseDir of containers whose model
// data does not resolve against it.
func withoutIdleBaseDir(t containers.VariantPlan) containers.VariantPlan {
	t.Containers = append([]containers.ContainerPlan(nil), t.Containers...)
	for i := range t.Containers {
		c := &t.Containers[i]
		if p, ok := strings.CutPrefix(c.ModelDataURL, "file://"); !ok || filepath.IsAbs(p) {
			c.BaseDir = ""
		}
	}
	return t
}

// canonicalJSON is v's JSON with object members sorted and null, empty
// objects and empty arrays left out, at every depth.
func canonicalJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "!" + err.Error()
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		return "!" + err.Error()
	}
	b, _ = json.Marshal(prune(tree))
	return string(b)
}

// prune drops null, {} and [] from a decoded JSON tree (nil when nothing
// is left of it).
func prune(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if x = prune(x); x == nil {
				delete(t, k)
			} else {
				t[k] = x
			}
		}
		if len(t) == 0 {
			return nil
		}
	case []any:
		if len(t) == 0 {
			return nil
		}
		for i, x := range t {
			t[i] = prune(x)
		}
	}
	return v
}
