package host

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/mce-run/mce/host/apierr"
	"golang.org/x/sync/semaphore"
)

// Request bodies are bounded in time and in memory (issue 9): a body must
// arrive within Config.BodyTimeout of its headers, and all bodies held at
// once share Config.BodyMemory bytes. A caller beyond the budget gets a 503
// ServiceUnavailable, which every AWS SDK retries with backoff; one too slow
// gets RequestTimeout, the code S3 uses, which the SDKs also retry.

const (
	// DefaultBodyTimeout is Config.BodyTimeout's default: SageMaker's limit
	// on a whole call.
	DefaultBodyTimeout = 60 * time.Second
	// DefaultBodyMemory is Config.BodyMemory's default.
	DefaultBodyMemory = 256 << 20
	// bodyChargeStep is the smallest slice of the budget a body takes at a
	// time; a body takes more as it grows (doubling), never ahead of the
	// bytes that arrived, so a stalled upload holds little.
	bodyChargeStep = 64 << 10
)

// bodyPool recycles request-body buffers between requests.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// maxPooledBody is the largest buffer kept for reuse.
const maxPooledBody = 1 << 20

var (
	errTooLarge   = errors.New("body too large")
	errBodyBudget = errors.New("request body memory budget exhausted")
)

// requestBody is a body read by readBody. Release it when the request is
// done with the bytes.
type requestBody struct {
	buf     *[]byte
	charged int64
	budget  *semaphore.Weighted
}

// bytes returns the body; valid until release.
func (b *requestBody) bytes() []byte { return *b.buf }

// release returns the buffer to the pool and the bytes to the budget.
func (b *requestBody) release() { b.free(true) }

// free gives the bytes back to the budget, and the buffer to the pool when
// pool is set. Buffers of refused bodies are not pooled: a burst of them
// would otherwise stay in the pool, beyond the budget.
func (b *requestBody) free(pool bool) {
	if b.charged > 0 {
		b.budget.Release(b.charged)
		b.charged = 0
	}
	if b.buf != nil {
		if pool && cap(*b.buf) <= maxPooledBody {
			*b.buf = (*b.buf)[:0]
			bodyPool.Put(b.buf)
		}
		b.buf = nil
	}
}

// readBody reads r's body, at most limit bytes, within the body deadline and
// the memory budget. tooLarge is the error for a body over limit. On
// failure the body is already released.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int, tooLarge func(n int64) *apierr.Error) (requestBody, *apierr.Error) {
	b := requestBody{buf: bodyPool.Get().(*[]byte), budget: s.bodyBudget}
	if r.ContentLength == 0 {
		return b, nil
	}
	// The deadline covers the body only: it is lifted once the body is in,
	// so that an invocation may take its time to answer. (net/http lifts it
	// too when it starts watching the connection after the body's end; an
	// expired read deadline there would cancel the request's context.)
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) == nil
	buf, charged, err := readLimited(r.Body, (*b.buf)[:0], limit, b.budget)
	*b.buf, b.charged = buf, charged
	if err == nil {
		if deadline {
			rc.SetReadDeadline(time.Time{})
		}
		return b, nil
	}
	b.free(false)
	// The rest of a failed body is not read: the connection closes after
	// the answer. (The deadline stays: net/http would otherwise wait for a
	// stalled body's last bytes before it answers.)
	w.Header().Set("Connection", "close")
	var ne net.Error
	switch {
	case errors.Is(err, errTooLarge):
		return requestBody{}, tooLarge(-1)
	case errors.Is(err, errBodyBudget):
		s.log.Warn().Int64("budget_bytes", s.cfg.BodyMemory).Str("remote_addr", r.RemoteAddr).
			Msg("request refused: the request bodies in memory reached --max-body-memory")
		return requestBody{}, &apierr.Error{Status: http.StatusServiceUnavailable, Code: apierr.CodeServiceUnavail, Cause: err,
			Message: "mce is holding as many request bodies as its memory budget allows; retry the request later."}
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		s.log.Info().Str("remote_addr", r.RemoteAddr).Dur("body_timeout_ms", s.cfg.BodyTimeout).
			Msg("request body not received in time; connection cut")
		return requestBody{}, &apierr.Error{Status: http.StatusBadRequest, Code: apierr.CodeRequestTimeout, Cause: err,
			Message: "The request body was not received within " + s.cfg.BodyTimeout.String() + "; send it faster, or ask the operator to raise --body-timeout."}
	}
	s.log.Debug().Err(err).Str("remote_addr", r.RemoteAddr).Msg("reading a request body failed")
	return requestBody{}, &apierr.Error{Status: http.StatusBadRequest, Code: apierr.CodeValidation, Cause: err,
		Message: "Could not read the request body: the connection ended before the body was complete."}
}

// readLimited appends r to buf up to limit bytes; one byte more is
// errTooLarge. Before bytes land beyond what is charged to budget, it takes
// more (doubling from bodyChargeStep); a refusal is errBodyBudget. charged
// is what it took, to be released by the caller, error or not.
func readLimited(r io.Reader, buf []byte, limit int, budget *semaphore.Weighted) (_ []byte, charged int64, _ error) {
	for {
		if len(buf) > limit {
			return buf, charged, errTooLarge
		}
		if int64(len(buf)) == charged {
			step := min(max(bodyChargeStep, charged), int64(limit)+1-charged)
			if !budget.TryAcquire(step) {
				return buf, charged, errBodyBudget
			}
			charged += step
		}
		if len(buf) == cap(buf) {
			// Grow to what is charged, no more: the budget is the memory.
			nb := make([]byte, len(buf), charged)
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):min(int64(cap(buf)), charged)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if len(buf) > limit {
				return buf, charged, errTooLarge
			}
			return buf, charged, nil
		}
		if err != nil {
			return buf, charged, err
		}
	}
}

func payloadTooLarge(n int64) *apierr.Error {
	msg := "The request body exceeds the maximum of 6291456 bytes (6 MiB)."
	if n > 0 {
		msg = "The request body of " + strconv.FormatInt(n, 10) + " bytes exceeds the maximum of 6291456 bytes (6 MiB)."
	}
	return &apierr.Error{Status: http.StatusRequestEntityTooLarge, Code: apierr.CodeValidation, Message: msg}
}
