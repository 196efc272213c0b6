package host

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"
)

// requestIDs hands out request IDs: a random prefix per process and a counter,
// shaped like a UUID, without a syscall per request.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [10]byte
	rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return &requestIDs{prefix: h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-"}
}

func (r *requestIDs) next() string {
	n := r.n.Add(1)
	s := strconv.FormatUint(n, 16)
	const width = 12
	if len(s) < width {
		s = "000000000000"[:width-len(s)] + s
	}
	return r.prefix + s
}
