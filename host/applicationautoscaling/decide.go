package applicationautoscaling

import (
	"math"
	"time"
)

// The scaling decisions, as pure functions of the capacity, the bounds,
// the metric and what the cooldowns remember, so that a replayed series
// can be checked against the Application Auto Scaling user guide:
//
//   - Target tracking scales out to ceil(capacity × metric / target) when
//     its AlarmHigh is in ALARM and in to ceil(capacity × metric / target)
//     when its AlarmLow is (rounding up: scale-in keeps the capacity the
//     metric needs, never less).
//   - Step scaling adds the step whose interval (relative to the alarm's
//     threshold) holds the breach: ChangeInCapacity adds it,
//     PercentChangeInCapacity adds that percent of the capacity (a change
//     between 0 and 1 in size becomes 1, a larger one is rounded toward
//     zero, and never less than MinAdjustmentMagnitude), ExactCapacity sets
//     it.
//   - Both stay within MinCapacity and MaxCapacity.
//   - Cooldowns: while a scale-out's cooldown runs, the capacity it added
//     counts toward the next scale-out (the next one is computed from the
//     capacity before it and happens only when it asks for more); a
//     scale-in waits for the scale-in cooldown after a scale-in and for
//     the scale-out cooldown after a scale-out; a scale-out never waits
//     for a scale-in's cooldown.

// Decision is what one run of a policy decides.
type Decision struct {
	Desired int    // the capacity to set; the current one when Scale is false
	Scale   bool   // whether to change the capacity
	Why     string // when Scale is false: why not (AWS's NotScaledReason codes)
}

// The reasons a policy run changes nothing.
const (
	reasonAtMax       = "AlreadyAtMaxCapacity"
	reasonAtMin       = "AlreadyAtMinCapacity"
	reasonAtDesired   = "AlreadyAtDesiredCapacity"
	reasonCooldown    = "CooldownInEffect"
	reasonSuspended   = "ScalingSuspended"
	reasonScaleInOff  = "ScaleInDisabled"
	reasonNoStepMatch = "NoStepAdjustmentApplies"
)

// bounds are a target's capacities and cooldown memory at one instant.
type bounds struct {
	Now      time.Time
	Current  int
	Min, Max int
	Cool     cooldowns
}

// ratioCeil is ceil(n × metric / target), with a tolerance for the
// rounding of floating point (2 × 150 / 100 is 3, not 4).
func ratioCeil(n int, metric, target float64) int {
	x := float64(n) * metric / target
	if math.IsNaN(x) || x < 0 {
		return 0
	}
	if x > maxCapacity {
		return maxCapacity
	}
	return int(math.Ceil(x - 1e-9))
}

func clamp(v, lo, hi int) int { return max(lo, min(hi, v)) }

// inCooldown reports whether t+d is after now.
func inCooldown(t time.Time, d time.Duration, now time.Time) bool {
	return !t.IsZero() && d > 0 && now.Before(t.Add(d))
}

// decideOut decides a scale-out to want (computed by f from a base
// capacity): during the scale-out cooldown the base is the capacity before
// the last scale-out.
func decideOut(b bounds, outCooldown time.Duration, f func(base int) int) Decision {
	base := b.Current
	cooling := inCooldown(b.Cool.LastOut, outCooldown, b.Now) && b.Current == b.Cool.OutTo
	if cooling {
		base = b.Cool.OutFrom
	}
	want := clamp(f(base), b.Min, b.Max)
	switch {
	case want > b.Current:
		return Decision{Desired: want, Scale: true}
	case b.Current >= b.Max:
		return Decision{Desired: b.Current, Why: reasonAtMax}
	case cooling:
		return Decision{Desired: b.Current, Why: reasonCooldown}
	}
	return Decision{Desired: b.Current, Why: reasonAtDesired}
}

// decideIn decides a scale-in to f(current).
func decideIn(b bounds, inCool, outCool time.Duration, f func(base int) int) Decision {
	if inCooldown(b.Cool.LastIn, inCool, b.Now) || inCooldown(b.Cool.LastOut, outCool, b.Now) {
		return Decision{Desired: b.Current, Why: reasonCooldown}
	}
	want := clamp(f(b.Current), b.Min, b.Max)
	switch {
	case want < b.Current:
		return Decision{Desired: want, Scale: true}
	case b.Current <= b.Min:
		return Decision{Desired: b.Current, Why: reasonAtMin}
	}
	return Decision{Desired: b.Current, Why: reasonAtDesired}
}

// decideTargetTracking is target tracking's decision when its AlarmHigh
// (high) or AlarmLow is in ALARM with metric as the metric's value. A
// current capacity of 0 does not scale out by ratio (0 × anything is 0):
// it goes to 1, as a step policy on NoCapacityInvocationFailures would.
// A NaN metric (an alarm set by SetAlarmState, which carries no
// datapoints) moves the capacity by one.
func decideTargetTracking(b bounds, c *TargetTrackingConfig, high bool, metric float64) Decision {
	target := *c.TargetValue
	outCool := seconds(c.ScaleOutCooldown, 300)
	inCool := seconds(c.ScaleInCooldown, 300)
	if high {
		return decideOut(b, outCool, func(base int) int {
			if base == 0 || math.IsNaN(metric) {
				return base + 1
			}
			return ratioCeil(base, metric, target)
		})
	}
	if c.DisableScaleIn != nil && *c.DisableScaleIn {
		return Decision{Desired: b.Current, Why: reasonScaleInOff}
	}
	return decideIn(b, inCool, outCool, func(base int) int {
		if math.IsNaN(metric) {
			return base - 1
		}
		return ratioCeil(base, metric, target)
	})
}

// decideStep is a step policy's decision for an alarm whose threshold is
// threshold, breached (above: a GreaterThan alarm) by metric.
func decideStep(b bounds, c *StepConfig, threshold, metric float64, above bool) Decision {
	diff := metric - threshold
	var step *StepAdjustment
	for i := range c.StepAdjustments {
		st := &c.StepAdjustments[i]
		lo, hi := math.Inf(-1), math.Inf(1)
		if st.MetricIntervalLowerBound != nil {
			lo = *st.MetricIntervalLowerBound
		}
		if st.MetricIntervalUpperBound != nil {
			hi = *st.MetricIntervalUpperBound
		}
		// Above the threshold the lower bound is inclusive, below it the
		// upper one.
		if above && lo <= diff && diff < hi || !above && lo < diff && diff <= hi {
			step = st
			break
		}
	}
	if step == nil {
		return Decision{Desired: b.Current, Why: reasonNoStepMatch}
	}
	adj := int(*step.ScalingAdjustment)
	apply := func(base int) int {
		switch *c.AdjustmentType {
		case adjExact:
			return adj
		case adjPercent:
			d := float64(base) * float64(adj) / 100
			var n int
			switch {
			case d > 0 && d < 1:
				n = 1
			case d < 0 && d > -1:
				n = -1
			default:
				n = int(d) // toward zero
			}
			if c.MinAdjustmentMagnitude != nil && n != 0 && abs(n) < int(*c.MinAdjustmentMagnitude) {
				n = sign(n) * int(*c.MinAdjustmentMagnitude)
			}
			return base + n
		}
		return base + adj
	}
	cool := seconds(c.Cooldown, 0)
	want := apply(b.Current)
	if want > b.Current || (*c.AdjustmentType != adjExact && adj > 0) {
		return decideOut(b, cool, apply)
	}
	return decideIn(b, cool, cool, apply)
}

func seconds(v *int32, def int) time.Duration {
	if v == nil {
		return time.Duration(def) * time.Second
	}
	return time.Duration(*v) * time.Second
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func sign(n int) int {
	if n < 0 {
		return -1
	}
	return 1
}
