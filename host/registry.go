package host

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// Status is an endpoint's lifecycle state, with SageMaker's names
// (contracts doc §2.4).
type Status string

const (
	StatusCreating  Status = "Creating"
	StatusInService Status = "InService"
	StatusFailed    Status = "Failed"
	StatusDeleting  Status = "Deleting"
)

// Endpoint is one endpoint known to the host. Its route is set once it is
// InService; the status is read on every invocation, so it is atomic.
type Endpoint struct {
	Name       string
	Plan       spec.EndpointPlan
	Created    time.Time
	multiModel bool

	status   atomic.Value // Status
	route    atomic.Pointer[pipeline.Route]
	mu       sync.Mutex
	failure  string
	launched Launched
}

// Status is the endpoint's current state.
func (e *Endpoint) Status() Status { return e.status.Load().(Status) }

// FailureReason says why a Failed endpoint failed.
func (e *Endpoint) FailureReason() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failure
}

// EndpointInfo is a snapshot of an endpoint for listings.
type EndpointInfo struct {
	Name          string `json:"EndpointName"`
	Status        Status `json:"EndpointStatus"`
	FailureReason string `json:"FailureReason,omitempty"`
	Mode          string `json:"Mode"`
	Variants      int    `json:"Variants"`
}

type registry struct {
	mu sync.RWMutex
	m  map[string]*Endpoint
}

func (r *registry) get(name string) *Endpoint {
	r.mu.RLock()
	e := r.m[name]
	r.mu.RUnlock()
	return e
}

// add registers a new endpoint in Creating, or fails if the name is taken.
func (r *registry) add(plan spec.EndpointPlan) (*Endpoint, error) {
	e := &Endpoint{Name: plan.Name, Plan: plan, Created: time.Now()}
	e.status.Store(StatusCreating)
	for _, v := range plan.Variants {
		for _, c := range v.Containers {
			if c.Mode == "MultiModel" {
				e.multiModel = true
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]*Endpoint{}
	}
	if _, ok := r.m[plan.Name]; ok {
		return nil, fmt.Errorf("endpoint %q already exists", plan.Name)
	}
	r.m[plan.Name] = e
	return e, nil
}

func (r *registry) remove(name string) {
	r.mu.Lock()
	delete(r.m, name)
	r.mu.Unlock()
}

func (r *registry) all() []*Endpoint {
	r.mu.RLock()
	out := make([]*Endpoint, 0, len(r.m))
	for _, e := range r.m {
		out = append(out, e)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Endpoints lists the endpoints with their status.
func (s *Server) Endpoints() []EndpointInfo {
	var out []EndpointInfo
	for _, e := range s.reg.all() {
		out = append(out, EndpointInfo{Name: e.Name, Status: e.Status(), FailureReason: e.FailureReason(),
			Mode: e.Plan.Mode, Variants: len(e.Plan.Variants)})
	}
	return out
}

// CreateEndpoint registers the endpoint as Creating and launches its
// containers in the background; it returns at once. The endpoint becomes
// InService when every container passes /ping, or Failed with the reason.
// done, if not nil, receives the launch's outcome.
func (s *Server) CreateEndpoint(plan spec.EndpointPlan, done func(error)) error {
	e, err := s.reg.add(plan)
	if err != nil {
		return err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := s.launch(e)
		if done != nil {
			done(err)
		}
	}()
	return nil
}

func (s *Server) launch(e *Endpoint) error {
	log := s.log.With().Str("endpoint", e.Name).Logger()
	log.Info().Str("mode", e.Plan.Mode).Int("variants", len(e.Plan.Variants)).Msg("creating endpoint")
	start := time.Now()
	l, err := s.cfg.Backend.Launch(s.ctx, e.Plan)
	if err != nil {
		e.mu.Lock()
		e.failure = err.Error()
		e.mu.Unlock()
		e.status.Store(StatusFailed)
		log.Error().Err(err).Msg("endpoint failed")
		return err
	}
	mode := pipeline.Serial
	if e.Plan.Mode == "Direct" {
		mode = pipeline.Direct
	}
	var vs []*pipeline.Variant
	for _, v := range e.Plan.Variants {
		var insts []*pipeline.Instance
		for _, cp := range l.Copies(v.Name) {
			insts = append(insts, pipeline.NewInstance(cp))
		}
		vs = append(vs, pipeline.NewVariant(v.Name, v.Weight, insts))
	}
	e.mu.Lock()
	if e.Status() == StatusDeleting { // deleted while it was starting
		e.mu.Unlock()
		return l.Close(context.WithoutCancel(s.ctx))
	}
	e.launched = l
	e.mu.Unlock()
	e.route.Store(pipeline.NewRoute(e.Name, mode, vs))
	e.status.Store(StatusInService)
	log.Info().Dur("took", time.Since(start)).Msg("endpoint InService")
	return nil
}

// DeleteEndpoint takes the endpoint out of service and removes its containers.
func (s *Server) DeleteEndpoint(ctx context.Context, name string) error {
	e := s.reg.get(name)
	if e == nil {
		return fmt.Errorf("endpoint %q not found", name)
	}
	e.mu.Lock()
	e.status.Store(StatusDeleting)
	e.route.Store(nil)
	l := e.launched
	e.launched = nil
	e.mu.Unlock()
	var err error
	if l != nil {
		err = l.Close(ctx)
	}
	s.reg.remove(name)
	s.log.Info().Str("endpoint", name).Msg("endpoint deleted")
	return err
}
