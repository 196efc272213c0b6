package mme

import (
	"context"
	"errors"
	"net/http"
)

// NotLoaded reports that the container answered 404 to an invoke of the
// leased model, which the manager counts as loaded. A container can forget
// its models without restarting (the engine sees no restart, so Reset is
// never called): a model server whose worker process died and was replaced
// by a fresh one, as gunicorn and TorchServe do. Every later call of that
// model would get 404 until it was evicted.
//
// The manager first asks the container (GET /models/<id>, the multi-model
// contract's describe call). When the container says it has the model, the
// 404 was the model's own answer: NotLoaded returns false, nil and the
// caller passes the 404 on. Otherwise the manager forgets the model (its
// files stay cached), loads it again as Acquire does (sharing the load with
// other leases that saw the same 404) and returns true, nil: the caller
// retries the invoke, once. When the model was loaded again since this lease
// saw it (by another lease's NotLoaded), it returns true at once. Errors
// are Acquire's.
func (l *Lease) NotLoaded(ctx context.Context) (bool, error) {
	if l.done.Load() {
		return false, errors.New("mme: NotLoaded on a released lease")
	}
	return l.m.notLoaded(ctx, l)
}

func (m *Manager) notLoaded(ctx context.Context, l *Lease) (bool, error) {
	st := l.st
	status, _, derr := m.api.describe(ctx, st.id, st.target)
	if err := ctx.Err(); err != nil {
		return false, err
	}
	var files Files
	m.mu.Lock()
	switch {
	case m.closed:
		m.mu.Unlock()
		return false, ErrClosed
	case st.phase == loaded && st.loadNo != l.loadNo: // loaded again since this lease saw it
		l.loadNo = st.loadNo
		m.mu.Unlock()
		return true, nil
	case st.phase == loaded && derr == nil && status == http.StatusOK: // the container has it
		m.mu.Unlock()
		return false, nil
	case st.phase == loaded:
		// Forgotten by the container: no longer loaded here either. The lease
		// pins it, so it is in no idle list and no unload runs on it. The
		// memory it took is free again, for whoever waits on a 507.
		st.phase = unloaded
		files, st.files = st.files, nil
		m.nLoaded--
		m.obs.LoadedModelCount(m.nLoaded)
		m.freedSeq++
		m.broadcastLocked()
	}
	// Otherwise (unloaded) another lease forgot it, or the container
	// restarted (Reset): its load is running or starts now.
	m.mu.Unlock()
	if files != nil {
		m.store.Release(files, false)
		m.act.forgotten.Add(1)
		ev := m.logEvent("model forgotten", m.log.Warn).Str("event", "model_forgotten").Str("model", st.target).Int("describe_status", status)
		if derr != nil {
			ev = ev.AnErr("describe_error", derr)
		}
		ev.Msg("the container answered 404 (model not found) to an invoke of a model it had loaded, without restarting (did its server's worker process die?): loading the model again (the first time a warning; later ones are counted in the summary)")
	}
	seq, no, err := m.waitLoad(ctx, st)
	if err != nil {
		return false, err
	}
	l.seq, l.loadNo = seq, no
	return true, nil
}
