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
// then the deployment bakes for Wait (alarms watched) before the next.
type Step struct {
	Share float64
	Wait  time.Duration
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
			return []Step{{1, wait}}
		}
		return []Step{{float64(k) / float64(capacity), wait}, {1, 0}}
	case spec.TrafficLinear:
		k := t.LinearStepSize.Instances(capacity)
		var out []Step
		for n := k; ; n += k {
			if n >= capacity {
				return append(out, Step{1, wait})
			}
			out = append(out, Step{float64(n) / float64(capacity), wait})
		}
	}
	return []Step{{1, wait}}
}

// Target is what a deployment moves: host implements it.
type Target interface {
	// Shift makes share the part of the calls the green fleet takes.
	Shift(share float64)
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
		t.Shift(st.Share)
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
	// state; remove unregisters it.
	OnAlarmChange(f func(name string)) (remove func())
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

func (c cloudWatchAlarms) OnAlarmChange(f func(name string)) func() {
	return c.svc.OnStateChange(func(a cloudwatch.Alarm, _, _ cloudwatch.State) { f(a.AlarmName) })
}

// Watcher watches named alarms of a source (Alarms).
type Watcher struct {
	src     AlarmSource
	names   []string
	changed chan struct{}
	remove  func()
	once    sync.Once
}

// Watch starts watching names; Close stops it.
func Watch(src AlarmSource, names []string) *Watcher {
	w := &Watcher{src: src, names: slices.Clone(names), changed: make(chan struct{}, 1)}
	w.remove = src.OnAlarmChange(func(name string) {
		if slices.Contains(w.names, name) {
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
