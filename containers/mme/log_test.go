package mme

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

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

// logLines parses JSON log lines by their event field.
func logLines(t *testing.T, logs string) map[string][]map[string]any {
	t.Helper()
	events := map[string][]map[string]any{}
	for line := range strings.SplitSeq(strings.TrimSpace(logs), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		ev, _ := m["event"].(string)
		if ev == "" {
			ev, _ = m["message"].(string)
		}
		events[ev] = append(events[ev], m)
	}
	return events
}

func checkLines(t *testing.T, events map[string][]map[string]any, event, level string, n int, want map[string]any, keys ...string) {
	t.Helper()
	got := events[event]
	if len(got) != n {
		t.Errorf("%d %s lines, want %d: %v", len(got), event, n, got)
		return
	}
	for _, m := range got {
		if m["level"] != level {
			t.Errorf("%s at %v, want %s", event, m["level"], level)
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

// TestModelEventsAreDebugLines (issue 18): with a container that holds one
// model, loading a second evicts the first; the download, both loads, the
// eviction and the unload are debug lines with model, container, took and
// bytes, so a load test does not write one info line per call.
func TestModelEventsAreDebugLines(t *testing.T) {
	logs := &syncBuffer{}
	log := zerolog.New(logs).Level(zerolog.DebugLevel)
	e := newEnv(t, envOptions{
		fake:     func(f *fakeMME) { f.capacity = 1 },
		mgr:      func(o *ManagerOptions) { o.Logger, o.SummaryInterval = log, -1 },
		cacheOpt: func(o *CacheOptions) { o.Logger = log },
	})
	e.put(t, "a.tar.gz", 1000)
	e.put(t, "b.tar.gz", 1000)
	e.use(t, "a.tar.gz")
	e.use(t, "b.tar.gz")
	events := logLines(t, logs.String())
	checkLines(t, events, "model_downloaded", "debug", 2, nil, "model", "bytes", "took_ms")
	checkLines(t, events, "model_loaded", "debug", 2, map[string]any{"container": "c", "endpoint": "ep", "variant": "v"}, "model", "bytes", "took_ms")
	checkLines(t, events, "model_evicted", "debug", 1, map[string]any{"model": "a.tar.gz", "for": "b.tar.gz", "container": "c"})
	checkLines(t, events, "model_unloaded", "debug", 1, map[string]any{"model": "a.tar.gz", "container": "c"}, "took_ms")
}

// TestSummaryAndFirstConditionsAtInfo (issue 18): at info, many loads and
// evictions give one summary line per interval with their counts; the first
// 507 is an info line and the first load failure of each kind a warning,
// their repeats only counted.
func TestSummaryAndFirstConditionsAtInfo(t *testing.T) {
	logs := &syncBuffer{}
	log := zerolog.New(logs).Level(zerolog.InfoLevel)
	e := newEnv(t, envOptions{
		fake: func(f *fakeMME) {
			f.capacity = 1
			f.refuse = map[string]int{"bad.tar.gz": 400, "worse.tar.gz": 400, "broken.tar.gz": 500}
		},
		mgr:      func(o *ManagerOptions) { o.Logger, o.SummaryInterval = log, time.Hour },
		cacheOpt: func(o *CacheOptions) { o.Logger = log },
	})
	for _, m := range []string{"a", "b", "c", "d", "e", "bad.tar.gz", "worse.tar.gz", "broken.tar.gz"} {
		e.put(t, m, 100)
	}
	for range 3 {
		for _, m := range []string{"a", "b", "c", "d", "e"} {
			e.use(t, m)
		}
	}
	for _, m := range []string{"bad.tar.gz", "worse.tar.gz", "broken.tar.gz"} {
		if _, err := e.mgr.Acquire(context.Background(), m); err == nil {
			t.Fatalf("Acquire(%s) succeeded", m)
		}
	}
	e.mgr.logSummary(time.Hour) // what the ticker does
	events := logLines(t, logs.String())
	for _, ev := range []string{"model_downloaded", "model_loaded", "model_evicted", "model_unloaded"} {
		if n := len(events[ev]); n != 0 {
			t.Errorf("%d %s lines at info", n, ev)
		}
	}
	checkLines(t, events, "container_out_of_memory", "info", 1, map[string]any{"model": "b"})
	checkLines(t, events, "model load failed (the first failure of this kind is a warning; later ones are counted in the summary)", "warn", 2, nil, "kind", "model")
	checkLines(t, events, "models_summary", "info", 1, map[string]any{
		"loads": float64(15), "load_failures": float64(3), "unloads": float64(14), "evictions": float64(14), "load_507s": float64(14), "loaded": float64(1),
	}, "interval_ms")
	e.mgr.logSummary(time.Hour) // nothing happened since: no line
	if n := len(logLines(t, logs.String())["models_summary"]); n != 1 {
		t.Errorf("%d summary lines after an idle interval, want 1", n)
	}
}
