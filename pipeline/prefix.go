package pipeline

import (
	"hash/maphash"
	"math"
	"time"
)

// Prefix-aware routing (RoutingStrategy PREFIX_AWARE,
// https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_PrefixAwareRoutingConfig.html):
// calls whose first PrefixLength body bytes and PrefixAwareId agree go to
// one instance, so that a container's prefix cache (a shared system prompt)
// serves them, until that instance has ConcurrencyThreshold calls in flight.
//
// The instance is chosen by rendezvous hashing: each ready instance scores
// hash(prefix) mixed with its own key's hash, and the highest score wins.
// Adding or removing an instance moves only the prefixes that instance wins
// or won (about 1/n of them); the rest stay where their caches are.

// SetPrefixAware stores PrefixAware's configuration: the body bytes hashed
// (PrefixLength) and the calls in flight at which the chosen instance is
// passed over for the least loaded one (ConcurrencyThreshold). A
// prefixLength below 1 clears it (PrefixAware then routes as
// LeastOutstanding); a threshold below 1 is stored as 1. It does not change
// the strategy (SetStrategy).
func (v *Variant) SetPrefixAware(prefixLength, concurrencyThreshold int) {
	if prefixLength < 1 {
		v.prefix.Store(0)
		return
	}
	pl := uint64(min(prefixLength, math.MaxInt32))
	ct := uint64(max(1, min(concurrencyThreshold, math.MaxInt32)))
	v.prefix.Store(ct<<32 | pl)
}

// PrefixAware returns the configuration SetPrefixAware stored (0, 0 when
// none was).
func (v *Variant) PrefixAware() (prefixLength, concurrencyThreshold int) {
	p := v.prefix.Load()
	return int(p & math.MaxUint32), int(p >> 32)
}

// prefixSeed is the seed of prefix hashes. A seed only changes the mapping
// of prefixes to instances, which no one outside the process sees.
var prefixSeed = maphash.MakeSeed()

// prefixHash hashes the routing key of req: PrefixAwareId, then the first
// n bytes of the body.
func prefixHash(req *Request, n int) uint64 {
	var h maphash.Hash
	h.SetSeed(prefixSeed)
	h.WriteString(req.PrefixAwareID)
	h.WriteByte(0)
	b := req.Body
	if len(b) > n {
		b = b[:n]
	}
	h.Write(b)
	return h.Sum64()
}

// hashString hashes an instance's key (computed once, at NewInstance).
func hashString(s string) uint64 { return maphash.String(prefixSeed, s) }

// mix is a 64-bit finalizer (splitmix64's), so that scores of one prefix
// over several instances are independent.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// choosePrefix is choose for a PrefixAware variant: the ready instance with
// the highest rendezvous score for req's prefix, unless its calls in flight
// reached the threshold or it is suspected, when the least loaded instance
// takes the call.
func (v *Variant) choosePrefix(insts []*Instance, direct bool, host string, req *Request) (best *Instance, idx int, known bool) {
	n, threshold := v.PrefixAware()
	if n == 0 {
		return choose(insts, direct, host, nil, false)
	}
	ph := prefixHash(req, n)
	idx, known = -1, !direct
	var top uint64
	for _, in := range insts {
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
		if s := mix(ph ^ in.keyHash); best == nil || s > top {
			best, idx, top = in, i, s
		}
	}
	if best == nil {
		return nil, -1, known
	}
	if best.outstanding.Load() >= int64(threshold) || best.suspectUntil.Load() > time.Now().UnixNano() {
		return choose(insts, direct, host, nil, false)
	}
	return best, idx, known
}
