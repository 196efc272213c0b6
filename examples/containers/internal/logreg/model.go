package logreg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// Format is the value of model.json's "format" field.
const Format = "mce-logreg/1"

// MaxModelBytes caps the size of a model.json file (outside input).
const MaxModelBytes = 64 << 20

// ErrBadModel marks an invalid model.
var ErrBadModel = errors.New("bad model")

// Model is a multinomial logistic regression: P(label i | x) = softmax(W·x + b)_i. It is read-only after
// Validate and then safe for concurrent use.
type Model struct {
	// Format must be Format.
	Format string `json:"format"`
	// Labels are the class names, one per row of Weights.
	Labels []string `json:"labels"`
	// Weights has one row per label, each as long as the feature vector.
	Weights [][]float64 `json:"weights"`
	// Bias has one value per label.
	Bias []float64 `json:"bias"`
}

// Validate checks the model's shape: at least two distinct non-empty labels, one weight row and one bias
// per label, rows of equal non-zero width, finite numbers. Errors wrap ErrBadModel.
func (m *Model) Validate() error {
	if m.Format != Format {
		return fmt.Errorf("%w: format %q, want %q", ErrBadModel, m.Format, Format)
	}
	if len(m.Labels) < 2 {
		return fmt.Errorf("%w: %d labels, need at least 2", ErrBadModel, len(m.Labels))
	}
	seen := make(map[string]bool, len(m.Labels))
	for _, l := range m.Labels {
		if l == "" || seen[l] {
			return fmt.Errorf("%w: empty or repeated label %q", ErrBadModel, l)
		}
		seen[l] = true
	}
	if len(m.Weights) != len(m.Labels) || len(m.Bias) != len(m.Labels) {
		return fmt.Errorf("%w: %d labels but %d weight rows and %d biases", ErrBadModel, len(m.Labels), len(m.Weights), len(m.Bias))
	}
	width := len(m.Weights[0])
	if width == 0 {
		return fmt.Errorf("%w: no features", ErrBadModel)
	}
	for i, row := range m.Weights {
		if len(row) != width {
			return fmt.Errorf("%w: weight row %d has %d values, row 1 has %d", ErrBadModel, i+1, len(row), width)
		}
		for _, w := range row {
			if math.IsNaN(w) || math.IsInf(w, 0) {
				return fmt.Errorf("%w: weight row %d is not finite", ErrBadModel, i+1)
			}
		}
		if math.IsNaN(m.Bias[i]) || math.IsInf(m.Bias[i], 0) {
			return fmt.Errorf("%w: bias %d is not finite", ErrBadModel, i+1)
		}
	}
	return nil
}

// Features returns the length of the feature vectors the model takes.
func (m *Model) Features() int { return len(m.Weights[0]) }

// Decode reads and validates a model.json document (unknown fields are errors), reading at most
// MaxModelBytes.
func Decode(r io.Reader) (*Model, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxModelBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read model: %w", err)
	}
	if len(data) > MaxModelBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBadModel, MaxModelBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Model
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadModel, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrBadModel)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Load reads the model.json file at path.
func Load(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Encode writes m as indented JSON. The output is a function of m alone (byte-for-byte reproducible).
func (m *Model) Encode(w io.Writer) error {
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
