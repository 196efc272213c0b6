package pipeline

import (
	"context"
	"time"
)

// Drain waits until none of insts has a call outstanding, for at most
// within or until ctx is done: instances already out of their route finish
// the calls they took before they are stopped.
func Drain(ctx context.Context, insts []*Instance, within time.Duration) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		busy := false
		for _, in := range insts {
			if in.Outstanding() > 0 {
				busy = true
			}
		}
		if !busy {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
