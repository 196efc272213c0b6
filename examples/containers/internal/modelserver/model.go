package modelserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"strings"
)

// File names inside a model directory.
const (
	ModelFile  = "model.json"
	ConfigFile = "config.pbtxt"
)

// Backend is the backend (or platform) a config.pbtxt may name.
const Backend = "mce_dense"

// Format is the optional "format" value of model.json.
const Format = "mce-dense/1"

// Limits on model files and networks.
const (
	MaxModelFileBytes  = 64 << 20
	MaxConfigFileBytes = 1 << 20
	MaxLayers          = 64
	MaxWidth           = 1 << 16
	MaxParams          = 1 << 24
	MaxMemoryBytes     = 1 << 50
)

// Datatypes a model can take and give (KServe v2 names).
const (
	FP32 = "FP32"
	FP64 = "FP64"
)

// TensorSpec describes a model input or output: its name, KServe v2 datatype and shape, where -1 in the
// first dimension is the batch dimension.
type TensorSpec struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

// LayerSpec is one dense layer: out = activation(weights · in + bias), with weights given as one row of
// `in` numbers per output unit.
type LayerSpec struct {
	Weights    [][]float64 `json:"weights"`
	Bias       []float64   `json:"bias"`
	Activation string      `json:"activation,omitempty"`
}

// Spec is the content of model.json.
type Spec struct {
	Format      string       `json:"format,omitempty"`
	Description string       `json:"description,omitempty"`
	Inputs      []TensorSpec `json:"inputs"`
	Outputs     []TensorSpec `json:"outputs"`
	Layers      []LayerSpec  `json:"layers"`
	// MemoryBytes, when set, is the model's footprint in the memory budget instead of the bytes of its
	// weights (to simulate big models).
	MemoryBytes *int64 `json:"memory_bytes,omitempty"`
}

// Activations.
const (
	ActNone    = "none"
	ActReLU    = "relu"
	ActSigmoid = "sigmoid"
	ActTanh    = "tanh"
	ActSoftmax = "softmax"
)

var activations = []string{ActNone, ActReLU, ActSigmoid, ActTanh, ActSoftmax}

type layer struct {
	in, out int
	w       []float64 // out rows of in weights
	b       []float64
	act     string
}

// Model is a validated, ready-to-run network. It is immutable and safe for concurrent use.
type Model struct {
	// Name is the name in config.pbtxt, if any.
	Name string
	// Version is the version directory model.json came from, "1" when it sits at the model root.
	Version string
	// MaxBatchSize is config.pbtxt's max_batch_size (0: no limit).
	MaxBatchSize int
	Input        TensorSpec
	Output       TensorSpec
	// Params counts weights and biases.
	Params int64
	// Footprint is what the model takes from the memory budget.
	Footprint int64

	fp32        bool
	batched     bool
	inFeatures  int
	outFeatures int
	maxWidth    int
	layers      []layer
}

// Describe summarises the model for logs.
func (m *Model) Describe() string {
	widths := []string{strconv.Itoa(m.inFeatures)}
	for _, l := range m.layers {
		widths = append(widths, strconv.Itoa(l.out))
	}
	return fmt.Sprintf("%s %s→%s, layers %s, %d params, %d bytes", m.Input.Datatype, m.Input.Name, m.Output.Name,
		strings.Join(widths, "→"), m.Params, m.Footprint)
}

// Widths returns the input width followed by every layer's output width.
func (m *Model) Widths() []int {
	w := []int{m.inFeatures}
	for _, l := range m.layers {
		w = append(w, l.out)
	}
	return w
}

// ParseSpec decodes model.json strictly (unknown fields are errors).
func ParseSpec(b []byte) (*Spec, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", ModelFile, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: unexpected data after the JSON object", ModelFile)
	}
	return &s, nil
}

// Compile validates s and builds the model.
func Compile(s *Spec) (*Model, error) {
	if s.Format != "" && s.Format != Format {
		return nil, fmt.Errorf("format %q is not %q", s.Format, Format)
	}
	if len(s.Inputs) != 1 || len(s.Outputs) != 1 {
		return nil, fmt.Errorf("a model has exactly one input and one output, not %d and %d", len(s.Inputs), len(s.Outputs))
	}
	in, out := s.Inputs[0], s.Outputs[0]
	inBatch, inFeat, err := checkTensor("inputs[0]", in)
	if err != nil {
		return nil, err
	}
	outBatch, outFeat, err := checkTensor("outputs[0]", out)
	if err != nil {
		return nil, err
	}
	if inBatch != outBatch {
		return nil, errors.New("either both or neither of the input and output shapes start with the batch dimension -1")
	}
	if in.Name == out.Name {
		return nil, fmt.Errorf("input and output are both named %q", in.Name)
	}
	if len(s.Layers) == 0 || len(s.Layers) > MaxLayers {
		return nil, fmt.Errorf("a model has 1 to %d layers, not %d", MaxLayers, len(s.Layers))
	}
	m := &Model{
		Version: "1", Input: cloneTensor(in), Output: cloneTensor(out),
		fp32: in.Datatype == FP32, batched: inBatch, inFeatures: inFeat, outFeatures: outFeat, maxWidth: inFeat,
	}
	width := inFeat
	for i, ls := range s.Layers {
		l, err := compileLayer(ls, width, m.fp32)
		if err != nil {
			return nil, fmt.Errorf("layers[%d]: %w", i, err)
		}
		m.Params += int64(len(l.w) + len(l.b))
		if m.Params > MaxParams {
			return nil, fmt.Errorf("more than %d parameters", MaxParams)
		}
		m.layers = append(m.layers, l)
		m.maxWidth = max(m.maxWidth, l.out)
		width = l.out
	}
	if width != outFeat {
		return nil, fmt.Errorf("the last layer gives %d values per row but output %q has shape %v", width, out.Name, out.Shape)
	}
	elem := int64(8)
	if m.fp32 {
		elem = 4
	}
	m.Footprint = m.Params * elem
	if s.MemoryBytes != nil {
		if *s.MemoryBytes < 0 || *s.MemoryBytes > MaxMemoryBytes {
			return nil, fmt.Errorf("memory_bytes %d is outside 0…%d", *s.MemoryBytes, int64(MaxMemoryBytes))
		}
		m.Footprint = *s.MemoryBytes
	}
	return m, nil
}

func cloneTensor(t TensorSpec) TensorSpec {
	t.Shape = slices.Clone(t.Shape)
	return t
}

// checkTensor validates a tensor spec and returns whether it is batched and its features per row.
func checkTensor(where string, t TensorSpec) (batched bool, features int, err error) {
	if t.Name == "" {
		return false, 0, fmt.Errorf("%s: name is empty", where)
	}
	if t.Datatype != FP32 && t.Datatype != FP64 {
		return false, 0, fmt.Errorf("%s %q: datatype %q is not FP32 or FP64", where, t.Name, t.Datatype)
	}
	if len(t.Shape) == 0 || len(t.Shape) > 8 {
		return false, 0, fmt.Errorf("%s %q: shape %v must have 1 to 8 dimensions", where, t.Name, t.Shape)
	}
	features = 1
	for i, d := range t.Shape {
		switch {
		case d == -1 && i == 0:
			batched = true
		case d >= 1 && d <= MaxWidth:
			features *= int(d)
			if features > MaxWidth {
				return false, 0, fmt.Errorf("%s %q: shape %v has more than %d values per row", where, t.Name, t.Shape, MaxWidth)
			}
		default:
			return false, 0, fmt.Errorf("%s %q: shape %v: dimensions are 1…%d, or -1 first for the batch", where, t.Name, t.Shape, MaxWidth)
		}
	}
	if batched && len(t.Shape) == 1 {
		return false, 0, fmt.Errorf("%s %q: shape %v has only the batch dimension", where, t.Name, t.Shape)
	}
	return batched, features, nil
}

func compileLayer(ls LayerSpec, in int, fp32 bool) (layer, error) {
	out := len(ls.Weights)
	if out == 0 || out > MaxWidth {
		return layer{}, fmt.Errorf("weights has %d rows (1…%d)", out, MaxWidth)
	}
	if len(ls.Bias) != out {
		return layer{}, fmt.Errorf("weights has %d rows but bias has %d values", out, len(ls.Bias))
	}
	if int64(out)*int64(in) > MaxParams {
		return layer{}, fmt.Errorf("more than %d parameters", MaxParams)
	}
	act := ls.Activation
	if act == "" {
		act = ActNone
	}
	if !slices.Contains(activations, act) {
		return layer{}, fmt.Errorf("activation %q is not one of %s", ls.Activation, strings.Join(activations, ", "))
	}
	l := layer{in: in, out: out, w: make([]float64, 0, out*in), b: make([]float64, out), act: act}
	for j, row := range ls.Weights {
		if len(row) != in {
			return layer{}, fmt.Errorf("weights row %d has %d values, the layer takes %d inputs", j, len(row), in)
		}
		for _, v := range row {
			v, err := fit(v, fp32)
			if err != nil {
				return layer{}, fmt.Errorf("weights row %d: %w", j, err)
			}
			l.w = append(l.w, v)
		}
	}
	for j, v := range ls.Bias {
		v, err := fit(v, fp32)
		if err != nil {
			return layer{}, fmt.Errorf("bias[%d]: %w", j, err)
		}
		l.b[j] = v
	}
	return l, nil
}

// fit rounds v to float32 when fp32 is set and refuses values that are not finite there.
func fit(v float64, fp32 bool) (float64, error) {
	if fp32 {
		v = float64(float32(v))
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("value %g does not fit the datatype", v)
	}
	return v, nil
}

// Forward runs rows (rows × input features, row-major) through the network and returns rows × output
// features. It allocates what ScratchBytes(rows) accounts for.
func (m *Model) Forward(x []float64, rows int) []float64 {
	cur := x
	for _, l := range m.layers {
		next := make([]float64, rows*l.out)
		for r := range rows {
			in := cur[r*l.in : (r+1)*l.in]
			o := next[r*l.out : (r+1)*l.out]
			for j := range l.out {
				w := l.w[j*l.in : (j+1)*l.in]
				s := l.b[j]
				for i, v := range in {
					s += w[i] * v
				}
				o[j] = s
			}
			activate(o, l.act)
			if m.fp32 {
				for j, v := range o {
					o[j] = float64(float32(v))
				}
			}
		}
		cur = next
	}
	return cur
}

func activate(o []float64, act string) {
	switch act {
	case ActReLU:
		for j, v := range o {
			if v < 0 || math.IsNaN(v) {
				o[j] = 0
			}
		}
	case ActSigmoid:
		for j, v := range o {
			o[j] = 1 / (1 + math.Exp(-v))
		}
	case ActTanh:
		for j, v := range o {
			o[j] = math.Tanh(v)
		}
	case ActSoftmax:
		hi := math.Inf(-1)
		for _, v := range o {
			hi = max(hi, v)
		}
		sum := 0.0
		for j, v := range o {
			o[j] = math.Exp(v - hi)
			sum += o[j]
		}
		for j := range o {
			o[j] /= sum
		}
	}
}

// ScratchBytes is the working memory one request of rows rows needs: its input and every layer's output
// as float64.
func (m *Model) ScratchBytes(rows int) int64 {
	per := int64(m.inFeatures)
	for _, l := range m.layers {
		per += int64(l.out)
	}
	return 8 * per * int64(rows)
}

// Config is what modelserver reads from a Triton-style config.pbtxt: top-level scalar fields only.
type Config struct {
	Name         string
	Backend      string
	Platform     string
	MaxBatchSize int
}

// ParseConfig reads the top-level name, backend, platform and max_batch_size of a protobuf text-format
// model configuration and checks that the text is well formed (tokens, strings, balanced brackets). Other
// fields (input, output, instance_group, …) are accepted and ignored.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	toks, err := tokenize(string(b))
	if err != nil {
		return c, err
	}
	var stack []byte
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch t.text {
		case "{", "[", "<":
			stack = append(stack, t.text[0])
			continue
		case "}", "]", ">":
			want := map[string]byte{"}": '{', "]": '[', ">": '<'}[t.text]
			if len(stack) == 0 || stack[len(stack)-1] != want {
				return c, fmt.Errorf("line %d: unbalanced %q", t.line, t.text)
			}
			stack = stack[:len(stack)-1]
			continue
		}
		if len(stack) != 0 || t.kind != tokIdent || i+2 >= len(toks) || toks[i+1].text != ":" {
			continue
		}
		v := toks[i+2]
		switch t.text {
		case "name", "backend", "platform":
			if v.kind != tokString {
				return c, fmt.Errorf("line %d: %s must be a string", v.line, t.text)
			}
			switch t.text {
			case "name":
				c.Name = v.text
			case "backend":
				c.Backend = v.text
			default:
				c.Platform = v.text
			}
		case "max_batch_size":
			n, err := strconv.Atoi(v.text)
			if v.kind != tokNumber || err != nil || n < 0 {
				return c, fmt.Errorf("line %d: max_batch_size must be a non-negative integer, not %q", v.line, v.text)
			}
			c.MaxBatchSize = n
		}
		i += 2
	}
	if len(stack) != 0 {
		return c, fmt.Errorf("unclosed %q", string(stack[len(stack)-1]))
	}
	for _, v := range []string{c.Backend, c.Platform} {
		if v != "" && v != Backend {
			return c, fmt.Errorf("backend %q is not supported: modelserver runs %q models (model.json)", v, Backend)
		}
	}
	return c, nil
}

type tokKind int

const (
	tokIdent tokKind = iota
	tokString
	tokNumber
	tokPunct
)

type token struct {
	kind tokKind
	text string
	line int
}

func tokenize(s string) ([]token, error) {
	var toks []token
	line := 1
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'':
			j := i + 1
			var sb strings.Builder
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\n' {
					return nil, fmt.Errorf("line %d: unterminated string", line)
				}
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				sb.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("line %d: unterminated string", line)
			}
			toks = append(toks, token{tokString, sb.String(), line})
			i = j + 1
		case strings.IndexByte("{}[]<>:,;", c) >= 0:
			toks = append(toks, token{tokPunct, string(c), line})
			i++
		case c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(s) && (isWordByte(s[j]) || s[j] == '.' || ((s[j] == '-' || s[j] == '+') && (s[j-1] == 'e' || s[j-1] == 'E'))) {
				j++
			}
			toks = append(toks, token{tokNumber, s[i:j], line})
			i = j
		case isWordByte(c):
			j := i + 1
			for j < len(s) && (isWordByte(s[j]) || s[j] == '.') {
				j++
			}
			toks = append(toks, token{tokIdent, s[i:j], line})
			i = j
		default:
			return nil, fmt.Errorf("line %d: unexpected character %q", line, c)
		}
	}
	return toks, nil
}

func isWordByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// LoadFS reads a model from fsys, whose root is the model directory: config.pbtxt (optional) and model.json
// at the root, or model.json in the highest numeric version directory (1/, 2/, …) as in a Triton model.
func LoadFS(fsys fs.FS) (*Model, error) {
	var cfg Config
	b, err := readCapped(fsys, ConfigFile, MaxConfigFileBytes)
	switch {
	case err == nil:
		if cfg, err = ParseConfig(b); err != nil {
			return nil, fmt.Errorf("%s: %w", ConfigFile, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	file, version, err := findModelFile(fsys)
	if err != nil {
		return nil, err
	}
	if b, err = readCapped(fsys, file, MaxModelFileBytes); err != nil {
		return nil, err
	}
	s, err := ParseSpec(b)
	if err != nil {
		return nil, err
	}
	m, err := Compile(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	m.Name, m.Version, m.MaxBatchSize = cfg.Name, version, cfg.MaxBatchSize
	return m, nil
}

// findModelFile returns model.json at the root (version "1") or in the highest version directory.
func findModelFile(fsys fs.FS) (file, version string, err error) {
	if _, err := fs.Stat(fsys, ModelFile); err == nil {
		return ModelFile, "1", nil
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return "", "", fmt.Errorf("read model directory: %w", err)
	}
	best := int64(-1)
	for _, e := range entries {
		n, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || n < 1 || strconv.FormatInt(n, 10) != e.Name() || !e.IsDir() {
			continue
		}
		if _, err := fs.Stat(fsys, e.Name()+"/"+ModelFile); err == nil && n > best {
			best = n
		}
	}
	if best < 0 {
		return "", "", fmt.Errorf("no %s at the model root or in a version directory (1/%s)", ModelFile, ModelFile)
	}
	v := strconv.FormatInt(best, 10)
	return v + "/" + ModelFile, v, nil
}

func readCapped(fsys fs.FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	} else if st.Size() > limit {
		return nil, fmt.Errorf("%s has %d bytes, more than %d", name, st.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s has more than %d bytes", name, limit)
	}
	return b, nil
}

// ResolveModelDir decides which directory of fsys holds the model: the root when it has config.pbtxt or
// model.json (or a version directory), else its only subdirectory (a Triton repository holding one model,
// <name>/config.pbtxt). It returns "." or the subdirectory's name.
func ResolveModelDir(fsys fs.FS) (string, error) {
	if hasModel(fsys, ".") {
		return ".", nil
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return "", fmt.Errorf("read model directory: %w", err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) == 1 && hasModel(fsys, dirs[0]) {
		return dirs[0], nil
	}
	return "", fmt.Errorf("no %s or %s at the model root, nor one model directory inside it (found %d directories)",
		ConfigFile, ModelFile, len(dirs))
}

func hasModel(fsys fs.FS, dir string) bool {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		return false
	}
	if _, err := fs.Stat(sub, ConfigFile); err == nil {
		return true
	}
	_, _, err = findModelFile(sub)
	return err == nil
}
