package logreg

import "math"

// Probabilities returns softmax(W·x + b), one probability per label, reusing dst when large enough.
// x must have Features() values.
func (m *Model) Probabilities(x, dst []float64) []float64 {
	k := len(m.Labels)
	if cap(dst) < k {
		dst = make([]float64, k)
	}
	dst = dst[:k]
	for i, row := range m.Weights {
		dst[i] = m.Bias[i] + dot(row, x)
	}
	softmax(dst)
	return dst
}

// Predict returns the index of the most probable label (the first on ties) and the probabilities.
func (m *Model) Predict(x, dst []float64) (int, []float64) {
	p := m.Probabilities(x, dst)
	best := 0
	for i := range p {
		if p[i] > p[best] {
			best = i
		}
	}
	return best, p
}

// dot is Σ a[i]·b[i]. The explicit float64 conversion stops the compiler from fusing multiply and add,
// so results are bit-identical on every architecture (and training is reproducible).
func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += float64(a[i] * b[i])
	}
	return s
}

// softmax replaces z by exp(z-max)/Σexp(z-max) in place.
func softmax(z []float64) {
	mx := math.Inf(-1)
	for _, v := range z {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range z {
		z[i] = math.Exp(v - mx)
		sum += z[i]
	}
	for i := range z {
		z[i] /= sum
	}
}
