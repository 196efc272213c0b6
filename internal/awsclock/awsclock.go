// Package awsclock is the one clock of AWS's timings in mce: CloudWatch's
// periods and alarm evaluation, deployment guardrails' waits and baking
// periods, Application Auto Scaling's cooldowns and scheduled actions.
//
// By default it is the wall clock: a one-minute period lasts a minute. For
// tests and demos, mce serve --time-compression N makes AWS time pass N
// times faster than the wall clock, everywhere at once: Now runs N times
// as fast from the moment the clock was made, and Real turns an AWS
// duration into the wall-clock time to wait for it. The timestamps of
// CloudWatch and Application Auto Scaling (datapoints, alarm state changes,
// scaling activities) are on this clock, so they stay consistent with each
// other; SageMaker's own (CreationTime, …) stay on the wall clock.
package awsclock

import (
	"fmt"
	"time"
)

// MaxFactor bounds the compression a clock takes: at 3,600 an hour of AWS
// time passes in a second (tests of long waits use it).
const MaxFactor = 3600

// MaxServeFactor bounds mce serve --time-compression: at 120 a one-minute
// period lasts half a second, and CloudWatch's store flushes every 8 ms of
// wall time to keep up with its one-second grace for late values. Beyond
// that the loops that keep AWS's timings would spend more time waking than
// working, and datapoints could be dropped.
const MaxServeFactor = 120

// Clock is AWS time as mce keeps it. The zero value and nil are the wall
// clock.
type Clock struct {
	factor float64
	origin time.Time // wall-clock time when the clock was made
}

// New returns a clock running factor times as fast as the wall clock
// (1: the wall clock). It refuses a factor below 1 or above MaxFactor.
func New(factor float64) (*Clock, error) {
	if !(factor >= 1 && factor <= MaxFactor) { // NaN fails too
		return nil, fmt.Errorf("awsclock: time compression %v is out of range [1, %d]", factor, MaxFactor)
	}
	return &Clock{factor: factor, origin: time.Now()}, nil
}

// Factor is how many times faster than the wall clock AWS time passes.
func (c *Clock) Factor() float64 {
	if c == nil || c.factor == 0 {
		return 1
	}
	return c.factor
}

// Now is the current AWS time.
func (c *Clock) Now() time.Time {
	now := time.Now()
	if c.Factor() == 1 {
		return now
	}
	return c.origin.Add(time.Duration(float64(now.Sub(c.origin)) * c.factor))
}

// Real is the wall-clock time an AWS duration d takes on this clock
// (never below a millisecond for a positive d, so that loops still wait).
func (c *Clock) Real(d time.Duration) time.Duration {
	if c.Factor() == 1 || d <= 0 {
		return d
	}
	r := time.Duration(float64(d) / c.factor)
	if r < time.Millisecond {
		r = time.Millisecond
	}
	return r
}

// Since is the AWS time passed since t (a time of this clock).
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// NewTimer fires after the AWS duration d.
func (c *Clock) NewTimer(d time.Duration) *time.Timer { return time.NewTimer(c.Real(d)) }
