package host

import (
	"context"
	"errors"
	"github.com/mce-run/mce/host/deploy"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/components"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// host's side of inference components: an endpoint that hosts them
// launches nothing of its own (its components launch their copies), and
// the Manager (host/components) is built here from the little of the
// Server it needs.

// launchPlan launches an endpoint's generation: nothing for an endpoint
// that hosts inference components (its components launch their copies).
func (s *Server) launchPlan(ctx context.Context, plan containers.EndpointPlan, gen int) (containers.Launched, error) {
	if plan.HostsComponents() {
		return noContainers{}, nil
	}
	return s.cfg.Backend.Launch(ctx, plan, gen)
}

// adoptPlan is Backend.Adopt, or nothing to adopt for an endpoint that
// hosts inference components.
func (s *Server) adoptPlan(ctx context.Context, plan containers.EndpointPlan, gen int) (containers.Launched, error) {
	if plan.HostsComponents() {
		return noContainers{}, nil
	}
	return s.cfg.Backend.Adopt(ctx, plan, gen)
}

// noContainers is the Launched of an endpoint that hosts inference
// components: it runs nothing itself.
type noContainers struct{}

func (noContainers) Copies(string) [][]pipeline.Container { return nil }
func (noContainers) Scale(context.Context, string, int) error {
	return errors.New("an endpoint for inference components has no copies of its own: scale its inference components")
}
func (noContainers) Close(context.Context) error { return nil }

// newComponents builds the Manager of s's inference components from the
// little of s it needs: the engine, the store, the endpoints and models by
// name, the model-data check and the container limit.
func newComponents(s *Server) *components.Manager {
	var checkModelData func(url, baseDir string) error
	if s.cfg.ModelData != nil {
		checkModelData = s.cfg.ModelData.CheckModelDataURL
	}
	return components.NewManager(components.Options{
		Engine: s.cfg.Backend,
		Store:  s.store,
		Endpoint: func(name string) components.HostEndpoint {
			if e := s.reg.get(name); e != nil {
				return componentHost{s: s, e: e}
			}
			return nil
		},
		Model: func(name string) (spec.CreateModelInput, string, error) {
			rec, err := s.getModel(name)
			return rec.Input, rec.BaseDir, err
		},
		CheckModelData:   checkModelData,
		Region:           s.cfg.Region,
		Account:          s.cfg.Account,
		ContainerTimeout: s.cfg.ContainerTimeout,
		ContainerRoom: func() (int, int, bool) {
			room, ok := s.containerRoom()
			return room, s.cfg.MaxContainers, ok
		},
		CheckContainers: func(delta int) error { return s.checkCapacity(delta, nil) },
		NoCapacity:      s.metrics.ObserveNoCapacity,
		Clock:           s.cfg.Clock,
		Alarms:          deploy.CloudWatch(s.cfg.CloudWatch),
		Background:      s.bg,
		Logger:          s.log,
	})
}

// componentHost is an endpoint as the Manager sees it (HostEndpoint).
type componentHost struct {
	s *Server
	e *Endpoint
}

func (h componentHost) State() components.EndpointState {
	r := h.e.record()
	return components.EndpointState{Name: r.Name, ARN: r.ARN, ConfigName: r.ConfigName, Status: r.Status, Plan: r.Plan}
}

func (h componentHost) Deleting() bool { return h.e.deleting.Load() }

// UnlessDeleting runs f under e.mu unless e is being deleted or is no
// longer the endpoint of its name: deleteEndpointIf sets deleting under
// e.mu before finishDelete collects the endpoint's components.
func (h componentHost) UnlessDeleting(f func() error) (bool, error) {
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deleting.Load() || h.s.reg.get(e.name) != e {
		return false, nil
	}
	return true, f()
}
