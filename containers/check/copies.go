package check

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/moby/moby/api/types/container"
)

// twoCopies starts a second copy in the first one's network namespace on
// port 8081, as two containers of one multi-container endpoint share an
// instance, and expects /ping 200 from both.
func (r *run) twoCopies(ctx context.Context) {
	t := time.Now()
	cfg := &container.Config{Image: r.opts.Image, Cmd: []string{"serve"}, Env: r.env(secondIndex)}
	id, err := r.s.launch(ctx, "2", cfg, r.hostConfig("container:"+r.first))
	if err != nil {
		r.add(nameTwo, Fail, t, "the second copy did not start: "+err.Error())
		return
	}
	p := r.waitPing(ctx, id, r.url(secondPort, "/ping"))
	switch {
	case p.exit != "":
		r.add(nameTwo, Fail, t, "the second copy (SAGEMAKER_BIND_TO_PORT=8081) "+p.exit)
		return
	case p.err != nil:
		r.add(nameTwo, Fail, t, "the second copy (SAGEMAKER_BIND_TO_PORT=8081): /ping "+p.err.Error()+"\nlast log lines:\n"+r.s.tail(ctx, id))
		return
	}
	if e := r.exited(ctx, r.first, t); e != "" {
		r.add(nameTwo, Fail, t, "the first copy died when the second started: "+e)
		return
	}
	a, err := r.call(ctx, http.MethodGet, r.url(firstPort, "/ping"), nil, nil, pingTimeout)
	if err != nil || a.status != http.StatusOK {
		r.add(nameTwo, Fail, t, fmt.Sprintf("the first copy stopped answering /ping: %v %d", err, a.status))
		return
	}
	if !r.multi && r.opts.Input != nil {
		a, err := r.call(ctx, http.MethodPost, r.url(secondPort, "/invocations"), r.opts.Input, r.sampleHeaders(), r.opts.Timeout)
		if err != nil || a.status != http.StatusOK {
			r.add(nameTwo, Fail, t, fmt.Sprintf("the second copy answers /ping but not the sample: %v %s", err, a.summary()))
			return
		}
		r.add(nameTwo, Pass, t, "both answer /ping; the second answers the sample too")
		return
	}
	r.add(nameTwo, Pass, t, "both answer /ping")
}
