package host

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mce-run/mce/host/spec"
)

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
	m  map[string]*Endpoint // by lower-cased name
}

func (r *registry) get(name string) *Endpoint {
	r.mu.RLock()
	e := r.m[strings.ToLower(name)]
	r.mu.RUnlock()
	return e
}

func (r *registry) add(e *Endpoint) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]*Endpoint{}
	}
	k := strings.ToLower(e.name)
	if _, ok := r.m[k]; ok {
		return false
	}
	r.m[k] = e
	return true
}

func (r *registry) remove(e *Endpoint) {
	r.mu.Lock()
	if r.m[strings.ToLower(e.name)] == e {
		delete(r.m, strings.ToLower(e.name))
	}
	r.mu.Unlock()
}

func (r *registry) all() []*Endpoint {
	r.mu.RLock()
	out := make([]*Endpoint, 0, len(r.m))
	for _, e := range r.m {
		out = append(out, e)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// Endpoints lists the endpoints with their status.
func (s *Server) Endpoints() []EndpointInfo {
	var out []EndpointInfo
	for _, e := range s.reg.all() {
		rec := e.record()
		status, reason := e.shown(rec)
		out = append(out, EndpointInfo{Name: e.name, Status: status, FailureReason: reason,
			Mode: endpointMode(rec, e.multiModel.Load()), Variants: len(rec.Plan.Variants)})
	}
	return out
}

// WaitEndpoint waits until the endpoint is InService (nil) or Failed or gone
// (an error saying why).
func (s *Server) WaitEndpoint(ctx context.Context, name string) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		e := s.reg.get(name)
		if e == nil {
			return fmt.Errorf("endpoint %q does not exist", name)
		}
		switch e.Status() {
		case StatusInService:
			return nil
		case StatusFailed:
			return fmt.Errorf("endpoint %q failed: %s", name, e.record().FailureReason)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func planContainers(p spec.EndpointPlan) int {
	n := 0
	for _, v := range p.Variants {
		n += v.InstanceCount * len(v.Containers)
	}
	return n
}

// checkCapacity enforces Config.MaxContainers across all endpoints.
func (s *Server) checkCapacity(delta int, except *Endpoint) error {
	if s.cfg.MaxContainers <= 0 {
		return nil
	}
	used := 0
	for _, e := range s.reg.all() {
		if e != except && e.Status() != StatusFailed {
			used += planContainers(e.record().Plan)
		}
	}
	if used+delta > s.cfg.MaxContainers {
		return &APIError{Status: 400, Code: "ResourceLimitExceeded", Message: fmt.Sprintf(
			"The account-level service limit 'total containers across all endpoints' is %d Containers, with current utilization of %d Containers and a request delta of %d Containers. Start mce with a higher --max-containers to raise it.",
			s.cfg.MaxContainers, used, delta)}
	}
	return nil
}
