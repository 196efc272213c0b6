package artifact

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeEvictor holds idle artifacts as sizes with their last use.
type fakeEvictor struct {
	b     *Budget
	idle  []int64
	times []time.Time
}

func (f *fakeEvictor) OldestIdle() (time.Time, bool) {
	if len(f.idle) == 0 {
		return time.Time{}, false
	}
	return f.times[0], true
}

func (f *fakeEvictor) EvictOldest() int64 {
	if len(f.idle) == 0 {
		return 0
	}
	n := f.idle[0]
	f.idle, f.times = f.idle[1:], f.times[1:]
	f.b.Release(n)
	return n
}

func TestBudgetEvictsLeastRecentlyUsedAcrossEvictors(t *testing.T) {
	b := NewBudget(100)
	t0 := time.Now()
	a := &fakeEvictor{b: b, idle: []int64{30, 30}, times: []time.Time{t0.Add(1), t0.Add(3)}}
	c := &fakeEvictor{b: b, idle: []int64{20}, times: []time.Time{t0.Add(2)}}
	b.Register(a)
	unregister := b.Register(c)
	b.Force(80) // a's 60 and c's 20 are on disk
	if err := b.Reserve(60); err != nil {
		t.Fatal(err)
	}
	// 80+60 > 100: a's oldest (30) goes first, then c's (20, older than a's next).
	if len(a.idle) != 1 || len(c.idle) != 0 || b.Used() != 90 {
		t.Errorf("after Reserve: a %v, c %v, used %d; want a [30], c [], used 90", a.idle, c.idle, b.Used())
	}
	unregister()
	err := b.Reserve(100)
	var le *LimitError
	if !errors.As(err, &le) || !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), DiskBudgetFlag) {
		t.Fatalf("Reserve past everything = %v, want a LimitError naming %s", err, DiskBudgetFlag)
	}
	if b.Used() != 60 {
		t.Errorf("used %d after a refused Reserve, want 60 (a's last idle one deleted, nothing counted)", b.Used())
	}
	b.Release(60)
	if b.Used() != 0 {
		t.Errorf("used %d, want 0", b.Used())
	}
	var nilBudget *Budget
	if err := nilBudget.Reserve(1 << 62); err != nil {
		t.Errorf("nil Budget refused: %v", err)
	}
	nilBudget.Release(1)
	nilBudget.Register(a)()
}
