package kubernetes

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/containers/mme/agent"
	"github.com/mce-run/mce/pipeline"
)

// MultiModelOptions configure the multi-model managers of the engine: the
// loads mce asks of MultiModel containers. Zero values are mme's defaults.
// The disk capacity of a pod's cache is ManifestOptions.MultiModelDiskCapacity
// (it is the agent's flag, part of the pod).
type MultiModelOptions struct {
	LoadTimeout time.Duration // a load slower than this answers NotReady while it carries on (default 60 s)
	IdleTTL     time.Duration // unload models nobody called for this long (0: never)
}

// ErrNoPod is what a multi-model call gets while its copy has no Ready pod.
var ErrNoPod = errors.New("no Ready pod runs this instance now")

// podModels is the model manager of one pod's MultiModel container and the
// client of the pod's agent it loads from. Made when the pod is first bound
// to a slot, kept while the pod runs (a pod that is briefly not Ready keeps
// what it loaded), closed when it is gone.
type podModels struct {
	uid      types.UID
	mgr      *mme.Manager
	store    *agent.Client
	restarts int // of the model container and the agent, when last seen (guarded by Launched.mu)
}

func (pm *podModels) close() {
	pm.mgr.Close()   // cancels loads; gives back references (sent by the store, which closes next)
	pm.store.Close() // cancels those: the pod is going or gone
}

// SetMultiModelObserver implements containers.MultiModelObservable: managers made
// from now on report to fn's observers.
func (e *Engine) SetMultiModelObserver(fn func(endpoint, variant, container string) mme.Observer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.observer = fn
}

func (e *Engine) multiModelObserver(endpoint, variant, container string) mme.Observer {
	e.mu.Lock()
	fn := e.observer
	e.mu.Unlock()
	if fn == nil {
		return nil
	}
	return fn(endpoint, variant, container)
}

var _ containers.MultiModelObservable = (*Engine)(nil)

// bindModels gives slot s the model manager of the pod it is bound to: a
// new one (and a reset of the pod's agent) for a pod seen first, none
// without a pod, and a Reset when the model container or the agent
// restarted. Called with l.mu held; nothing here blocks.
func (l *Launched) bindModels(vc *variantCopies, s *slot) {
	if vc.multiModel < 0 {
		return
	}
	p := s.pod.Load()
	if p == nil {
		s.models.Store(nil)
		return
	}
	restarts := p.agentRestarts
	if vc.multiModel < len(p.restarts) {
		restarts += p.restarts[vc.multiModel]
	}
	pm := vc.models[p.uid]
	switch {
	case pm == nil:
		var err error
		if pm, err = l.newPodModels(vc, p, restarts); err != nil {
			l.e.log.Error().Err(err).Str("endpoint", l.plan.Name).Str("pod", p.name).Msg("no model manager for a multi-model pod")
			s.models.Store(nil)
			return
		}
		vc.models[p.uid] = pm
	case restarts != pm.restarts:
		pm.restarts = restarts
		pm.mgr.Reset() // what the container had loaded is gone, or the agent's references are
	}
	s.models.Store(pm)
}

// dropModels closes the managers of the variant's pods that are gone (alive
// says which run). Called with l.mu held.
func (vc *variantCopies) dropModels(alive func(types.UID) bool) {
	for uid, pm := range vc.models {
		if !alive(uid) {
			delete(vc.models, uid)
			go pm.close()
		}
	}
}

func (l *Launched) newPodModels(vc *variantCopies, p *podState, restarts int) (*podModels, error) {
	cp := vc.plan.Containers[vc.multiModel]
	log := l.e.log.With().Str("pod", p.name).Logger()
	obs := l.e.multiModelObserver(l.plan.Name, vc.plan.Name, cp.Hostname)
	agentURL := "http://" + net.JoinHostPort(p.ip, strconv.Itoa(agent.Port))
	store, err := agent.NewClient(agent.ClientOptions{BaseURL: func() string { return agentURL }, HTTP: l.e.podHTTP,
		ResetFirst: true, Observer: obs, Logger: log.With().Str("component", "mme-agent-client").Logger()})
	if err != nil {
		return nil, err
	}
	base := "http://" + net.JoinHostPort(p.ip, strconv.Itoa(vc.multiModelPort))
	mo := l.e.opts.MultiModel
	mgr, err := mme.NewManager(mme.ManagerOptions{
		Store: store, BaseURL: func() string { return base }, Client: l.e.podHTTP,
		LoadTimeout: mo.LoadTimeout, IdleTTL: mo.IdleTTL, CacheDisabled: cp.ModelCacheSetting == "Disabled",
		Observer: obs, Logger: log, Endpoint: l.plan.Name, Variant: vc.plan.Name, Container: cp.Hostname,
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	// Give back what an earlier mce (or an earlier binding) held, and learn
	// the cache's usage, before the first call needs it; an acquire waits
	// for this.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), agent.DefaultTimeout)
		defer cancel()
		if err := store.Attach(ctx); err != nil && !errors.Is(err, mme.ErrClosed) {
			log.Debug().Err(err).Msg("resetting the pod's model cache agent failed; the first call tries again")
		}
	}()
	return &podModels{uid: p.uid, mgr: mgr, store: store, restarts: restarts}, nil
}

// defaultPodHTTP is the client of calls to pods (agents, loads, unloads):
// every call is bounded by a context.
func defaultPodHTTP() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}}
}

// multiModelContainer is a copy's MultiModel container: the pipeline loads
// target models through its pod's manager (pipeline.MultiModel) and the
// status page shows them (containers.MultiModelDetail).
type multiModelContainer struct{ *Container }

var (
	_ pipeline.MultiModel         = multiModelContainer{}
	_ containers.MultiModelDetail = multiModelContainer{}
)

// Acquire implements pipeline.MultiModel.
func (m multiModelContainer) Acquire(ctx context.Context, target string) (pipeline.Lease, error) {
	pm := m.slot.models.Load()
	if pm == nil {
		return nil, ErrNoPod
	}
	l, err := pm.mgr.Acquire(ctx, target)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// LoadedModels implements containers.MultiModelDetail.
func (m multiModelContainer) LoadedModels() []string {
	if pm := m.slot.models.Load(); pm != nil {
		return pm.mgr.Loaded()
	}
	return nil
}

// CacheUsage implements containers.MultiModelDetail: the pod's cache, as its
// agent last reported it.
func (m multiModelContainer) CacheUsage() (int64, int) {
	if pm := m.slot.models.Load(); pm != nil {
		return pm.mgr.CacheUsage()
	}
	return 0, 0
}
