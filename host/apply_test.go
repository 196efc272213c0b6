package host

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
)

const applyFile = `Models:
  - ModelName: m
    PrimaryContainer: {Image: "probe:P"}
EndpointConfigs:
  - EndpointConfigName: c
    ProductionVariants:
      - {VariantName: a, ModelName: m, InitialInstanceCount: 1, InstanceType: local, InitialVariantWeight: 1}
      - {VariantName: b, ModelName: m, InitialInstanceCount: 1, InstanceType: local, InitialVariantWeight: WEIGHT}
Endpoints:
  - {EndpointName: ep, EndpointConfigName: c}
`

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestApplyKeepsWhatTheAPIChanged: serve -f after a restart. The file gives
// the endpoint's initial configuration; while the file is unchanged, weights
// and instance counts changed through the API survive restarts; once the file
// changes, the file wins. Each start says in its log which and why.
func TestApplyKeepsWhatTheAPIChanged(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	file := filepath.Join(t.TempDir(), "endpoint.yaml")
	write := func(weight string) {
		if err := os.WriteFile(file, []byte(strings.Replace(applyFile, "WEIGHT", weight, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// start is one run of serve -f: recover the state, apply the file, wait.
	start := func() (*Server, *syncBuffer) {
		t.Helper()
		logs := &syncBuffer{}
		s := New(Config{Backend: &fakeBackend{t: t}, Logger: zerolog.New(logs), Store: st})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := s.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		b, err := spec.LoadFiles(file)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
		waitSettled(t, s, "ep")
		return s, logs
	}
	stop := func(s *Server) {
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	weights := func(s *Server) map[string]float64 {
		out := map[string]float64{}
		for _, v := range s.reg.get("ep").record().Plan.Variants {
			out[v.Name] = v.Weight
			out[v.Name+".count"] = float64(v.InstanceCount)
		}
		return out
	}

	write("1")
	s, _ := start()
	if err := s.updateWeightsAndCapacities(s.reg.get("ep"), map[string]VariantTarget{"b": {Weight: 4, Count: 2}}); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, s, "ep")
	if w := weights(s); w["b"] != 4 || w["b.count"] != 2 {
		t.Fatalf("after UpdateEndpointWeightsAndCapacities: %v", w)
	}
	stop(s)

	// Same file: the API's weights and counts stay.
	s, logs := start()
	if w := weights(s); w["a"] != 1 || w["b"] != 4 || w["b.count"] != 2 {
		t.Errorf("restart with the same file: %v, want b at weight 4 with 2 copies (the API's change kept)", w)
	}
	if !strings.Contains(logs.String(), "keeping the endpoint as the API left it") {
		t.Errorf("no log line says the state was kept:\n%s", logs)
	}
	stop(s)

	// The file changed: it wins.
	write("2")
	s, logs = start()
	if w := weights(s); w["a"] != 1 || w["b"] != 2 || w["b.count"] != 1 {
		t.Errorf("restart with a changed file: %v, want the file's b at weight 2 with 1 copy", w)
	}
	if !strings.Contains(logs.String(), "its definition in the file changed since it was last applied") {
		t.Errorf("no log line says the file won and why:\n%s", logs)
	}
	stop(s)

	// And from then on the file is the one last applied: unchanged, nothing moves.
	s, logs = start()
	if w := weights(s); w["b"] != 2 {
		t.Errorf("second restart with the changed file: %v", w)
	}
	if strings.Contains(logs.String(), "updating the endpoint") {
		t.Errorf("an unchanged endpoint was updated:\n%s", logs)
	}
	stop(s)
}

// waitSettled waits until the endpoint is InService with no update pending.
func waitSettled(t *testing.T, s *Server, name string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if e := s.reg.get(name); e != nil {
			rec := e.record()
			if rec.Status == spec.StatusInService && rec.Pending == "" && len(rec.Desired) == 0 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("endpoint %s never settled InService", name)
}
