package mme

import (
	"context"
	"testing"
)

// BenchmarkAcquireHit is the cost a cache-hit call adds: Acquire + Release
// of a loaded model.
func BenchmarkAcquireHit(b *testing.B) {
	e := newEnv(b, envOptions{})
	e.put(b, "models/resnet50/v1.tar.gz", 10)
	e.use(b, "models/resnet50/v1.tar.gz")
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l, err := e.mgr.Acquire(ctx, "models/resnet50/v1.tar.gz")
			if err != nil {
				b.Fatal(err)
			}
			l.Release()
		}
	})
}
