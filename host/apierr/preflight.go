package apierr

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mce-run/mce/containers"
)

// PreflightReason is the FailureReason for problems found before anything
// started, at most limit bytes. Problems of one container follow its name
// once: `(1) container "a" (variant "v"): … (2) …`. Every problem has its
// fix when all fit; otherwise the room is shared fairly (shortest first,
// so what a short item leaves goes to the longer ones): an item that does
// not fit its share loses its fix, then is cut, and a last sentence points
// at the log, which has every problem in full.
func PreflightReason(prefix string, problems []containers.Problem, limit int) string {
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
		return RedactPaths(b.String())
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
				items[i] = Truncate(items[i], max(share-len("…"), 0)) + "…"
			}
		}
		room -= len(items[i])
	}
	return Truncate(head+strings.Join(items, "")+tail, limit)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
