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
		if errors.As(err, &nf) || errors.Is(err, ErrClosed) {
			m.log.Debug().Err(err).Str("model", target).Msg("model load failed")
			return err
		}
		m.act.loadFailures.Add(1)
		kind := failureKind(err)
		m.logEvent("load failure: "+kind, m.log.Warn).Err(err).Str("model", target).Str("kind", kind).
			Msg("model load failed (the first failure of this kind is a warning; later ones are counted in the summary)")
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
		seq, unloads := m.freedSeq, m.unloads
		m.mu.Unlock()
		status, msg, err := m.postLoad(ctx, st)
		// The load call leaves nPosting and, when it succeeded, enters
		// nLoaded in one critical section: a load answered 507 that looks
		// in between would otherwise count neither and give up with "no
		// other model is loaded" while the container holds this one (issue
		// 19.7). Loads answered 507 may be waiting for this outcome; 409
		// means the container has the model already.
		m.mu.Lock()
		m.nPosting--
		ok := err == nil && (status == http.StatusOK || status == http.StatusConflict)
		restarted := m.gen != gen
		var bytes int64
		if ok && !restarted {
			bytes = files.Size()
			st.phase, st.files, files = loaded, files, nil
			st.loadNo++
			st.lastUsed = time.Now()
			m.nLoaded++
			m.obs.LoadedModelCount(m.nLoaded)
			if st.pins == 0 { // every waiter gave up: it is idle
				m.idle.touch(st.id, st)
			}
		}
		m.broadcastLocked()
		m.mu.Unlock()
		if err != nil {
			return fmt.Errorf("loading model %q: %w", target, err)
		}
		switch status {
		case http.StatusOK, http.StatusConflict:
			if restarted { // the container restarted meanwhile: load it again
				continue
			}
			d := time.Since(start)
			m.obs.ModelLoadingTime(d)
			m.act.loads.Add(1)
			m.log.Debug().Str("event", "model_loaded").Str("model", target).Int("status", status).
				Int64("bytes", bytes).Dur("took_ms", d).Msg("model loaded")
			return nil
		case http.StatusInsufficientStorage:
			m.act.load507s.Add(1)
			m.logEvent("507", m.log.Info).Str("event", "container_out_of_memory").Str("model", target).
				Msg("the container answered 507 (out of memory) to a load; mce unloads the least recently used idle models to make room (the first time at info; later ones are counted in the summary)")
			if err := m.makeRoom(ctx, st, &seq, &unloads); err != nil {
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
		if after, err := m.gpu.read(); err == nil && after.perContainer == before.perContainer {
			m.gpu.loaded(st.id, before, after)
		}
	}
	return status, msg, err
}

// evictAhead unloads idle models, least recently used first, when the GPU
// memory in use plus st's expected footprint passes the threshold. It
// evicts only while the memory the unloads are expected to free is short
// of what the load needs, stops once NVML shows enough room, and stops
// after maxFutileUnloads unloads that freed (almost) nothing: a container
// that keeps memory after unloads then gets the load anyway, and its 507
// decides. It returns the memory read last, and false when it could not
// be read. Called with gpu.mu held.
func (m *Manager) evictAhead(ctx context.Context, st *modelState) (gpuReading, bool) {
	expect := m.gpu.expected(st.id)
	r, err := m.gpu.read()
	if err != nil {
		m.logEvent("gpu read failed", m.log.Warn).Err(err).Msg("reading GPU memory failed; loading without evicting ahead")
		return r, false
	}
	need := m.gpu.need(r, expect)
	var covered uint64
	futile := 0
	for need > covered && futile < maxFutileUnloads && ctx.Err() == nil {
		m.mu.Lock()
		_, victim, ok := m.idle.oldest()
		if !ok {
			m.mu.Unlock()
			break // nothing idle: the container decides (507)
		}
		t := m.beginUnloadLocked(victim, true)
		t.gpuHeld = true
		m.mu.Unlock()
		fp := m.gpu.expected(victim.id)
		m.log.Debug().Str("event", "model_evicted").Str("model", victim.target).Str("for", st.target).
			Uint64("gpu_used_bytes", r.device).Uint64("gpu_total_bytes", r.total).Uint64("gpu_expected_bytes", expect).
			Uint64("gpu_need_bytes", need).Msg("evicting the least recently used model to make GPU memory")
		if err := m.finishUnload(t); err != nil {
			m.logEvent("unload failed", m.log.Warn).Err(err).Msg("unloading ahead of a GPU load failed")
			break
		}
		if t.freed < max(fp/2, 1) {
			futile++
		}
		covered += max(fp, t.freed)
		if r2, err := m.gpu.read(); err == nil {
			r = r2
			if m.gpu.need(r, expect) == 0 {
				break
			}
		}
	}
	if futile >= maxFutileUnloads {
		m.log.Debug().Str("model", st.target).Int("futile_unloads", futile).
			Msg("unloads freed no GPU memory; loading anyway (the container's 507 decides)")
	}
	return r, true
}
