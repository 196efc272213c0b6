package mme

import (
	"context"
	"testing"
)

// TestGPUEvictsAhead: the fake GPU fills with each load and empties with
// each unload; the manager learns the footprint and unloads idle models
// before a load would pass the threshold, so the container never answers 507.
func TestGPUEvictsAhead(t *testing.T) {
	const gib = 1 << 30
	gpu := &fakeGPU{total: 10 * gib, used: gib / 2} // half a GiB used by the runtime
	e := newEnv(t, envOptions{
		fake: func(f *fakeMME) { f.gpu, f.footprint = gpu, gib },
		mgr: func(o *ManagerOptions) {
			o.GPU, o.GPUIndexes, o.GPUThreshold = gpu, []int{0}, 0.9
		},
	})
	const n = 30
	names := make([]string, n)
	for i := range names {
		names[i] = "m" + string(rune('a'+i%26)) + string(rune('0'+i/26))
		e.put(t, names[i], 10)
	}
	for _, m := range names {
		e.use(t, m)
	}
	if e.fake.full507.Load() != 0 {
		t.Errorf("the container answered 507 %d times; evict-ahead should prevent it", e.fake.full507.Load())
	}
	if gpu.maxUsed > 9*gib {
		t.Errorf("GPU memory peaked at %.1f GiB, over the 90%% threshold", float64(gpu.maxUsed)/gib)
	}
	if e.fake.unloads.Load() == 0 || e.fake.maxLoaded != 8 {
		t.Errorf("unloads %d, most loaded %d; want evictions and 8 models at most (0.5 + 8 GiB ≤ 9 GiB)",
			e.fake.unloads.Load(), e.fake.maxLoaded)
	}
	if got := len(e.mgr.Loaded()); got != 8 {
		t.Errorf("loaded = %d, want 8", got)
	}
	// A model with a lease open is never unloaded ahead.
	l, err := e.mgr.Acquire(context.Background(), names[n-1])
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range names[:12] {
		e.use(t, m)
	}
	if !e.fake.isLoaded(names[n-1]) {
		t.Error("a leased model was unloaded ahead of a GPU load")
	}
	l.Release()
	e.fake.check(t)
}
