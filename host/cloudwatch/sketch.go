package cloudwatch

import (
	"math"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	ddstore "github.com/DataDog/sketches-go/ddsketch/store"
)

// Percentiles come from a DDSketch (github.com/DataDog/sketches-go): a
// histogram whose buckets grow geometrically (bucket i holds the values in
// (γ^(i-1), γ^i], γ = (1+α)/(1−α)); the index is computed by cubic
// interpolation of log₂ on the float's bits, not math.Log, which keeps the
// same guarantee for about 1 % more buckets and a third of the cost on the
// hot path. Every quantile it answers is within a relative error α
// of the true value at that rank, whatever the distribution, and two
// sketches of the same γ merge exactly by adding bucket counts — so
// one-minute datapoints add up into any longer period without losing the
// guarantee, which a t-digest or a sampled reservoir cannot promise. With
// α = 1 % a factor of 10 takes about 115 buckets (8 bytes each, for the
// values' actual range only); the store keeps at most maxBins, the lowest
// collapsing first, so only the smallest values of a period whose values
// span more than a factor of ~10^8 lose precision.
//
// CloudWatch defines percentiles on the raw values; it answers none for a
// period with a negative value, and neither does mce (the sketch keeps them,
// the answer omits them).
const (
	sketchAccuracy = 0.01
	maxBins        = 1024
)

// sketchMapping is shared by every sketch: the encoding omits it, and every
// sketch can merge with every other.
var sketchMapping = mustMapping()

func mustMapping() mapping.IndexMapping {
	m, err := mapping.NewCubicallyInterpolatedMapping(sketchAccuracy)
	if err != nil {
		panic(err) // a constant accuracy in (0, 1) cannot fail
	}
	return m
}

func newStore() ddstore.Store { return ddstore.NewCollapsingLowestDenseStore(maxBins) }

func newSketch() *ddsketch.DDSketch {
	return ddsketch.NewDDSketch(sketchMapping, newStore(), newStore())
}

// sketchAdd adds v; a value beyond what the mapping indexes (|v| > ~1e307)
// is counted at the edge, which keeps the count right.
func sketchAdd(s *ddsketch.DDSketch, v float64) {
	if err := s.Add(v); err != nil {
		_ = s.Add(math.Copysign(s.MaxIndexableValue(), v))
	}
}

// quantile answers percentile p (0..100) of a sketch whose exact minimum
// and maximum are min and max: p0 and p100 are those, any other the
// sketch's value clamped into [min, max].
func quantile(s *ddsketch.DDSketch, p, min, max float64) (float64, bool) {
	switch p {
	case 0:
		return min, true
	case 100:
		return max, true
	}
	v, err := s.GetValueAtQuantile(p / 100)
	if err != nil {
		return 0, false
	}
	if v < min {
		v = min
	}
	if v > max {
		v = max
	}
	return v, true
}
