package host

import (
	"testing"
	"time"
)

func TestFailLimiter(t *testing.T) {
	var l failLimiter
	now := time.Now()
	for i := range failLogBurst {
		if ok, s := l.allow(now); !ok || s != 0 {
			t.Fatalf("line %d: allow = %v, %d", i, ok, s)
		}
	}
	for range 5 {
		if ok, _ := l.allow(now.Add(time.Millisecond)); ok {
			t.Fatal("a line beyond the burst was allowed")
		}
	}
	if ok, s := l.allow(now.Add(failLogPeriod)); !ok || s != 5 {
		t.Errorf("next period: allow = %v, suppressed %d; want true, 5", ok, s)
	}
}
