package parallel

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestEachRunsAllAtOnceAndJoinsEveryError(t *testing.T) {
	const n = 8
	var running atomic.Int32
	release := make(chan struct{})
	items := make([]int, n)
	for i := range items {
		items[i] = i
	}
	done := make(chan error, 1)
	go func() {
		done <- Each(items, func(i int) error {
			running.Add(1)
			<-release // every call must be under way before any returns
			running.Add(-1)
			if i%2 == 1 {
				return fmt.Errorf("item %d failed", i)
			}
			return nil
		})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for running.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d calls started together", running.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	err := <-done
	for i := 1; i < n; i += 2 {
		if want := fmt.Sprintf("item %d failed", i); err == nil || !containsLine(err, want) {
			t.Errorf("error %v does not report %q", err, want)
		}
	}
	if got := len(err.(interface{ Unwrap() []error }).Unwrap()); got != n/2 {
		t.Errorf("joined %d errors, want %d", got, n/2)
	}
}

func TestEachNilWhenAllSucceed(t *testing.T) {
	var calls atomic.Int32
	if err := Each([]string{"a", "b", "c"}, func(string) error { calls.Add(1); return nil }); err != nil {
		t.Fatalf("Each = %v, want nil", err)
	}
	if calls.Load() != 3 {
		t.Fatalf("%d calls, want 3", calls.Load())
	}
	if err := Each[int](nil, func(int) error { return errors.New("called") }); err != nil {
		t.Fatalf("Each(nil) = %v, want nil", err)
	}
}

func containsLine(err error, want string) bool {
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		if e.Error() == want {
			return true
		}
	}
	return false
}
