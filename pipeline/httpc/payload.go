package httpc

import "io"

// buffer is a pooled body buffer. Pools hold *buffer so that Get and Put do
// not allocate.
type buffer struct{ b []byte }

// minBuffer is the capacity a fresh buffer starts with when the body length
// is not announced.
const minBuffer = 4 << 10

// readCapped reads r into dst, keeping at most limit bytes. announced is the
// Content-Length (-1 when unknown). It reports tooBig when the body is longer
// than limit; it then stops reading (at most limit+1 bytes are read).
func readCapped(dst *buffer, r io.Reader, announced int64, limit int) (tooBig bool, err error) {
	if announced > int64(limit) {
		return true, nil
	}
	if announced >= 0 {
		n := int(announced)
		if cap(dst.b) < n {
			dst.b = make([]byte, n)
		}
		dst.b = dst.b[:n]
		if _, err := io.ReadFull(r, dst.b); err != nil {
			return false, err
		}
		return false, nil
	}
	b := dst.b[:0]
	for {
		if len(b) > limit {
			dst.b = b
			return true, nil
		}
		if len(b) == cap(b) {
			grown := make([]byte, len(b), min(max(2*cap(b), minBuffer), limit+1))
			copy(grown, b)
			b = grown
		}
		m, rerr := r.Read(b[len(b):min(cap(b), limit+1)])
		b = b[:len(b)+m]
		if rerr == io.EOF {
			dst.b = b
			return len(b) > limit, nil
		}
		if rerr != nil {
			dst.b = b
			return false, rerr
		}
	}
}
