package applicationautoscaling

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	aas "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling"
	"github.com/aws/aws-sdk-go-v2/service/applicationautoscaling/types"
	"github.com/aws/smithy-go"

	"github.com/mce-run/mce/host/cloudwatch"
)

var (
	nsSM  = types.ServiceNamespaceSagemaker
	dimV  = types.ScalableDimensionSageMakerVariantDesiredInstanceCount
	dimIC = types.ScalableDimension(DimensionComponent)
)

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode() + ": " + ae.ErrorMessage()
	}
	return fmt.Sprint(err)
}

func register(t *testing.T, f *fixture, id string, dim types.ScalableDimension, lo, hi int32) {
	t.Helper()
	_, err := f.c.RegisterScalableTarget(context.Background(), &aas.RegisterScalableTargetInput{ServiceNamespace: nsSM,
		ResourceId: aws.String(id), ScalableDimension: dim, MinCapacity: aws.Int32(lo), MaxCapacity: aws.Int32(hi)})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSDKTargets: aws-sdk-go-v2 registers, updates, pages through,
// describes and deregisters scalable targets, and gets the service's
// modeled errors.
func TestSDKTargets(t *testing.T) {
	fake := newFake(map[string]int{key(DimensionVariant, vID): 2, key(DimensionComponent, cID): 0})
	for i := range 5 {
		fake.caps[key(DimensionVariant, fmt.Sprintf("endpoint/ep%d/variant/v", i))] = 1
	}
	f := open(t, "", newClock(t0), fake)
	ctx := context.Background()
	out, err := f.c.RegisterScalableTarget(ctx, &aas.RegisterScalableTargetInput{ServiceNamespace: nsSM, ResourceId: aws.String(vID),
		ScalableDimension: dimV, MinCapacity: aws.Int32(1), MaxCapacity: aws.Int32(4)})
	if err != nil || !strings.HasPrefix(aws.ToString(out.ScalableTargetARN), "arn:aws:application-autoscaling:us-east-1:000000000000:scalable-target/") {
		t.Fatalf("%v %v", out, err)
	}
	// An update changes only what it names.
	if _, err := f.c.RegisterScalableTarget(ctx, &aas.RegisterScalableTargetInput{ServiceNamespace: nsSM, ResourceId: aws.String(vID),
		ScalableDimension: dimV, MaxCapacity: aws.Int32(6), SuspendedState: &types.SuspendedState{ScheduledScalingSuspended: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	register(t, f, cID, dimIC, 0, 3)
	for i := range 5 {
		register(t, f, fmt.Sprintf("endpoint/ep%d/variant/v", i), dimV, 1, 2)
	}
	d, err := f.c.DescribeScalableTargets(ctx, &aas.DescribeScalableTargetsInput{ServiceNamespace: nsSM, ResourceIds: []string{vID}})
	if err != nil || len(d.ScalableTargets) != 1 {
		t.Fatalf("%+v %v", d, err)
	}
	st := d.ScalableTargets[0]
	if aws.ToInt32(st.MinCapacity) != 1 || aws.ToInt32(st.MaxCapacity) != 6 || !aws.ToBool(st.SuspendedState.ScheduledScalingSuspended) ||
		!st.CreationTime.Equal(t0) || !strings.Contains(aws.ToString(st.RoleARN), "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint") ||
		aws.ToString(st.ScalableTargetARN) != aws.ToString(out.ScalableTargetARN) {
		t.Errorf("%+v", st)
	}
	var ids []string
	p := aas.NewDescribeScalableTargetsPaginator(f.c, &aas.DescribeScalableTargetsInput{ServiceNamespace: nsSM, MaxResults: aws.Int32(2)})
	pages := 0
	for p.HasMorePages() {
		pg, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, x := range pg.ScalableTargets {
			ids = append(ids, aws.ToString(x.ResourceId))
		}
	}
	if pages != 4 || len(ids) != 7 || ids[0] != "endpoint/ep/variant/v1" || ids[6] != cID {
		t.Errorf("%d pages: %v", pages, ids)
	}
	d, _ = f.c.DescribeScalableTargets(ctx, &aas.DescribeScalableTargetsInput{ServiceNamespace: nsSM, ScalableDimension: dimIC})
	if len(d.ScalableTargets) != 1 {
		t.Errorf("by dimension: %+v", d.ScalableTargets)
	}

	for _, c := range []struct {
		name string
		in   *aas.RegisterScalableTargetInput
		want string
	}{
		{"no such endpoint", &aas.RegisterScalableTargetInput{ServiceNamespace: nsSM, ResourceId: aws.String("endpoint/nope/variant/v1"), ScalableDimension: dimV,
			MinCapacity: aws.Int32(1), MaxCapacity: aws.Int32(2)}, "ValidationException: Unable to register the scalable target: the endpoint variant endpoint/nope/variant/v1 does not exist."},
		{"ecs", &aas.RegisterScalableTargetInput{ServiceNamespace: types.ServiceNamespaceEcs, ResourceId: aws.String("service/c/s"),
			ScalableDimension: types.ScalableDimensionECSServiceDesiredCount, MinCapacity: aws.Int32(1), MaxCapacity: aws.Int32(2)}, "ValidationException: mce serves only SageMaker's"},
		{"bad namespace", &aas.RegisterScalableTargetInput{ServiceNamespace: "nope", ResourceId: aws.String(vID), ScalableDimension: dimV},
			"ValidationException: 1 validation error detected: Value 'nope' at 'serviceNamespace'"},
		{"bad resource id", &aas.RegisterScalableTargetInput{ServiceNamespace: nsSM, ResourceId: aws.String("endpoint/ep"), ScalableDimension: dimV,
			MinCapacity: aws.Int32(1), MaxCapacity: aws.Int32(2)}, "ValidationException: Unsupported service namespace, resource type or scalable dimension"},
		{"component id as variant", &aas.RegisterScalableTargetInput{ServiceNamespace: nsSM, ResourceId: aws.String(cID), ScalableDimension: dimV,
			MinCapacity: aws.Int32(1), MaxCapacity: aws.Int32(2)}, "ValidationException: Unsupported service namespace"},
		{"min above max", &aas.RegisterScalableTargetInput{ServiceNamespace: nsSM, ResourceId: aws.String(vID), ScalableDimension: dimV,
			MinCapacity: aws.Int32(5), MaxCapacity: aws.Int32(2)}, "ValidationException: Minimum capacity cannot be greater than maximum capacity"},
		{"negative", &aas.RegisterScalableTargetInput{ServiceNamespace: nsSM, ResourceId: aws.String(vID), ScalableDimension: dimV,
			MaxCapacity: aws.Int32(-1)}, "ValidationException: 1 validation error detected: Value '-1' at 'maxCapacity'"},
		{"absurd", &aas.RegisterScalableTargetInput{ServiceNamespace: nsSM, ResourceId: aws.String(vID), ScalableDimension: dimV,
			MaxCapacity: aws.Int32(2_000_000_000)}, "ValidationException: The maxCapacity 2000000000 is more than mce accepts"},
		{"variant at zero", &aas.RegisterScalableTargetInput{ServiceNamespace: nsSM, ResourceId: aws.String(vID), ScalableDimension: dimV,
			MinCapacity: aws.Int32(0)}, "ValidationException: The minimum capacity of a SageMaker endpoint variant must be at least 1"},
		{"new without bounds", &aas.RegisterScalableTargetInput{ServiceNamespace: nsSM, ResourceId: aws.String("endpoint/ep0/variant/v"), ScalableDimension: dimV},
			""},
		{"serverless", &aas.RegisterScalableTargetInput{ServiceNamespace: nsSM, ResourceId: aws.String(vID),
			ScalableDimension: types.ScalableDimensionSageMakerVariantDesiredProvisionedConcurrency}, "ValidationException: mce serves no serverless endpoints"},
	} {
		_, err := f.c.RegisterScalableTarget(ctx, c.in)
		if got := apiCode(err); c.want == "" && err != nil || c.want != "" && !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %s\nwant %s", c.name, got, c.want)
		}
	}
	_, err = f.c.DescribeScalableTargets(ctx, &aas.DescribeScalableTargetsInput{ServiceNamespace: nsSM, MaxResults: aws.Int32(51)})
	if got := apiCode(err); !strings.HasPrefix(got, "ValidationException: 1 validation error detected: Value '51' at 'maxResults'") {
		t.Errorf("MaxResults 51: %s", got)
	}
	_, err = f.c.DescribeScalableTargets(ctx, &aas.DescribeScalableTargetsInput{ServiceNamespace: nsSM, NextToken: aws.String("forged!")})
	if got := apiCode(err); !strings.HasPrefix(got, "ValidationException: Invalid NextToken") {
		t.Errorf("a forged NextToken: %s", got)
	}
	if _, err := f.c.DeregisterScalableTarget(ctx, &aas.DeregisterScalableTargetInput{ServiceNamespace: nsSM, ResourceId: aws.String(cID), ScalableDimension: dimIC}); err != nil {
		t.Fatal(err)
	}
	_, err = f.c.DeregisterScalableTarget(ctx, &aas.DeregisterScalableTargetInput{ServiceNamespace: nsSM, ResourceId: aws.String(cID), ScalableDimension: dimIC})
	var onf *types.ObjectNotFoundException
	if !errors.As(err, &onf) || !strings.Contains(onf.ErrorMessage(), "No scalable target registered for service namespace: sagemaker, resource ID: inference-component/ic1") {
		t.Errorf("deregistering twice: %v", err)
	}
	_, err = f.c.GetPredictiveScalingForecast(ctx, &aas.GetPredictiveScalingForecastInput{ServiceNamespace: nsSM, ResourceId: aws.String(vID),
		ScalableDimension: dimV, PolicyName: aws.String("p"), StartTime: aws.Time(t0), EndTime: aws.Time(t0.Add(time.Hour))})
	if got := apiCode(err); !strings.HasPrefix(got, "UnknownOperationException: mce does not serve Application Auto Scaling's GetPredictiveScalingForecast") {
		t.Errorf("GetPredictiveScalingForecast: %s", got)
	}
}

// TestSDKPolicies: target tracking with a predefined and a customized
// metric, and step scaling: their ARNs, the alarms target tracking owns
// (in DescribeAlarms, replaced in place on update, deleted with the
// policy), paging, and the refusals of absurd values.
func TestSDKPolicies(t *testing.T) {
	fake := newFake(map[string]int{key(DimensionVariant, vID): 2, key(DimensionComponent, cID): 1})
	f := open(t, "", newClock(t0), fake)
	ctx := context.Background()
	register(t, f, vID, dimV, 1, 4)
	register(t, f, cID, dimIC, 0, 3)
	tt, err := f.c.PutScalingPolicy(ctx, &aas.PutScalingPolicyInput{PolicyName: aws.String("invocations"), ServiceNamespace: nsSM,
		ResourceId: aws.String(vID), ScalableDimension: dimV, PolicyType: types.PolicyTypeTargetTrackingScaling,
		TargetTrackingScalingPolicyConfiguration: &types.TargetTrackingScalingPolicyConfiguration{TargetValue: aws.Float64(100),
			PredefinedMetricSpecification: &types.PredefinedMetricSpecification{PredefinedMetricType: types.MetricTypeSageMakerVariantInvocationsPerInstance},
			ScaleInCooldown:               aws.Int32(600), ScaleOutCooldown: aws.Int32(60)}})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(tt.PolicyARN)
	if !strings.HasPrefix(arn, "arn:aws:autoscaling:us-east-1:000000000000:scalingPolicy:") || !strings.HasSuffix(arn, ":resource/sagemaker/endpoint/ep/variant/v1:policyName/invocations") {
		t.Errorf("policy ARN %s", arn)
	}
	if len(tt.Alarms) != 2 || !strings.HasPrefix(aws.ToString(tt.Alarms[0].AlarmName), "TargetTracking-endpoint/ep/variant/v1-AlarmHigh-") ||
		!strings.HasPrefix(aws.ToString(tt.Alarms[1].AlarmName), "TargetTracking-endpoint/ep/variant/v1-AlarmLow-") {
		t.Fatalf("alarms %+v", tt.Alarms)
	}
	high, ok := f.cw.Alarm(aws.ToString(tt.Alarms[0].AlarmName))
	low, ok2 := f.cw.Alarm(aws.ToString(tt.Alarms[1].AlarmName))
	if !ok || !ok2 {
		t.Fatal("the alarms are not CloudWatch's")
	}
	if high.MetricName != "InvocationsPerInstance" || high.Threshold != 100 || high.EvaluationPeriods != 3 || high.Period != 60 ||
		high.ComparisonOperator != "GreaterThanThreshold" || fmt.Sprint(high.AlarmActions) != "["+arn+"]" || len(high.Dimensions) != 2 ||
		low.Threshold != 90 || low.EvaluationPeriods != 15 || low.ComparisonOperator != "LessThanThreshold" || aws.ToString(tt.Alarms[0].AlarmARN) != high.AlarmArn {
		t.Errorf("high %+v\nlow %+v", high, low)
	}
	// An update keeps the ARN and the alarms' names; DisableScaleIn drops AlarmLow.
	tt2, err := f.c.PutScalingPolicy(ctx, &aas.PutScalingPolicyInput{PolicyName: aws.String("invocations"), ServiceNamespace: nsSM,
		ResourceId: aws.String(vID), ScalableDimension: dimV, PolicyType: types.PolicyTypeTargetTrackingScaling,
		TargetTrackingScalingPolicyConfiguration: &types.TargetTrackingScalingPolicyConfiguration{TargetValue: aws.Float64(200), DisableScaleIn: aws.Bool(true),
			PredefinedMetricSpecification: &types.PredefinedMetricSpecification{PredefinedMetricType: types.MetricTypeSageMakerVariantInvocationsPerInstance}}})
	if err != nil || aws.ToString(tt2.PolicyARN) != arn || len(tt2.Alarms) != 1 || aws.ToString(tt2.Alarms[0].AlarmName) != high.AlarmName {
		t.Fatalf("%+v %v", tt2, err)
	}
	if h, _ := f.cw.Alarm(high.AlarmName); h.Threshold != 200 {
		t.Errorf("the updated AlarmHigh: %+v", h)
	}
	if _, ok := f.cw.Alarm(low.AlarmName); ok {
		t.Errorf("AlarmLow is left after DisableScaleIn")
	}
	// Customized metric on the component, and a step policy.
	cust, err := f.c.PutScalingPolicy(ctx, &aas.PutScalingPolicyInput{PolicyName: aws.String("latency"), ServiceNamespace: nsSM,
		ResourceId: aws.String(cID), ScalableDimension: dimIC, PolicyType: types.PolicyTypeTargetTrackingScaling,
		TargetTrackingScalingPolicyConfiguration: &types.TargetTrackingScalingPolicyConfiguration{TargetValue: aws.Float64(5000),
			CustomizedMetricSpecification: &types.CustomizedMetricSpecification{MetricName: aws.String("ModelLatency"), Namespace: aws.String("AWS/SageMaker"),
				Statistic: types.MetricStatisticAverage, Dimensions: []types.MetricDimension{{Name: aws.String("InferenceComponentName"), Value: aws.String("ic1")}}}}})
	if err != nil || len(cust.Alarms) != 2 {
		t.Fatalf("%+v %v", cust, err)
	}
	step, err := f.c.PutScalingPolicy(ctx, &aas.PutScalingPolicyInput{PolicyName: aws.String("from-zero"), ServiceNamespace: nsSM,
		ResourceId: aws.String(cID), ScalableDimension: dimIC, PolicyType: types.PolicyTypeStepScaling,
		StepScalingPolicyConfiguration: &types.StepScalingPolicyConfiguration{AdjustmentType: types.AdjustmentTypeChangeInCapacity,
			MetricAggregationType: types.MetricAggregationTypeMaximum, Cooldown: aws.Int32(60),
			StepAdjustments: []types.StepAdjustment{{MetricIntervalLowerBound: aws.Float64(0), ScalingAdjustment: aws.Int32(1)}}}})
	if err != nil || len(step.Alarms) != 0 || !strings.HasSuffix(aws.ToString(step.PolicyARN), ":resource/sagemaker/inference-component/ic1:policyName/from-zero") {
		t.Fatalf("%+v %v", step, err)
	}
	if n := len(f.cw.Alarms()); n != 3 {
		t.Errorf("%d alarms, want 3", n)
	}
	var names []string
	pg := aas.NewDescribeScalingPoliciesPaginator(f.c, &aas.DescribeScalingPoliciesInput{ServiceNamespace: nsSM, MaxResults: aws.Int32(1)})
	for pg.HasMorePages() {
		p, err := pg.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range p.ScalingPolicies {
			names = append(names, aws.ToString(x.PolicyName)+"/"+string(x.PolicyType))
			if aws.ToString(x.PolicyName) == "invocations" && (x.TargetTrackingScalingPolicyConfiguration == nil ||
				aws.ToFloat64(x.TargetTrackingScalingPolicyConfiguration.TargetValue) != 200 || !x.CreationTime.Equal(t0)) {
				t.Errorf("%+v", x)
			}
		}
	}
	if fmt.Sprint(names) != "[invocations/TargetTrackingScaling from-zero/StepScaling latency/TargetTrackingScaling]" {
		t.Errorf("policies %v", names)
	}
	dp, _ := f.c.DescribeScalingPolicies(ctx, &aas.DescribeScalingPoliciesInput{ServiceNamespace: nsSM, PolicyNames: []string{"latency"}})
	if len(dp.ScalingPolicies) != 1 || len(dp.ScalingPolicies[0].Alarms) != 2 {
		t.Errorf("by name: %+v", dp.ScalingPolicies)
	}

	tracking := func(v float64, mod func(*types.TargetTrackingScalingPolicyConfiguration)) *aas.PutScalingPolicyInput {
		c := &types.TargetTrackingScalingPolicyConfiguration{TargetValue: aws.Float64(v),
			PredefinedMetricSpecification: &types.PredefinedMetricSpecification{PredefinedMetricType: types.MetricTypeSageMakerVariantInvocationsPerInstance}}
		if mod != nil {
			mod(c)
		}
		return &aas.PutScalingPolicyInput{PolicyName: aws.String("bad"), ServiceNamespace: nsSM, ResourceId: aws.String(vID), ScalableDimension: dimV,
			PolicyType: types.PolicyTypeTargetTrackingScaling, TargetTrackingScalingPolicyConfiguration: c}
	}
	stepIn := func(adj types.AdjustmentType, steps ...types.StepAdjustment) *aas.PutScalingPolicyInput {
		return &aas.PutScalingPolicyInput{PolicyName: aws.String("bad"), ServiceNamespace: nsSM, ResourceId: aws.String(vID), ScalableDimension: dimV,
			PolicyType: types.PolicyTypeStepScaling, StepScalingPolicyConfiguration: &types.StepScalingPolicyConfiguration{AdjustmentType: adj, StepAdjustments: steps}}
	}
	for _, c := range []struct {
		name string
		in   *aas.PutScalingPolicyInput
		want string
	}{
		{"target 0", tracking(0, nil), "ValidationException: The target value 0 is out of range"},
		{"target 1e300", tracking(1e300, nil), "ValidationException: The target value 1e+300 is out of range"},
		{"cooldown", tracking(1, func(c *types.TargetTrackingScalingPolicyConfiguration) { c.ScaleInCooldown = aws.Int32(-5) }), "ValidationException: The ScaleInCooldown -5 is out of range"},
		{"component metric on a variant", tracking(1, func(c *types.TargetTrackingScalingPolicyConfiguration) {
			c.PredefinedMetricSpecification.PredefinedMetricType = types.MetricTypeSageMakerInferenceComponentInvocationsPerCopy
		}), "ValidationException: The predefined metric type SageMakerInferenceComponentInvocationsPerCopy does not apply"},
		{"ECS metric", tracking(1, func(c *types.TargetTrackingScalingPolicyConfiguration) {
			c.PredefinedMetricSpecification.PredefinedMetricType = types.MetricTypeECSServiceAverageCPUUtilization
		}), "ValidationException: The predefined metric type ECSServiceAverageCPUUtilization does not apply"},
		{"both metrics", tracking(1, func(c *types.TargetTrackingScalingPolicyConfiguration) {
			c.CustomizedMetricSpecification = &types.CustomizedMetricSpecification{MetricName: aws.String("m"), Namespace: aws.String("n"), Statistic: types.MetricStatisticSum}
		}), "ValidationException: Exactly one of PredefinedMetricSpecification and CustomizedMetricSpecification"},
		{"no steps", stepIn(types.AdjustmentTypeChangeInCapacity), "ValidationException: StepAdjustments must hold at least one"},
		{"overlap", stepIn(types.AdjustmentTypeChangeInCapacity,
			types.StepAdjustment{MetricIntervalLowerBound: aws.Float64(0), MetricIntervalUpperBound: aws.Float64(10), ScalingAdjustment: aws.Int32(1)},
			types.StepAdjustment{MetricIntervalLowerBound: aws.Float64(5), ScalingAdjustment: aws.Int32(2)}), "ValidationException: Step adjustments must not overlap."},
		{"gap", stepIn(types.AdjustmentTypeChangeInCapacity,
			types.StepAdjustment{MetricIntervalLowerBound: aws.Float64(0), MetricIntervalUpperBound: aws.Float64(10), ScalingAdjustment: aws.Int32(1)},
			types.StepAdjustment{MetricIntervalLowerBound: aws.Float64(20), ScalingAdjustment: aws.Int32(2)}), "ValidationException: Step adjustments must not have gaps"},
		{"huge adjustment", stepIn(types.AdjustmentTypeChangeInCapacity,
			types.StepAdjustment{MetricIntervalLowerBound: aws.Float64(0), ScalingAdjustment: aws.Int32(2_000_000_000)}), "ValidationException: The scaling adjustment 2000000000 is out of range"},
		{"predictive", &aas.PutScalingPolicyInput{PolicyName: aws.String("p"), ServiceNamespace: nsSM, ResourceId: aws.String(vID), ScalableDimension: dimV,
			PolicyType: types.PolicyTypePredictiveScaling}, "ValidationException: mce does not serve predictive scaling policies"},
		{"no target", &aas.PutScalingPolicyInput{PolicyName: aws.String("p"), ServiceNamespace: nsSM, ResourceId: aws.String("endpoint/x/variant/y"),
			ScalableDimension: dimV, PolicyType: types.PolicyTypeStepScaling, StepScalingPolicyConfiguration: &types.StepScalingPolicyConfiguration{
				AdjustmentType: types.AdjustmentTypeExactCapacity, StepAdjustments: []types.StepAdjustment{{ScalingAdjustment: aws.Int32(1)}}}},
			"ObjectNotFoundException: No scalable target registered"},
	} {
		_, err := f.c.PutScalingPolicy(ctx, c.in)
		if got := apiCode(err); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %s\nwant %s", c.name, got, c.want)
		}
	}
	// 50 policies a target: the 51st is LimitExceededException.
	for i := 0; i < maxPoliciesTarget-1; i++ {
		if _, err := f.c.PutScalingPolicy(ctx, stepIn(types.AdjustmentTypeExactCapacity, types.StepAdjustment{ScalingAdjustment: aws.Int32(1)}),
			func(o *aas.Options) {}); err != nil && i == 0 {
			t.Fatal(err)
		}
		in := stepIn(types.AdjustmentTypeExactCapacity, types.StepAdjustment{ScalingAdjustment: aws.Int32(1)})
		in.PolicyName = aws.String(fmt.Sprintf("s%02d", i))
		if _, err := f.c.PutScalingPolicy(ctx, in); err != nil && i < maxPoliciesTarget-2 {
			t.Fatalf("policy %d: %v", i, err)
		}
	}
	in := stepIn(types.AdjustmentTypeExactCapacity, types.StepAdjustment{ScalingAdjustment: aws.Int32(1)})
	in.PolicyName = aws.String("one-too-many")
	var le *types.LimitExceededException
	if _, err := f.c.PutScalingPolicy(ctx, in); !errors.As(err, &le) {
		t.Errorf("the 51st policy: %v", err)
	}

	if _, err := f.c.DeleteScalingPolicy(ctx, &aas.DeleteScalingPolicyInput{PolicyName: aws.String("invocations"), ServiceNamespace: nsSM,
		ResourceId: aws.String(vID), ScalableDimension: dimV}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.cw.Alarm(high.AlarmName); ok {
		t.Errorf("AlarmHigh outlived its policy")
	}
	_, err = f.c.DeleteScalingPolicy(ctx, &aas.DeleteScalingPolicyInput{PolicyName: aws.String("invocations"), ServiceNamespace: nsSM,
		ResourceId: aws.String(vID), ScalableDimension: dimV})
	var onf *types.ObjectNotFoundException
	if !errors.As(err, &onf) || !strings.Contains(onf.ErrorMessage(), "policy name: invocations") {
		t.Errorf("deleting twice: %v", err)
	}
	// Deregistering the component deletes its policies' alarms.
	if _, err := f.c.DeregisterScalableTarget(ctx, &aas.DeregisterScalableTargetInput{ServiceNamespace: nsSM, ResourceId: aws.String(cID), ScalableDimension: dimIC}); err != nil {
		t.Fatal(err)
	}
	if as := f.cw.Alarms(); len(as) != 0 {
		t.Errorf("alarms left: %v", as)
	}
	_ = cloudwatch.StateAlarm
}
