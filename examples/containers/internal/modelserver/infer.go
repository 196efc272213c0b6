package modelserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

// BinaryContentType is the prefix of Triton's binary tensor extension media type, which modelserver does not
// implement.
const BinaryContentType = "application/vnd.sagemaker-triton.binary+json"

// maxDataDepth bounds the nesting of a "data" array.
const maxDataDepth = 32

// InferInput is one input tensor of a KServe v2 request.
type InferInput struct {
	Name       string          `json:"name"`
	Shape      []int64         `json:"shape"`
	Datatype   string          `json:"datatype"`
	Parameters json.RawMessage `json:"parameters,omitempty"`
	Data       json.RawMessage `json:"data"`
}

// RequestedOutput names an output the caller wants.
type RequestedOutput struct {
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// InferRequest is a KServe v2 inference request (https://github.com/kserve/kserve/blob/master/docs/predict-api/v2/required_api.md, https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_model_repository.md).
type InferRequest struct {
	ID         string            `json:"id,omitempty"`
	Parameters json.RawMessage   `json:"parameters,omitempty"`
	Inputs     []InferInput      `json:"inputs"`
	Outputs    []RequestedOutput `json:"outputs,omitempty"`
}

// InferOutput is one output tensor of a response. Data is []float32 or []float64.
type InferOutput struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
	Data     any     `json:"data"`
}

// InferResponse is a KServe v2 inference response.
type InferResponse struct {
	ModelName    string        `json:"model_name"`
	ModelVersion string        `json:"model_version"`
	ID           string        `json:"id,omitempty"`
	Outputs      []InferOutput `json:"outputs"`
}

// Batch is a decoded, validated request for one model.
type Batch struct {
	ID   string
	Rows int
	X    []float64
	// Outputs reports whether the model's output was asked for (true when the request names no outputs).
	Output bool
}

func badRequest(format string, a ...any) error {
	return smserve.Errorf(http.StatusBadRequest, format, a...)
}

// DecodeRequest parses and validates a KServe v2 JSON body for m, called name in messages.
func (m *Model) DecodeRequest(name string, body []byte) (*Batch, error) {
	var req InferRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, badRequest("failed to parse the request JSON buffer: %v", err)
	}
	if len(req.Inputs) != 1 {
		return nil, badRequest("expected 1 inputs but got %d inputs for model '%s'", len(req.Inputs), name)
	}
	in := req.Inputs[0]
	if in.Name != m.Input.Name {
		return nil, badRequest("unexpected inference input '%s' for model '%s'", in.Name, name)
	}
	if in.Datatype != m.Input.Datatype {
		return nil, badRequest("inference input '%s' data-type is '%s', but model '%s' expects '%s'",
			in.Name, in.Datatype, name, m.Input.Datatype)
	}
	rows, err := m.checkShape(name, in)
	if err != nil {
		return nil, err
	}
	if len(in.Data) == 0 || string(in.Data) == "null" {
		return nil, badRequest("input '%s' has no 'data' (binary tensor data is not supported)", in.Name)
	}
	want := rows * m.inFeatures
	x, err := flatten(in.Data, want, m.fp32)
	if err != nil {
		return nil, badRequest("unable to parse 'data' of input '%s': %v", in.Name, err)
	}
	if len(x) != want {
		return nil, badRequest("unable to parse 'data' of input '%s': shape %s has %d elements but 'data' has %d",
			in.Name, formatShape(in.Shape), want, len(x))
	}
	b := &Batch{ID: req.ID, Rows: rows, X: x, Output: len(req.Outputs) == 0}
	for _, o := range req.Outputs {
		if o.Name != m.Output.Name {
			return nil, badRequest("unexpected inference output '%s' for model '%s'", o.Name, name)
		}
		b.Output = true
	}
	return b, nil
}

// checkShape checks a request shape against the model input and returns the number of rows.
func (m *Model) checkShape(name string, in InferInput) (int, error) {
	bad := func() error {
		return badRequest("unexpected shape for input '%s' for model '%s'. Expected %s, got %s",
			in.Name, name, formatShape(m.Input.Shape), formatShape(in.Shape))
	}
	if len(in.Shape) != len(m.Input.Shape) {
		return 0, bad()
	}
	rows := 1
	for i, d := range in.Shape {
		md := m.Input.Shape[i]
		switch {
		case md == -1:
			if d < 0 || d > math.MaxInt32 {
				return 0, bad()
			}
			rows = int(d)
		case d != md:
			return 0, bad()
		}
	}
	if int64(rows)*int64(m.inFeatures) > smserve.MaxBodyBytes {
		return 0, badRequest("input '%s' shape %s has more elements than a request can carry", in.Name, formatShape(in.Shape))
	}
	if m.batched && m.MaxBatchSize > 0 && rows > m.MaxBatchSize {
		return 0, badRequest("inference request batch-size must be <= %d for '%s'", m.MaxBatchSize, name)
	}
	return rows, nil
}

func formatShape(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// flatten reads a JSON number or nested arrays of numbers, row-major. It reads at most limit+1 numbers
// (so the caller can tell that there were too many). raw must be valid JSON (json.Unmarshal checked it).
func flatten(raw []byte, limit int, fp32 bool) ([]float64, error) {
	p := flattener{b: raw, limit: limit, fp32: fp32, out: make([]float64, 0, min(limit, 1<<16))}
	if err := p.value(0); err != nil {
		return nil, err
	}
	return p.out, nil
}

type flattener struct {
	b     []byte
	i     int
	limit int
	fp32  bool
	out   []float64
}

var errTooMany = errors.New("more elements than the shape holds")

func (p *flattener) skipSpace() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *flattener) value(depth int) error {
	p.skipSpace()
	if p.i >= len(p.b) {
		return errors.New("unexpected end of data")
	}
	switch c := p.b[p.i]; {
	case c == '[':
		if depth >= maxDataDepth {
			return fmt.Errorf("arrays nested deeper than %d", maxDataDepth)
		}
		p.i++
		p.skipSpace()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return nil
		}
		for {
			if err := p.value(depth + 1); err != nil {
				return err
			}
			p.skipSpace()
			if p.i >= len(p.b) {
				return errors.New("unexpected end of data")
			}
			switch p.b[p.i] {
			case ',':
				p.i++
			case ']':
				p.i++
				return nil
			default:
				return fmt.Errorf("unexpected %q in data", p.b[p.i])
			}
		}
	case c == '-' || (c >= '0' && c <= '9'):
		j := p.i
		for j < len(p.b) && strings.IndexByte("+-.eE0123456789", p.b[j]) >= 0 {
			j++
		}
		v, err := strconv.ParseFloat(string(p.b[p.i:j]), 64)
		if err != nil {
			return fmt.Errorf("bad or out-of-range number %s", p.b[p.i:j])
		}
		if p.fp32 && math.Abs(v) > math.MaxFloat32 {
			return fmt.Errorf("number %s is out of the FP32 range", p.b[p.i:j])
		}
		if len(p.out) == p.limit {
			return errTooMany
		}
		if p.fp32 {
			v = float64(float32(v))
		}
		p.out = append(p.out, v)
		p.i = j
		return nil
	default:
		return fmt.Errorf("expected numbers or arrays of numbers, found %s", describeJSON(c))
	}
}

func describeJSON(c byte) string {
	switch c {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return strconv.QuoteRune(rune(c))
}

// Run computes the response to b. name is the model name to report.
func (m *Model) Run(name string, b *Batch) (*InferResponse, error) {
	y := m.Forward(b.X, b.Rows)
	for _, v := range y {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, badRequest("model '%s' produced a value that is not finite (overflow in %s)", name, m.Output.Datatype)
		}
	}
	resp := &InferResponse{ModelName: name, ModelVersion: m.Version, ID: b.ID, Outputs: []InferOutput{}}
	if !b.Output {
		return resp, nil
	}
	shape := make([]int64, 0, len(m.Output.Shape))
	for _, d := range m.Output.Shape {
		if d == -1 {
			d = int64(b.Rows)
		}
		shape = append(shape, d)
	}
	out := InferOutput{Name: m.Output.Name, Datatype: m.Output.Datatype, Shape: shape}
	if m.Output.Datatype == FP32 {
		d := make([]float32, len(y))
		for i, v := range y {
			d[i] = float32(v)
			if math.IsInf(float64(d[i]), 0) {
				return nil, badRequest("model '%s' produced a value that is not finite (overflow in FP32)", name)
			}
		}
		out.Data = d
	} else {
		out.Data = y
	}
	resp.Outputs = append(resp.Outputs, out)
	return resp, nil
}

// checkContentType refuses Triton's binary tensor extension; any other Content-Type is read as JSON, as
// Triton does.
func checkContentType(r *http.Request) error {
	if ct := r.Header.Get("Content-Type"); strings.HasPrefix(strings.TrimSpace(strings.ToLower(ct)), BinaryContentType) {
		return badRequest("binary tensor data (%s) is not supported by modelserver; send KServe v2 JSON", ct)
	}
	return nil
}
