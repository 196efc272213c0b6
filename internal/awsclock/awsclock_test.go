package awsclock

import (
	"math"
	"testing"
	"time"
)

func TestWallClockByDefault(t *testing.T) {
	var c *Clock
	if c.Factor() != 1 || c.Real(time.Minute) != time.Minute {
		t.Fatalf("nil clock: factor %v, a minute takes %v", c.Factor(), c.Real(time.Minute))
	}
	if d := time.Since(c.Now()); d < 0 || d > time.Second {
		t.Fatalf("nil clock's Now is %v off the wall clock", d)
	}
}

func TestCompressed(t *testing.T) {
	c, err := New(60)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Real(time.Minute); got != time.Second {
		t.Fatalf("a minute at 60x takes %v, want 1s", got)
	}
	if got := c.Real(time.Microsecond); got != time.Millisecond {
		t.Fatalf("a microsecond at 60x takes %v, want the 1ms floor", got)
	}
	start := c.Now()
	time.Sleep(50 * time.Millisecond)
	// 50 ms of wall time is 3 s of AWS time at 60x; allow for a slow machine.
	if d := c.Since(start); d < 2900*time.Millisecond {
		t.Fatalf("50ms of wall time passed as %v of AWS time at 60x", d)
	}
}

func TestRefusesBadFactors(t *testing.T) {
	for _, f := range []float64{0, 0.5, -1, MaxFactor + 1, math.NaN(), math.Inf(1)} {
		if _, err := New(f); err == nil {
			t.Errorf("New(%v) accepted", f)
		}
	}
}
