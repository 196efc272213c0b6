package applicationautoscaling

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	aas "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling"
	"github.com/aws/aws-sdk-go-v2/service/applicationautoscaling/types"

	"github.com/mce-run/mce/host/cloudwatch"
	"github.com/mce-run/mce/internal/atomicfile"
)

var epDims = []cloudwatch.Dimension{{Name: "EndpointName", Value: "ep"}, {Name: "VariantName", Value: "v1"}}

// minute records v as this minute's InvocationsPerInstance of ep/v1, steps
// the clock a minute and evaluates the alarms.
func (f *fixture) minute(v float64) {
	f.t.Helper()
	if err := f.cw.Observe("AWS/SageMaker", "InvocationsPerInstance", epDims, "None", cloudwatch.Standard, v); err != nil {
		f.t.Fatal(err)
	}
	f.cw.EvaluateAlarms()
	f.clock.Add(time.Minute)
}

func (f *fixture) activities(id string) []types.ScalingActivity {
	f.t.Helper()
	out, err := f.c.DescribeScalingActivities(context.Background(), &aas.DescribeScalingActivitiesInput{ServiceNamespace: nsSM, ResourceId: aws.String(id)})
	if err != nil {
		f.t.Fatal(err)
	}
	return out.ScalingActivities
}

// TestTargetTrackingScales: a target tracking policy on
// InvocationsPerInstance scales the variant out when its AlarmHigh goes to
// ALARM on real datapoints, by the ratio, waits out its cooldown, records
// a Failed activity when the endpoint is updating and scales on the next
// evaluation once it is not.
// TestTargetTrackingReadsTheMetricNow: an alarm that stays in ALARM keeps
// the StateReasonData of its change; each evaluation decides on the
// datapoints as they are now, as AWS hands them to the action each minute.
// (Deciding on the stale ones left an idle component at one copy.)
func TestTargetTrackingReadsTheMetricNow(t *testing.T) {
	c := newClock(t0.Add(5 * time.Second))
	fake := newFake(map[string]int{key(DimensionVariant, vID): 4})
	f := open(t, "", c, fake)
	ctx := context.Background()
	register(t, f, vID, dimV, 1, 6)
	if _, err := f.c.PutScalingPolicy(ctx, &aas.PutScalingPolicyInput{PolicyName: aws.String("ipi"), ServiceNamespace: nsSM,
		ResourceId: aws.String(vID), ScalableDimension: dimV, PolicyType: types.PolicyTypeTargetTrackingScaling,
		TargetTrackingScalingPolicyConfiguration: &types.TargetTrackingScalingPolicyConfiguration{TargetValue: aws.Float64(100),
			PredefinedMetricSpecification: &types.PredefinedMetricSpecification{PredefinedMetricType: types.MetricTypeSageMakerVariantInvocationsPerInstance},
			ScaleInCooldown:               aws.Int32(60)}}); err != nil {
		t.Fatal(err)
	}
	minute := func(v float64) { // each minute written, as the flusher does
		f.cw.Flush()
		f.minute(v)
		f.cw.Flush()
	}
	for range 15 { // fifteen minutes below 90: the AlarmLow goes to ALARM
		minute(60)
	}
	f.svc.Evaluate(ctx)
	if got := fake.get(DimensionVariant, vID); got != 3 {
		t.Fatalf("after 15 minutes at 60 per instance: %d instances, want ceil(4×60/100) = 3", got)
	}
	// The load falls; the alarm stays in ALARM (no change, no new
	// StateReasonData). Past the cooldown the decision reads 20, not 60.
	minute(20)
	minute(20)
	f.svc.Evaluate(ctx)
	if got := fake.get(DimensionVariant, vID); got != 1 {
		t.Fatalf("at 20 per instance: %d instances, want ceil(3×20/100) = 1 (the stale 60 gives 2)", got)
	}
}

func TestTargetTrackingScales(t *testing.T) {
	c := newClock(t0.Add(5 * time.Second))
	fake := newFake(map[string]int{key(DimensionVariant, vID): 2})
	f := open(t, "", c, fake)
	ctx := context.Background()
	register(t, f, vID, dimV, 1, 6)
	_, err := f.c.PutScalingPolicy(ctx, &aas.PutScalingPolicyInput{PolicyName: aws.String("ipi"), ServiceNamespace: nsSM,
		ResourceId: aws.String(vID), ScalableDimension: dimV, PolicyType: types.PolicyTypeTargetTrackingScaling,
		TargetTrackingScalingPolicyConfiguration: &types.TargetTrackingScalingPolicyConfiguration{TargetValue: aws.Float64(100),
			PredefinedMetricSpecification: &types.PredefinedMetricSpecification{PredefinedMetricType: types.MetricTypeSageMakerVariantInvocationsPerInstance},
			ScaleOutCooldown:              aws.Int32(180)}})
	if err != nil {
		t.Fatal(err)
	}
	// The alarm's range holds one datapoint, above the target: CloudWatch
	// decides on the datapoints there are (alarm_eval.go), ALARM.
	f.minute(150)
	f.svc.Evaluate(ctx)
	acts := f.activities(vID)
	if got := fake.get(DimensionVariant, vID); got != 3 {
		t.Fatalf("after a minute at 150 per instance: %d instances, want ceil(2×150/100) = 3", got)
	}
	if len(acts) != 1 || acts[0].StatusCode != types.ScalingActivityStatusCodeSuccessful ||
		aws.ToString(acts[0].Description) != "Setting desired instance count to 3." ||
		!strings.HasPrefix(aws.ToString(acts[0].Cause), "monitor alarm TargetTracking-endpoint/ep/variant/v1-AlarmHigh-") ||
		!strings.HasSuffix(aws.ToString(acts[0].Cause), "in state ALARM triggered policy ipi") || acts[0].EndTime == nil {
		t.Fatalf("activities %+v", acts)
	}
	// Still in ALARM a minute later (at 150 the datapoints were counted on
	// 2 instances): inside the cooldown the scale-out counts from 2, no more.
	f.minute(150)
	f.svc.Evaluate(ctx)
	if got := fake.get(DimensionVariant, vID); got != 3 {
		t.Fatalf("inside the cooldown: %d instances", got)
	}
	// The endpoint is updating when the cooldown ends: a Failed activity,
	// then the scale-out at the next evaluation.
	f.minute(150)
	f.minute(150)
	fake.setFail(errUpdating)
	f.svc.Evaluate(ctx)
	acts = f.activities(vID)
	if got := fake.get(DimensionVariant, vID); got != 3 || acts[0].StatusCode != types.ScalingActivityStatusCodeFailed ||
		!strings.Contains(aws.ToString(acts[0].StatusMessage), "Cannot update in-progress endpoint") {
		t.Fatalf("%d instances, %+v", got, acts[0])
	}
	fake.setFail(nil)
	f.minute(150)
	f.svc.Evaluate(ctx)
	if got := fake.get(DimensionVariant, vID); got != 5 {
		t.Fatalf("after the cooldown: %d instances, want ceil(3×150/100) = 5", got)
	}
	// Three activities, newest first.
	acts = f.activities(vID)
	if len(acts) != 3 || aws.ToString(acts[0].Description) != "Setting desired instance count to 5." || acts[2].StatusCode != types.ScalingActivityStatusCodeSuccessful {
		t.Errorf("%+v", acts)
	}
	page, err := f.c.DescribeScalingActivities(ctx, &aas.DescribeScalingActivitiesInput{ServiceNamespace: nsSM, MaxResults: aws.Int32(2)})
	if err != nil || len(page.ScalingActivities) != 2 || page.NextToken == nil {
		t.Fatalf("%+v %v", page, err)
	}
	rest, err := f.c.DescribeScalingActivities(ctx, &aas.DescribeScalingActivitiesInput{ServiceNamespace: nsSM, MaxResults: aws.Int32(2), NextToken: page.NextToken})
	if err != nil || len(rest.ScalingActivities) != 1 || rest.NextToken != nil || aws.ToString(rest.ScalingActivities[0].ActivityId) != aws.ToString(acts[2].ActivityId) {
		t.Errorf("second page %+v %v", rest, err)
	}
	// Suspending scale-out stops it.
	if _, err := f.c.RegisterScalableTarget(ctx, &aas.RegisterScalableTargetInput{ServiceNamespace: nsSM, ResourceId: aws.String(vID), ScalableDimension: dimV,
		SuspendedState: &types.SuspendedState{DynamicScalingOutSuspended: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		f.minute(300)
	}
	f.svc.Evaluate(ctx)
	if got := fake.get(DimensionVariant, vID); got != 5 {
		t.Errorf("scale-out suspended: %d instances", got)
	}
}

// TestStepFromZero: the documented way to scale an inference component
// out from zero copies: a step policy, and an alarm of the user's on
// NoCapacityInvocationFailures whose action is the policy's ARN. The run
// loop reacts to the alarm's change without waiting for its interval.
func TestStepFromZero(t *testing.T) {
	c := newClock(t0.Add(5 * time.Second))
	fake := newFake(map[string]int{key(DimensionComponent, cID): 0})
	f := openRunning(t, "", c, fake)
	ctx := context.Background()
	register(t, f, cID, dimIC, 0, 2)
	out, err := f.c.PutScalingPolicy(ctx, &aas.PutScalingPolicyInput{PolicyName: aws.String("from-zero"), ServiceNamespace: nsSM,
		ResourceId: aws.String(cID), ScalableDimension: dimIC, PolicyType: types.PolicyTypeStepScaling,
		StepScalingPolicyConfiguration: &types.StepScalingPolicyConfiguration{AdjustmentType: types.AdjustmentTypeChangeInCapacity,
			MetricAggregationType: types.MetricAggregationTypeMaximum, Cooldown: aws.Int32(60),
			StepAdjustments: []types.StepAdjustment{{MetricIntervalLowerBound: aws.Float64(0), ScalingAdjustment: aws.Int32(1)}}}})
	if err != nil {
		t.Fatal(err)
	}
	icDims := []cloudwatch.Dimension{{Name: "InferenceComponentName", Value: "ic1"}}
	if err := f.cw.PutAlarm(cloudwatch.AlarmSpec{AlarmName: "ic1-no-capacity", Namespace: "AWS/SageMaker", MetricName: "NoCapacityInvocationFailures",
		Dimensions: icDims, Statistic: "Maximum", Period: 10, EvaluationPeriods: 1, Threshold: 1,
		ComparisonOperator: "GreaterThanOrEqualToThreshold", TreatMissingData: "missing", AlarmActions: []string{aws.ToString(out.PolicyARN)}}); err != nil {
		t.Fatal(err)
	}
	if err := f.cw.Observe("AWS/SageMaker", "NoCapacityInvocationFailures", icDims, "None", cloudwatch.HighResolution, 1); err != nil {
		t.Fatal(err)
	}
	f.cw.EvaluateAlarms() // → ALARM: the hook wakes Run
	deadline := time.Now().Add(10 * time.Second)
	for fake.get(DimensionComponent, cID) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the component has %d copies 10 s after its alarm went to ALARM", fake.get(DimensionComponent, cID))
		}
		time.Sleep(5 * time.Millisecond)
	}
	acts := f.activities(cID)
	if len(acts) == 0 || aws.ToString(acts[0].Description) != "Setting desired copy count to 1." ||
		aws.ToString(acts[0].Cause) != "monitor alarm ic1-no-capacity in state ALARM triggered policy from-zero" {
		t.Errorf("%+v", acts)
	}
	// Still in ALARM inside the cooldown: counted from 0, +1 is 1: no more.
	c.Add(30 * time.Second)
	f.svc.Evaluate(ctx)
	if got := fake.get(DimensionComponent, cID); got != 1 {
		t.Errorf("inside the cooldown: %d copies", got)
	}
	// After it, the alarm still in ALARM: +1 again, then the maximum.
	c.Add(time.Minute)
	f.svc.Evaluate(ctx)
	c.Add(2 * time.Minute)
	f.svc.Evaluate(ctx)
	if got := fake.get(DimensionComponent, cID); got != 2 {
		t.Errorf("after the cooldown, at most 2: %d copies", got)
	}
}

// TestScheduledActions: at, rate and cron actions change the bounds when
// they come due (in their time zone, within StartTime and EndTime) and the
// capacity follows the bounds; an update changes only what it names.
func TestScheduledActions(t *testing.T) {
	c := newClock(t0)
	fake := newFake(map[string]int{key(DimensionVariant, vID): 2})
	f := open(t, "", c, fake)
	ctx := context.Background()
	register(t, f, vID, dimV, 1, 4)
	put := func(name, sched string, lo, hi int32, mod func(*aas.PutScheduledActionInput)) {
		t.Helper()
		in := &aas.PutScheduledActionInput{ServiceNamespace: nsSM, ResourceId: aws.String(vID), ScalableDimension: dimV,
			ScheduledActionName: aws.String(name), Schedule: aws.String(sched),
			ScalableTargetAction: &types.ScalableTargetAction{MinCapacity: aws.Int32(lo), MaxCapacity: aws.Int32(hi)}}
		if mod != nil {
			mod(in)
		}
		if _, err := f.c.PutScheduledAction(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	// 10:30 UTC is 11:30 in Berlin (CET).
	put("morning", "at(2026-11-28T11:30:00)", 3, 6, func(in *aas.PutScheduledActionInput) { in.Timezone = aws.String("Europe/Berlin") })
	put("weekdays-noon", "cron(0 12 ? * MON-FRI *)", 1, 2, nil)
	put("every-2h", "rate(2 hours)", 1, 4, func(in *aas.PutScheduledActionInput) {
		in.StartTime = aws.Time(t0.Add(24 * time.Hour))
		in.EndTime = aws.Time(t0.Add(24*time.Hour + 30*time.Minute))
	})
	c.Add(29 * time.Minute)
	f.svc.Evaluate(ctx)
	if got := fake.get(DimensionVariant, vID); got != 2 {
		t.Fatalf("before 10:30: %d", got)
	}
	c.Add(time.Minute)
	f.svc.Evaluate(ctx)
	d, _ := f.c.DescribeScalableTargets(ctx, &aas.DescribeScalableTargetsInput{ServiceNamespace: nsSM})
	if got := fake.get(DimensionVariant, vID); got != 3 || aws.ToInt32(d.ScalableTargets[0].MinCapacity) != 3 || aws.ToInt32(d.ScalableTargets[0].MaxCapacity) != 6 {
		t.Fatalf("at 10:30 UTC: %d instances, target %+v", got, d.ScalableTargets[0])
	}
	acts := f.activities(vID)
	if len(acts) != 2 || aws.ToString(acts[0].Cause) != "minimum capacity was set to 3" ||
		aws.ToString(acts[1].Cause) != "scheduled action name morning was triggered" ||
		aws.ToString(acts[1].Description) != "Setting min capacity to 3 and max capacity to 6" {
		t.Errorf("%+v", acts)
	}
	// 2026-11-28 is a Saturday: the weekday cron first runs Monday the 30th
	// at noon; the rate runs from StartTime (the 29th, 10:00) until EndTime
	// (10:30 the same day): once.
	c.Add(23*time.Hour + 31*time.Minute) // Sunday 10:01
	f.svc.Evaluate(ctx)
	d, _ = f.c.DescribeScalableTargets(ctx, &aas.DescribeScalableTargetsInput{ServiceNamespace: nsSM})
	if aws.ToInt32(d.ScalableTargets[0].MaxCapacity) != 4 || fake.get(DimensionVariant, vID) != 3 {
		t.Fatalf("Sunday 10:01: %+v, %d", d.ScalableTargets[0], fake.get(DimensionVariant, vID))
	}
	c.Add(26 * time.Hour) // Monday 12:01
	f.svc.Evaluate(ctx)
	if got := fake.get(DimensionVariant, vID); got != 2 {
		t.Fatalf("Monday noon: max 2, %d instances", got)
	}
	var names []string
	pg := aas.NewDescribeScheduledActionsPaginator(f.c, &aas.DescribeScheduledActionsInput{ServiceNamespace: nsSM, MaxResults: aws.Int32(1)})
	for pg.HasMorePages() {
		p, err := pg.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range p.ScheduledActions {
			names = append(names, aws.ToString(a.ScheduledActionName))
			if !strings.Contains(aws.ToString(a.ScheduledActionARN), ":scheduledAction:") || a.CreationTime == nil {
				t.Errorf("%+v", a)
			}
		}
	}
	if strings.Join(names, ",") != "every-2h,morning,weekdays-noon" {
		t.Errorf("%v", names)
	}
	// An update of the schedule alone keeps the action's bounds.
	if _, err := f.c.PutScheduledAction(ctx, &aas.PutScheduledActionInput{ServiceNamespace: nsSM, ResourceId: aws.String(vID), ScalableDimension: dimV,
		ScheduledActionName: aws.String("morning"), Schedule: aws.String("cron(30 7 * * ? *)")}); err != nil {
		t.Fatal(err)
	}
	one, _ := f.c.DescribeScheduledActions(ctx, &aas.DescribeScheduledActionsInput{ServiceNamespace: nsSM, ScheduledActionNames: []string{"morning"}})
	if len(one.ScheduledActions) != 1 || aws.ToInt32(one.ScheduledActions[0].ScalableTargetAction.MaxCapacity) != 6 ||
		aws.ToString(one.ScheduledActions[0].Timezone) != "Europe/Berlin" {
		t.Errorf("%+v", one.ScheduledActions)
	}
	for _, bad := range []struct{ sched, want string }{
		{"cron(0 12 * * MON *)", "one of day-of-month and day-of-week must be ?"},
		{"cron(0 12 L * ? *)", "mce does not serve L, W and #"},
		{"cron(61 12 * * ? *)", "out of its range 0-59"},
		{"rate(1 hours)", "singular for 1"},
		{"rate(0 minutes)", "between 1 and 100000"},
		{"at(2026-13-01T00:00:00)", "not a valid date"},
		{"every day", "none of at"},
	} {
		_, err := f.c.PutScheduledAction(ctx, &aas.PutScheduledActionInput{ServiceNamespace: nsSM, ResourceId: aws.String(vID), ScalableDimension: dimV,
			ScheduledActionName: aws.String("bad"), Schedule: aws.String(bad.sched)})
		if got := apiCode(err); !strings.HasPrefix(got, "ValidationException: Invalid schedule") || !strings.Contains(got, bad.want) {
			t.Errorf("%s: %s", bad.sched, got)
		}
	}
	_, err := f.c.PutScheduledAction(ctx, &aas.PutScheduledActionInput{ServiceNamespace: nsSM, ResourceId: aws.String(vID), ScalableDimension: dimV,
		ScheduledActionName: aws.String("tz"), Schedule: aws.String("rate(1 day)"), Timezone: aws.String("Mars/Olympus")})
	if got := apiCode(err); !strings.Contains(got, "is not an IANA time zone") {
		t.Errorf("a bad time zone: %s", got)
	}
	_, err = f.c.PutScheduledAction(ctx, &aas.PutScheduledActionInput{ServiceNamespace: nsSM, ResourceId: aws.String(vID), ScalableDimension: dimV,
		ScheduledActionName: aws.String("a:b"), Schedule: aws.String("rate(1 day)")})
	if got := apiCode(err); !strings.HasPrefix(got, "ValidationException: 1 validation error detected: Value 'a:b' at 'scheduledActionName'") {
		t.Errorf("a name with a colon: %s", got)
	}
	if _, err := f.c.DeleteScheduledAction(ctx, &aas.DeleteScheduledActionInput{ServiceNamespace: nsSM, ResourceId: aws.String(vID), ScalableDimension: dimV,
		ScheduledActionName: aws.String("morning")}); err != nil {
		t.Fatal(err)
	}
	_, err = f.c.DeleteScheduledAction(ctx, &aas.DeleteScheduledActionInput{ServiceNamespace: nsSM, ResourceId: aws.String(vID), ScalableDimension: dimV,
		ScheduledActionName: aws.String("morning")})
	var onf *types.ObjectNotFoundException
	if !errorsAs(err, &onf) {
		t.Errorf("deleting twice: %v", err)
	}
}

// TestReopen: targets, policies, scheduled actions, activities and
// cooldowns are kept over a restart; target tracking's alarms are
// CloudWatch's, kept by it, and still trigger the policy.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	c := newClock(t0.Add(5 * time.Second))
	fake := newFake(map[string]int{key(DimensionVariant, vID): 2})
	f := open(t, dir, c, fake)
	ctx := context.Background()
	register(t, f, vID, dimV, 1, 8)
	pol, err := f.c.PutScalingPolicy(ctx, &aas.PutScalingPolicyInput{PolicyName: aws.String("ipi"), ServiceNamespace: nsSM,
		ResourceId: aws.String(vID), ScalableDimension: dimV, PolicyType: types.PolicyTypeTargetTrackingScaling,
		TargetTrackingScalingPolicyConfiguration: &types.TargetTrackingScalingPolicyConfiguration{TargetValue: aws.Float64(100),
			PredefinedMetricSpecification: &types.PredefinedMetricSpecification{PredefinedMetricType: types.MetricTypeSageMakerVariantInvocationsPerInstance},
			ScaleOutCooldown:              aws.Int32(600)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.PutScheduledAction(ctx, &aas.PutScheduledActionInput{ServiceNamespace: nsSM, ResourceId: aws.String(vID), ScalableDimension: dimV,
		ScheduledActionName: aws.String("nightly"), Schedule: aws.String("cron(0 2 * * ? *)"),
		ScalableTargetAction: &types.ScalableTargetAction{MinCapacity: aws.Int32(1)}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		f.minute(200)
	}
	f.svc.Evaluate(ctx)
	if got := fake.get(DimensionVariant, vID); got != 4 {
		t.Fatalf("%d instances", got)
	}
	before := f.activities(vID)
	f.stop()

	g := open(t, dir, c, fake)
	pols, err := g.c.DescribeScalingPolicies(ctx, &aas.DescribeScalingPoliciesInput{ServiceNamespace: nsSM})
	if err != nil || len(pols.ScalingPolicies) != 1 || aws.ToString(pols.ScalingPolicies[0].PolicyARN) != aws.ToString(pol.PolicyARN) ||
		len(pols.ScalingPolicies[0].Alarms) != 2 {
		t.Fatalf("%+v %v", pols, err)
	}
	for _, a := range pols.ScalingPolicies[0].Alarms {
		if _, ok := g.cw.Alarm(aws.ToString(a.AlarmName)); !ok {
			t.Errorf("the alarm %s is gone after the restart", aws.ToString(a.AlarmName))
		}
	}
	sch, _ := g.c.DescribeScheduledActions(ctx, &aas.DescribeScheduledActionsInput{ServiceNamespace: nsSM})
	after := g.activities(vID)
	if len(sch.ScheduledActions) != 1 || len(after) != len(before) || aws.ToString(after[0].ActivityId) != aws.ToString(before[0].ActivityId) {
		t.Errorf("scheduled %+v, activities %+v", sch.ScheduledActions, after)
	}
	// The cooldown survived: still in ALARM, counted from 2 → 4, no more.
	g.minute(200)
	g.svc.Evaluate(ctx)
	if got := fake.get(DimensionVariant, vID); got != 4 {
		t.Errorf("the cooldown was lost over the restart: %d instances", got)
	}
	// A file that does not parse is moved aside, not fatal.
	g.stop()
	if err := atomicfile.Write(dir+"/applicationautoscaling/"+fileName("x"), []byte("{")); err != nil {
		t.Fatal(err)
	}
	h := open(t, dir, c, fake)
	d, _ := h.c.DescribeScalableTargets(ctx, &aas.DescribeScalableTargetsInput{ServiceNamespace: nsSM})
	if len(d.ScalableTargets) != 1 {
		t.Errorf("%+v", d.ScalableTargets)
	}
}
