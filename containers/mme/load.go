package mme

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// flight runs load and logs a failure, which no caller may be waiting for.
func (m *Manager) flight(id, target string) error {
	err := m.load(id, target)
	if err != nil {
		var nf *ModelNotFoundError
		ev := m.log.Warn()
		if errors.As(err, &nf) || errors.Is(err, ErrClosed) {
			ev = m.log.Debug()
		}
		ev.Err(err).Str("model", target).Msg("model load failed")
	}
	return err
}

// load is the flight for one model: files, then the container's load call,
// making room on 507. It runs detached from the callers' contexts, bounded
// by BackgroundLoadTimeout and cancelled by Close; its outcome is shared by
// every caller that waited for it.
func (m *Manager) load(id, target string) (err error) {
	m.mu.Lock()
	if !m.enterLocked() {
		m.mu.Unlock()
		return ErrClosed
	}
	st := m.stateLocked(id, target)
	st.loading = true
	m.mu.Unlock()
	defer m.wg.Done()
	ctx, cancel := context.WithTimeout(m.life, m.o.BackgroundLoadTimeout)
	defer cancel()

	var files Files // our Store reference until the model is loaded
	defer func() {
		m.mu.Lock()
		st.loading = false
		m.forgetLocked(st)
		m.mu.Unlock()
		if files != nil {
			// Files the container refused to load are deleted at once (when
			// no one else holds them), so that a bad artifact neither stays
			// in the cache nor counts against its capacity; a container out
			// of memory or a cancelled load says nothing about them.
			var refused *LoadError
			m.store.Release(files, m.o.CacheDisabled || errors.As(err, &refused))
		}
	}()
	for {
		m.mu.Lock()
		if st.phase == loaded {
			m.mu.Unlock()
			return nil
		}
		wait, gen := st.unloaded, m.gen
		m.mu.Unlock()
		if wait != nil { // an unload of this model is running: let it end first
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return fmt.Errorf("loading model %q: %w", target, ctx.Err())
			}
		}
		if files == nil {
			f, err := m.store.Acquire(ctx, target)
			if err != nil {
				return err
			}
			files = f
		}
		start := time.Now()
		m.mu.Lock()
		m.nPosting++
		seq := m.freedSeq
		m.mu.Unlock()
		status, msg, err := m.postLoad(ctx, st)
		m.mu.Lock()
		m.nPosting-- // loads answered 507 may be waiting for this one's outcome
		m.broadcastLocked()
		m.mu.Unlock()
		if err != nil {
			return fmt.Errorf("loading model %q: %w", target, err)
		}
		switch status {
		case http.StatusOK, http.StatusConflict: // 409: the container has it already
			m.mu.Lock()
			if m.gen != gen { // the container restarted meanwhile: load it again
				m.mu.Unlock()
				continue
			}
			bytes := files.Size()
			st.phase, st.files, files = loaded, files, nil
			st.lastUsed = time.Now()
			m.nLoaded++
			m.obs.LoadedModelCount(m.nLoaded)
			if st.pins == 0 { // every waiter gave up: it is idle
				m.idle.touch(st.id, st)
				m.broadcastLocked()
			}
			m.mu.Unlock()
			d := time.Since(start)
			m.obs.ModelLoadingTime(d)
			m.log.Info().Str("event", "model_loaded").Str("model", target).Int("status", status).
				Int64("bytes", bytes).Dur("took_ms", d).Msgf("loaded model %s in %s", target, roundDuration(d))
			return nil
		case http.StatusInsufficientStorage:
			m.log.Debug().Str("model", target).Msg("container out of memory (507) on load; unloading an idle model")
			if err := m.makeRoom(ctx, st, &seq); err != nil {
				return err
			}
		default:
			return &LoadError{TargetModel: target, Status: status, Message: msg}
		}
	}
}

// postLoad sends the load call; with a GPU it first unloads idle models
// while the expected footprint would pass the threshold, and learns the
// model's footprint from the call. GPU loads are serialized so that the
// footprints measured are each model's own.
func (m *Manager) postLoad(ctx context.Context, st *modelState) (int, string, error) {
	if !m.gpu.enabled() {
		return m.api.load(ctx, st.id, st.target)
	}
	m.gpu.mu.Lock()
	defer m.gpu.mu.Unlock()
	before, ok := m.evictAhead(ctx, st)
	status, msg, err := m.api.load(ctx, st.id, st.target)
	if ok && err == nil && status == http.StatusOK {
		if after, _, err := m.gpu.usage(); err == nil {
			m.gpu.learn(st.id, before, after)
		}
	}
	return status, msg, err
}

// evictAhead unloads idle models, least recently used first, while the GPU
// memory in use plus st's expected footprint passes the threshold. It
// returns the memory in use before the load, and false when it could not
// be read. Called with gpu.mu held.
func (m *Manager) evictAhead(ctx context.Context, st *modelState) (uint64, bool) {
	expect := m.gpu.expected(st.id)
	for {
		used, total, err := m.gpu.usage()
		if err != nil {
			m.log.Warn().Err(err).Msg("reading GPU memory failed; loading without evicting ahead")
			return 0, false
		}
		if !m.gpu.over(used+expect, total) || ctx.Err() != nil {
			return used, true
		}
		m.mu.Lock()
		_, victim, ok := m.idle.oldest()
		if !ok {
			m.mu.Unlock()
			return used, true // nothing idle: the container decides (507)
		}
		t := m.beginUnloadLocked(victim, true)
		m.mu.Unlock()
		m.log.Info().Str("event", "model_evicted").Str("model", victim.target).Str("for", st.target).Uint64("gpu_used_bytes", used).
			Uint64("gpu_total_bytes", total).Uint64("gpu_expected_bytes", expect).
			Msgf("evicting model %s (least recently used) to make GPU memory for %s", victim.target, st.target)
		if err := m.finishUnload(t); err != nil {
			m.log.Warn().Err(err).Msg("unloading ahead of a GPU load failed")
			return used, true
		}
	}
}
