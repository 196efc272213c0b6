package deploy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mce-run/mce/host/cloudwatch"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/internal/awsclock"
)

// Step is one stage of a traffic shift: green takes Share of the calls,
// then the deployment bakes for Wait (alarms watched) before the next. A
// rolling update's steps also size the fleets first: Green and Blue are
// the instance counts of the new and old plans' variants, in their order
// (nil for a blue/green step: the fleets keep their sizes).
type Step struct {
	Share       float64
	Wait        time.Duration
	Green, Blue []int
}

// BlueGreenSteps are the stages of a blue/green policy for a green fleet
// of capacity instances (the sum of its variants' instance counts):
//
//   - ALL_AT_ONCE: everything, then a bake of WaitIntervalInSeconds;
//   - CANARY: CanarySize of the green fleet's capacity (as a share of the
//     calls), a bake of WaitIntervalInSeconds, then everything;
//   - LINEAR: steps of LinearStepSize, each followed by a bake of
//     WaitIntervalInSeconds, the last one reaching everything.
func BlueGreenSteps(p *spec.BlueGreenUpdatePolicy, capacity int) []Step {
	t := p.TrafficRoutingConfiguration
	wait := spec.Seconds(t.WaitIntervalInSeconds)
	capacity = max(capacity, 1)
	switch t.Type {
	case spec.TrafficCanary:
		k := t.CanarySize.Instances(capacity)
		if k >= capacity {
			return []Step{{Share: 1, Wait: wait}}
		}
		return []Step{{Share: float64(k) / float64(capacity), Wait: wait}, {Share: 1}}
	case spec.TrafficLinear:
		k := t.LinearStepSize.Instances(capacity)
		var out []Step
		for n := k; ; n += k {
			if n >= capacity {
				return append(out, Step{Share: 1, Wait: wait})
			}
			out = append(out, Step{Share: float64(n) / float64(capacity), Wait: wait})
		}
	}
	return []Step{{Share: 1, Wait: wait}}
}

// Target is what a deployment moves: host implements it.
type Target interface {
	// Shift sizes the fleets as the step says (if it does), then makes
	// its Share the part of the calls the green fleet takes. An error
	// (the engine could not size a fleet) rolls the deployment back.
	Shift(st Step) error
	// Phase reports a stage for DescribeEndpoint's PendingDeploymentSummary:
	// status is a variant status (ActivatingTraffic, Baking), msg says more.
	Phase(status, msg string)
}

// Alarms tells whether a watched alarm is in ALARM.
type Alarms interface {
	// Tripped is the name of a watched alarm in ALARM, or "".
	Tripped() string
	// Changed is signalled (without blocking) when a watched alarm changes
	// state.
	Changed() <-chan struct{}
}

// Outcome is how a deployment ended.
type Outcome struct {
	// Completed: green takes every call and baked without an alarm.
	Completed bool
	// Canceled: ctx ended (the endpoint is being deleted or mce stops).
	Canceled bool
	// Reason says why a deployment that neither completed nor was canceled
	// must roll back.
	Reason string
}

// Clock is the clock deployments wait on (nil: the wall clock); a var for
// the state machine's tests.
type Clock = *awsclock.Clock

// Run walks the steps: shift, then bake watching the alarms. It stops at
// the first alarm in ALARM or when timeout (counted from started, on the
// clock; 0: none) runs out, and says so in the Outcome; it never shifts
// traffic back itself (host rolls back, so that it can drain first).
func Run(ctx context.Context, clock Clock, steps []Step, started time.Time, timeout time.Duration, alarms Alarms, t Target) Outcome {
	var deadline <-chan time.Time
	if timeout > 0 {
		tm := clock.NewTimer(timeout - clock.Since(started))
		defer tm.Stop()
		deadline = tm.C
	}
	var changed <-chan struct{}
	if alarms != nil {
		changed = alarms.Changed()
	}
	tripped := func() (Outcome, bool) {
		if alarms == nil {
			return Outcome{}, false
		}
		if name := alarms.Tripped(); name != "" {
			return Outcome{Reason: fmt.Sprintf("CloudWatch alarm %s went into the ALARM state", name)}, true
		}
		return Outcome{}, false
	}
	timedOut := Outcome{Reason: fmt.Sprintf("the deployment ran past its MaximumExecutionTimeoutInSeconds (%d)", int(timeout/time.Second))}
	for _, st := range steps {
		if o, bad := tripped(); bad {
			return o
		}
		t.Phase("ActivatingTraffic", fmt.Sprintf("Shifting %s of the traffic to the new fleet.", percent(st.Share)))
		if err := t.Shift(st); err != nil {
			return Outcome{Reason: "resizing a fleet failed: " + err.Error()}
		}
		if st.Wait <= 0 {
			continue
		}
		t.Phase("Baking", fmt.Sprintf("Baking with %s of the traffic on the new fleet for %d seconds.", percent(st.Share), int(st.Wait/time.Second)))
		bake := clock.NewTimer(st.Wait)
	baking:
		for {
			if o, bad := tripped(); bad {
				bake.Stop()
				return o
			}
			select {
			case <-ctx.Done():
				bake.Stop()
				return Outcome{Canceled: true}
			case <-deadline:
				bake.Stop()
				return timedOut
			case <-changed:
			case <-bake.C:
				break baking
			}
		}
	}
	if o, bad := tripped(); bad {
		return o
	}
	select {
	case <-ctx.Done():
		return Outcome{Canceled: true}
	default:
	}
	return Outcome{Completed: true}
}

func percent(f float64) string {
	s := fmt.Sprintf("%.1f", f*100)
	return strings.TrimSuffix(s, ".0") + "%"
}

// AlarmSource is where alarms' states are read: host adapts CloudWatch.
type AlarmSource interface {
	// AlarmState is an alarm's state (OK, ALARM, INSUFFICIENT_DATA) and
	// whether the alarm exists.
	AlarmState(name string) (string, bool)
	// OnAlarmChange registers f, called after each change of an alarm's
	// state with the alarm's name and new state; remove unregisters it.
	OnAlarmChange(f func(name, state string)) (remove func())
}

// CloudWatch is svc as an AlarmSource; nil when svc is nil.
func CloudWatch(svc *cloudwatch.Service) AlarmSource {
	if svc == nil {
		return nil
	}
	return cloudWatchAlarms{svc}
}

type cloudWatchAlarms struct{ svc *cloudwatch.Service }

func (c cloudWatchAlarms) AlarmState(name string) (string, bool) {
	st, ok := c.svc.AlarmState(name)
	return string(st), ok
}

func (c cloudWatchAlarms) OnAlarmChange(f func(name, state string)) func() {
	return c.svc.OnStateChange(func(a cloudwatch.Alarm, _, new cloudwatch.State) { f(a.AlarmName, string(new)) })
}

// Watcher watches named alarms of a source (Alarms). An alarm that went
// to ALARM while watched stays tripped even if it is OK again when the
// deployment looks: a brief ALARM rolls back too.
type Watcher struct {
	src     AlarmSource
	names   []string
	changed chan struct{}
	remove  func()
	once    sync.Once
	mu      sync.Mutex
	tripped string // the first watched alarm seen going to ALARM
}

// Watch starts watching names; Close stops it.
func Watch(src AlarmSource, names []string) *Watcher {
	w := &Watcher{src: src, names: slices.Clone(names), changed: make(chan struct{}, 1)}
	w.remove = src.OnAlarmChange(func(name, state string) {
		if slices.Contains(w.names, name) {
			if state == "ALARM" {
				w.mu.Lock()
				if w.tripped == "" {
					w.tripped = name
				}
				w.mu.Unlock()
			}
			select {
			case w.changed <- struct{}{}:
			default:
			}
		}
	})
	return w
}

// Missing lists the names the source does not know.
func Missing(src AlarmSource, names []string) []string {
	var out []string
	for _, n := range names {
		if _, ok := src.AlarmState(n); !ok {
			out = append(out, n)
		}
	}
	return out
}

// Tripped implements Alarms.
func (w *Watcher) Tripped() string {
	w.mu.Lock()
	t := w.tripped
	w.mu.Unlock()
	if t != "" {
		return t
	}
	for _, n := range w.names {
		if st, ok := w.src.AlarmState(n); ok && st == "ALARM" {
			return n
		}
	}
	return ""
}

// Changed implements Alarms.
func (w *Watcher) Changed() <-chan struct{} { return w.changed }

// Close stops watching.
func (w *Watcher) Close() { w.once.Do(w.remove) }

// RollingSteps are the batches of a rolling update from a fleet of old
// instance counts (by variant of the old plan) to one of new counts (by
// variant of the new plan), SageMaker's order in mce's terms: each step
// brings up the next batch of the new fleet (MaximumBatchSize of each new
// variant), has taken down the batch of the old fleet that the previous
// step replaced, shifts traffic by capacity (new instances over all
// instances running) and bakes for WaitIntervalInSeconds. The old fleet
// keeps at least one instance per variant until the last step: when the
// new fleet is whole and bakes with every call, the old one goes entirely.
func RollingSteps(p *spec.RollingUpdatePolicy, old, new []int) []Step {
	wait := spec.Seconds(p.WaitIntervalInSeconds)
	batch := func(n int) int { return p.MaximumBatchSize.Instances(max(n, 1)) }
	var out []Step
	for k := 1; ; k++ {
		green, blue := make([]int, len(new)), make([]int, len(old))
		g, b, whole, gone := 0, 0, true, true
		for i, n := range new {
			green[i] = min(n, k*batch(n))
			g += green[i]
			whole = whole && green[i] == n
		}
		for i, n := range old {
			left := n - (k-1)*batch(n)
			blue[i] = max(1, left)
			gone = gone && left-batch(n) <= 0
		}
		if whole && gone {
			return append(out, Step{Share: 1, Wait: wait, Green: green, Blue: blue})
		}
		for _, n := range blue {
			b += n
		}
		out = append(out, Step{Share: float64(g) / float64(g+b), Wait: wait, Green: green, Blue: blue})
	}
}

// RollbackSteps are the batches a rolling update's rollback brings the old
// fleet back in (RollbackMaximumBatchSize of each old variant; default
// all at once), from the counts it had (from) to its own (old), with
// the share of calls the new fleet keeps while it does (green instances
// running); the new fleet goes after the last.
func RollbackSteps(p *spec.RollingUpdatePolicy, from, old []int, green int) []Step {
	batch := func(n int) int { return n }
	if p.RollbackMaximumBatchSize != nil {
		batch = func(n int) int { return p.RollbackMaximumBatchSize.Instances(max(n, 1)) }
	}
	cur := slices.Clone(from)
	var out []Step
	for !slices.Equal(cur, old) {
		b := 0
		for i, n := range old {
			cur[i] = min(n, cur[i]+batch(n))
			b += cur[i]
		}
		out = append(out, Step{Share: float64(green) / float64(green+b), Blue: slices.Clone(cur)})
	}
	return out
}
