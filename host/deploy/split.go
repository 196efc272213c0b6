// Package deploy runs deployment guardrails (DeploymentConfig of
// UpdateEndpoint): the call-level traffic split between the old (blue) and
// new (green) fleets, the steps a blue/green policy shifts traffic in, the
// watching of the CloudWatch alarms of AutoRollbackConfiguration, and the
// state machine that walks the steps and decides to complete or roll back.
//
// It launches and removes nothing: host drives the engine and tells it
// what to do through Target; this package decides when.
package deploy

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
)

// full is the share that sends every call to green.
const full = 1 << 24

// Split is the traffic split of a deployment in progress: each call goes
// to green with probability Share, else to blue. Pick costs one atomic load
// and, while the share is strictly between 0 and 1, one random draw; it
// takes no lock.
type Split[R any] struct {
	green *R
	share atomic.Uint32 // out of full
}

// NewSplit is a split that sends nothing to green yet.
func NewSplit[R any](green *R) *Split[R] { return &Split[R]{green: green} }

// Green is the new fleet's route.
func (s *Split[R]) Green() *R { return s.green }

// Set makes f (clamped to [0, 1]) the share of calls green takes.
func (s *Split[R]) Set(f float64) {
	if !(f > 0) { // NaN too
		f = 0
	}
	s.share.Store(uint32(math.Round(math.Min(f, 1) * full)))
}

// Share is the share of calls green takes now.
func (s *Split[R]) Share() float64 { return float64(s.share.Load()) / full }

// Pick is the route one call takes.
func (s *Split[R]) Pick(blue *R) *R {
	sh := s.share.Load()
	switch {
	case sh == 0:
		return blue
	case sh >= full:
		return s.green
	case rand.Uint32N(full) < sh:
		return s.green
	}
	return blue
}
