package host

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	aas "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling"
	aastypes "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/applicationautoscaling"
	cw "github.com/mce-run/mce/host/cloudwatch"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/internal/sdkhttp"
)

// stepClock is AWS time that a test steps by hand.
type stepClock struct{ ns atomic.Int64 }

func (c *stepClock) Now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *stepClock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// openAutoScaling opens CloudWatch and Application Auto Scaling on clk, as
// mce serve does; the server runs the latter.
func openAutoScaling(t *testing.T, clk *stepClock) (*cw.Service, *applicationautoscaling.Service) {
	t.Helper()
	dir := t.TempDir()
	c, err := cw.Open(cw.Options{Dir: filepath.Join(dir, "cloudwatch"), Now: clk.Now, AlarmInterval: time.Hour, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	as, err := applicationautoscaling.Open(applicationautoscaling.Options{Dir: filepath.Join(dir, "applicationautoscaling"), CloudWatch: c,
		Now: clk.Now, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return c, as
}

func (h *harness) autoScaling() *aas.Client {
	return aas.New(aas.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.http.URL),
		Credentials: aws.AnonymousCredentials{}, HTTPClient: &sdkhttp.Client{Next: h.http.Client()}})
}

// waitCapacity waits until the target's capacity is n and its endpoint in
// service.
func waitCapacity(t *testing.T, h *harness, endpoint, dim, id string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _, _ := autoScalingTargets{h.srv}.Capacity(context.Background(), dim, id)
		e := h.srv.reg.get(endpoint)
		if got == n && e != nil && e.Status() == spec.StatusInService {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: capacity %d, want %d", id, got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAutoScalingVariant: a target tracking policy, made with
// aws-sdk-go-v2 through the server, changes a variant's instance count
// through UpdateEndpointWeightsAndCapacities' path when its AlarmHigh goes
// to ALARM (by the ratio, held at MaxCapacity), waits for its scale-out
// cooldown before its AlarmLow scales in, and stops at MinCapacity.
func TestAutoScalingVariant(t *testing.T) {
	clk := &stepClock{}
	clk.ns.Store(time.Date(2026, 11, 28, 10, 0, 5, 0, time.UTC).UnixNano())
	c, as := openAutoScaling(t, clk)
	h := newHarness(t, Config{CloudWatch: c, AutoScaling: as})
	if err := h.deploy(plan("ep", "Direct", map[string][]string{"v1": {"a:A"}})); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const id = "endpoint/ep/variant/v1"
	a := h.autoScaling()
	if _, err := a.RegisterScalableTarget(ctx, &aas.RegisterScalableTargetInput{ServiceNamespace: aastypes.ServiceNamespaceSagemaker,
		ResourceId: aws.String(id), ScalableDimension: aastypes.ScalableDimensionSageMakerVariantDesiredInstanceCount,
		MinCapacity: aws.Int32(1), MaxCapacity: aws.Int32(3)}); err != nil {
		t.Fatal(err)
	}
	_, err := a.RegisterScalableTarget(ctx, &aas.RegisterScalableTargetInput{ServiceNamespace: aastypes.ServiceNamespaceSagemaker,
		ResourceId: aws.String("endpoint/nope/variant/v1"), ScalableDimension: aastypes.ScalableDimensionSageMakerVariantDesiredInstanceCount,
		MinCapacity: aws.Int32(1), MaxCapacity: aws.Int32(3)})
	wantAPIError(t, err, "ValidationException", "does not exist")
	pol, err := a.PutScalingPolicy(ctx, &aas.PutScalingPolicyInput{PolicyName: aws.String("ipi"), ServiceNamespace: aastypes.ServiceNamespaceSagemaker,
		ResourceId: aws.String(id), ScalableDimension: aastypes.ScalableDimensionSageMakerVariantDesiredInstanceCount,
		PolicyType: aastypes.PolicyTypeTargetTrackingScaling,
		TargetTrackingScalingPolicyConfiguration: &aastypes.TargetTrackingScalingPolicyConfiguration{TargetValue: aws.Float64(100),
			PredefinedMetricSpecification: &aastypes.PredefinedMetricSpecification{PredefinedMetricType: aastypes.MetricTypeSageMakerVariantInvocationsPerInstance},
			ScaleOutCooldown:              aws.Int32(600), ScaleInCooldown: aws.Int32(0)}})
	if err != nil {
		t.Fatal(err)
	}
	// The policy's alarms are CloudWatch's: DescribeAlarms lists them.
	alarms, err := h.cloudWatch(nil).DescribeAlarms(ctx, &cloudwatch.DescribeAlarmsInput{AlarmNamePrefix: aws.String("TargetTracking-" + id)})
	if err != nil || len(alarms.MetricAlarms) != 2 {
		t.Fatalf("%+v %v", alarms, err)
	}
	high, low := aws.ToString(pol.Alarms[0].AlarmName), aws.ToString(pol.Alarms[1].AlarmName)

	// 500 invocations a minute on one instance: ceil(1×500/100) = 5, held at 3.
	if err := c.Observe("AWS/SageMaker", "InvocationsPerInstance", []cw.Dimension{{Name: "EndpointName", Value: "ep"}, {Name: "VariantName", Value: "v1"}},
		"None", cw.Standard, 500); err != nil {
		t.Fatal(err)
	}
	c.EvaluateAlarms() // AlarmHigh → ALARM: the server's run of the service reacts
	waitCapacity(t, h, "ep", applicationautoscaling.DimensionVariant, id, 3)
	if n := h.srv.reg.get("ep").record().Plan.Variants[0].InstanceCount; n != 3 {
		t.Fatalf("the plan has %d instances", n)
	}
	// AlarmLow in ALARM inside the scale-out cooldown: nothing.
	setState := func(name string) {
		t.Helper()
		if _, err := h.cloudWatch(nil).SetAlarmState(ctx, &cloudwatch.SetAlarmStateInput{AlarmName: aws.String(name),
			StateValue: cwtypes.StateValueAlarm, StateReason: aws.String("test")}); err != nil {
			t.Fatal(err)
		}
	}
	setState(high)
	setState(low)
	as.Evaluate(ctx)
	waitCapacity(t, h, "ep", applicationautoscaling.DimensionVariant, id, 3)
	// After it, each evaluation in ALARM scales in by one (SetAlarmState
	// carries no datapoint), down to MinCapacity.
	if _, err := h.cloudWatch(nil).SetAlarmState(ctx, &cloudwatch.SetAlarmStateInput{AlarmName: aws.String(high),
		StateValue: cwtypes.StateValueOk, StateReason: aws.String("test")}); err != nil {
		t.Fatal(err)
	}
	clk.Add(11 * time.Minute)
	for _, want := range []int{2, 1, 1} {
		as.Evaluate(ctx)
		waitCapacity(t, h, "ep", applicationautoscaling.DimensionVariant, id, want)
	}
	acts, err := a.DescribeScalingActivities(ctx, &aas.DescribeScalingActivitiesInput{ServiceNamespace: aastypes.ServiceNamespaceSagemaker})
	if err != nil || len(acts.ScalingActivities) != 3 {
		t.Fatalf("%+v %v", acts, err)
	}
	for i, want := range []string{"Setting desired instance count to 1.", "Setting desired instance count to 2.", "Setting desired instance count to 3."} {
		if got := acts.ScalingActivities[i]; aws.ToString(got.Description) != want || got.StatusCode != aastypes.ScalingActivityStatusCodeSuccessful {
			t.Errorf("activity %d: %s %s %s", i, aws.ToString(got.Description), got.StatusCode, aws.ToString(got.StatusMessage))
		}
	}
	// The status page's autoscaling section.
	rep := h.srv.status.Report(false)
	if len(rep.Scaling) != 1 || rep.Scaling[0].ResourceID != id || rep.Scaling[0].Current != 1 || rep.Scaling[0].Max != 3 ||
		len(rep.Scaling[0].Policies) != 1 || len(rep.Scaling[0].Activities) != 3 || rep.Scaling[0].Activities[0].Description != "Setting desired instance count to 1." {
		t.Errorf("status page: %+v", rep.Scaling)
	}
}

// TestAutoScalingComponentFromZero: an inference component with no copies
// is scaled to one by a step policy when the user's alarm, whose action is
// the policy, goes to ALARM, through UpdateInferenceComponentRuntimeConfig's
// path.
func TestAutoScalingComponentFromZero(t *testing.T) {
	clk := &stepClock{}
	clk.ns.Store(time.Date(2026, 11, 28, 10, 0, 5, 0, time.UTC).UnixNano())
	c, as := openAutoScaling(t, clk)
	h, _ := newICHarnessWith(t, nil, Config{CloudWatch: c, AutoScaling: as})
	sm := h.sm()
	ctx := context.Background()
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("model-a"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("-a")}}); err != nil {
		t.Fatal(err)
	}
	createICEndpoint(t, sm, "shared", "ml.g5.12xlarge", 1)
	if err := createIC(ctx, sm, "ic1", "shared", icSpec("model-a", 1, 1024, 0), 1); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "ic1")
	if _, err := sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String("ic1"),
		DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(0)}}); err != nil {
		t.Fatal(err)
	}
	if d := waitIC(t, sm, "ic1"); aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 0 {
		t.Fatalf("%+v", d.RuntimeConfig)
	}
	a := h.autoScaling()
	const id = "inference-component/ic1"
	dim := aastypes.ScalableDimension(applicationautoscaling.DimensionComponent)
	if _, err := a.RegisterScalableTarget(ctx, &aas.RegisterScalableTargetInput{ServiceNamespace: aastypes.ServiceNamespaceSagemaker,
		ResourceId: aws.String(id), ScalableDimension: dim, MinCapacity: aws.Int32(0), MaxCapacity: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	pol, err := a.PutScalingPolicy(ctx, &aas.PutScalingPolicyInput{PolicyName: aws.String("from-zero"), ServiceNamespace: aastypes.ServiceNamespaceSagemaker,
		ResourceId: aws.String(id), ScalableDimension: dim, PolicyType: aastypes.PolicyTypeStepScaling,
		StepScalingPolicyConfiguration: &aastypes.StepScalingPolicyConfiguration{AdjustmentType: aastypes.AdjustmentTypeChangeInCapacity,
			MetricAggregationType: aastypes.MetricAggregationTypeMaximum, Cooldown: aws.Int32(60),
			StepAdjustments: []aastypes.StepAdjustment{{MetricIntervalLowerBound: aws.Float64(0), ScalingAdjustment: aws.Int32(1)}}}})
	if err != nil {
		t.Fatal(err)
	}
	cwc := h.cloudWatch(nil)
	if _, err := cwc.PutMetricAlarm(ctx, &cloudwatch.PutMetricAlarmInput{AlarmName: aws.String("ic1-no-capacity"),
		Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("NoCapacityInvocationFailures"),
		Dimensions: []cwtypes.Dimension{{Name: aws.String("InferenceComponentName"), Value: aws.String("ic1")}},
		Statistic:  cwtypes.StatisticMaximum, Period: aws.Int32(30), EvaluationPeriods: aws.Int32(1), Threshold: aws.Float64(1),
		ComparisonOperator: cwtypes.ComparisonOperatorGreaterThanOrEqualToThreshold, AlarmActions: []string{aws.ToString(pol.PolicyARN)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cwc.SetAlarmState(ctx, &cloudwatch.SetAlarmStateInput{AlarmName: aws.String("ic1-no-capacity"),
		StateValue: cwtypes.StateValueAlarm, StateReason: aws.String("a call found no copy")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		d := waitIC(t, sm, "ic1")
		if d.RuntimeConfig != nil && aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ic1: %+v", d.RuntimeConfig)
		}
		time.Sleep(10 * time.Millisecond)
	}
	acts, err := a.DescribeScalingActivities(ctx, &aas.DescribeScalingActivitiesInput{ServiceNamespace: aastypes.ServiceNamespaceSagemaker, ResourceId: aws.String(id)})
	if err != nil || len(acts.ScalingActivities) != 1 || aws.ToString(acts.ScalingActivities[0].Cause) != "monitor alarm ic1-no-capacity in state ALARM triggered policy from-zero" {
		t.Fatalf("%+v %v", acts, err)
	}
}

// TestAutoScalingSignedAndDecided: a call must be signed for
// application-autoscaling, and the caller's policies decide each action.
func TestAutoScalingSignedAndDecided(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "creds.yaml"), []byte(`
Credentials:
  - AccessKeyId: AKIAOPS00000EXAMPLE
    SecretAccessKey: ops-secret
    Arn: arn:aws:iam::123456789012:user/ops
    Policies:
      - Name: read-scaling
        Document: {Version: "2012-10-17", Statement: [{Effect: Allow, Action: "application-autoscaling:Describe*", Resource: "*"}]}
`), 0o600)
	az, err := authz.Load(context.Background(), authz.Config{CredentialsFile: filepath.Join(dir, "creds.yaml"), Region: "us-east-1", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	c, as := openAutoScaling(t, &stepClock{})
	h := newHarness(t, Config{Authz: az, CloudWatch: c, AutoScaling: as})
	call := func(op, service string) (int, string) {
		body := []byte(`{"ServiceNamespace":"sagemaker"}`)
		r, _ := http.NewRequest(http.MethodPost, h.http.URL+"/", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/x-amz-json-1.1")
		r.Header.Set("X-Amz-Target", "AnyScaleFrontendService."+op)
		resp, b := h.signedDo(t, r, body, service, "AKIAOPS00000EXAMPLE", "ops-secret")
		return resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType") + " " + string(b)
	}
	if st, got := call("DescribeScalableTargets", "application-autoscaling"); st != 200 || !strings.Contains(got, `"ScalableTargets":[]`) {
		t.Errorf("allowed: %d %s", st, got)
	}
	if st, got := call("DeregisterScalableTarget", "application-autoscaling"); st != 400 || !strings.HasPrefix(got, "AccessDeniedException ") {
		t.Errorf("not allowed: %d %s", st, got)
	}
	if st, got := call("DescribeScalableTargets", "sagemaker"); st < 400 || strings.Contains(got, "ScalableTargets") {
		t.Errorf("signed for sagemaker: %d %s", st, got)
	}
}
