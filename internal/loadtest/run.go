package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Call is one request for an Invoker.
type Call struct {
	Model string // TargetModel; "" for none
	Body  []byte
}

// Outcome is what an Invoker saw of one call.
type Outcome struct {
	// Code is "" for success, else the SageMaker error code (ModelError,
	// ValidationError, ThrottlingException…), "ModelError:NNN" with the
	// container's status, or a transport class (Timeout, ConnectionError).
	Code string
	// Message is the error's text, for the report's examples.
	Message string
	// TTFB is the time from the send to the first part of a streamed answer.
	TTFB time.Duration
	// Variant is the production variant that answered a successful call
	// (InvokedProductionVariant), "" when the endpoint did not say.
	Variant string
}

// Invoker sends one request and waits for its whole answer. It must be safe
// for concurrent use and return when ctx is done.
type Invoker interface {
	Invoke(ctx context.Context, c Call) Outcome
}

// InvokerFunc adapts a function to Invoker.
type InvokerFunc func(ctx context.Context, c Call) Outcome

// Invoke calls f.
func (f InvokerFunc) Invoke(ctx context.Context, c Call) Outcome { return f(ctx, c) }

// Options are what a run needs besides its plan. Zero values are defaults.
type Options struct {
	// Endpoint is the endpoint's name, for the report.
	Endpoint string
	// Payloads are the bodies (default one empty body).
	Payloads *Payloads
	// Progress receives a line a second (nil: none).
	Progress io.Writer
	// ProgressTTY rewrites one line instead of writing one a second.
	ProgressTTY bool
	// Scraper, when set, scrapes the endpoint's metrics during the run.
	Scraper *Scraper
	// CloudWatch, when set, is asked after the run for mce's server-side
	// figures of each variant of the endpoint over the run's minutes.
	CloudWatch *CloudWatch
}

// Run executes a validated plan and returns its report. It returns early,
// with a partial report marked Interrupted, when ctx is cancelled; the error
// is only for a run that could not start.
func Run(ctx context.Context, p *Plan, inv Invoker, o Options) (*Report, error) {
	if p.targets == nil && p.Target != "" {
		return nil, errors.New("the plan was not validated")
	}
	if o.Payloads == nil {
		o.Payloads = &Payloads{Bodies: [][]byte{{}}, Names: []string{"(empty)"}}
	}
	r := &runner{plan: p, inv: inv, o: o, reqCtx: ctx, now: time.Now}
	return r.run(ctx), nil
}

type runner struct {
	plan   *Plan
	now    func() time.Time
	inv    Invoker
	o      Options
	rec    *recorder
	reqCtx context.Context // requests' parent: cancelled by Ctrl-C only

	sentTotal atomic.Int64
	inflight  atomic.Int64
	peak      atomic.Int64
	limitHit  atomic.Bool
	semFull   atomic.Bool // a rate stage had max_inflight calls out
	stage     atomic.Int32
	users     atomic.Int32
	seeds     atomic.Uint64

	cancelSends context.CancelFunc

	wg   sync.WaitGroup // requests and users
	pool []*user
}

type user struct {
	stop chan struct{}
	once sync.Once
}

func (u *user) halt() { u.once.Do(func() { close(u.stop) }) }

func (r *runner) run(ctx context.Context) *Report {
	p := r.plan
	start := r.now()
	maxSecs := int(time.Duration(p.Limits.MaxDuration)/time.Second) + 2
	r.rec = newRecorder(start, len(p.Stages), maxSecs)
	cpu0 := cpuTime()
	rep := &Report{Endpoint: r.o.Endpoint, Started: start, Plan: p, Targets: targetStrings(p.targets)}

	runCtx, cancelRun := context.WithTimeout(ctx, time.Duration(p.Limits.MaxDuration))
	defer cancelRun()
	// stagesCtx ends early when max_requests is reached
	stagesCtx, cancelSends := context.WithCancel(runCtx)
	defer cancelSends()
	r.cancelSends = cancelSends
	if r.o.Scraper != nil {
		r.o.Scraper.Start(runCtx, start)
	}
	progDone := make(chan struct{})
	progStop := make(chan struct{})
	go r.progress(progStop, progDone)

	for i, s := range p.Stages {
		sr := r.runStage(stagesCtx, i, s)
		rep.Stages = append(rep.Stages, sr)
		if reason := r.stopReason(runCtx, ctx, rep, i); reason != "" {
			rep.StopReason = reason
			break
		}
	}
	r.stopUsers(0)
	r.wg.Wait()
	end := r.now()
	close(progStop)
	<-progDone
	cpu1 := cpuTime()
	rep.Interrupted = ctx.Err() != nil
	rep.Ended = end
	rep.WallMS = msOf(end.Sub(start))
	rep.Seconds = r.rec.finish(end)
	r.finishStages(rep)
	rep.Cold, rep.Warm = summarise(r.rec.cold), summarise(r.rec.warm)
	r.rec.mu.Lock()
	if len(r.rec.samples) > 0 {
		rep.ErrorSamples = r.rec.samples
	}
	r.rec.mu.Unlock()
	rep.Generator = generatorReport(cpu0, cpu1, end.Sub(start), r.peak.Load(), p.Limits.MaxInFlight, r.semFull.Load())
	rep.saturation()
	if r.o.Scraper != nil {
		rep.Metrics = r.o.Scraper.Stop()
	}
	rep.Variants = r.rec.variantReports()
	rep.answer()
	if r.o.CloudWatch != nil {
		// after Ctrl-C too: a partial report keeps mce's figures of the
		// calls it made, within the CloudWatch time limit
		r.o.CloudWatch.fill(context.WithoutCancel(ctx), rep)
	}
	return rep
}

// stopReason says why the run ends after stage i, or "".
func (r *runner) stopReason(runCtx, parent context.Context, rep *Report, i int) string {
	switch {
	case parent.Err() != nil:
		return "interrupted"
	case r.limitHit.Load():
		return fmt.Sprintf("max_requests %d reached", r.plan.Limits.MaxRequests)
	case runCtx.Err() != nil:
		return fmt.Sprintf("max_duration %s reached", time.Duration(r.plan.Limits.MaxDuration))
	}
	// A rate stage is judged once its requests are answered (the last ones
	// may be the slowest); a user stage at once, as its users go on into
	// the next stage (its few requests still out land in the final report).
	if r.plan.Stages[i].Rate > 0 {
		r.waitStage(runCtx, i)
	}
	s := r.stageReport(i, rep.Stages[i])
	rep.Stages[i] = s
	if i == len(r.plan.Stages)-1 {
		return "" // the last stage: the run ends anyway
	}
	if lim := r.plan.Stop.ErrorRate; lim > 0 && s.ErrorRate > lim {
		return fmt.Sprintf("%s: error rate %.3f above %.3f", s.Name, s.ErrorRate, lim)
	}
	if r.plan.Stop.OnTargetMiss && s.MetTarget != nil && !*s.MetTarget {
		return fmt.Sprintf("%s: latency target %s missed", s.Name, joinTargets(r.plan.targets))
	}
	return ""
}

// waitStage waits (at most the request timeout) until stage i has no
// request outstanding.
func (r *runner) waitStage(ctx context.Context, i int) {
	deadline := time.Now().Add(time.Duration(r.plan.Request.Timeout))
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r.rec.mu.Lock()
		a := r.rec.stages[i]
		pending := a.sent - a.completed
		r.rec.mu.Unlock()
		if pending <= 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runStage runs stage i until its duration is over or the run ends.
func (r *runner) runStage(ctx context.Context, i int, s Stage) StageReport {
	r.stage.Store(int32(i))
	start := r.now()
	cpu0 := cpuTime()
	stageCtx, cancel := context.WithTimeout(ctx, time.Duration(s.Duration))
	defer cancel()
	sr := StageReport{Index: i + 1, Name: s.Name, Users: s.Users, SpawnRate: s.SpawnRate, Rate: s.Rate, PlannedMS: msOf(time.Duration(s.Duration)), ThinkTimeMS: msOf(r.plan.thinkTime(s))}
	if s.Rate > 0 {
		r.stopUsers(0)
		r.rec.setLoad(i, 0)
		sr.Intended = r.dispatch(stageCtx, i, s, start)
	} else {
		r.scaleUsers(stageCtx, i, s, start)
		<-stageCtx.Done()
	}
	end := r.now()
	sr.Started, sr.Ended = start, end
	sr.WallMS = msOf(end.Sub(start))
	sr.cpu = cpuTime().total() - cpu0.total()
	return sr
}

// SpawnOffsets returns when, after a stage's start, each of the users added
// going from `from` to `to` users starts at spawnRate users a second (all at
// once for 0).
func SpawnOffsets(from, to int, spawnRate float64) []time.Duration {
	if to <= from {
		return nil
	}
	out := make([]time.Duration, to-from)
	for j := range out {
		if spawnRate > 0 {
			out[j] = time.Duration(float64(j) / spawnRate * float64(time.Second))
		}
	}
	return out
}

// IntendedAt is the k-th send (from 0) of a stage at rate per second.
func IntendedAt(start time.Time, k int64, rate float64) time.Time {
	return start.Add(time.Duration(float64(k) / rate * float64(time.Second)))
}

// PlannedSends is how many requests a rate stage intends to send.
func PlannedSends(rate float64, d time.Duration) int64 {
	return int64(math.Ceil(rate * d.Seconds()))
}

// scaleUsers moves the pool to s.Users: extras stop after their current
// request, new users start at the spawn rate while the stage lasts.
func (r *runner) scaleUsers(ctx context.Context, i int, s Stage, start time.Time) {
	if len(r.pool) > s.Users {
		r.stopUsers(s.Users)
	}
	r.users.Store(int32(len(r.pool)))
	r.rec.setLoad(i, len(r.pool))
	offsets := SpawnOffsets(len(r.pool), s.Users, s.SpawnRate)
	for _, off := range offsets {
		if d := start.Add(off).Sub(r.now()); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		u := &user{stop: make(chan struct{})}
		r.pool = append(r.pool, u)
		r.users.Store(int32(len(r.pool)))
		r.rec.setLoad(i, len(r.pool))
		r.wg.Add(1)
		go r.userLoop(u)
	}
}

// stopUsers stops all users past the first n.
func (r *runner) stopUsers(n int) {
	for _, u := range r.pool[n:] {
		u.halt()
	}
	r.pool = r.pool[:n]
	r.users.Store(int32(n))
}

func (r *runner) newChooser() (*Chooser, *rand.Rand) {
	n := r.seeds.Add(1)
	seed := uint64(r.plan.Seed)
	return NewChooser(r.plan.Traffic, seed, n), rand.New(rand.NewPCG(seed^0x9e3779b97f4a7c15, n))
}

func (r *runner) userLoop(u *user) {
	defer r.wg.Done()
	ch, rng := r.newChooser()
	for {
		select {
		case <-u.stop:
			return
		case <-r.reqCtx.Done():
			return
		default:
		}
		stage := int(r.stage.Load())
		s := r.plan.Stages[stage]
		if s.Rate > 0 {
			return // a rate stage began: its users are being stopped
		}
		if !r.takeSend() {
			return
		}
		r.rec.sent(stage)
		r.do(stage, ch, rng, r.now())
		if think := r.plan.thinkTime(s); think > 0 {
			t := time.NewTimer(think)
			select {
			case <-u.stop:
				t.Stop()
				return
			case <-r.reqCtx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// takeSend counts one send against max_requests; false once the bound is
// reached.
func (r *runner) takeSend() bool {
	n := r.sentTotal.Add(1)
	if lim := r.plan.Limits.MaxRequests; lim > 0 && n > lim {
		r.limitHit.Store(true)
		r.cancelSends()
		return false
	}
	return true
}

// dispatch sends stage i's requests at their scheduled times until the
// stage ends; it returns how many it intended to send by then.
func (r *runner) dispatch(ctx context.Context, i int, s Stage, start time.Time) int64 {
	sem := make(chan struct{}, r.plan.Limits.MaxInFlight)
	ch, rng := r.newChooser()
	planned := PlannedSends(s.Rate, time.Duration(s.Duration))
	var k int64
	for ; k < planned; k++ {
		intended := IntendedAt(start, k, s.Rate)
		if d := intended.Sub(r.now()); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return r.intendedBy(start, s, k)
			case <-t.C:
			}
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return r.intendedBy(start, s, k)
		}
		if len(sem) == cap(sem) {
			r.semFull.Store(true)
		}
		if ctx.Err() != nil {
			<-sem
			return r.intendedBy(start, s, k)
		}
		if !r.takeSend() {
			<-sem
			return k
		}
		r.rec.sent(i)
		model := ch.Name(ch.Index())
		body := r.body(rng)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer func() { <-sem }()
			r.send(i, model, body, intended)
		}()
	}
	return planned
}

// intendedBy is how many sends were due by the stage's end (or now, when the
// run was cut short): those not sent were omitted by a generator that fell
// behind, and the report says so.
func (r *runner) intendedBy(start time.Time, s Stage, sent int64) int64 {
	el := r.now().Sub(start)
	if el > time.Duration(s.Duration) {
		el = time.Duration(s.Duration)
	}
	n := int64(math.Floor(s.Rate*el.Seconds())) + 1
	if n < sent {
		n = sent
	}
	if p := PlannedSends(s.Rate, time.Duration(s.Duration)); n > p {
		n = p
	}
	return n
}

func (r *runner) body(rng *rand.Rand) []byte {
	b := r.o.Payloads.Bodies
	if len(b) == 1 {
		return b[0]
	}
	return b[rng.IntN(len(b))]
}

// do sends one request of a user (intended = sent) and records it.
func (r *runner) do(stage int, ch *Chooser, rng *rand.Rand, intended time.Time) {
	r.send(stage, ch.Name(ch.Index()), r.body(rng), intended)
}

func (r *runner) send(stage int, model string, body []byte, intended time.Time) {
	if n := r.inflight.Add(1); n > r.peak.Load() {
		r.peak.Store(n) // racy max: good enough for a report
	}
	defer r.inflight.Add(-1)
	ctx, cancel := context.WithTimeout(r.reqCtx, time.Duration(r.plan.Request.Timeout))
	defer cancel()
	sent := r.now()
	out := r.inv.Invoke(ctx, Call{Model: model, Body: body})
	done := r.now()
	if r.reqCtx.Err() != nil && out.Code != "" {
		// cut by Ctrl-C: not the endpoint's failure
		r.rec.mu.Lock()
		r.rec.stages[stage].sent--
		r.rec.mu.Unlock()
		return
	}
	if out.Code == "" && ctx.Err() == context.DeadlineExceeded {
		// an answer after the request's time limit (an invoker that does
		// not stop at it); a Ctrl-C that lands just after a good answer is
		// not a timeout
		out.Code = "Timeout"
	}
	r.rec.add(result{stage: stage, model: model, intended: intended, sent: sent, done: done, ttfb: out.TTFB, code: out.Code, message: out.Message, variant: out.Variant})
}

// progress writes a line a second until stop closes.
func (r *runner) progress(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var lastCompleted int64
	last := r.now()
	for {
		select {
		case <-stop:
			if r.o.Progress != nil && r.o.ProgressTTY {
				fmt.Fprintln(r.o.Progress)
			}
			return
		case <-t.C:
		}
		now := r.now()
		r.rec.advance(now)
		if r.o.Progress == nil {
			continue
		}
		i := int(r.stage.Load())
		r.rec.mu.Lock()
		var completed, errs int64
		for _, a := range r.rec.stages {
			completed += a.completed
			errs += a.errors
		}
		var p50, p90, p99 float64
		if n := len(r.rec.seconds); n > 0 {
			s := r.rec.seconds[n-1]
			p50, p90, p99 = s.P50, s.P90, s.P99
		}
		r.rec.mu.Unlock()
		rps := float64(completed-lastCompleted) / now.Sub(last).Seconds()
		lastCompleted, last = completed, now
		s := r.plan.Stages[i]
		load := fmt.Sprintf("%d users", r.users.Load())
		if s.Rate > 0 {
			load = fmt.Sprintf("rate %g/s", s.Rate)
		}
		line := fmt.Sprintf("%5.0fs  %s (%d/%d, %s)  %7.1f req/s  p50 %.1fms p90 %.1fms p99 %.1fms  in flight %d  done %d  errors %d",
			now.Sub(r.rec.start).Seconds(), s.Name, i+1, len(r.plan.Stages), load, rps, p50, p90, p99, r.inflight.Load(), completed, errs)
		if r.o.ProgressTTY {
			fmt.Fprintf(r.o.Progress, "\r\x1b[K%s", line)
		} else {
			fmt.Fprintln(r.o.Progress, line)
		}
	}
}
