package host

import (
	"context"
	"errors"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/pipeline"
)

// An endpoint that hosts inference components launches nothing of its own:
// its components launch their copies (components.go).

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
