package host

import (
	"sync"
	"time"

	"github.com/mce-run/mce/host/apierr"
)

// Failed invocations are logged at info, one line each, at most
// failLogBurst lines per failLogPeriod; the lines beyond are counted and the
// next line logged says how many were left out ("suppressed"), so a flood
// of failures cannot flood the log.
const (
	failLogBurst  = 20
	failLogPeriod = time.Second
)

// failLimiter is a fixed-window limit on log lines. Safe for concurrent use.
type failLimiter struct {
	mu         sync.Mutex
	window     time.Time
	n          int
	suppressed int
}

// allow reports whether a line may be logged now and, when it may, how many
// were suppressed since the last one logged.
func (l *failLimiter) allow(now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.window) >= failLogPeriod {
		l.window, l.n = now, 0
	}
	if l.n >= failLogBurst {
		l.suppressed++
		return false, 0
	}
	l.n++
	s := l.suppressed
	l.suppressed = 0
	return true, s
}

// logFailedInvocation writes the info line of a failed InvokeEndpoint:
// request ID, endpoint, variant and container when known, status, error
// code and message, and the latency with its unit.
func (s *Server) logFailedInvocation(reqID, endpoint, variant, container string, api *apierr.Error, latency time.Duration) {
	if !s.log.Info().Enabled() {
		return
	}
	ok, suppressed := s.failLog.allow(time.Now())
	if !ok {
		return
	}
	ev := s.log.Info().Str("event", "invocation_failed").Str("request_id", reqID).
		Str("endpoint", apierr.Printable(endpoint))
	if variant != "" {
		ev = ev.Str("variant", apierr.Printable(variant))
	}
	if container != "" {
		ev = ev.Str("container", apierr.Printable(container))
	}
	ev = ev.Int("status", api.Status).Str("code", api.Code)
	if api.OriginalStatusCode != nil {
		ev = ev.Int("original_status", *api.OriginalStatusCode)
	}
	ev = ev.Dur("latency_ms", latency).Str("error", api.Message)
	if suppressed > 0 {
		ev = ev.Int("suppressed", suppressed)
	}
	ev.Msgf("invocation failed after %s", latencyString(latency))
}

// latencyString prints a latency with its unit, to the microsecond below
// 10 ms and to the millisecond above.
func latencyString(d time.Duration) string {
	if d < 10*time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}
