package pipeline

import (
	"math"
	"math/rand/v2"
	"time"
)

// pickVariant returns the variant named target, or when target is empty one
// drawn with probability weight/sum over the variants with weight > 0.
// math/rand/v2's top-level functions use a per-thread generator, so there is
// no shared lock here.
func (r *Route) pickVariant(target string) (*Variant, error) {
	vs := r.Variants()
	if target != "" {
		for _, v := range vs {
			if v.name == target {
				return v, nil
			}
		}
		if r.shadow(target) != nil {
			return nil, &ValidationError{
				Endpoint: r.Endpoint,
				Message: "Variant " + target + " is a shadow variant of endpoint " + r.Endpoint +
					": it receives copies of the production variant's requests only, and cannot be named with TargetVariant.",
			}
		}
		return nil, &ValidationError{
			Endpoint: r.Endpoint,
			Message:  "Variant " + target + " is not a production variant of endpoint " + r.Endpoint + ".",
		}
	}
	if len(vs) == 1 && vs[0].Weight() > 0 {
		return vs[0], nil
	}
	var sum float64
	for _, v := range vs {
		sum += v.Weight()
	}
	if !(sum > 0) {
		return nil, &UnavailableError{
			Endpoint: r.Endpoint,
			Message:  "Endpoint " + r.Endpoint + " has no production variant with a weight above 0; name one with TargetVariant.",
		}
	}
	x := rand.Float64() * sum
	var last *Variant
	for _, v := range vs {
		w := v.Weight()
		if w <= 0 {
			continue
		}
		last = v
		if x < w {
			return v, nil
		}
		x -= w
	}
	// Rounding (or a weight lowered since the sum was taken) left x past the
	// end: the last variant with a weight takes it.
	if last != nil {
		return last, nil
	}
	return nil, &UnavailableError{
		Endpoint: r.Endpoint,
		Message:  "Endpoint " + r.Endpoint + " has no production variant with a weight above 0; name one with TargetVariant.",
	}
}

// choose returns the instance with the fewest outstanding requests among
// insts that are ready for the call, skipping exclude, ties broken uniformly
// at random; with random (RoutingStrategy RANDOM) it returns any ready
// instance with the same chance, whatever its load. Either way an instance
// suspected after a transport failure comes after every other. For Direct (direct true) the call needs the container named host
// and idx is its position in the chosen instance; for Serial every container
// must be ready and idx is -1. known reports whether host exists in any
// instance looked at (always true for Serial).
func choose(insts []*Instance, direct bool, host string, exclude *Instance, random bool) (best *Instance, idx int, known bool) {
	idx = -1
	known = !direct
	var least int64
	ties := 0
	now := time.Now().UnixNano()
	for _, in := range insts {
		if in == exclude {
			continue
		}
		i := -1
		if direct {
			if i = in.index(host); i < 0 {
				continue
			}
			known = true
		}
		if !in.readyFor(i) {
			continue
		}
		var n int64 // RANDOM: every ready instance ties
		if !random {
			n = in.outstanding.Load()
		}
		if in.suspectUntil.Load() > now {
			n += math.MaxInt32 // behind every unsuspected instance
		}
		switch {
		case best == nil || n < least:
			best, idx, least, ties = in, i, n, 1
		case n == least:
			ties++
			if rand.IntN(ties) == 0 {
				best, idx = in, i
			}
		}
	}
	return best, idx, known
}
