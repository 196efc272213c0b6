package host

import (
	"context"
	"slices"
	"time"

	"github.com/mce-run/mce/containers"
)

// Preflight checks a plan as CreateEndpoint and UpdateEndpoint do before
// they launch it; nil when the backend has no pre-flight or found nothing.
func (s *Server) Preflight(ctx context.Context, plan containers.EndpointPlan) []containers.Problem {
	pf, ok := s.cfg.Backend.(containers.Preflighter)
	if !ok {
		return nil
	}
	return pf.Preflight(ctx, plan)
}

// preflight runs the backend's pre-flight for a launch and logs every
// problem at error level, one entry each.
func (s *Server) preflight(ctx context.Context, e *Endpoint, plan containers.EndpointPlan) []containers.Problem {
	if plan.HostsComponents() && !slices.ContainsFunc(plan.Variants, func(v containers.VariantPlan) bool { return len(v.Partitions) > 0 }) {
		return nil // runs no container of its own, and needs no partition
	}
	start := time.Now()
	problems := s.Preflight(ctx, plan)
	log := s.log.With().Str("endpoint", e.name).Logger()
	for i, p := range problems {
		log.Error().Int("problem", i+1).Int("problems", len(problems)).Str("variant", p.Variant).Str("container", p.Container).
			Str("what", p.What).Str("fix", p.Fix).Msg("pre-flight problem")
	}
	log.Debug().Dur("took_ms", time.Since(start)).Int("problems", len(problems)).Msg("pre-flight done")
	return problems
}
