package applicationautoscaling

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// alarmSim evaluates target tracking's two alarms on a series of one
// datapoint a minute, as CloudWatch does with AWS's rules: AlarmHigh is
// in ALARM when the last 3 datapoints are above the target, AlarmLow when
// the last 15 are below 90% of it.
func alarmSim(series []float64, i int, target float64) (high, low bool) {
	all := func(n int, f func(v float64) bool) bool {
		if i+1 < n {
			return false
		}
		for _, v := range series[i+1-n : i+1] {
			if !f(v) {
				return false
			}
		}
		return true
	}
	return all(3, func(v float64) bool { return v > target }), all(15, func(v float64) bool { return v < 0.9*target })
}

// replay runs target tracking over series (one value a minute, from
// minute 1) and returns its scalings as "minute:from->to".
func replay(series []float64, start, lo, hi int, c *TargetTrackingConfig) []string {
	now := t0
	cur := start
	var cool cooldowns
	var got []string
	for i, v := range series {
		now = t0.Add(time.Duration(i+1) * time.Minute)
		high, low := alarmSim(series, i, *c.TargetValue)
		if !high && !low {
			continue
		}
		d := decideTargetTracking(bounds{Now: now, Current: cur, Min: lo, Max: hi, Cool: cool}, c, high, v)
		if !d.Scale {
			continue
		}
		got = append(got, fmt.Sprintf("%d:%d->%d", i+1, cur, d.Desired))
		if d.Desired > cur {
			cool.LastOut, cool.OutFrom, cool.OutTo = now, cur, d.Desired
		} else {
			cool.LastIn = now
		}
		cur = d.Desired
	}
	return got
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func concat(parts ...[]float64) []float64 {
	var out []float64
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestReplayTargetTracking replays InvocationsPerInstance series (the
// load divided by the instances of the moment) against a target of 100 and
// checks each scaling is the one the user guide's algorithm gives:
// ceil(capacity × metric / target), within the bounds, with the
// cooldowns' rules.
func TestReplayTargetTracking(t *testing.T) {
	cfg := func(mod func(*TargetTrackingConfig)) *TargetTrackingConfig {
		c := &TargetTrackingConfig{TargetValue: ptr(100.0), ScaleOutCooldown: ptr(int32(300)), ScaleInCooldown: ptr(int32(300))}
		if mod != nil {
			mod(c)
		}
		return c
	}
	for _, c := range []struct {
		name   string
		series []float64
		start  int
		lo, hi int
		cfg    *TargetTrackingConfig
		want   string
	}{{
		// Load 300 on 2 instances: 150 each for 3 minutes → ceil(2×150/100) = 3.
		// Load 420 on 3 (140): AlarmHigh at minute 7, inside the cooldown of
		// minute 3's scale-out: counted from the 2 before it, ceil(2×1.4) = 3,
		// no more. At minute 8 the cooldown is over: ceil(3×1.4) = 5.
		// Load 300 on 5 (60): 15 minutes below 90 → minute 23: ceil(5×0.6) = 3.
		// Load 150 on 3 (50) after one minute at 100: AlarmLow again at minute
		// 39: ceil(3×0.5) = 2. Then 75 on 2: still below 90, but ceil(2×0.75)
		// = 2, already there.
		name: "out, cooldown, out, in, in",
		series: concat(repeat(150, 3), []float64{100}, repeat(140, 4), repeat(60, 15), []float64{100},
			repeat(50, 15), repeat(75, 20)),
		start: 2, lo: 1, hi: 8, cfg: cfg(nil),
		want: "3:2->3 8:3->5 23:5->3 39:3->2",
	}, {
		name:   "the maximum caps a spike",
		series: repeat(500, 4),
		start:  2, lo: 1, hi: 4, cfg: cfg(nil),
		want: "3:2->4",
	}, {
		// With a short cooldown each minute in ALARM scales again, from the
		// capacity the previous scale-out left.
		name:   "no cooldown: again each minute",
		series: repeat(150, 6),
		start:  2, lo: 1, hi: 10, cfg: cfg(func(c *TargetTrackingConfig) { c.ScaleOutCooldown = ptr(int32(0)) }),
		want: "3:2->3 4:3->5 5:5->8 6:8->10",
	}, {
		name:   "the minimum holds a scale-in",
		series: repeat(1, 16),
		start:  4, lo: 2, hi: 10, cfg: cfg(nil),
		want: "15:4->2",
	}, {
		name:   "DisableScaleIn",
		series: repeat(1, 30),
		start:  4, lo: 1, hi: 10, cfg: cfg(func(c *TargetTrackingConfig) { c.DisableScaleIn = ptr(true) }),
		want: "",
	}, {
		// Scale-in waits for the scale-out cooldown too.
		name:   "no scale-in right after a scale-out",
		series: concat(repeat(200, 3), repeat(10, 15)),
		start:  1, lo: 1, hi: 10, cfg: cfg(func(c *TargetTrackingConfig) { c.ScaleOutCooldown = ptr(int32(3600)) }),
		want: "3:1->2",
	}} {
		t.Run(c.name, func(t *testing.T) {
			if got := strings.Join(replay(c.series, c.start, c.lo, c.hi, c.cfg), " "); got != c.want {
				t.Errorf("scalings %q\nwant     %q", got, c.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestDecideStep checks step scaling's arithmetic against the user guide:
// the step whose interval holds the breach, the three adjustment types,
// the rounding of percentages, MinAdjustmentMagnitude, the bounds and the
// cooldown.
func TestDecideStep(t *testing.T) {
	steps := []StepAdjustment{
		{MetricIntervalLowerBound: ptr(0.0), MetricIntervalUpperBound: ptr(10.0), ScalingAdjustment: ptr(int32(1))},
		{MetricIntervalLowerBound: ptr(10.0), ScalingAdjustment: ptr(int32(3))},
	}
	change := &StepConfig{AdjustmentType: ptr(adjChange), StepAdjustments: steps}
	b := func(cur, lo, hi int) bounds { return bounds{Now: t0, Current: cur, Min: lo, Max: hi} }
	for _, c := range []struct {
		name              string
		b                 bounds
		cfg               *StepConfig
		threshold, metric float64
		above             bool
		want              string
	}{
		{"first step", b(2, 1, 10), change, 50, 55, true, "3"},
		{"lower bound inclusive", b(2, 1, 10), change, 50, 60, true, "5"},
		{"second step", b(2, 1, 10), change, 50, 90, true, "5"},
		{"capped", b(9, 1, 10), change, 50, 90, true, "10"},
		{"at max", b(10, 1, 10), change, 50, 90, true, "-" + reasonAtMax},
		{"percent 25 of 10 is 2.5: 2", b(10, 1, 100), &StepConfig{AdjustmentType: ptr(adjPercent),
			StepAdjustments: []StepAdjustment{{MetricIntervalLowerBound: ptr(0.0), ScalingAdjustment: ptr(int32(25))}}}, 1, 2, true, "12"},
		{"percent 25 of 2 is 0.5: 1", b(2, 1, 100), &StepConfig{AdjustmentType: ptr(adjPercent),
			StepAdjustments: []StepAdjustment{{MetricIntervalLowerBound: ptr(0.0), ScalingAdjustment: ptr(int32(25))}}}, 1, 2, true, "3"},
		{"MinAdjustmentMagnitude", b(10, 1, 100), &StepConfig{AdjustmentType: ptr(adjPercent), MinAdjustmentMagnitude: ptr(int32(3)),
			StepAdjustments: []StepAdjustment{{MetricIntervalLowerBound: ptr(0.0), ScalingAdjustment: ptr(int32(10))}}}, 1, 2, true, "13"},
		{"percent -50 of 5 is -2.5: -2", b(5, 1, 100), &StepConfig{AdjustmentType: ptr(adjPercent),
			StepAdjustments: []StepAdjustment{{MetricIntervalUpperBound: ptr(0.0), ScalingAdjustment: ptr(int32(-50))}}}, 10, 5, false, "3"},
		{"below the threshold: upper bound inclusive", b(5, 1, 100), &StepConfig{AdjustmentType: ptr(adjChange),
			StepAdjustments: []StepAdjustment{{MetricIntervalUpperBound: ptr(0.0), ScalingAdjustment: ptr(int32(-1))}}}, 10, 10, false, "4"},
		{"scale-in held at the minimum", b(1, 1, 100), &StepConfig{AdjustmentType: ptr(adjChange),
			StepAdjustments: []StepAdjustment{{MetricIntervalUpperBound: ptr(0.0), ScalingAdjustment: ptr(int32(-1))}}}, 10, 5, false, "-" + reasonAtMin},
		{"exact: zero to one", b(0, 0, 4), &StepConfig{AdjustmentType: ptr(adjExact),
			StepAdjustments: []StepAdjustment{{MetricIntervalLowerBound: ptr(0.0), ScalingAdjustment: ptr(int32(1))}}}, 0, 1, true, "1"},
		{"no step holds the breach", b(2, 1, 10), &StepConfig{AdjustmentType: ptr(adjChange),
			StepAdjustments: []StepAdjustment{{MetricIntervalLowerBound: ptr(5.0), ScalingAdjustment: ptr(int32(1))}}}, 50, 52, true, "-" + reasonNoStepMatch},
		{"cooldown: counted from the capacity before the last scale-out", bounds{Now: t0, Current: 3, Min: 1, Max: 10,
			Cool: cooldowns{LastOut: t0.Add(-time.Minute), OutFrom: 2, OutTo: 3}}, &StepConfig{AdjustmentType: ptr(adjChange), Cooldown: ptr(int32(300)),
			StepAdjustments: steps}, 50, 55, true, "-" + reasonCooldown},
		{"cooldown: a bigger step still scales out", bounds{Now: t0, Current: 3, Min: 1, Max: 10,
			Cool: cooldowns{LastOut: t0.Add(-time.Minute), OutFrom: 2, OutTo: 3}}, &StepConfig{AdjustmentType: ptr(adjChange), Cooldown: ptr(int32(300)),
			StepAdjustments: steps}, 50, 80, true, "5"},
		{"a scale-out does not wait for a scale-in's cooldown", bounds{Now: t0, Current: 3, Min: 1, Max: 10,
			Cool: cooldowns{LastIn: t0.Add(-time.Minute)}}, &StepConfig{AdjustmentType: ptr(adjChange), Cooldown: ptr(int32(300)),
			StepAdjustments: steps}, 50, 55, true, "4"},
	} {
		d := decideStep(c.b, c.cfg, c.threshold, c.metric, c.above)
		got := fmt.Sprint(d.Desired)
		if !d.Scale {
			got = "-" + d.Why
		}
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestRatioCeil(t *testing.T) {
	for _, c := range []struct {
		n           int
		metric, tgt float64
		want        int
	}{{2, 150, 100, 3}, {3, 0.7, 0.7, 3}, {10, 0.1 * 3, 0.3, 10}, {0, 500, 1, 0}, {1, math.MaxFloat64, 1e-100, maxCapacity}} {
		if got := ratioCeil(c.n, c.metric, c.tgt); got != c.want {
			t.Errorf("ratioCeil(%d, %v, %v) = %d, want %d", c.n, c.metric, c.tgt, got, c.want)
		}
	}
}
