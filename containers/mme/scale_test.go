package mme

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestManyModels is the multi-model run: 200 small artifacts under a
// file:// prefix, a container that holds 20 at a time (507 beyond, and an
// occasional 507 on invoke when full), 50 concurrent clients invoking
// random models (skewed: 70% of calls go to 15 hot models) through
// Acquire, a real HTTP invoke and the OutOfMemory retry. No request may
// fail and no model with an open lease may be unloaded.
func TestManyModels(t *testing.T) {
	const (
		models    = 200
		slots     = 20
		clients   = 50
		perClient = 40
		hot       = 15
	)
	var mu sync.Mutex
	open := map[string]int{}
	e := newEnv(t, envOptions{fake: func(f *fakeMME) {
		f.capacity = slots
		f.oomEvery = 25
		f.open = func(id string) int { mu.Lock(); defer mu.Unlock(); return open[id] }
	}})
	names := make([]string, models)
	for i := range names {
		names[i] = fmt.Sprintf("tenant-%d/model-%03d.tar.gz", i%7, i)
		e.put(t, names[i], 512)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)

	var (
		wg       sync.WaitGroup
		failures = make(chan error, clients*perClient)
		lat      = make([][]time.Duration, clients)
		oomCalls sync.Map
	)
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 42))
			ctx := context.Background()
			for range perClient {
				target := names[rng.IntN(models)]
				if rng.IntN(10) < 7 {
					target = names[rng.IntN(hot)]
				}
				t0 := time.Now()
				l, err := e.mgr.Acquire(ctx, target)
				lat[c] = append(lat[c], time.Since(t0))
				if err != nil {
					failures <- fmt.Errorf("Acquire(%s): %w", target, err)
					continue
				}
				mu.Lock()
				open[l.ModelID()]++
				mu.Unlock()
				err = func() error {
					for attempt := 0; ; attempt++ {
						st, err := invoke(ctx, hc, e.base, l)
						switch {
						case err != nil:
							return err
						case st == http.StatusOK:
							return nil
						case st == http.StatusInsufficientStorage && attempt < 3:
							oomCalls.Store(t0, true)
							if err := l.OutOfMemory(ctx); err != nil {
								return fmt.Errorf("OutOfMemory: %w", err)
							}
						default:
							return fmt.Errorf("invoke %s: status %d", target, st)
						}
					}
				}()
				mu.Lock()
				open[l.ModelID()]--
				mu.Unlock()
				l.Release()
				if err != nil {
					failures <- err
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(failures)
	nfail := 0
	for err := range failures {
		nfail++
		if nfail <= 5 {
			t.Error(err)
		}
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(p float64) time.Duration { return all[int(p*float64(len(all)-1))] }
	hits, misses := e.obs.hits.Load(), e.obs.misses.Load()
	t.Logf("%d requests by %d clients over %d models (%d slots) in %s: %d failures; hit ratio %.1f%% (%d hits, %d misses); "+
		"%d downloads, %d loads, %d load-507s, %d unloads (evictions), %d invoke-507s; Acquire p50 %s p99 %s max %s",
		len(all), clients, models, slots, elapsed.Round(time.Millisecond), nfail, 100*float64(hits)/float64(hits+misses), hits, misses,
		e.obs.downloads.Load(), e.fake.loads.Load(), e.fake.full507.Load(), e.fake.unloads.Load(), e.fake.invoke507.Load(),
		pct(0.5).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), all[len(all)-1].Round(time.Microsecond))
	if e.fake.unloads.Load() == 0 || hits == 0 {
		t.Error("the run saw no evictions or no cache hits")
	}
	if n := e.fake.invoke404.Load(); n != 0 {
		t.Errorf("%d invokes found their model unloaded", n)
	}
	if e.fake.maxLoaded > slots {
		t.Errorf("the container held %d models", e.fake.maxLoaded)
	}
	if d := e.obs.downloads.Load(); d > models {
		t.Errorf("%d downloads for %d models: files must stay cached", d, models)
	}
	e.fake.check(t)
}

// TestChurn races the idle sweeper, CacheDisabled unloads and 507
// evictions against concurrent callers: no call fails, no leased model is
// unloaded.
func TestChurn(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("CacheDisabled=%v", disabled), func(t *testing.T) {
			var mu sync.Mutex
			open := map[string]int{}
			e := newEnv(t, envOptions{
				fake: func(f *fakeMME) {
					f.capacity = 3
					f.open = func(id string) int { mu.Lock(); defer mu.Unlock(); return open[id] }
				},
				mgr: func(o *ManagerOptions) { o.IdleTTL, o.CacheDisabled = 5*time.Millisecond, disabled },
			})
			names := []string{"a", "b", "c", "d", "e", "f"}
			for _, n := range names {
				e.put(t, n, 100)
			}
			var wg sync.WaitGroup
			for c := range 20 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(c), 7))
					for range 25 {
						target := names[rng.IntN(len(names))]
						l, err := e.mgr.Acquire(context.Background(), target)
						if err != nil {
							e.fake.mu.Lock()
							fl := fmt.Sprint(e.fake.loaded)
							e.fake.mu.Unlock()
							e.mgr.mu.Lock()
							var sts []string
							for _, st := range e.mgr.models {
								sts = append(sts, fmt.Sprintf("%s:%d/pins%d/loading%v", st.target, st.phase, st.pins, st.loading))
							}
							e.mgr.mu.Unlock()
							t.Errorf("Acquire(%s): %v; fake %s; mgr %v", target, err, fl, sts)
							continue
						}
						mu.Lock()
						open[l.ModelID()]++
						mu.Unlock()
						if st, err := invoke(context.Background(), http.DefaultClient, e.base, l); err != nil || st != http.StatusOK {
							t.Errorf("invoke %s: %d %v", target, st, err)
						}
						mu.Lock()
						open[l.ModelID()]--
						mu.Unlock()
						l.Release()
					}
				})
			}
			wg.Wait()
			e.fake.check(t)
			if disabled {
				waitFor(t, "every model unloaded and deleted", func() bool {
					_, n := e.cache.Usage()
					return len(e.mgr.Loaded()) == 0 && n == 0 && len(e.cacheEntries(t)) == 0
				})
			}
		})
	}
}
