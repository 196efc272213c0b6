package modelserver

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"testing/fstest"
)

// tinySpec is a hand-checkable FP64 network: [x0, x1] → relu([x0, x1, x0+x1-10]) → sum + 0.5.
func tinySpec() *Spec {
	return &Spec{
		Inputs:  []TensorSpec{{Name: "X", Datatype: FP64, Shape: []int64{-1, 2}}},
		Outputs: []TensorSpec{{Name: "Y", Datatype: FP64, Shape: []int64{-1, 1}}},
		Layers: []LayerSpec{
			{Weights: [][]float64{{1, 0}, {0, 1}, {1, 1}}, Bias: []float64{0, 0, -10}, Activation: ActReLU},
			{Weights: [][]float64{{1, 1, 1}}, Bias: []float64{0.5}},
		},
	}
}

func mustCompile(t testing.TB, s *Spec) *Model {
	t.Helper()
	m, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestForwardNumerics(t *testing.T) {
	m := mustCompile(t, tinySpec())
	got := m.Forward([]float64{1, 2, 6, 7, -3, 1}, 3)
	// row 1: relu(1,2,-7)=1,2,0 → 3.5; row 2: 6,7,3 → 16.5; row 3: 0,1,0 → 1.5
	want := []float64{3.5, 16.5, 1.5}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Forward = %v, want %v", got, want)
		}
	}
	if m.Params != 6+3+3+1 || m.Footprint != 13*8 {
		t.Errorf("params %d footprint %d, want 13 and 104", m.Params, m.Footprint)
	}
	if w := m.Widths(); len(w) != 3 || w[0] != 2 || w[1] != 3 || w[2] != 1 {
		t.Errorf("Widths = %v", w)
	}
}

func TestActivations(t *testing.T) {
	o := []float64{0, math.Log(2)}
	activate(o, ActSoftmax)
	if math.Abs(o[0]-1.0/3) > 1e-15 || math.Abs(o[1]-2.0/3) > 1e-15 {
		t.Errorf("softmax = %v", o)
	}
	o = []float64{1000, 1000}
	activate(o, ActSoftmax) // stable for large values
	if o[0] != 0.5 || o[1] != 0.5 {
		t.Errorf("softmax(large) = %v", o)
	}
	o = []float64{0, -1}
	activate(o, ActSigmoid)
	if o[0] != 0.5 || math.Abs(o[1]-1/(1+math.E)) > 1e-15 {
		t.Errorf("sigmoid = %v", o)
	}
	o = []float64{0.5}
	activate(o, ActTanh)
	if o[0] != math.Tanh(0.5) {
		t.Errorf("tanh = %v", o)
	}
}

func TestFP32RoundsEveryLayer(t *testing.T) {
	s := tinySpec()
	s.Inputs[0].Datatype, s.Outputs[0].Datatype = FP32, FP32
	s.Layers[1].Bias[0] = 0.1 // not exact in float32
	m := mustCompile(t, s)
	if m.Footprint != 13*4 {
		t.Errorf("FP32 footprint %d, want 52", m.Footprint)
	}
	got := m.Forward([]float64{1, 2}, 1)[0]
	want := float64(float32(3 + float64(float32(0.1))))
	if got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestMemoryBytesOverrides(t *testing.T) {
	s := tinySpec()
	n := int64(123456)
	s.MemoryBytes = &n
	if m := mustCompile(t, s); m.Footprint != n {
		t.Errorf("footprint %d, want %d", m.Footprint, n)
	}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(*Spec)
	}{
		{"format", `format "x"`, func(s *Spec) { s.Format = "x" }},
		{"two inputs", "exactly one input", func(s *Spec) { s.Inputs = append(s.Inputs, s.Inputs[0]) }},
		{"datatype", `datatype "INT32"`, func(s *Spec) { s.Inputs[0].Datatype = "INT32" }},
		{"empty name", "name is empty", func(s *Spec) { s.Outputs[0].Name = "" }},
		{"same names", "both named", func(s *Spec) { s.Outputs[0].Name = "X" }},
		{"batch not first", "dimensions are", func(s *Spec) { s.Inputs[0].Shape = []int64{2, -1} }},
		{"zero dim", "dimensions are", func(s *Spec) { s.Inputs[0].Shape = []int64{-1, 0} }},
		{"batch only", "only the batch", func(s *Spec) { s.Inputs[0].Shape = []int64{-1} }},
		{"batch mismatch", "either both or neither", func(s *Spec) { s.Outputs[0].Shape = []int64{1} }},
		{"no layers", "1 to 64 layers", func(s *Spec) { s.Layers = nil }},
		{"row width", "weights row 1 has 1 values", func(s *Spec) { s.Layers[0].Weights[1] = []float64{1} }},
		{"bias", "bias has 2 values", func(s *Spec) { s.Layers[0].Bias = []float64{1, 2} }},
		{"activation", `activation "gelu"`, func(s *Spec) { s.Layers[0].Activation = "gelu" }},
		{"output width", "gives 1 values per row", func(s *Spec) { s.Outputs[0].Shape = []int64{-1, 2} }},
		{"fp32 overflow", "does not fit", func(s *Spec) {
			s.Inputs[0].Datatype = FP32
			s.Layers[0].Bias[0] = 1e300
		}},
		{"memory_bytes", "memory_bytes -1", func(s *Spec) { n := int64(-1); s.MemoryBytes = &n }},
		{"no rows", "weights has 0 rows", func(s *Spec) { s.Layers[1].Weights = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tinySpec()
			tc.edit(s)
			_, err := Compile(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compile error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseSpecStrict(t *testing.T) {
	if _, err := ParseSpec([]byte(`{"inputs":[],"weigths":[]}`)); err == nil || !strings.Contains(err.Error(), "weigths") {
		t.Errorf("unknown field: %v", err)
	}
	if _, err := ParseSpec([]byte(`{} {}`)); err == nil {
		t.Error("trailing data accepted")
	}
	if _, err := ParseSpec([]byte(`{"layers":[{"bias":[1e999]}]}`)); err == nil {
		t.Error("1e999 accepted")
	}
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`# comment
name: "m1"  # trailing
backend: "mce_dense"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
parameters { key: "name" value: { string_value: "nested ]" } }
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "m1" || c.Backend != Backend || c.MaxBatchSize != 8 {
		t.Errorf("config %+v", c)
	}
	for in, want := range map[string]string{
		`input [ { name: "x" }`:        "unclosed",
		`input { ] }`:                  "unbalanced",
		`name: "x`:                     "unterminated",
		`name: x`:                      "name must be a string",
		`max_batch_size: -2`:           "max_batch_size",
		`platform: "onnxruntime_onnx"`: "not supported",
		`backend: "python"`:            "not supported",
		"name: \"a\" @":                "unexpected character",
	} {
		if _, err := ParseConfig([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseConfig(%q) = %v, want %q", in, err, want)
		}
	}
}

func specJSON(t testing.TB, s *Spec) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLoadFSLayouts(t *testing.T) {
	mj := specJSON(t, tinySpec())
	cfg := []byte("name: \"tiny\"\nmax_batch_size: 4\n")
	for _, tc := range []struct {
		name, dir, version string
		fs                 fstest.MapFS
	}{
		{"root", ".", "1", fstest.MapFS{"model.json": {Data: mj}, "config.pbtxt": {Data: cfg}}},
		{"version dirs", ".", "3", fstest.MapFS{"config.pbtxt": {Data: cfg}, "1/model.json": {Data: mj},
			"3/model.json": {Data: mj}, "10/other": {Data: nil}, "02/model.json": {Data: []byte("bad")}}},
		{"repository", "tiny", "1", fstest.MapFS{"tiny/config.pbtxt": {Data: cfg}, "tiny/1/model.json": {Data: mj}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := ResolveModelDir(tc.fs)
			if err != nil || dir != tc.dir {
				t.Fatalf("ResolveModelDir = %q, %v; want %q", dir, err, tc.dir)
			}
			sub := tc.fs
			if dir != "." {
				sub = fstest.MapFS{}
				for k, v := range tc.fs {
					if rest, ok := strings.CutPrefix(k, dir+"/"); ok {
						sub[rest] = v
					}
				}
			}
			m, err := LoadFS(sub)
			if err != nil {
				t.Fatal(err)
			}
			if m.Version != tc.version || m.Name != "tiny" || m.MaxBatchSize != 4 {
				t.Errorf("version %q name %q max batch %d", m.Version, m.Name, m.MaxBatchSize)
			}
		})
	}
}

func TestLoadFSErrors(t *testing.T) {
	mj := specJSON(t, tinySpec())
	for _, tc := range []struct {
		name, want string
		fs         fstest.MapFS
	}{
		{"empty", "no model.json", fstest.MapFS{"README": {}}},
		{"bad config", "config.pbtxt", fstest.MapFS{"config.pbtxt": {Data: []byte("{")}, "model.json": {Data: mj}}},
		{"bad json", "model.json", fstest.MapFS{"model.json": {Data: []byte("{")}}},
		{"invalid", "layers", fstest.MapFS{"model.json": {Data: []byte(`{"inputs":[{"name":"a","datatype":"FP32","shape":[2]}],"outputs":[{"name":"b","datatype":"FP32","shape":[1]}]}`)}}},
		{"too big", "more than", fstest.MapFS{"model.json": {Data: make([]byte, MaxModelFileBytes+1)}}},
		{"not regular", "not a regular file", fstest.MapFS{"model.json/x": {Data: mj}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadFS(tc.fs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadFS error %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := ResolveModelDir(fstest.MapFS{"a/model.json": {Data: mj}, "b/model.json": {Data: mj}}); err == nil ||
		!strings.Contains(err.Error(), "found 2 directories") {
		t.Errorf("two model dirs: %v", err)
	}
}
