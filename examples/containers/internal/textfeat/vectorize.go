package textfeat

import "math"

// Vectorize returns the feature vector of doc: for each vocabulary token the number of times it occurs,
// the whole vector then scaled to unit Euclidean length (L2), so that long and short documents are
// comparable. A document with no known token gives all zeros. The result reuses dst's storage when it is
// large enough.
func (v *Vocabulary) Vectorize(doc string, dst []float64) []float64 {
	n := len(v.tokens)
	if cap(dst) < n {
		dst = make([]float64, n)
	}
	dst = dst[:n]
	clear(dst)
	for _, tok := range Tokenize(doc) {
		if i, ok := v.index[tok]; ok {
			dst[i]++
		}
	}
	var sum float64
	for _, x := range dst {
		sum += x * x
	}
	if sum == 0 {
		return dst
	}
	inv := 1 / math.Sqrt(sum)
	for i := range dst {
		dst[i] *= inv
	}
	return dst
}
