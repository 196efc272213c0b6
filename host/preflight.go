package host

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
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
	if plan.HostsComponents() {
		return nil // runs no container of its own
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

// preflightReason is the FailureReason for problems found before anything
// started, at most limit bytes. Problems of one container follow its name
// once: `(1) container "a" (variant "v"): … (2) …`. Every problem has its
// fix when all fit; otherwise the room is shared fairly (shortest first,
// so what a short item leaves goes to the longer ones): an item that does
// not fit its share loses its fix, then is cut, and a last sentence points
// at the log, which has every problem in full.
func preflightReason(prefix string, problems []containers.Problem, limit int) string {
	head := fmt.Sprintf("%sThe pre-flight found %d problem%s; no container was started.", prefix, len(problems), plural(len(problems)))
	items := make([]string, len(problems))
	item := func(i int, withFix bool) string {
		p := problems[i]
		var b strings.Builder
		fmt.Fprintf(&b, " (%d)", i+1)
		if p.Container != "" && (i == 0 || problems[i-1].Container != p.Container || problems[i-1].Variant != p.Variant) {
			fmt.Fprintf(&b, " container %q (variant %q):", p.Container, p.Variant)
		}
		b.WriteString(" " + p.What)
		if withFix && p.Fix != "" {
			b.WriteString(" — " + p.Fix)
		}
		b.WriteString(".")
		return apierr.RedactPaths(b.String())
	}
	full := head
	for i := range problems {
		items[i] = item(i, true)
		full += items[i]
	}
	if len(full) <= limit {
		return full
	}
	const tail = " (Shortened to fit; every problem with what to do is in mce's log: \"pre-flight problem\".)"
	room := limit - len(head) - len(tail)
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(items[order[a]]) < len(items[order[b]]) })
	for n, i := range order {
		share := room / (len(order) - n)
		if len(items[i]) > share {
			items[i] = item(i, false)
			if len(items[i]) > share {
				items[i] = apierr.Truncate(items[i], max(share-len("…"), 0)) + "…"
			}
		}
		room -= len(items[i])
	}
	return apierr.Truncate(head+strings.Join(items, "")+tail, limit)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
