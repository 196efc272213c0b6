package check

import (
	"context"
	"net/http"
	"time"
)

// invoke posts the sample to url and expects 200.
func (r *run) invoke(ctx context.Context, name, url string) {
	if r.opts.Input == nil {
		r.skip("no sample input given (--input and --content-type)", name)
		return
	}
	a, err := r.call(ctx, http.MethodPost, url, r.opts.Input, r.sampleHeaders(), r.opts.Timeout)
	switch {
	case err != nil:
		r.addDur(name, Fail, a.took, err.Error()+r.diedNote(ctx))
	case a.status != http.StatusOK:
		r.addDur(name, Fail, a.took, "want 200, got "+a.summary())
	case a.over:
		r.addDur(name, Fail, a.took, "the answer is over SageMaker's 6 MiB response limit")
	default:
		r.addDur(name, Pass, a.took, a.summary())
	}
}

func (r *run) sampleHeaders() map[string]string {
	h := map[string]string{"Content-Type": r.opts.ContentType, "Accept": r.opts.Accept}
	if r.target != "" {
		h[targetModelHeader] = r.target
	}
	return h
}

// diedNote says, after a failed call, whether the container died.
func (r *run) diedNote(ctx context.Context) string {
	if e := r.exited(ctx, r.first, time.Now()); e != "" {
		r.died = true
		return "; the container " + e
	}
	return ""
}

// misuse sends what SageMaker itself would refuse or a client might get
// wrong: a body over 6 MiB, and a content type no container supports. A
// 4xx passes; the container must keep running and answering /ping.
//
// Verdicts: 4xx → pass. Oversize: 2xx or 5xx → warn (SageMaker and mce
// never forward a body over 6 MiB, so it costs only robustness); the
// connection closed without an answer → warn. Wrong content type: 2xx →
// warn (the toolkits answer 415), 5xx → fail (an error of the client's
// reported as the model's). Either: the container dies or stops answering
// /ping → fail.
func (r *run) misuse(ctx context.Context, path string) {
	ct := r.opts.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	big := make([]byte, OversizeBytes)
	for i := range big {
		big[i] = 'x'
	}
	hdr := map[string]string{"Content-Type": ct, "Accept": r.opts.Accept, targetModelHeader: r.target}
	a, err := r.call(ctx, http.MethodPost, r.url(firstPort, path), big, hdr, r.opts.Timeout)
	st, detail := Pass, ""
	switch {
	case err != nil:
		st, detail = Warn, "no answer: "+err.Error()
	case a.status >= 400 && a.status < 500:
		detail = a.summary()
	default:
		st, detail = Warn, "want 413 (or another 4xx), got "+a.summary()
	}
	r.aliveOr(ctx, nameOversize, st, a.took, detail)
	if r.died {
		r.skip(skipDead, nameWrongCT)
		return
	}

	hdr["Content-Type"] = "application/x-mce-check-unsupported"
	body := r.opts.Input
	if body == nil {
		body = []byte("mce check: a content type no container supports")
	}
	a, err = r.call(ctx, http.MethodPost, r.url(firstPort, path), body, hdr, r.opts.Timeout)
	switch {
	case err != nil:
		st, detail = Fail, "no answer: "+err.Error()
	case a.status >= 400 && a.status < 500:
		st, detail = Pass, a.summary()
	case a.status >= 500:
		st, detail = Fail, "a client's error answered as a server error: want 415 (or another 4xx), got "+a.summary()
	default:
		st, detail = Warn, "accepted: want 415 (or another 4xx), got "+a.summary()
	}
	r.aliveOr(ctx, nameWrongCT, st, a.took, detail)
}

// aliveOr records st unless the container died or stopped answering
// /ping, which fails. A server that restarts a worker gets 10 s.
func (r *run) aliveOr(ctx context.Context, name string, st Status, took time.Duration, detail string) {
	since := time.Now().Add(-took)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if e := r.exited(ctx, r.first, since); e != "" {
			r.died = true
			r.addDur(name, Fail, took, "the container died: "+e)
			return
		}
		a, err := r.call(ctx, http.MethodGet, r.url(firstPort, "/ping"), nil, nil, pingTimeout)
		if err == nil && a.status == http.StatusOK {
			r.addDur(name, st, took, detail)
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.died = true
			r.addDur(name, Fail, took, "the container stopped answering /ping 200 afterwards ("+detail+")")
			return
		}
		time.Sleep(readyPoll)
	}
}
