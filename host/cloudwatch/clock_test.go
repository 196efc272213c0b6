package cloudwatch

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/mce-run/mce/internal/awsclock"
)

// TestCompressedClock: with mce serve --time-compression 60, a one-minute
// alarm over two periods goes to ALARM within about two seconds of wall
// time on values observed now, and back to OK when they stop (missing
// data treated as not breaching): the store, the flusher and the evaluator
// all keep AWS time.
func TestCompressedClock(t *testing.T) {
	clock, err := awsclock.New(60)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(Options{Dir: filepath.Join(t.TempDir(), "cw"), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	putAlarm(t, s, "fast", 2, 2, "notBreaching")
	h := mustSeries(t, s, "AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard)
	start := time.Now()
	wait := func(want State, feed bool) time.Duration {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for stateOf(t, s, "fast") != want {
			if time.Now().After(deadline) {
				t.Fatalf("alarm is %s after 15 s of wall time (15 min of AWS time), want %s", stateOf(t, s, "fast"), want)
			}
			if feed {
				h.Observe(10) // beyond the threshold of 5 (Sum a minute)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(start)
	}
	toAlarm := wait(StateAlarm, true)
	start = time.Now()
	toOK := wait(StateOK, false)
	// Two periods of a minute are two seconds at 60x; the alarm needs both
	// (plus the period it started in, and an evaluation every 10 AWS
	// seconds). The bound is loose for a busy machine, and far below the
	// two minutes the wall clock would take.
	if toAlarm > 10*time.Second || toOK > 10*time.Second {
		t.Fatalf("ALARM after %v, OK after %v of wall time; want each within 10 s at 60x", toAlarm, toOK)
	}
	t.Logf("at 60x: ALARM after %v, back to OK after %v of wall time", toAlarm, toOK)
}
