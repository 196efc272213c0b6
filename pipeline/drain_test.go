package pipeline

import (
	"context"
	"testing"
	"time"
)

func TestDrainWaitsForOutstandingCalls(t *testing.T) {
	a, b := NewInstance(nil), NewInstance(nil)
	a.outstanding.Add(1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		a.outstanding.Add(-1)
	}()
	start := time.Now()
	Drain(context.Background(), []*Instance{a, b}, time.Minute)
	if a.Outstanding() != 0 {
		t.Fatal("Drain returned while a call was outstanding")
	}
	if time.Since(start) > 30*time.Second {
		t.Fatal("Drain waited far past the last call")
	}

	// Bounded: a call that never ends holds it for at most within, and a
	// done context ends it at once.
	b.outstanding.Add(1)
	start = time.Now()
	Drain(context.Background(), []*Instance{b}, 60*time.Millisecond)
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Fatalf("Drain returned after %v with a call outstanding, before its bound", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() { Drain(ctx, []*Instance{b}, time.Hour); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Drain ignored its done context")
	}
}
