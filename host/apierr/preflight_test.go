package apierr

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mce-run/mce/containers"
)

func TestPreflightReason(t *testing.T) {
	small := func(i int) containers.Problem {
		return containers.Problem{Variant: "v", Container: fmt.Sprintf("c%d", i), What: fmt.Sprintf("problem %d", i), Fix: fmt.Sprintf("fix %d", i)}
	}
	t.Run("all fit", func(t *testing.T) {
		got := PreflightReason("", []containers.Problem{small(1), small(2)}, 1024)
		want := `The pre-flight found 2 problems; no container was started. (1) container "c1" (variant "v"): problem 1 — fix 1. (2) container "c2" (variant "v"): problem 2 — fix 2.`
		if got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
	t.Run("many", func(t *testing.T) {
		var ps []containers.Problem
		for i := 1; i <= 40; i++ {
			ps = append(ps, small(i))
		}
		got := PreflightReason("Update to endpoint configuration c failed: ", ps, 1024)
		if len(got) > 1024 {
			t.Errorf("%d bytes, over 1024", len(got))
		}
		for _, want := range []string{"Update to endpoint configuration c failed: The pre-flight found 40 problems", "(1) ", "(40) ", "mce's log"} {
			if !strings.Contains(got, want) {
				t.Errorf("lacks %q: %s", want, got)
			}
		}
	})
	t.Run("one long", func(t *testing.T) {
		long := containers.Problem{Variant: "v", Container: "big", What: strings.Repeat("w", 600), Fix: strings.Repeat("f", 600)}
		got := PreflightReason("", []containers.Problem{small(1), long, small(3)}, 1024)
		if len(got) > 1024 {
			t.Errorf("%d bytes, over 1024", len(got))
		}
		// The short problems keep their fixes; the long one keeps its
		// headline, without its fix.
		for _, want := range []string{"problem 1 — fix 1.", "problem 3 — fix 3.", `(2) container "big" (variant "v"): www`, "mce's log"} {
			if !strings.Contains(got, want) {
				t.Errorf("lacks %q: %s", want, got)
			}
		}
		if strings.Contains(got, "fff") {
			t.Errorf("the long problem's fix should have been left out: %s", got)
		}
	})
	t.Run("one container named once", func(t *testing.T) {
		p := []containers.Problem{small(1), small(1), {What: "about several"}}
		got := PreflightReason("", p, 1024)
		want := `The pre-flight found 3 problems; no container was started. (1) container "c1" (variant "v"): problem 1 — fix 1. (2) problem 1 — fix 1. (3) about several.`
		if got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
	t.Run("host paths", func(t *testing.T) {
		got := PreflightReason("", []containers.Problem{{What: `model data "file:///srv/models/m.tar.gz" not found`}}, 1024)
		if strings.Contains(got, "/srv/models") {
			t.Errorf("a host path reached the FailureReason: %s", got)
		}
	})
}
