package applicationautoscaling

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/rs/zerolog"
)

// Scheduled actions: PutScheduledAction, DescribeScheduledActions,
// DeleteScheduledAction, and their runs (schedule.go reads schedules).

var scheduledNameRe = regexp.MustCompile(`^[^ :/|\x00-\x1f\x7f-\x9f]([^:/|\x00-\x1f\x7f-\x9f]*[^ :/|\x00-\x1f\x7f-\x9f])?$`)

func checkScheduledName(member, n string) *APIError {
	if n == "" {
		return required(member)
	}
	if len(n) > 256 || !scheduledNameRe.MatchString(n) {
		return validation("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must be 1 to 256 characters without :, /, |, control characters or leading and trailing spaces", n, member)
	}
	return nil
}

func (s *Service) scheduledARN(resourceID, name string) string {
	return "arn:aws:autoscaling:" + s.region + ":" + s.account + ":scheduledAction:" + newUUID() + ":resource/" + Namespace + "/" + resourceID + ":scheduledActionName/" + name
}

func (s *Service) putScheduled(_ context.Context, in *putScheduledInput) (any, *APIError) {
	if e := checkScheduledName("scheduledActionName", in.ScheduledActionName); e != nil {
		return nil, e
	}
	if e := checkTargetKey(in.ServiceNamespace, in.ResourceID, in.ScalableDimension); e != nil {
		return nil, e
	}
	if in.Timezone != nil && (*in.Timezone == "" || len(*in.Timezone) > 1600) {
		return nil, validation("The Timezone must be an IANA time zone name.")
	}
	if in.StartTime != nil && in.EndTime != nil && !in.EndTime.After(in.StartTime.Time) {
		return nil, validation("The EndTime must be after the StartTime.")
	}
	if a := in.ScalableTargetAction; a != nil {
		if e := checkCapacity("scalableTargetAction.minCapacity", a.MinCapacity, ""); e != nil {
			return nil, e
		}
		if e := checkCapacity("scalableTargetAction.maxCapacity", a.MaxCapacity, ""); e != nil {
			return nil, e
		}
		if a.MinCapacity != nil && a.MaxCapacity != nil && *a.MinCapacity > *a.MaxCapacity {
			return nil, validation("Minimum capacity cannot be greater than maximum capacity")
		}
		if a.MinCapacity != nil && *a.MinCapacity == 0 && in.ScalableDimension == DimensionVariant {
			return nil, validation("The minimum capacity of a SageMaker endpoint variant must be at least 1: only inference components scale to zero.")
		}
	}
	k := key(in.ScalableDimension, in.ResourceID)
	s.mu.Lock()
	e := s.putScheduledLocked(k, in)
	s.mu.Unlock()
	if e != nil {
		return nil, e
	}
	if err := s.persist(k); err != nil {
		return nil, internal("The scheduled action could not be written to mce's state folder.")
	}
	return struct{}{}, nil
}

// putScheduledLocked creates or updates the action in of target k; s.mu
// is held.
func (s *Service) putScheduledLocked(k string, in *putScheduledInput) *APIError {
	t := s.targets[k]
	if t == nil {
		return notRegistered(in.targetKey)
	}
	i := slices.IndexFunc(t.Scheduled, func(x *scheduled) bool { return x.A.ScheduledActionName == in.ScheduledActionName })
	var a ScheduledAction
	if i >= 0 {
		a = t.Scheduled[i].A // an update changes only what it names
	} else {
		if len(t.Scheduled) >= maxScheduledTarget {
			return limitExceeded("A scalable target has at most %d scheduled actions.", maxScheduledTarget)
		}
		if in.Schedule == nil {
			return validation("A Schedule is required to create a scheduled action.")
		}
		a = ScheduledAction{ScheduledActionName: in.ScheduledActionName, ScheduledActionARN: s.scheduledARN(in.ResourceID, in.ScheduledActionName),
			ServiceNamespace: in.ServiceNamespace, ResourceID: in.ResourceID, ScalableDimension: in.ScalableDimension,
			CreationTime: epoch{s.now().Truncate(time.Millisecond)}}
	}
	if in.Schedule != nil {
		a.Schedule = *in.Schedule
	}
	if in.Timezone != nil {
		a.Timezone = in.Timezone
	}
	if in.StartTime != nil {
		a.StartTime = in.StartTime
	}
	if in.EndTime != nil {
		a.EndTime = in.EndTime
	}
	if in.ScalableTargetAction != nil {
		a.ScalableTargetAction = in.ScalableTargetAction
	}
	tz := ""
	if a.Timezone != nil {
		tz = *a.Timezone
	}
	if len(a.Schedule) > 1600 {
		return validation("The Schedule is longer than 1600 characters.")
	}
	if _, err := parseSchedule(a.Schedule, tz); err != nil {
		return validation("Invalid schedule: %s.", err.Error())
	}
	if i >= 0 {
		t.Scheduled[i] = &scheduled{A: a, LastRun: t.Scheduled[i].LastRun}
	} else {
		t.Scheduled = append(t.Scheduled, &scheduled{A: a})
	}
	return nil
}

func (s *Service) describeScheduled(_ context.Context, in *describeScheduledInput) (any, *APIError) {
	if e := checkFilter(in.ServiceNamespace, in.ScalableDimension); e != nil {
		return nil, e
	}
	if e := checkIDs("scheduledActionNames", in.ScheduledActionNames); e != nil {
		return nil, e
	}
	s.mu.Lock()
	var list []ScheduledAction
	for _, t := range s.targets {
		if in.ScalableDimension != "" && t.T.ScalableDimension != in.ScalableDimension || in.ResourceID != "" && t.T.ResourceID != in.ResourceID {
			continue
		}
		for _, a := range t.Scheduled {
			if len(in.ScheduledActionNames) > 0 && !slices.Contains(in.ScheduledActionNames, a.A.ScheduledActionName) {
				continue
			}
			list = append(list, a.A)
		}
	}
	s.mu.Unlock()
	items, next, e := page(list, func(a ScheduledAction) string {
		return a.ResourceID + "|" + a.ScalableDimension + "|" + a.ScheduledActionName
	}, in.MaxResults, 50, in.NextToken)
	if e != nil {
		return nil, e
	}
	return struct {
		ScheduledActions []ScheduledAction
		NextToken        *string `json:",omitempty"`
	}{items, next}, nil
}

func (s *Service) deleteScheduled(_ context.Context, in *deleteScheduledInput) (any, *APIError) {
	if e := checkScheduledName("scheduledActionName", in.ScheduledActionName); e != nil {
		return nil, e
	}
	k, t, e := s.lockTarget(in.targetKey)
	if e != nil {
		return nil, e
	}
	i := slices.IndexFunc(t.Scheduled, func(x *scheduled) bool { return x.A.ScheduledActionName == in.ScheduledActionName })
	if i < 0 {
		s.mu.Unlock()
		return nil, notFound("No scheduled action found for service namespace: %s, resource ID: %s, scalable dimension: %s, scheduled action name: %s",
			in.ServiceNamespace, in.ResourceID, in.ScalableDimension, in.ScheduledActionName)
	}
	t.Scheduled = slices.Delete(t.Scheduled, i, i+1)
	s.mu.Unlock()
	if err := s.persist(k); err != nil {
		return nil, internal("The scheduled action's removal could not be written to mce's state folder.")
	}
	return struct{}{}, nil
}

// due reports whether the action's next run after its last one (or its
// creation) has come by now, within its StartTime and EndTime.
func due(a *scheduled, now time.Time, log zerolog.Logger) bool {
	tz := ""
	if a.A.Timezone != nil {
		tz = *a.A.Timezone
	}
	sc, err := parseSchedule(a.A.Schedule, tz)
	if err != nil {
		log.Error().Err(err).Str("scheduled_action", a.A.ScheduledActionName).Msg("applicationautoscaling: a kept schedule does not parse")
		return false
	}
	after := a.LastRun
	if after.IsZero() {
		after = a.A.CreationTime.Add(-time.Millisecond)
	}
	start := a.A.CreationTime.Time
	if sc.kind == "rate" {
		start = start.Add(sc.every)
	}
	if a.A.StartTime != nil {
		start = a.A.StartTime.Time
	}
	n, ok := sc.next(after, start)
	if !ok || n.After(now) {
		return false
	}
	if a.A.StartTime != nil && n.Before(a.A.StartTime.Time) || a.A.EndTime != nil && n.After(a.A.EndTime.Time) {
		return false
	}
	if sc.kind == "at" && !a.LastRun.IsZero() {
		return false
	}
	return true
}

// runScheduled applies the action name of target k: its new bounds.
func (s *Service) runScheduled(k, name string, now time.Time) {
	s.mu.Lock()
	t := s.targets[k]
	if t == nil {
		s.mu.Unlock()
		return
	}
	i := slices.IndexFunc(t.Scheduled, func(x *scheduled) bool { return x.A.ScheduledActionName == name })
	if i < 0 {
		s.mu.Unlock()
		return
	}
	sa := t.Scheduled[i]
	sa.LastRun = now
	lo, hi := t.T.MinCapacity, t.T.MaxCapacity
	if a := sa.A.ScalableTargetAction; a != nil {
		if a.MinCapacity != nil {
			lo = *a.MinCapacity
		}
		if a.MaxCapacity != nil {
			hi = *a.MaxCapacity
		}
	}
	act := Activity{ActivityID: s.activityID(), ServiceNamespace: t.T.ServiceNamespace, ResourceID: t.T.ResourceID, ScalableDimension: t.T.ScalableDimension,
		Description: fmt.Sprintf("Setting min capacity to %d and max capacity to %d", lo, hi),
		Cause:       fmt.Sprintf("scheduled action name %s was triggered", name), StartTime: epoch{now.Truncate(time.Millisecond)}, EndTime: epochOf(now)}
	if lo > hi {
		act.StatusCode = StatusFailed
		act.StatusMessage = fmt.Sprintf("Failed to set min capacity to %d and max capacity to %d: the minimum would be above the maximum.", lo, hi)
	} else {
		t.T.MinCapacity, t.T.MaxCapacity = lo, hi
		act.StatusCode = StatusSuccessful
		act.StatusMessage = fmt.Sprintf("Successfully set min capacity to %d and max capacity to %d", lo, hi)
	}
	t.Activities = append([]Activity{act}, t.Activities...)
	if len(t.Activities) > maxActivitiesTarget {
		t.Activities = t.Activities[:maxActivitiesTarget]
	}
	s.mu.Unlock()
	s.persist(k)
}
