package check

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"

	"github.com/mce-run/mce/containers"
)

// Checker runs the checks of one image. Make it with [New]; it is meant for
// one [Checker.Run] at a time.
type Checker struct {
	engine   Engine
	opts     Options
	http     *http.Client
	procRoot string // "/proc"; tests may point it elsewhere
}

// New validates opts and returns a Checker.
func New(engine Engine, opts Options) (*Checker, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Checker{engine: engine, opts: opts, http: newHTTPClient(), procRoot: "/proc"}, nil
}

// run is the state of one Run.
type run struct {
	*Checker
	rep   *Report
	s     *session
	multi bool
	model *modelData

	first    string // container ID of the first copy
	pid      int
	base     string // http://address of the first copy, without port
	ports    []netip.AddrPort
	portsErr error
	modelRef string // the multi-model hash (model_name) and its Target-Model name
	target   string
	died     bool // the first copy died during a check; later ones are skipped
}

// skipDead is the reason checks after the first copy's death are skipped.
const skipDead = "the container died in an earlier check"

// Run starts the image as SageMaker would, runs every check and removes
// everything it created before returning. The report says what passed;
// an error means the checks could not be run at all (the engine did not
// answer, the model data could not be fetched) or ctx was cancelled.
func (c *Checker) Run(ctx context.Context) (rep *Report, err error) {
	start := time.Now()
	r := &run{Checker: c, rep: &Report{Image: c.opts.Image, Mode: "single-model"}}
	defer c.http.CloseIdleConnections()
	defer func() {
		if rep != nil {
			rep.DurationMS = millis(time.Since(start))
			rep.Passed = len(rep.Failed()) == 0
		}
	}()

	// The image and its labels.
	t := time.Now()
	labels, err := containers.InspectImage(ctx, c.engine, c.opts.Image)
	if errors.Is(err, containers.ErrNotFound) {
		r.add("image present", Fail, t, err.Error()+"; build it or docker load it first")
		return r.rep, nil
	}
	if err != nil {
		return nil, err
	}
	r.add("image present", Pass, t, "")
	r.labels(labels)

	if err := reap(ctx, c.engine); err != nil {
		return nil, fmt.Errorf("removing what an earlier check left behind: %w", err)
	}
	r.s = newSession(c.engine)
	defer func() {
		if r.model != nil {
			r.model.remove()
		}
		cerr := r.s.close(ctx)
		switch {
		case cerr == nil:
		case rep != nil: // a report that leaves things behind is not one to trust
			rep, err = nil, fmt.Errorf("the checks ran, but clean-up failed: %w", cerr)
		default:
			err = errors.Join(err, fmt.Errorf("clean-up: %w", cerr))
		}
	}()
	if c.opts.ModelData != "" {
		if r.model, err = c.prepareModel(ctx, r.multi); err != nil {
			return nil, err
		}
		if r.multi {
			r.modelRef, r.target = r.model.hash, r.model.target
		}
	}
	if err := r.s.createNetwork(ctx); err != nil {
		return nil, err
	}

	r.checks(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return r.rep, nil
}

// add records one result.
func (r *run) add(name string, st Status, since time.Time, detail string) {
	r.addDur(name, st, time.Since(since), detail)
}

func (r *run) addDur(name string, st Status, d time.Duration, detail string) {
	res := Result{Name: name, Status: st, Detail: detail, DurationMS: millis(d)}
	r.rep.Checks = append(r.rep.Checks, res)
	if r.opts.OnResult != nil {
		r.opts.OnResult(res)
	}
}

// skip records checks that cannot run, all for one reason.
func (r *run) skip(why string, names ...string) {
	for _, n := range names {
		r.addDur(n, Skip, 0, why)
	}
}

// labels checks the image's SageMaker capability labels and picks the mode.
func (r *run) labels(l map[string]string) {
	t := time.Now()
	name := "label accept-bind-to-port=true"
	if v := l[containers.LabelBindToPort]; v == "true" {
		r.add(name, Pass, t, "")
	} else {
		r.add(name, Fail, t, fmt.Sprintf("the image lacks %s=true (it has %q); SageMaker refuses it in a multi-container endpoint or pipeline", containers.LabelBindToPort, v))
	}
	labelled := l[containers.LabelMultiModels] == "true"
	mm := "label multi-models=true"
	switch r.opts.MultiModel {
	case MultiModelOn:
		r.multi = true
		if labelled {
			r.add(mm, Pass, t, "")
		} else {
			r.add(mm, Fail, t, fmt.Sprintf("checked as a multi-model container, but the image lacks %s=true, which SageMaker requires of one", containers.LabelMultiModels))
		}
	case MultiModelOff:
		r.skip("checked as a single-model container (--multi-model=off)", mm)
	default:
		switch {
		case labelled && r.opts.ModelData != "":
			r.multi = true
			r.add(mm, Pass, t, "")
		case labelled:
			r.add(mm, Pass, t, "labelled, but no model artifact was given (--model-data), so it is checked as a single-model container")
		default:
			r.skip("not labelled: checked as a single-model container", mm)
		}
	}
	if r.multi {
		r.rep.Mode = "multi-model"
	}
}

// env is the environment of one copy, SageMaker's variables winning.
func (r *run) env(port int, safe string) []string {
	env := map[string]string{}
	maps.Copy(env, r.opts.Env)
	env["SAGEMAKER_BIND_TO_PORT"] = strconv.Itoa(port)
	env["SAGEMAKER_SAFE_PORT_RANGE"] = safe
	if r.multi {
		env["SAGEMAKER_MULTI_MODEL"] = "true"
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

func (r *run) hostConfig(netMode string) *container.HostConfig {
	h := &container.HostConfig{
		NetworkMode: container.NetworkMode(netMode),
		SecurityOpt: []string{"no-new-privileges"},
		Resources:   container.Resources{PidsLimit: pidsLimit()},
	}
	if r.model != nil {
		h.Binds = []string{r.model.bind()}
	}
	return h
}

// Names of the checks, in report order.
const (
	nameStart    = "starts with serve"
	nameInvoke   = "/invocations answers the sample"
	nameOversize = "oversize body (7 MiB): 4xx, keeps running"
	nameWrongCT  = "wrong content type: 4xx, keeps running"
	nameTwo      = "two copies (ports 8080, 8081) answer /ping"
)

func (r *run) namePing() string  { return "/ping 200 within " + formatWindow(r.opts.HealthWindow) }
func (r *run) namePorts() string { return "listens only on port " + strconv.Itoa(firstPort) }

func formatWindow(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.Itoa(int(d/time.Second)) + "s"
	}
	return d.String()
}

// checks runs the first copy alone and every check on it, then the second
// copy beside it.
func (r *run) checks(ctx context.Context) {
	later := func() []string {
		names := []string{r.namePing()}
		if !r.multi {
			names = append(names, nameInvoke)
		}
		names = append(names, r.mmeNames()...)
		return append(names, nameOversize, nameWrongCT, r.namePorts(), nameTwo)
	}
	t := time.Now()
	cfg := &container.Config{Image: r.opts.Image, Cmd: []string{"serve"}, Env: r.env(firstPort, firstSafe), Hostname: "primary"}
	id, err := r.s.launch(ctx, "1", cfg, r.hostConfig(r.s.network))
	r.first = id
	if err != nil {
		r.add(nameStart, Fail, t, err.Error())
		r.skip("the container did not start", later()...)
		return
	}
	started := time.Since(t)
	info, err := r.s.inspect(ctx, id)
	if err == nil {
		r.pid = info.State.Pid
		if ep := info.NetworkSettings.Networks[r.s.network]; ep != nil && ep.IPAddress.IsValid() {
			r.base = "http://" + ep.IPAddress.String()
		}
	}
	if r.base == "" {
		// An address is gone once the container exits: say why it did.
		why := r.exited(ctx, id, t)
		if why == "" {
			why = fmt.Sprintf("the container has no address on network %s (inspect: %v)", r.s.network, err)
		}
		r.addDur(nameStart, Fail, started, why)
		r.skip("the container did not start", later()...)
		return
	}

	// /ping within the window, watching for the container's exit.
	p := r.waitPing(ctx, id, r.url(firstPort, "/ping"))
	if ctx.Err() != nil {
		return // interrupted: Run reports the cancellation, not a failure
	}
	if p.exit != "" {
		r.addDur(nameStart, Fail, started, p.exit)
		r.skip("the container exited", later()...)
		return
	}
	r.addDur(nameStart, Pass, started, "running after start")
	if p.err != nil {
		r.addDur(r.namePing(), Fail, p.took, p.err.Error()+"\nlast log lines:\n"+r.s.tail(ctx, id))
		r.snapshotPorts(ctx)
		var calls []string
		if !r.multi {
			calls = append(calls, nameInvoke)
		}
		calls = append(calls, r.mmeNames()...)
		r.skip("/ping never answered 200", append(calls, nameOversize, nameWrongCT)...)
		r.portsResult()
		r.skip("/ping never answered 200", nameTwo)
		return
	}
	r.addDur(r.namePing(), Pass, p.took, "")
	r.snapshotPorts(ctx)

	invokePath := "/invocations"
	if r.multi {
		invokePath = r.mme(ctx)
	} else {
		r.invoke(ctx, nameInvoke, r.url(firstPort, "/invocations"))
	}
	switch {
	case invokePath == "":
		r.skip("the model did not load", nameOversize, nameWrongCT)
	case r.died:
		r.skip(skipDead, nameOversize, nameWrongCT)
	default:
		r.misuse(ctx, invokePath)
	}
	if r.multi && invokePath != "" {
		r.mmeUnload(ctx)
	}
	if !r.died {
		r.snapshotPorts(ctx)
	}
	r.portsResult()
	if r.died {
		r.skip(skipDead, nameTwo)
		return
	}
	r.twoCopies(ctx)
}

// url is the address of one copy's path.
func (r *run) url(port int, path string) string {
	return r.base + ":" + strconv.Itoa(port) + path
}

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
		h["X-Amzn-SageMaker-Target-Model"] = r.target
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
	hdr := map[string]string{"Content-Type": ct, "Accept": r.opts.Accept, "X-Amzn-SageMaker-Target-Model": r.target}
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

// snapshotPorts adds the first copy's listening sockets to what was seen.
func (r *run) snapshotPorts(ctx context.Context) {
	ls, err := listeners(r.procRoot, r.pid, r.first)
	if err != nil {
		if r.portsErr == nil {
			r.portsErr = err
		}
		return
	}
	r.ports = append(r.ports, ls...)
	slices.SortFunc(r.ports, func(a, b netip.AddrPort) int { return a.Compare(b) })
	r.ports = slices.Compact(r.ports)
}

// portsResult reports listeners on other ports than SAGEMAKER_BIND_TO_PORT,
// seen right after /ping passed and again after the other checks.
func (r *run) portsResult() {
	name := r.namePorts()
	switch {
	case r.ports == nil && errors.Is(r.portsErr, errProcHidden):
		r.skip(r.portsErr.Error(), name)
	case r.ports == nil && r.portsErr != nil:
		r.addDur(name, Fail, 0, r.portsErr.Error())
	default:
		if other := otherPorts(r.ports, firstPort); len(other) > 0 {
			r.addDur(name, Fail, 0, "also listening on "+strings.Join(other, ", ")+
				": in a multi-container endpoint the containers share the instance's ports, so a fixed second port collides; use SAGEMAKER_BIND_TO_PORT, and SAGEMAKER_SAFE_PORT_RANGE for any other")
			return
		}
		if !slices.ContainsFunc(r.ports, func(p netip.AddrPort) bool { return p.Port() == firstPort }) {
			r.addDur(name, Fail, 0, "no listener on port 8080 seen")
			return
		}
		var all []string
		for _, p := range r.ports {
			if p.Addr() != dockerDNS {
				all = append(all, p.String())
			}
		}
		r.addDur(name, Pass, 0, strings.Join(all, ", "))
	}
}

// twoCopies starts a second copy in the first one's network namespace on
// port 8081, as two containers of one multi-container endpoint share an
// instance, and expects /ping 200 from both.
func (r *run) twoCopies(ctx context.Context) {
	t := time.Now()
	cfg := &container.Config{Image: r.opts.Image, Cmd: []string{"serve"}, Env: r.env(secondPort, secondSafe)}
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
