package logreg

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestProbabilities(t *testing.T) {
	m := &Model{Format: Format, Labels: []string{"a", "b", "c"},
		Weights: [][]float64{{1, 0}, {0, 1}, {0, 0}}, Bias: []float64{0, 0, math.Log(2)}}
	tests := []struct {
		x    []float64
		want []float64
	}{
		{[]float64{0, 0}, []float64{0.25, 0.25, 0.5}},
		{[]float64{math.Log(2), 0}, []float64{0.4, 0.2, 0.4}},
		{[]float64{1000, 0}, []float64{1, 0, 0}}, // no overflow
	}
	for _, tt := range tests {
		got := m.Probabilities(tt.x, nil)
		for i := range got {
			if math.Abs(got[i]-tt.want[i]) > 1e-12 {
				t.Errorf("Probabilities(%v) = %v, want %v", tt.x, got, tt.want)
				break
			}
		}
	}
	if i, _ := m.Predict([]float64{0, 5}, nil); i != 1 {
		t.Errorf("Predict = %d, want 1", i)
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr bool
	}{
		{"ok", `{"format":"mce-logreg/1","labels":["a","b"],"weights":[[1,2],[3,4]],"bias":[0,1]}`, false},
		{"wrong format", `{"format":"x","labels":["a","b"],"weights":[[1],[3]],"bias":[0,1]}`, true},
		{"one label", `{"format":"mce-logreg/1","labels":["a"],"weights":[[1]],"bias":[0]}`, true},
		{"duplicate label", `{"format":"mce-logreg/1","labels":["a","a"],"weights":[[1],[3]],"bias":[0,1]}`, true},
		{"ragged", `{"format":"mce-logreg/1","labels":["a","b"],"weights":[[1,2],[3]],"bias":[0,1]}`, true},
		{"no features", `{"format":"mce-logreg/1","labels":["a","b"],"weights":[[],[]],"bias":[0,1]}`, true},
		{"bias short", `{"format":"mce-logreg/1","labels":["a","b"],"weights":[[1],[3]],"bias":[0]}`, true},
		{"unknown field", `{"format":"mce-logreg/1","labels":["a","b"],"weights":[[1],[3]],"bias":[0,1],"x":1}`, true},
		{"trailing data", `{"format":"mce-logreg/1","labels":["a","b"],"weights":[[1],[3]],"bias":[0,1]} {}`, true},
		{"not json", `weights`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode(strings.NewReader(tt.in))
			if tt.wantErr {
				if !errors.Is(err, ErrBadModel) {
					t.Fatalf("err = %v, want ErrBadModel", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Features() != 2 {
				t.Errorf("Features = %d, want 2", m.Features())
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(`{"format":"mce-logreg/1","labels":["a","b"],"weights":[[1,2],[3,4]],"bias":[0,1]}`)
	f.Add(`{"format":"mce-logreg/1","labels":["a","b"],"weights":[[1e308,2],[3,4]],"bias":[0,1]}`)
	f.Add(`{"labels":null}`)
	f.Fuzz(func(t *testing.T, in string) {
		m, err := Decode(strings.NewReader(in))
		if err != nil {
			return
		}
		// A model that validates must predict a probability distribution for a zero vector.
		p := m.Probabilities(make([]float64, m.Features()), nil)
		var sum float64
		for _, v := range p {
			sum += v
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("probabilities %v sum to %v", p, sum)
		}
	})
}

// twoBlobs is a separable toy problem: class 0 near (1,0), class 1 near (0,1), class 2 near (1,1).
func twoBlobs() ([][]float64, []int) {
	x := [][]float64{{1, 0}, {0.9, 0.1}, {0, 1}, {0.1, 0.9}, {1, 1}, {0.9, 1}}
	y := []int{0, 0, 1, 1, 2, 2}
	return x, y
}

func TestTrainLearnsAndIsDeterministic(t *testing.T) {
	x, y := twoBlobs()
	labels := []string{"east", "north", "both"}
	m1, err := Train(x, y, labels, TrainOptions{Epochs: 3000, LearningRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, xi := range x {
		if got, p := m1.Predict(xi, nil); got != y[i] {
			t.Errorf("sample %d: predicted %s (%v), want %s", i, labels[got], p, labels[y[i]])
		}
	}
	m2, err := Train(x, y, labels, TrainOptions{Epochs: 3000, LearningRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	var b1, b2 bytes.Buffer
	if err := m1.Encode(&b1); err != nil {
		t.Fatal(err)
	}
	if err := m2.Encode(&b2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1.Bytes(), b2.Bytes()) {
		t.Error("two trainings on the same data differ")
	}
	back, err := Decode(&b1)
	if err != nil {
		t.Fatalf("decode encoded model: %v", err)
	}
	if back.Weights[2][1] != m1.Weights[2][1] {
		t.Errorf("round trip changed a weight: %v vs %v", back.Weights[2][1], m1.Weights[2][1])
	}
}

func TestTrainRejects(t *testing.T) {
	tests := []struct {
		name   string
		x      [][]float64
		y      []int
		labels []string
	}{
		{"empty", nil, nil, []string{"a", "b"}},
		{"length mismatch", [][]float64{{1}}, []int{0, 1}, []string{"a", "b"}},
		{"ragged", [][]float64{{1}, {1, 2}}, []int{0, 1}, []string{"a", "b"}},
		{"label out of range", [][]float64{{1}}, []int{2}, []string{"a", "b"}},
		{"one label", [][]float64{{1}}, []int{0}, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Train(tt.x, tt.y, tt.labels, TrainOptions{Epochs: 1})
			if !errors.Is(err, ErrBadTrainingData) && !errors.Is(err, ErrBadModel) {
				t.Errorf("err = %v, want ErrBadTrainingData or ErrBadModel", err)
			}
		})
	}
}
