package mme

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLoadsAndEvictionsAreLoggedAtInfo: with a container that holds one
// model, loading a second evicts the first; the download, both loads, the
// eviction and the unload are info lines with model, container, took and
// bytes.
func TestLoadsAndEvictionsAreLoggedAtInfo(t *testing.T) {
	logs := &syncBuffer{}
	log := zerolog.New(logs).Level(zerolog.InfoLevel)
	e := newEnv(t, envOptions{
		fake:     func(f *fakeMME) { f.capacity = 1 },
		mgr:      func(o *ManagerOptions) { o.Logger = log },
		cacheOpt: func(o *CacheOptions) { o.Logger = log },
	})
	e.put(t, "a.tar.gz", 1000)
	e.put(t, "b.tar.gz", 1000)
	e.use(t, "a.tar.gz")
	e.use(t, "b.tar.gz")
	events := map[string][]map[string]any{}
	for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if ev, ok := m["event"].(string); ok {
			events[ev] = append(events[ev], m)
		}
	}
	check := func(event string, n int, want map[string]any, keys ...string) {
		t.Helper()
		got := events[event]
		if len(got) != n {
			t.Errorf("%d %s lines, want %d: %v", len(got), event, n, got)
			return
		}
		for _, m := range got {
			if m["level"] != "info" {
				t.Errorf("%s at %v", event, m["level"])
			}
			for k, v := range want {
				if m[k] != v {
					t.Errorf("%s: %s = %v, want %v (%v)", event, k, m[k], v, m)
				}
			}
			for _, k := range keys {
				if _, ok := m[k]; !ok {
					t.Errorf("%s line without %s: %v", event, k, m)
				}
			}
			if took, ok := m["took_ms"]; ok {
				if _, num := took.(float64); !num {
					t.Errorf("%s: took_ms %v is not a number of milliseconds", event, took)
				}
			}
		}
	}
	check("model_downloaded", 2, nil, "model", "bytes", "took_ms")
	check("model_loaded", 2, map[string]any{"container": "c", "endpoint": "ep", "variant": "v"}, "model", "bytes", "took_ms")
	check("model_evicted", 1, map[string]any{"model": "a.tar.gz", "for": "b.tar.gz", "container": "c"})
	check("model_unloaded", 1, map[string]any{"model": "a.tar.gz", "container": "c"}, "took_ms")
}
