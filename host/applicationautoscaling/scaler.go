package applicationautoscaling

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mce-run/mce/host/cloudwatch"
)

// The evaluation: each Options.Interval (and when an alarm goes to
// ALARM), for every target: the scheduled actions that came due change
// its bounds; a capacity outside the bounds is brought within them;
// otherwise each policy named in the actions of an alarm in ALARM runs
// (AWS invokes an alarm's actions again each minute it stays in ALARM),
// the largest scale-out wins, else the most conservative scale-in. A
// change that fails (the endpoint is updating) is recorded as a Failed
// activity and tried again at the next evaluation, the alarm being still
// in ALARM.

// Evaluate runs one evaluation now (Run calls it; tests call it to step).
func (s *Service) Evaluate(ctx context.Context) {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	res := s.resources()
	if res == nil {
		return
	}
	now := s.now()
	firing := map[string][]cloudwatch.Alarm{} // by the action (policy ARN) they invoke
	for _, a := range s.cw.Alarms() {
		if a.StateValue != cloudwatch.StateAlarm || !a.ActionsEnabled {
			continue
		}
		for _, act := range a.AlarmActions {
			if strings.HasPrefix(act, "arn:aws:autoscaling:") {
				firing[act] = append(firing[act], a)
			}
		}
	}
	s.mu.Lock()
	keys := make([]string, 0, len(s.targets))
	for k := range s.targets {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	slices.Sort(keys)
	for _, k := range keys {
		if ctx.Err() != nil {
			return
		}
		s.evaluateTarget(ctx, res, k, firing, now)
	}
}

// snapshot copies what an evaluation reads of the target k.
func (s *Service) snapshot(k string) (ScalableTarget, []*ScalingPolicy, []scheduled, cooldowns, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.targets[k]
	if t == nil {
		return ScalableTarget{}, nil, nil, cooldowns{}, false
	}
	sch := make([]scheduled, len(t.Scheduled))
	for i, x := range t.Scheduled {
		sch[i] = *x
	}
	return t.T, slices.Clone(t.Policies), sch, t.Cool, true
}

func (s *Service) evaluateTarget(ctx context.Context, res Targets, k string, firing map[string][]cloudwatch.Alarm, now time.Time) {
	tg, policies, sch, cool, ok := s.snapshot(k)
	if !ok {
		return
	}
	if !tg.SuspendedState.scheduled() {
		for _, a := range sch {
			if due(&a, now, s.log) {
				s.runScheduled(k, a.A.ScheduledActionName, now)
			}
		}
		if tg, _, _, cool, ok = s.snapshot(k); !ok {
			return
		}
	}
	cur, exists, err := res.Capacity(ctx, tg.ScalableDimension, tg.ResourceID)
	if err != nil || !exists {
		return
	}
	// Bounds first: a capacity outside them is brought in.
	switch {
	case cur < int(tg.MinCapacity):
		s.scale(ctx, res, k, tg, cur, int(tg.MinCapacity), fmt.Sprintf("minimum capacity was set to %d", tg.MinCapacity), now, false)
		return
	case cur > int(tg.MaxCapacity):
		s.scale(ctx, res, k, tg, cur, int(tg.MaxCapacity), fmt.Sprintf("maximum capacity was set to %d", tg.MaxCapacity), now, false)
		return
	}
	b := bounds{Now: now, Current: cur, Min: int(tg.MinCapacity), Max: int(tg.MaxCapacity), Cool: cool}
	var out, in *Decision
	var outCause, inCause string
	for _, p := range policies {
		for _, a := range firing[p.PolicyARN] {
			// The datapoints now, as AWS hands them to the action each
			// minute: an alarm that stays in ALARM keeps the
			// StateReasonData of its change, which gets stale.
			// An alarm whose state SetAlarmState set (no StateReasonData)
			// carries no datapoint: the policy moves by one.
			points := recentDatapoints(a)
			if a.StateReasonData != nil {
				if now, _ := s.cw.AlarmDatapoints(a.AlarmName); len(now) > 0 {
					points = now
				}
			}
			d, ok := decidePolicy(b, p, a, points)
			if !ok || !d.Scale {
				continue
			}
			cause := fmt.Sprintf("monitor alarm %s in state ALARM triggered policy %s", a.AlarmName, p.PolicyName)
			if d.Desired > cur && (out == nil || d.Desired > out.Desired) {
				out, outCause = &d, cause
			}
			if d.Desired < cur && (in == nil || d.Desired > in.Desired) {
				in, inCause = &d, cause
			}
		}
	}
	switch {
	case out != nil && !tg.SuspendedState.out():
		s.scale(ctx, res, k, tg, cur, out.Desired, outCause, now, true)
	case out == nil && in != nil && !tg.SuspendedState.in():
		s.scale(ctx, res, k, tg, cur, in.Desired, inCause, now, true)
	}
}

// decidePolicy runs policy p for alarm a, whose evaluation sees points
// (oldest first).
func decidePolicy(b bounds, p *ScalingPolicy, a cloudwatch.Alarm, points []float64) (Decision, bool) {
	switch p.PolicyType {
	case typeTargetTracking:
		high := false
		for _, r := range p.Alarms {
			if r.AlarmName == a.AlarmName {
				high = strings.Contains(a.AlarmName, "-AlarmHigh-")
				return decideTargetTracking(b, p.TargetTrackingScalingPolicyConfiguration, high, latest(points)), true
			}
		}
		return Decision{}, false // another alarm naming a target tracking policy: AWS runs only its own
	case typeStep:
		c := p.StepScalingPolicyConfiguration
		above := strings.HasPrefix(a.ComparisonOperator, "Greater")
		metric := aggregate(points, c.MetricAggregationType)
		if math.IsNaN(metric) {
			metric = a.Threshold // no datapoints (SetAlarmState): the breach is at the threshold
		}
		return decideStep(b, c, a.Threshold, metric, above), true
	}
	return Decision{}, false
}

// recentDatapoints reads the datapoints that decided an alarm's state,
// oldest first, from its StateReasonData (none when it was set by hand).
func recentDatapoints(a cloudwatch.Alarm) []float64 {
	if a.StateReasonData == nil {
		return nil
	}
	var d struct {
		RecentDatapoints []float64 `json:"recentDatapoints"`
	}
	if json.Unmarshal([]byte(*a.StateReasonData), &d) != nil {
		return nil
	}
	return d.RecentDatapoints
}

func latest(points []float64) float64 {
	if len(points) == 0 {
		return math.NaN()
	}
	return points[len(points)-1]
}

func aggregate(points []float64, how *string) float64 {
	if len(points) == 0 {
		return math.NaN()
	}
	agg := "Average"
	if how != nil {
		agg = *how
	}
	switch agg {
	case "Minimum":
		return slices.Min(points)
	case "Maximum":
		return slices.Max(points)
	}
	sum := 0.0
	for _, p := range points {
		sum += p
	}
	return sum / float64(len(points))
}

func unitOf(dim string) string {
	if dim == DimensionComponent {
		return "copy count"
	}
	return "instance count"
}

// scale sets the capacity of target k from cur to n, recording the
// activity; dynamic is a policy's doing (its cooldowns start).
func (s *Service) scale(ctx context.Context, res Targets, k string, tg ScalableTarget, cur, n int, cause string, now time.Time, dynamic bool) {
	unit := unitOf(tg.ScalableDimension)
	a := Activity{ActivityID: s.activityID(), ServiceNamespace: tg.ServiceNamespace, ResourceID: tg.ResourceID,
		ScalableDimension: tg.ScalableDimension, Description: fmt.Sprintf("Setting desired %s to %d.", unit, n),
		Cause: cause, StartTime: epoch{now.Truncate(time.Millisecond)}, StatusCode: StatusInProgress}
	s.addActivity(k, a)
	err := res.SetCapacity(ctx, tg.ScalableDimension, tg.ResourceID, n)
	end := s.now()
	a.EndTime = epochOf(end)
	if err != nil {
		a.StatusCode = StatusFailed
		a.StatusMessage = fmt.Sprintf("Failed to set desired %s to %d: %s. mce tries again at its next evaluation.", unit, n, err.Error())
		s.log.Warn().Err(err).Str("scalable_target", tg.ResourceID).Int("desired", n).Msg("applicationautoscaling: scaling failed; tried again at the next evaluation")
	} else {
		a.StatusCode = StatusSuccessful
		a.StatusMessage = fmt.Sprintf("Successfully set desired %s to %d. Change successfully fulfilled by %s.", unit, n, Namespace)
	}
	s.mu.Lock()
	if t := s.targets[k]; t != nil {
		if i := slices.IndexFunc(t.Activities, func(x Activity) bool { return x.ActivityID == a.ActivityID }); i >= 0 {
			t.Activities[i] = a
		}
		if err == nil && dynamic {
			if n > cur {
				t.Cool.LastOut, t.Cool.OutFrom, t.Cool.OutTo = now, cur, n
			} else {
				t.Cool.LastIn = now
			}
		}
	}
	s.mu.Unlock()
	s.persist(k)
}

func (s *Service) addActivity(k string, a Activity) {
	s.mu.Lock()
	if t := s.targets[k]; t != nil {
		t.Activities = append([]Activity{a}, t.Activities...)
		if len(t.Activities) > maxActivitiesTarget {
			t.Activities = t.Activities[:maxActivitiesTarget]
		}
	}
	s.mu.Unlock()
	s.persist(k)
}

func (s *Service) describeActivities(_ context.Context, in *describeActivitiesInput) (any, *APIError) {
	if e := checkFilter(in.ServiceNamespace, in.ScalableDimension); e != nil {
		return nil, e
	}
	if in.ResourceID != "" {
		if e := checkResourceID("resourceId", in.ResourceID); e != nil {
			return nil, e
		}
	}
	s.mu.Lock()
	var list []Activity
	for _, t := range s.targets {
		if in.ScalableDimension != "" && t.T.ScalableDimension != in.ScalableDimension || in.ResourceID != "" && t.T.ResourceID != in.ResourceID {
			continue
		}
		list = append(list, t.Activities...)
	}
	s.mu.Unlock()
	// Newest first: the key orders by start time, then by the order they
	// were recorded in, both descending.
	items, next, e := page(list, func(a Activity) string {
		return fmt.Sprintf("%020d|%08x|%s", math.MaxInt64-a.StartTime.UnixNano(), math.MaxUint32-activitySeq(a.ActivityID), a.ActivityID)
	}, in.MaxResults, 50, in.NextToken)
	if e != nil {
		return nil, e
	}
	return struct {
		ScalingActivities []Activity
		NextToken         *string `json:",omitempty"`
	}{items, next}, nil
}

// activityID is a UUID whose first 8 hex digits count the activities
// recorded, so that those of one instant are listed in the order they
// were recorded.
func (s *Service) activityID() string {
	n := s.seq.Add(1)
	return fmt.Sprintf("%08x", uint32(n)) + newUUID()[8:]
}

// activitySeq reads the count an activityID starts with.
func activitySeq(id string) uint64 {
	if len(id) < 8 {
		return 0
	}
	n, err := strconv.ParseUint(id[:8], 16, 32)
	if err != nil {
		return 0
	}
	return n
}

// TargetStatus is a scalable target as mce's status page shows it: the
// target, its policies' names and its activities, newest first.
type TargetStatus struct {
	Target     ScalableTarget
	Policies   []string
	Activities []Activity
}

// Status returns every scalable target now, sorted by resource ID and
// dimension.
func (s *Service) Status() []TargetStatus {
	s.mu.Lock()
	out := make([]TargetStatus, 0, len(s.targets))
	for _, t := range s.targets {
		st := TargetStatus{Target: t.T, Activities: slices.Clone(t.Activities)}
		for _, p := range t.Policies {
			st.Policies = append(st.Policies, p.PolicyName)
		}
		out = append(out, st)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b TargetStatus) int {
		return strings.Compare(a.Target.ResourceID+"|"+a.Target.ScalableDimension, b.Target.ResourceID+"|"+b.Target.ScalableDimension)
	})
	return out
}
