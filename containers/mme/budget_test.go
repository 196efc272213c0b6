package mme

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mce-run/mce/containers/artifact"
)

// TestCachesShareTheDiskBudget (issue 9, class 5): the multi-model caches of
// all endpoints draw on one disk budget; unused models of any cache are
// deleted, least recently used first, to make room, and a download that
// cannot fit fails naming the limit and its flag, leaving nothing behind.
func TestCachesShareTheDiskBudget(t *testing.T) {
	budget := artifact.NewBudget(2500)
	withBudget := func(o *CacheOptions) { o.Budget = budget }
	a := newEnv(t, envOptions{cacheOpt: withBudget})
	b := newEnv(t, envOptions{cacheOpt: withBudget})
	for _, m := range []string{"a1", "a2"} {
		a.put(t, m, 1000)
	}
	for _, m := range []string{"b1", "b2"} {
		b.put(t, m, 1000)
	}
	ctx := context.Background()
	hold := func(e *env, target string) *cacheEntry {
		t.Helper()
		ce, err := e.cache.acquire(ctx, target)
		if err != nil {
			t.Fatalf("acquire(%s): %v", target, err)
		}
		return ce
	}
	a.cache.release(hold(a, "a1"), false)
	a.cache.release(hold(a, "a2"), false)
	b1 := hold(b, "b1") // over 2500: a1, the least recently used, goes
	if a.onDisk("a1") || !a.onDisk("a2") || !b.onDisk("b1") {
		t.Errorf("on disk: a1 %v a2 %v b1 %v; want a1 deleted for b1", a.onDisk("a1"), a.onDisk("a2"), b.onDisk("b1"))
	}
	a2 := hold(a, "a2")
	_, err := b.cache.acquire(ctx, "b2") // nothing unused is left
	if !errors.Is(err, artifact.ErrTooLarge) || !strings.Contains(err.Error(), artifact.DiskBudgetFlag) {
		t.Fatalf("acquire(b2) = %v, want ErrTooLarge naming %s", err, artifact.DiskBudgetFlag)
	}
	if b.onDisk("b2") || len(b.cacheEntries(t)) != 1 {
		t.Errorf("the refused model left files: %v", b.cacheEntries(t))
	}
	if used, _ := a.cache.Usage(); budget.Used() != used+func() int64 { u, _ := b.cache.Usage(); return u }() {
		t.Errorf("budget counts %d bytes; the caches hold %d", budget.Used(), used)
	}
	a.cache.release(a2, false)
	b.cache.release(b1, false)
	a.cache.Close()
	b.cache.Close()
	if budget.Used() != 0 {
		t.Errorf("budget counts %d bytes after both caches closed", budget.Used())
	}
}
