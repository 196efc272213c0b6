package mme

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// unloadTicket is an unload begun under the lock and finished outside it.
type unloadTicket struct {
	st  *modelState
	gen uint64
	// claimed: the memory it frees is for the load or lease that asked for
	// it; otherwise (idle sweep, CacheDisabled) it is free for anyone.
	claimed bool
	// gpuHeld: the caller holds gpu.mu (an unload ahead of a GPU load).
	gpuHeld bool
	// freed is the GPU memory the unload freed, when it was measured.
	freed uint64
}

// beginUnloadLocked takes a loaded model with no pins out of service.
func (m *Manager) beginUnloadLocked(st *modelState, claimed bool) *unloadTicket {
	m.idle.remove(st.id)
	st.phase = unloading
	st.unloaded = make(chan struct{})
	m.nLoaded--
	m.nUnloading++
	m.obs.LoadedModelCount(m.nLoaded)
	if claimed {
		m.obs.ModelEvicted()
		m.act.evictions.Add(1)
	}
	return &unloadTicket{st: st, gen: m.gen, claimed: claimed}
}

// finishUnload sends the unload call, detached from any caller (bounded by
// UnloadTimeout, cancelled by Close), and records the outcome. On failure
// the model counts as loaded again.
//
// With a GPU it reads the memory before and after the call, to learn what
// the unload freed (issue 19.2: servers that keep memory after unloads
// must not make every load evict every idle model). The measure needs
// gpu.mu so that no load runs meanwhile; an unload that finds a load
// holding it goes unmeasured rather than wait minutes for it.
func (m *Manager) finishUnload(t *unloadTicket) error {
	st := t.st
	var before gpuReading
	measure := false
	if m.gpu.enabled() && (t.gpuHeld || m.gpu.mu.TryLock()) {
		if !t.gpuHeld {
			defer m.gpu.mu.Unlock()
		}
		r, err := m.gpu.read()
		before, measure = r, err == nil
	}
	ctx, cancel := context.WithTimeout(m.life, m.o.UnloadTimeout)
	start := time.Now()
	status, msg, err := m.api.unload(ctx, st.id, st.target)
	cancel()
	d := time.Since(start)
	m.obs.ModelUnloadingTime(d)
	ok := err == nil && (status == http.StatusOK || status == http.StatusNotFound)
	if ok && measure {
		if after, err := m.gpu.read(); err == nil && after.perContainer == before.perContainer {
			var leaky bool
			t.freed, leaky = m.gpu.unloaded(st.id, before, after)
			if leaky {
				m.leaked(st.target, t.freed)
			}
		}
	}

	var files Files
	m.mu.Lock()
	close(st.unloaded)
	st.unloaded = nil
	if !t.claimed {
		m.freedSeq++
	}
	if m.gen == t.gen { // otherwise Reset or Close already counted it out
		m.nUnloading--
		if ok {
			st.phase = unloaded
			m.unloads++
			files, st.files = st.files, nil
		} else {
			st.phase = loaded
			m.nLoaded++
			m.obs.LoadedModelCount(m.nLoaded)
			if st.pins == 0 {
				m.idle.touch(st.id, st) // most recent: others go first next time
			}
		}
	}
	m.broadcastLocked()
	m.forgetLocked(st)
	m.mu.Unlock()
	if files != nil {
		m.store.Release(files, m.o.CacheDisabled)
	}
	if !ok {
		ue := &UnloadError{TargetModel: st.target, Status: status, Message: msg}
		if err != nil {
			ue.Message = err.Error()
		}
		return ue
	}
	m.act.unloads.Add(1)
	m.log.Debug().Str("event", "model_unloaded").Str("model", st.target).Dur("took_ms", d).
		Msg("model unloaded")
	return nil
}

// makeRoom frees memory for self (being loaded, or leased and answered
// 507): it unloads the least recently used idle model, or waits up to
// EvictWait for a busy one (or one whose load call is in flight) to become
// idle, or for a running unload to end.
// It returns nil when memory was freed, ErrNoMemory when nothing else is
// loaded or everything stayed busy. *seq is Manager.freedSeq read before
// the call that was answered 507: when memory that nobody claimed (an idle
// sweep, a CacheDisabled unload, Reset) was freed since, it returns nil at
// once. On return *seq holds the current count.
//
// unloads, for a load, is Manager.unloads read before the load call that
// was answered 507: when nothing is loaded, unloading or being loaded but
// an unload ended since (one claimed by another load that has not sent its
// own load call yet), the 507 may be stale and it returns nil so that the
// load is tried again (issue 19.7). Nil for a lease.
func (m *Manager) makeRoom(ctx context.Context, self *modelState, seq *uint64, unloads *uint64) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	m.mu.Lock()
	for {
		if m.closed {
			m.mu.Unlock()
			return ErrClosed
		}
		if m.freedSeq != *seq { // memory nobody claimed was freed since the 507: retry
			*seq = m.freedSeq
			m.mu.Unlock()
			return nil
		}
		if _, victim, ok := m.idle.oldest(); ok { // never self: self is pinned or not loaded
			t := m.beginUnloadLocked(victim, true)
			m.mu.Unlock()
			m.log.Debug().Str("event", "model_evicted").Str("model", victim.target).Str("for", self.target).
				Msg("evicting the least recently used model: the container had no memory (507)")
			err := m.finishUnload(t)
			m.mu.Lock()
			*seq = m.freedSeq
			m.mu.Unlock()
			if err != nil {
				return fmt.Errorf("making room for model %q: %w", self.target, err)
			}
			return nil
		}
		others := m.nLoaded
		if self.phase == loaded {
			others--
		}
		if others == 0 && m.nUnloading == 0 && m.nPosting == 0 {
			*seq = m.freedSeq
			if unloads != nil && *unloads != m.unloads {
				*unloads = m.unloads
				m.mu.Unlock()
				return nil
			}
			m.mu.Unlock()
			return noMemory(self.target, "no other model is loaded")
		}
		if timer == nil {
			timer = time.NewTimer(m.o.EvictWait)
		}
		m.waiting++
		ch := m.changed
		m.mu.Unlock()
		var err error
		select {
		case <-ch:
		case <-timer.C:
			err = noMemory(self.target, fmt.Sprintf("no other loaded model became idle within %s", m.o.EvictWait))
		case <-ctx.Done():
			err = ctx.Err()
		}
		m.mu.Lock()
		m.waiting--
		if err != nil {
			*seq = m.freedSeq
			m.mu.Unlock()
			return err
		}
	}
}
