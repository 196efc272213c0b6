package check

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// pingOutcome is how the wait for /ping ended.
type pingOutcome struct {
	took time.Duration // until /ping passed, or until the wait ended
	err  error         // why /ping did not pass, if it did not
	exit string        // the container exited: how, with its last log lines
}

// waitPing polls GET /ping until it answers 200, the health window ends or
// the container exits.
func (r *run) waitPing(ctx context.Context, id, url string) (o pingOutcome) {
	start := time.Now()
	defer func() { o.took = time.Since(start) }()
	deadline := start.Add(r.opts.HealthWindow)
	last := "no answer yet"
	for i := 0; ; i++ {
		a, cerr := r.call(ctx, http.MethodGet, url, nil, nil, max(min(pingTimeout, time.Until(deadline)), 50*time.Millisecond))
		switch {
		case cerr == nil && a.status == http.StatusOK:
			return o
		case cerr == nil:
			last = fmt.Sprintf("last answer %d", a.status)
		case ctx.Err() != nil:
			return pingOutcome{err: ctx.Err()}
		default:
			last = "last error: " + cerr.Error()
		}
		// No answer at all may mean the container is gone (and a dial to
		// its former address then hangs until the dial timeout): look.
		if cerr != nil || i%10 == 0 || time.Now().After(deadline) {
			if e := r.exited(ctx, id, start); e != "" {
				return pingOutcome{exit: e}
			}
		}
		if time.Now().After(deadline) {
			return pingOutcome{err: fmt.Errorf("no 200 within %s (%s)", r.opts.HealthWindow, last)}
		}
		// Poll often at first, so the time reported is close to the truth.
		poll := readyPoll
		if time.Since(start) < 2*time.Second {
			poll = readyPoll / 5
		}
		select {
		case <-ctx.Done():
			return pingOutcome{err: ctx.Err()}
		case <-time.After(poll):
		}
	}
}

// exited describes the container's exit, with its last log lines, or
// returns "" while it runs.
func (r *run) exited(ctx context.Context, id string, since time.Time) string {
	info, err := r.s.inspect(ctx, id)
	if err != nil {
		if ctx.Err() != nil {
			return ""
		}
		return "the container is gone: " + err.Error()
	}
	if info.State == nil || info.State.Running {
		return ""
	}
	ran := time.Since(since)
	st, err1 := time.Parse(time.RFC3339Nano, info.State.StartedAt)
	fin, err2 := time.Parse(time.RFC3339Nano, info.State.FinishedAt)
	if err1 == nil && err2 == nil && fin.After(st) {
		ran = fin.Sub(st)
	}
	why := fmt.Sprintf("exited with status %d after %s", info.State.ExitCode, formatDuration(ran))
	if info.State.OOMKilled {
		why += " (killed: out of memory)"
	}
	if info.State.Error != "" {
		why += ": " + info.State.Error
	}
	return why + "\nlast log lines:\n" + r.s.tail(ctx, id)
}
