package host

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
)

// EndpointInfo is a snapshot of an endpoint for listings.
type EndpointInfo struct {
	Name          string      `json:"EndpointName"`
	Status        spec.Status `json:"EndpointStatus"`
	FailureReason string      `json:"FailureReason,omitempty"`
	Mode          string      `json:"Mode"`
	Variants      int         `json:"Variants"`
}

// named is what byName holds: a pointer whose name it is kept under.
type named interface {
	comparable
	registryName() string
}

// byName holds endpoints or inference components by lower-cased name,
// safe for concurrent use.
type byName[T named] struct {
	mu sync.RWMutex
	m  map[string]T
}

// get returns the one named name (case-insensitively), or the zero T.
func (r *byName[T]) get(name string) T {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.m[strings.ToLower(name)]
}

// add adds v unless its name is taken.
func (r *byName[T]) add(v T) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]T{}
	}
	k := strings.ToLower(v.registryName())
	if _, ok := r.m[k]; ok {
		return false
	}
	r.m[k] = v
	return true
}

// remove removes v, if it is still the one under its name.
func (r *byName[T]) remove(v T) {
	k := strings.ToLower(v.registryName())
	r.mu.Lock()
	if r.m[k] == v {
		delete(r.m, k)
	}
	r.mu.Unlock()
}

// all lists them by name.
func (r *byName[T]) all() []T {
	r.mu.RLock()
	out := make([]T, 0, len(r.m))
	for _, v := range r.m {
		out = append(out, v)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].registryName() < out[j].registryName() })
	return out
}

// registry holds the endpoints.
type registry = byName[*Endpoint]

func (e *Endpoint) registryName() string { return e.name }

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
		case spec.StatusInService:
			return nil
		case spec.StatusFailed:
			return fmt.Errorf("endpoint %q failed: %s", name, e.record().FailureReason)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func planContainers(p containers.EndpointPlan) int {
	n := 0
	for _, v := range p.Variants {
		n += v.InstanceCount * len(v.Containers)
	}
	return n
}

// containersInUse counts the containers that count against
// Config.MaxContainers: every endpoint's that has not failed, and every
// inference component copy placed (launching or running), each one
// container. except's own are left out.
func (s *Server) containersInUse(except *Endpoint) int {
	used := 0
	for _, e := range s.reg.all() {
		if e != except && e.Status() != spec.StatusFailed {
			used += planContainers(e.record().Plan)
		}
	}
	return used + s.ics.PlacedCopies()
}

// containerRoom is how many more containers Config.MaxContainers allows;
// ok is false when there is no limit.
func (s *Server) containerRoom() (room int, ok bool) {
	if s.cfg.MaxContainers <= 0 {
		return 0, false
	}
	return s.cfg.MaxContainers - s.containersInUse(nil), true
}

// checkCapacity enforces Config.MaxContainers across all endpoints and
// inference component copies: delta more containers are refused with
// SageMaker's ResourceLimitExceeded when they would pass it.
func (s *Server) checkCapacity(delta int, except *Endpoint) error {
	if s.cfg.MaxContainers <= 0 || delta <= 0 {
		return nil
	}
	used := s.containersInUse(except)
	if used+delta > s.cfg.MaxContainers {
		return &apierr.Error{Status: 400, Code: "ResourceLimitExceeded", Message: fmt.Sprintf(
			"The account-level service limit 'total containers across all endpoints' is %d Containers, with current utilization of %d Containers and a request delta of %d Containers. Start mce with a higher --max-containers to raise it.",
			s.cfg.MaxContainers, used, delta)}
	}
	return nil
}
