package modelserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
	"github.com/mce-run/mce/internal/wire"
)

// Adapters (single-model mode): LoRA-style deltas on the loaded network's
// weights, managed through SageMaker's adapter API as its model hosting
// container standards define it (https://github.com/aws/model-hosting-container-standards,
// the LoRA handlers: POST /adapters {"name","src"}, DELETE /adapters/{name};
// an invocation names its adapter in X-Amzn-SageMaker-Adapter-Identifier).
// This is what mce calls for adapter inference components.
//
// An adapter is a folder (src) holding adapter.json:
//
//	{"format": "mce-lora/1", "rank": 2, "alpha": 4,
//	 "layers": [{"layer": 0, "a": [[…in] × rank], "b": [[…rank] × out]}]}
//
// For each listed layer, its weights become W + (alpha/rank)·B·A (B has
// one row per output unit, A one row of the layer's inputs per rank); the
// biases and the other layers are the base's. Registering computes the
// adapted network once; a call with the adapter runs it.

// AdapterFormat is the format adapter.json declares.
const AdapterFormat = "mce-lora/1"

// AdapterFile is the file an adapter folder holds.
const AdapterFile = "adapter.json"

// HeaderAdapter names the adapter of an invocation.
const HeaderAdapter = wire.HeaderAdapterIdentifier

// MaxAdapterWork bounds the multiply-adds of one layer's delta (rank × in
// × out), so that a hostile adapter.json cannot keep a register busy.
const MaxAdapterWork = 1 << 28

// DefaultAdapterRoot is where adapters' src must lie (SageMaker's /opt/ml;
// mce stages them under /opt/ml/adapters).
const DefaultAdapterRoot = "/opt/ml"

// MaxAdapters bounds the adapters registered at once.
const MaxAdapters = 256

// AdapterSpec is the content of adapter.json.
type AdapterSpec struct {
	Format string             `json:"format"`
	Rank   int                `json:"rank"`
	Alpha  float64            `json:"alpha"`
	Layers []AdapterLayerSpec `json:"layers"`
}

// AdapterLayerSpec is the low-rank delta of one layer.
type AdapterLayerSpec struct {
	Layer int         `json:"layer"`
	A     [][]float64 `json:"a"`
	B     [][]float64 `json:"b"`
}

// ParseAdapter reads adapter.json strictly (unknown keys are errors).
func ParseAdapter(b []byte) (*AdapterSpec, error) {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var a AdapterSpec
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("%s: %w", AdapterFile, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: data after the JSON object", AdapterFile)
	}
	return &a, nil
}

// WithAdapter returns m with the adapter's deltas added to its weights.
func (m *Model) WithAdapter(a *AdapterSpec) (*Model, error) {
	if a.Format != AdapterFormat {
		return nil, fmt.Errorf("%s: format %q, want %q", AdapterFile, a.Format, AdapterFormat)
	}
	if a.Rank < 1 || a.Rank > MaxWidth {
		return nil, fmt.Errorf("%s: rank %d (1…%d)", AdapterFile, a.Rank, MaxWidth)
	}
	for _, ls := range a.Layers {
		if ls.Layer >= 0 && ls.Layer < len(m.layers) {
			if l := m.layers[ls.Layer]; int64(a.Rank)*int64(l.in)*int64(l.out) > MaxAdapterWork {
				return nil, fmt.Errorf("%s: layer %d: rank %d makes %d×%d×%d multiply-adds, more than %d", AdapterFile, ls.Layer, a.Rank, l.out, a.Rank, l.in, int64(MaxAdapterWork))
			}
		}
	}
	if _, err := fit(a.Alpha, false); err != nil {
		return nil, fmt.Errorf("%s: alpha: %w", AdapterFile, err)
	}
	if len(a.Layers) == 0 {
		return nil, fmt.Errorf("%s: no layers", AdapterFile)
	}
	out := *m
	out.layers = make([]layer, len(m.layers))
	copy(out.layers, m.layers)
	scale := a.Alpha / float64(a.Rank)
	seen := map[int]bool{}
	for _, ls := range a.Layers {
		if ls.Layer < 0 || ls.Layer >= len(m.layers) {
			return nil, fmt.Errorf("%s: layer %d: the model has layers 0…%d", AdapterFile, ls.Layer, len(m.layers)-1)
		}
		if seen[ls.Layer] {
			return nil, fmt.Errorf("%s: layer %d is given twice", AdapterFile, ls.Layer)
		}
		seen[ls.Layer] = true
		base := m.layers[ls.Layer]
		if len(ls.A) != a.Rank || len(ls.B) != base.out {
			return nil, fmt.Errorf("%s: layer %d: a has %d rows (want rank %d), b has %d rows (want the layer's %d outputs)",
				AdapterFile, ls.Layer, len(ls.A), a.Rank, len(ls.B), base.out)
		}
		for i, row := range ls.A {
			if len(row) != base.in {
				return nil, fmt.Errorf("%s: layer %d: a row %d has %d values, the layer takes %d inputs", AdapterFile, ls.Layer, i, len(row), base.in)
			}
		}
		for j, row := range ls.B {
			if len(row) != a.Rank {
				return nil, fmt.Errorf("%s: layer %d: b row %d has %d values, want rank %d", AdapterFile, ls.Layer, j, len(row), a.Rank)
			}
		}
		l := base
		l.w = make([]float64, len(base.w))
		for j := range base.out {
			for i := range base.in {
				d := 0.0
				for k := range a.Rank {
					d += ls.B[j][k] * ls.A[k][i]
				}
				v, err := fit(base.w[j*base.in+i]+scale*d, m.fp32)
				if err != nil {
					return nil, fmt.Errorf("%s: layer %d weight [%d][%d]: %w", AdapterFile, ls.Layer, j, i, err)
				}
				l.w[j*base.in+i] = v
			}
		}
		out.layers[ls.Layer] = l
	}
	return &out, nil
}

// adapterSet is the adapters registered in one container.
type adapterSet struct {
	base *Model
	root string // src must lie under it
	b    *budget

	mu sync.RWMutex
	m  map[string]adapterEntry
}

type adapterEntry struct {
	src   string
	model *Model
}

func newAdapterSet(base *Model, root string, b *budget) *adapterSet {
	return &adapterSet{base: base, root: root, b: b, m: map[string]adapterEntry{}}
}

// model is the network a call runs: the base, or the adapter the call names.
func (s *adapterSet) model(r *http.Request) (*Model, error) {
	name := r.Header.Get(HeaderAdapter)
	if name == "" {
		return s.base, nil
	}
	s.mu.RLock()
	e, ok := s.m[name]
	s.mu.RUnlock()
	if !ok {
		return nil, smserve.Errorf(http.StatusNotFound, "The adapter %s was not found", name)
	}
	return e.model, nil
}

// ServeHTTP is the adapter API.
func (s *adapterSet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	handlerFunc(s.serve).ServeHTTP(w, r)
}

func (s *adapterSet) serve(w http.ResponseWriter, r *http.Request) error {
	name, sub := strings.CutPrefix(r.URL.Path, "/adapters/")
	switch {
	case r.URL.Path == "/adapters" && r.Method == http.MethodPost:
		return s.register(w, r)
	case r.URL.Path == "/adapters" && r.Method == http.MethodGet:
		return s.list(w)
	case sub && name != "" && !strings.Contains(name, "/") && r.Method == http.MethodDelete:
		return s.unregister(w, name)
	case sub && name != "" && !strings.Contains(name, "/") && r.Method == http.MethodGet:
		s.mu.RLock()
		e, ok := s.m[name]
		s.mu.RUnlock()
		if !ok {
			return smserve.Errorf(http.StatusNotFound, "The adapter %s was not found", name)
		}
		writeJSON(w, http.StatusOK, map[string]string{"name": name, "src": e.src})
		return nil
	}
	return smserve.Errorf(http.StatusMethodNotAllowed, "%s %s is not part of the adapter API", r.Method, r.URL.Path)
}

func (s *adapterSet) list(w http.ResponseWriter) error {
	s.mu.RLock()
	out := make([]map[string]string, 0, len(s.m))
	for n, e := range s.m {
		out = append(out, map[string]string{"name": n, "src": e.src})
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i]["name"] < out[j]["name"] })
	writeJSON(w, http.StatusOK, map[string]any{"adapters": out})
	return nil
}

func (s *adapterSet) register(w http.ResponseWriter, r *http.Request) error {
	body, err := smserve.ReadBody(w, r)
	if err != nil {
		return err
	}
	var req struct {
		Name    string `json:"name"`
		Src     string `json:"src"`
		Preload *bool  `json:"preload"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return badRequest("the request body must be a JSON object with name and src: %v", err)
	}
	if req.Name == "" || req.Src == "" {
		return badRequest("The parameters name and src cannot be empty strings.")
	}
	if len(req.Name) > 256 || strings.ContainsAny(req.Name, "/\\\x00") {
		return badRequest("invalid adapter name %q", req.Name)
	}
	m, err := s.load(req.Src)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, replaced := s.m[req.Name]
	if !replaced && len(s.m) >= MaxAdapters {
		return smserve.Errorf(http.StatusInsufficientStorage, "out of memory: %d adapters are registered already", MaxAdapters)
	}
	if ok, free := s.b.take(m.Footprint); !ok {
		return smserve.Errorf(http.StatusInsufficientStorage, "out of memory: the adapted model needs %d bytes and %d are free", m.Footprint, free)
	}
	if replaced {
		s.b.give(old.model.Footprint)
	}
	s.m[req.Name] = adapterEntry{src: req.Src, model: m}
	writeJSON(w, http.StatusOK, map[string]string{"status": "Adapter " + req.Name + " registered"})
	return nil
}

func (s *adapterSet) unregister(w http.ResponseWriter, name string) error {
	s.mu.Lock()
	e, ok := s.m[name]
	delete(s.m, name)
	s.mu.Unlock()
	if !ok {
		return smserve.Errorf(http.StatusNotFound, "The adapter %s was not found", name)
	}
	s.b.give(e.model.Footprint)
	writeJSON(w, http.StatusOK, map[string]string{"status": "Adapter " + name + " unregistered"})
	return nil
}

// load reads adapter.json from src, which must be an absolute path under
// the adapter root; links are followed only while they stay inside it.
func (s *adapterSet) load(src string) (*Model, error) {
	clean := path.Clean(src)
	if !path.IsAbs(src) {
		return nil, badRequest("src %q must be an absolute path", src)
	}
	rel, ok := strings.CutPrefix(clean, strings.TrimSuffix(s.root, "/")+"/")
	if !ok {
		return nil, badRequest("src %q must lie under %s", src, s.root)
	}
	root, err := os.OpenRoot(s.root)
	if err != nil {
		return nil, smserve.Errorf(http.StatusInternalServerError, "opening %s: %v", s.root, err)
	}
	defer root.Close()
	sub, err := root.OpenRoot(rel)
	if err != nil {
		return nil, badRequest("src %q: no adapter folder there", src)
	}
	defer sub.Close()
	b, err := readCapped(sub.FS(), AdapterFile, MaxModelFileBytes)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, badRequest("src %q: reading %s: %v", src, AdapterFile, err)
	}
	a, err := ParseAdapter(b)
	if err != nil {
		return nil, badRequest("src %q: %v", src, err)
	}
	m, err := s.base.WithAdapter(a)
	if err != nil {
		return nil, badRequest("src %q: %v", src, err)
	}
	return m, nil
}
