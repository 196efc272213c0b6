package mme

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/rs/zerolog"
)

// DefaultSummaryInterval is how often a Manager logs what it did (issue
// 18): per-model events are debug lines, the summary an info line.
const DefaultSummaryInterval = time.Minute

// activity counts what a Manager did since its last summary.
type activity struct {
	loads, loadFailures, unloads, evictions, load507s, leakyUnloads atomic.Int64
	forgotten                                                       atomic.Int64 // models the container lost (see NotLoaded)
}

// firsts remembers which conditions were logged once at info or warn.
type firsts struct {
	mu   sync.Mutex
	seen map[string]bool
}

// first reports whether kind is new; it remembers at most 64 kinds.
func (f *firsts) first(kind string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = make(map[string]bool)
	}
	if f.seen[kind] || len(f.seen) >= 64 {
		return false
	}
	f.seen[kind] = true
	return true
}

// failureKind names the kind of a load failure for the first-of-a-kind log.
func failureKind(err error) string {
	var le *LoadError
	switch {
	case errors.As(err, &le):
		return "status " + strconv.Itoa(le.Status)
	case errors.Is(err, ErrNoMemory):
		return "no memory"
	default:
		var ue *UnloadError
		if errors.As(err, &ue) {
			return "unload failed"
		}
	}
	return "other"
}

// summarize logs the activity of the last interval, at info, until Close.
func (m *Manager) summarize() {
	defer m.wg.Done()
	tick := time.NewTicker(m.o.SummaryInterval)
	defer tick.Stop()
	for {
		select {
		case <-m.life.Done():
			m.logSummary(m.o.SummaryInterval)
			return
		case <-tick.C:
			m.logSummary(m.o.SummaryInterval)
		}
	}
}

// logSummary writes one info line when anything happened since the last.
func (m *Manager) logSummary(interval time.Duration) {
	a := &m.act
	loads, fails, unloads := a.loads.Swap(0), a.loadFailures.Swap(0), a.unloads.Swap(0)
	evictions, full, leaky := a.evictions.Swap(0), a.load507s.Swap(0), a.leakyUnloads.Swap(0)
	forgotten := a.forgotten.Swap(0)
	if loads+fails+unloads+evictions+full+leaky+forgotten == 0 {
		return
	}
	m.mu.Lock()
	n := m.nLoaded
	m.mu.Unlock()
	ev := m.log.Info().Str("event", "models_summary").Dur("interval_ms", interval).
		Int64("loads", loads).Int64("load_failures", fails).Int64("unloads", unloads).
		Int64("evictions", evictions).Int64("load_507s", full).Int64("forgotten", forgotten).Int("loaded", n)
	if r, ok := m.GPUMemory(); ok {
		ev = ev.Int64("leaky_unloads", leaky).Uint64("gpu_unreleased_bytes", r.Unreleased)
	}
	ev.Msgf("models in the last %s: %d loaded, %d load failures, %d unloaded (%d evicted to make room), %d loads answered 507, %d forgotten by the container; %d loaded now",
		roundDuration(interval), loads, fails, unloads, evictions, full, forgotten, n)
}

// GPUReport is what a Manager knows of its container's GPU memory.
type GPUReport struct {
	// Used is the container's GPU memory at the last reading (taken around
	// each load and unload): its own processes' where NVML lists them
	// (PerContainer), else its GPUs' used memory, every process's. Total is
	// its GPUs' memory. Both are zero before the first reading.
	Used, Total  uint64
	PerContainer bool
	// Unreleased is GPU memory the container still holds after unloads
	// that freed less than half of what their models' loads took, less
	// what later loads took back from it.
	Unreleased uint64
	// LeakyUnloads counts those unloads since the container (re)started.
	LeakyUnloads int64
	// RestartRequested: the Manager asked the engine to restart the
	// container (ManagerOptions.RestartOnLeak) and it has not restarted yet.
	RestartRequested bool
}

// GPUMemory reports the container's GPU memory as the Manager measured it;
// false when it has no GPU accounting (ManagerOptions.GPU unset). It does
// not read the GPU.
func (m *Manager) GPUMemory() (GPUReport, bool) {
	if !m.gpu.enabled() {
		return GPUReport{}, false
	}
	r := GPUReport{Unreleased: m.gpu.unreleased.Load(), LeakyUnloads: m.gpu.leakyUnloads.Load(),
		RestartRequested: m.restartAsked.Load()}
	if last := m.gpu.last.Load(); last != nil {
		r.Used, r.Total, r.PerContainer = last.own, last.total, last.perContainer
	}
	return r, true
}

// leaked handles an unload of target that freed less than half of its
// model's footprint: one warning per container naming the image, and a
// restart when RestartOnLeak says so.
func (m *Manager) leaked(target string, freed uint64) {
	m.act.leakyUnloads.Add(1)
	held := m.gpu.unreleased.Load()
	if m.first.first("leak") {
		m.log.Warn().Str("event", "gpu_memory_unreleased").Str("image", m.o.Image).Str("model", target).
			Uint64("freed_bytes", freed).Uint64("unreleased_bytes", held).
			Msgf("unloading model %s freed %s of GPU memory, less than half of what its load took: the server in image %q keeps GPU memory after unloads "+
				"(PyTorch frees it only with torch.cuda.empty_cache(); Triton has known leaks). mce now evicts at most what a load needs and reports the memory held "+
				"(mce_mme_gpu_memory_unreleased_bytes)%s",
				target, humanize.IBytes(freed), m.o.Image, restartHint(m.o.RestartOnLeak))
	} else {
		m.log.Debug().Str("event", "gpu_memory_unreleased").Str("model", target).Uint64("freed_bytes", freed).
			Uint64("unreleased_bytes", held).Msg("an unload freed less than half of its model's GPU memory")
	}
	m.maybeRestart(held)
}

func restartHint(share float64) string {
	if share > 0 {
		return fmt.Sprintf("; the container is restarted when the memory held passes %g of its GPUs' memory", share)
	}
	return "; --mme-restart-on-leak restarts such a container when the memory held passes a share of its GPUs' memory"
}

// maybeRestart asks the engine, once per container start, to restart the
// container when the memory it holds passes RestartOnLeak of its GPUs'.
func (m *Manager) maybeRestart(held uint64) {
	if m.o.RestartOnLeak <= 0 || m.o.Restart == nil {
		return
	}
	last := m.gpu.last.Load()
	if last == nil || last.total == 0 || float64(held) <= m.o.RestartOnLeak*float64(last.total) {
		return
	}
	if !m.restartAsked.CompareAndSwap(false, true) {
		return
	}
	reason := fmt.Sprintf("it holds %s of GPU memory that unloads did not free, over %g of its GPUs' %s (--mme-restart-on-leak)",
		humanize.IBytes(held), m.o.RestartOnLeak, humanize.IBytes(last.total))
	m.log.Warn().Str("event", "container_restart_on_leak").Str("image", m.o.Image).Uint64("unreleased_bytes", held).
		Uint64("gpu_total_bytes", last.total).Msg("restarting the multi-model container: " + reason + "; its models load again on demand")
	m.o.Restart(reason)
}

// logEvent gives first's event the first time kind is seen, else a debug one.
func (m *Manager) logEvent(kind string, first func() *zerolog.Event) *zerolog.Event {
	if m.first.first(kind) {
		return first()
	}
	return m.log.Debug()
}
