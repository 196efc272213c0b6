package testenv

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestTraffic: every call is counted as it ended, the first failures are
// kept in order, and after Stop no call starts.
func TestTraffic(t *testing.T) {
	var n atomic.Int64
	tr := StartTraffic(t, 3, func() error {
		if i := n.Add(1); i%4 == 0 {
			return errors.New("failure")
		}
		time.Sleep(time.Millisecond)
		return nil
	})
	for tr.Failed() < 7 {
		time.Sleep(time.Millisecond)
	}
	tr.Stop()
	tr.Stop() // a second Stop (the cleanup's) does nothing
	calls := tr.Calls()
	if calls != n.Load() || tr.OK()+tr.Failed() != calls || tr.OK() < 3*tr.Failed()-3 {
		t.Fatalf("ok %d + failed %d, %d calls made", tr.OK(), tr.Failed(), n.Load())
	}
	if errs := tr.Errors(); len(errs) != 5 {
		t.Fatalf("kept %d errors, want the first 5", len(errs))
	}
	if !strings.HasSuffix(tr.String(), "failed (first: failure)") {
		t.Fatalf("String() = %q", tr.String())
	}
	time.Sleep(5 * time.Millisecond)
	if n.Load() != calls {
		t.Fatalf("%d calls after Stop", n.Load()-calls)
	}
}
