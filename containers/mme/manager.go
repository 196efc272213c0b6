package mme

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/singleflight"
)

// Defaults of [ManagerOptions].
const (
	// DefaultLoadTimeout: SageMaker answers InvokeEndpoint within 60 s and
	// returns ModelNotReadyException when the load is not done (https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html).
	DefaultLoadTimeout = 60 * time.Second
	// DefaultBackgroundLoadTimeout: "loading continues for up to 360 seconds".
	DefaultBackgroundLoadTimeout = 360 * time.Second
	// DefaultUnloadTimeout: SageMaker waits at most 360 s for an unload.
	DefaultUnloadTimeout = 360 * time.Second
	// DefaultEvictWait bounds the wait for a busy model to become idle when
	// memory must be freed.
	DefaultEvictWait = 10 * time.Second
	// DefaultGPUThreshold is the share of GPU memory loads may fill.
	DefaultGPUThreshold = 0.9
)

// ManagerOptions configure a [Manager]; zero values take the documented
// defaults.
type ManagerOptions struct {
	// Store holds the model files: a local [*Cache] shared by the variant's
	// copies, or a remote one in the container's pod. Required.
	Store Store
	// BaseURL returns the container's base URL ("http://172.18.0.5:8080"),
	// read on every call so that a restarted container's new address is
	// used. Required.
	BaseURL func() string
	// Client sends load and unload calls. Nil means a dedicated client with
	// keep-alives; every call is bounded by a context.
	Client *http.Client
	// LoadTimeout is how long Acquire waits for a download and load before
	// it returns *NotReadyError; the load carries on. Default 60 s.
	LoadTimeout time.Duration
	// BackgroundLoadTimeout bounds one download plus load, detached from
	// the callers' contexts. Default 360 s.
	BackgroundLoadTimeout time.Duration
	// UnloadTimeout bounds one unload call. Default 360 s.
	UnloadTimeout time.Duration
	// EvictWait is how long a load answered 507, or OutOfMemory, waits for
	// a busy loaded model to become idle before it gives ErrNoMemory.
	// Default 10 s.
	EvictWait time.Duration
	// CacheDisabled unloads a model and deletes its files right after its
	// last lease is released (SageMaker's ModelCacheSetting Disabled). A
	// model whose load finished after every caller got NotReadyError stays
	// loaded until its next call ends.
	CacheDisabled bool
	// IdleTTL unloads models that had no call for this long; 0 means never.
	// Their files stay cached.
	IdleTTL time.Duration
	// GPU reads the memory of the container's GPUs; nil means no GPU
	// accounting (507 answers are still handled).
	GPU GPUMemory
	// GPUIndexes are the container's GPUs, as GPU indexes them; required
	// with GPU. Their used and total memory are summed.
	GPUIndexes []int
	// GPUThreshold is the share of GPU memory that loads may fill, in
	// (0, 1]. Default 0.9.
	GPUThreshold float64
	// RestartOnLeak, in (0, 1], restarts the container (through Restart)
	// when the GPU memory it still holds after unloads (see
	// [GPUReport].Unreleased) passes this share of its GPUs' memory; its
	// models then load again on demand. 0, the default, never restarts.
	RestartOnLeak float64
	// Restart asks the engine to restart the container, giving the reason;
	// it must not block (the engine restarts in the background) and the
	// engine calls Reset once the container is back. Called at most once
	// per container start. Required with RestartOnLeak.
	Restart func(reason string)
	// SummaryInterval is how often the manager logs an info line counting
	// its loads, unloads, evictions and failures (only when there were
	// any); each load and unload is a debug line, and the first of each
	// kind of failure, the first 507 and the first leaky unload are info or
	// warn lines. Default 1 min; negative turns the summary off.
	SummaryInterval time.Duration
	// Observer receives the metrics. Nil means none.
	Observer Observer
	// Logger receives load and unload events; hot paths log at debug.
	Logger zerolog.Logger
	// Endpoint, Variant and Container name the container in logs; Image
	// names its image in the warning about GPU memory it keeps.
	Endpoint, Variant, Container, Image string
}

func (o *ManagerOptions) validate() error {
	if o.Store == nil {
		return errors.New("mme manager: Store is required")
	}
	if o.BaseURL == nil {
		return errors.New("mme manager: BaseURL is required")
	}
	for _, d := range []time.Duration{o.LoadTimeout, o.BackgroundLoadTimeout, o.UnloadTimeout, o.EvictWait, o.IdleTTL} {
		if d < 0 {
			return errors.New("mme manager: durations must not be negative")
		}
	}
	if o.GPUThreshold < 0 || o.GPUThreshold > 1 {
		return fmt.Errorf("mme manager: GPUThreshold %v must be in (0, 1]", o.GPUThreshold)
	}
	if o.GPU != nil && len(o.GPUIndexes) == 0 {
		return errors.New("mme manager: GPUIndexes must name the container's GPUs when GPU is set")
	}
	if o.RestartOnLeak < 0 || o.RestartOnLeak > 1 {
		return fmt.Errorf("mme manager: RestartOnLeak %v must be in [0, 1]", o.RestartOnLeak)
	}
	if o.RestartOnLeak > 0 && o.Restart == nil {
		return errors.New("mme manager: RestartOnLeak needs Restart")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.LoadTimeout, DefaultLoadTimeout)
	def(&o.BackgroundLoadTimeout, DefaultBackgroundLoadTimeout)
	def(&o.UnloadTimeout, DefaultUnloadTimeout)
	def(&o.EvictWait, DefaultEvictWait)
	def(&o.SummaryInterval, DefaultSummaryInterval)
	if o.GPUThreshold == 0 {
		o.GPUThreshold = DefaultGPUThreshold
	}
	if o.Client == nil {
		o.Client = newHTTPClient()
	}
	if o.Observer == nil {
		o.Observer = NopObserver{}
	}
	o.GPUIndexes = slices.Clone(o.GPUIndexes)
	return nil
}

// phase is where a model stands in the container.
type phase uint8

const (
	unloaded phase = iota
	loaded
	unloading
)

// modelState is one model of one container. id and target never change;
// the rest is guarded by Manager.mu.
type modelState struct {
	id, target string

	pins     int           // leases plus Acquire calls waiting for the load
	phase    phase         //
	loading  bool          // a load flight works on it
	unloaded chan struct{} // closed when the running unload call ends; nil when none
	files    Files         // the Store reference held while loaded
	loadNo   uint64        // counts the loads that succeeded: a lease knows which one it saw
	lastUsed time.Time     // last release (for IdleTTL)
}

// Manager keeps track of the models loaded in one multi-model container
// and loads, unloads and evicts them. It is safe for concurrent use.
type Manager struct {
	o     ManagerOptions
	store Store
	api   apiClient
	obs   Observer
	log   zerolog.Logger

	flights singleflight.Group
	life    context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup // flights, unloads in the background, the sweeper

	gpu          *gpuAccount
	act          activity    // counts for the periodic summary
	first        firsts      // conditions already logged once
	restartAsked atomic.Bool // RestartOnLeak asked for a restart not yet done

	mu         sync.Mutex
	models     map[string]*modelState    // by id: loaded, pinned or busy
	idle       *lru[string, *modelState] // loaded with no pins: the eviction order
	nLoaded    int                       // models in phase loaded
	nUnloading int                       // models in phase unloading
	nPosting   int                       // load calls in flight
	gen        uint64                    // bumped by Reset and Close
	freedSeq   uint64                    // bumped when memory nobody claimed is freed
	unloads    uint64                    // bumped by every unload that ended well
	changed    chan struct{}             // closed on idle or unload news, when waiting > 0
	waiting    int                       //
	closed     bool                      //
}

// NewManager validates o and returns a Manager for one running container.
// Close it when the container is gone.
func NewManager(o ManagerOptions) (*Manager, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	life, stop := context.WithCancel(context.Background())
	m := &Manager{
		o: o, store: o.Store, obs: o.Observer,
		api: apiClient{base: o.BaseURL, hc: o.Client},
		log: o.Logger.With().Str("endpoint", o.Endpoint).Str("variant", o.Variant).
			Str("container", o.Container).Logger(),
		life: life, stop: stop,
		gpu:    newGPUAccount(o.GPU, o.GPUIndexes, o.GPUThreshold),
		models: make(map[string]*modelState), idle: newLRU[string, *modelState](),
		changed: make(chan struct{}),
	}
	if o.IdleTTL > 0 {
		m.wg.Add(1)
		go m.sweep()
	}
	if o.SummaryInterval > 0 {
		m.wg.Add(1)
		go m.summarize()
	}
	return m, nil
}

// Lease is one request's hold on a loaded model: while any lease on a
// model is open, the model is not unloaded. A Lease belongs to the request
// that acquired it and is not for concurrent use, except Release, which is
// safe to call more than once and from any goroutine.
type Lease struct {
	m   *Manager
	st  *modelState
	seq uint64 // Manager.freedSeq when the lease was taken or OutOfMemory last ran
	// loadNo is modelState.loadNo when the lease was taken or NotLoaded
	// loaded the model again.
	loadNo uint64
	done   atomic.Bool
}

// ModelID is the model_name to invoke: POST {base}/models/{ModelID}/invoke.
func (l *Lease) ModelID() string { return l.st.id }

// TargetModel is the model's TargetModel, for the X-Amzn-SageMaker-Target-Model header.
func (l *Lease) TargetModel() string { return l.st.target }

// OutOfMemory reports a 507 answer to an invoke: it unloads another idle
// model (never the leased one), waiting up to EvictWait for a busy one to
// become idle, and returns nil so that the caller retries; or it returns an
// error matching ErrNoMemory when none is left. When memory was freed
// since the lease was taken (or since the previous OutOfMemory) by an idle
// or CacheDisabled unload or a Reset, it returns nil at once.
func (l *Lease) OutOfMemory(ctx context.Context) error {
	if l.done.Load() {
		return errors.New("mme: OutOfMemory on a released lease")
	}
	return l.m.makeRoom(ctx, l.st, &l.seq, nil)
}

// Release ends the request's hold on the model and marks it recently used.
func (l *Lease) Release() {
	if l.done.CompareAndSwap(false, true) {
		l.m.unpin(l.st)
	}
}

// Acquire returns a lease on targetModel loaded in the container,
// downloading and loading it first when needed. Concurrent first calls for
// one model share one download and one load. When that takes longer than
// LoadTimeout (or ctx's deadline) it returns *NotReadyError and the load
// carries on; a done ctx otherwise gives ctx.Err(). Other errors:
// ErrInvalidTargetModel, *ModelNotFoundError, *LoadError, ErrNoMemory, *UnloadError,
// artifact's unsafe, too-large and invalid archive errors, ErrClosed. The
// caller must Release the lease.
func (m *Manager) Acquire(ctx context.Context, targetModel string) (*Lease, error) {
	if err := ValidTargetModel(targetModel); err != nil {
		return nil, err
	}
	id := modelID(targetModel)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	st, ok := m.models[string(id[:])] // no allocation on a hit
	if !ok {
		st = m.stateLocked(string(id[:]), targetModel)
	}
	st.pins++
	if st.phase == loaded {
		m.idle.remove(st.id)
		seq, no := m.freedSeq, st.loadNo
		m.mu.Unlock()
		m.obs.ModelCacheHit(true)
		return &Lease{m: m, st: st, seq: seq, loadNo: no}, nil
	}
	m.mu.Unlock()
	m.obs.ModelCacheHit(false)

	start := time.Now()
	seq, no, err := m.waitLoad(ctx, st)
	m.obs.ModelLoadingWaitTime(time.Since(start))
	if err != nil {
		m.unpin(st)
		return nil, err
	}
	return &Lease{m: m, st: st, seq: seq, loadNo: no}, nil
}

// waitLoad joins (or starts) st's load flight and waits for it; it
// returns the unload count and st.loadNo once st is loaded. A flight that
// ended just before st was unloaded again is joined once more.
func (m *Manager) waitLoad(ctx context.Context, st *modelState) (uint64, uint64, error) {
	start := time.Now()
	timer := time.NewTimer(m.o.LoadTimeout)
	defer timer.Stop()
	for {
		ch := m.flights.DoChan(st.id, func() (any, error) { return nil, m.flight(st.id, st.target) })
		select {
		case r := <-ch:
			if r.Err != nil {
				return 0, 0, r.Err
			}
		case <-timer.C:
			return 0, 0, &NotReadyError{TargetModel: st.target, Waited: time.Since(start)}
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return 0, 0, &NotReadyError{TargetModel: st.target, Waited: time.Since(start), Err: ctx.Err()}
			}
			return 0, 0, ctx.Err()
		}
		m.mu.Lock()
		ph, closed, seq, no := st.phase, m.closed, m.freedSeq, st.loadNo
		m.mu.Unlock()
		switch {
		case closed:
			return 0, 0, ErrClosed
		case ph == loaded:
			return seq, no, nil
		}
	}
}

// stateLocked returns id's state, creating it.
func (m *Manager) stateLocked(id, target string) *modelState {
	st, ok := m.models[id]
	if !ok {
		st = &modelState{id: id, target: target}
		m.models[id] = st
	}
	return st
}

// forgetLocked drops a state that holds nothing.
func (m *Manager) forgetLocked(st *modelState) {
	if st.pins == 0 && st.phase == unloaded && !st.loading && st.unloaded == nil && m.models[st.id] == st {
		delete(m.models, st.id)
	}
}

// broadcastLocked wakes makeRoom waiters.
func (m *Manager) broadcastLocked() {
	if m.waiting > 0 {
		close(m.changed)
		m.changed = make(chan struct{})
	}
}

// unpin ends a lease or a failed wait.
func (m *Manager) unpin(st *modelState) {
	var t *unloadTicket
	m.mu.Lock()
	st.pins--
	if st.pins == 0 {
		if m.o.IdleTTL > 0 {
			st.lastUsed = time.Now()
		}
		switch {
		case m.closed:
		case st.phase == loaded && m.o.CacheDisabled:
			if m.enterLocked() {
				t = m.beginUnloadLocked(st, false)
			}
		case st.phase == loaded:
			m.idle.touch(st.id, st)
			m.broadcastLocked()
		default:
			m.forgetLocked(st)
		}
	}
	m.mu.Unlock()
	if t != nil {
		go func() {
			defer m.wg.Done()
			if err := m.finishUnload(t); err != nil {
				m.logEvent("unload failed", m.log.Warn).Err(err).Str("model", st.target).Msg("unloading a model after its last call failed")
			}
		}()
	}
}

// enterLocked registers a background goroutine unless the manager is closed.
func (m *Manager) enterLocked() bool {
	if m.closed {
		return false
	}
	m.wg.Add(1)
	return true
}

// Loaded returns the TargetModels loaded in the container, sorted.
func (m *Manager) Loaded() []string {
	m.mu.Lock()
	out := make([]string, 0, m.nLoaded)
	for _, st := range m.models {
		if st.phase == loaded {
			out = append(out, st.target)
		}
	}
	m.mu.Unlock()
	slices.Sort(out)
	return out
}

// CacheUsage returns the bytes and models of the file store this manager
// loads from (on Docker, shared with the variant's other copies).
func (m *Manager) CacheUsage() (bytes int64, models int) { return m.store.Usage() }

// Reset records that the container restarted: nothing is loaded any more.
// Files stay cached; loads in progress load again into the new container;
// open leases stay valid to release.
func (m *Manager) Reset() {
	m.mu.Lock()
	files := m.resetLocked()
	m.mu.Unlock()
	if m.gpu.enabled() {
		m.gpu.reset()
	}
	m.restartAsked.Store(false)
	for _, f := range files {
		m.store.Release(f, false)
	}
}

func (m *Manager) resetLocked() []Files {
	m.gen++
	var files []Files
	for _, st := range m.models {
		if st.phase != unloaded {
			st.phase = unloaded
			if st.files != nil {
				files = append(files, st.files)
				st.files = nil
			}
		}
		m.idle.remove(st.id)
		m.forgetLocked(st)
	}
	m.nLoaded, m.nUnloading = 0, 0
	m.freedSeq++
	m.broadcastLocked()
	m.obs.LoadedModelCount(0)
	return files
}

// Close stops background work (loads in progress are cancelled), waits for
// it, and gives back the Cache references of loaded models. It does not
// unload anything: the container is going away. Acquire then returns
// ErrClosed.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.broadcastLocked()
	m.mu.Unlock()
	m.stop()
	m.wg.Wait()
	m.Reset()
}
