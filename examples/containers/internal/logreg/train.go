package logreg

import (
	"errors"
	"fmt"
)

// TrainOptions tunes Train. Zero values take the defaults noted.
type TrainOptions struct {
	// Epochs is the number of full-batch gradient steps (default 2000).
	Epochs int
	// LearningRate is the step size (default 0.5).
	LearningRate float64
	// L2 is the weight-decay strength applied to the weights, not the biases (default 1e-3).
	L2 float64
}

func (o TrainOptions) withDefaults() TrainOptions {
	if o.Epochs == 0 {
		o.Epochs = 2000
	}
	if o.LearningRate == 0 {
		o.LearningRate = 0.5
	}
	if o.L2 == 0 {
		o.L2 = 1e-3
	}
	return o
}

// ErrBadTrainingData marks unusable training input.
var ErrBadTrainingData = errors.New("bad training data")

// Train fits a model by full-batch gradient descent on the mean cross-entropy plus L2 on the weights,
// starting from zeros. x[i] is a feature vector and y[i] the index into labels of its class. With the same
// inputs it returns the same model, bit for bit, on every platform.
func Train(x [][]float64, y []int, labels []string, o TrainOptions) (*Model, error) {
	o = o.withDefaults()
	if len(x) == 0 || len(x) != len(y) {
		return nil, fmt.Errorf("%w: %d vectors and %d labels", ErrBadTrainingData, len(x), len(y))
	}
	k, d := len(labels), len(x[0])
	for i := range x {
		if len(x[i]) != d {
			return nil, fmt.Errorf("%w: vector %d has %d features, vector 1 has %d", ErrBadTrainingData, i+1, len(x[i]), d)
		}
		if y[i] < 0 || y[i] >= k {
			return nil, fmt.Errorf("%w: label index %d out of range", ErrBadTrainingData, y[i])
		}
	}
	m := &Model{Format: Format, Labels: append([]string(nil), labels...), Weights: make([][]float64, k), Bias: make([]float64, k)}
	for c := range m.Weights {
		m.Weights[c] = make([]float64, d)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	gw := make([][]float64, k)
	for c := range gw {
		gw[c] = make([]float64, d)
	}
	gb := make([]float64, k)
	p := make([]float64, k)
	inv := 1 / float64(len(x))
	for range o.Epochs {
		for c := range gw {
			clear(gw[c])
		}
		clear(gb)
		for i, xi := range x {
			p = m.Probabilities(xi, p)
			for c := range k {
				g := p[c]
				if c == y[i] {
					g--
				}
				gb[c] += g
				row := gw[c]
				for j, v := range xi {
					row[j] += float64(g * v)
				}
			}
		}
		for c := range k {
			row, grad := m.Weights[c], gw[c]
			for j := range row {
				row[j] -= float64(o.LearningRate * (float64(grad[j]*inv) + float64(o.L2*row[j])))
			}
			m.Bias[c] -= float64(o.LearningRate * gb[c] * inv)
		}
	}
	return m, nil
}
