package metrics

import (
	"testing"
	"time"
)

// BenchmarkObserveInvocation is what the metrics cost one successful call
// of a two-container chain: two container observations and the variant's.
// It must not allocate once the label children are looked up
// (TestObserveInvocationAllocatesNothing).
//
//	go test -run '^$' -bench ObserveInvocation ./host/metrics/
func BenchmarkObserveInvocation(b *testing.B) {
	m := New()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ObserveContainer("ep", "AllTraffic", "a", 300*time.Microsecond, 200, nil)
			m.ObserveContainer("ep", "AllTraffic", "b", 700*time.Microsecond, 200, nil)
			m.ObserveInvocation("ep", "AllTraffic", 1200*time.Microsecond, time.Millisecond, nil)
		}
	})
}

// TestObserveInvocationAllocatesNothing holds BenchmarkObserveInvocation's
// claim: once the label children exist, a call's observations allocate
// nothing.
func TestObserveInvocationAllocatesNothing(t *testing.T) {
	m := New()
	observe := func() {
		m.ObserveContainer("ep", "AllTraffic", "a", 300*time.Microsecond, 200, nil)
		m.ObserveContainer("ep", "AllTraffic", "b", 700*time.Microsecond, 200, nil)
		m.ObserveInvocation("ep", "AllTraffic", 1200*time.Microsecond, time.Millisecond, nil)
	}
	observe()
	if n := testing.AllocsPerRun(1000, observe); n != 0 {
		t.Errorf("observing a call allocates %v times", n)
	}
}
