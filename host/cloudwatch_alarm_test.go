package host

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"

	cw "github.com/mce-run/mce/host/cloudwatch"
)

// TestCloudWatchAlarmOnVariant5XX: an alarm on a variant's
// Invocation5XXErrors, made with aws-sdk-go-v2 against the server's
// listener, goes to ALARM once the model answers 500s, and the Go hook
// sees it; the other variant's alarm stays OK.
func TestCloudWatchAlarmOnVariant5XX(t *testing.T) {
	svc, err := cw.Open(cw.Options{Dir: filepath.Join(t.TempDir(), "cloudwatch"), AlarmInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	changed := make(chan string, 16)
	svc.OnStateChange(func(a cw.Alarm, old, new cw.State) { changed <- a.AlarmName + ":" + string(old) + ">" + string(new) })
	h := newHarness(t, Config{CloudWatch: svc})
	if err := h.deploy(plan("ab", "Serial", map[string][]string{"VariantA": {"a:A"}, "VariantB": {"b:B"}})); err != nil {
		t.Fatal(err)
	}
	c := h.cloudWatch(nil)
	ctx := context.Background()
	for _, v := range []string{"VariantA", "VariantB"} {
		_, err := c.PutMetricAlarm(ctx, &cloudwatch.PutMetricAlarmInput{
			AlarmName: aws.String("ab-" + v + "-5xx"), Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("Invocation5XXErrors"),
			Dimensions: []cwtypes.Dimension{{Name: aws.String("EndpointName"), Value: aws.String("ab")}, {Name: aws.String("VariantName"), Value: aws.String(v)}},
			Statistic:  cwtypes.StatisticSum, Period: aws.Int32(60), EvaluationPeriods: aws.Int32(1), Threshold: aws.Float64(0),
			ComparisonOperator: cwtypes.ComparisonOperatorGreaterThanThreshold, TreatMissingData: aws.String("notBreaching"),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	call := func(variant, attrs string) {
		in := &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab"), Body: body("x"),
			ContentType: aws.String("text/plain"), TargetVariant: aws.String(variant)}
		if attrs != "" {
			in.CustomAttributes = aws.String(attrs)
		}
		h.invoke(in)
	}
	call("VariantB", "")
	call("VariantA", "")
	call("VariantA", "status=500")
	call("VariantA", "status=503")
	// Before the calls an evaluation may see no data (notBreaching: OK);
	// what counts is where each alarm ends.
	last := map[string]string{}
	deadline := time.After(10 * time.Second)
	for last["ab-VariantA-5xx"] != "ALARM" || last["ab-VariantB-5xx"] != "OK" {
		select {
		case ch := <-changed:
			name, st, _ := strings.Cut(ch, ":")
			_, to, _ := strings.Cut(st, ">")
			if last[name] == "ALARM" {
				t.Fatalf("%s left ALARM: %s", name, ch)
			}
			last[name] = to
		case <-deadline:
			t.Fatalf("states reached: %v, want VariantA's alarm in ALARM and VariantB's OK", last)
		}
	}
	out, err := c.DescribeAlarms(ctx, &cloudwatch.DescribeAlarmsInput{StateValue: cwtypes.StateValueAlarm})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.MetricAlarms) != 1 || aws.ToString(out.MetricAlarms[0].AlarmName) != "ab-VariantA-5xx" {
		t.Errorf("alarms in ALARM: %+v", out.MetricAlarms)
	}
	// The status page lists both, the one in ALARM first, with its rule.
	rep := h.srv.status.Report(true)
	if len(rep.Alarms) != 2 || rep.Alarms[0].Name != "ab-VariantA-5xx" || rep.Alarms[0].State != "ALARM" || rep.Alarms[1].State != "OK" ||
		rep.Alarms[0].Condition != "Sum > 0 for 1 of 1 periods of 60 s (missing data: notBreaching)" ||
		rep.Alarms[0].Metric != "AWS/SageMaker Invocation5XXErrors EndpointName=ab VariantName=VariantA" {
		t.Errorf("the status page's alarms: %+v", rep.Alarms)
	}
}

// TestNoCapacityInvocationFailuresAlarm: calls to an inference component
// scaled to zero copies are refused with SageMaker's ValidationError and
// counted as NoCapacityInvocationFailures, per component; the alarm AWS
// documents for scale-out from zero (Sum >= 1 over one period) goes to
// ALARM on them, and a component with copies counts none.
func TestNoCapacityInvocationFailuresAlarm(t *testing.T) {
	svc, err := cw.Open(cw.Options{Dir: filepath.Join(t.TempDir(), "cloudwatch"), AlarmInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	h, _ := newICHarnessWith(t, nil, Config{CloudWatch: svc})
	sm := h.sm()
	ctx := context.Background()
	createICEndpoint(t, sm, "zero", "ml.m5.xlarge", 1)
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-v1")},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(256), NumberOfCpuCoresRequired: aws.Float32(1)}}
	for _, name := range []string{"idle", "busy"} {
		if err := createIC(ctx, sm, name, "zero", sp, 1); err != nil {
			t.Fatal(err)
		}
		waitIC(t, sm, name)
	}
	// SageMaker creates a component with one copy at least; it reaches
	// zero by scaling.
	if _, err := sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String("idle"),
		DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(0)}}); err != nil {
		t.Fatal(err)
	}
	if d := waitIC(t, sm, "idle"); aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 0 {
		t.Fatalf("idle scaled to zero: %+v", d.RuntimeConfig)
	}
	c := h.cloudWatch(nil)
	for _, name := range []string{"idle", "busy"} {
		if _, err := c.PutMetricAlarm(ctx, &cloudwatch.PutMetricAlarmInput{
			AlarmName: aws.String(name + "-no-capacity"), Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("NoCapacityInvocationFailures"),
			Dimensions: []cwtypes.Dimension{{Name: aws.String("InferenceComponentName"), Value: aws.String(name)}},
			Statistic:  cwtypes.StatisticSum, Period: aws.Int32(60), EvaluationPeriods: aws.Int32(1), DatapointsToAlarm: aws.Int32(1),
			Threshold: aws.Float64(1), ComparisonOperator: cwtypes.ComparisonOperatorGreaterThanOrEqualToThreshold,
			TreatMissingData: aws.String("missing"),
		}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		_, err := h.invokeIC("zero", "idle")
		wantMessage(t, err, "ValidationError", "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress (if configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API.")
		if _, err := h.invokeIC("zero", "busy"); err != nil {
			t.Fatal(err)
		}
	}
	sum := func(name string) float64 {
		t.Helper()
		svc.Flush()
		out, err := c.GetMetricStatistics(ctx, &cloudwatch.GetMetricStatisticsInput{Namespace: aws.String("AWS/SageMaker"),
			MetricName: aws.String("NoCapacityInvocationFailures"), Dimensions: []cwtypes.Dimension{{Name: aws.String("InferenceComponentName"), Value: aws.String(name)}},
			StartTime: aws.Time(time.Now().Add(-5 * time.Minute)), EndTime: aws.Time(time.Now().Add(time.Minute)), Period: aws.Int32(600),
			Statistics: []cwtypes.Statistic{cwtypes.StatisticSum}})
		if err != nil {
			t.Fatal(err)
		}
		total := 0.0
		for _, d := range out.Datapoints {
			total += aws.ToFloat64(d.Sum)
		}
		return total
	}
	if got := sum("idle"); got != 3 {
		t.Fatalf("NoCapacityInvocationFailures of idle = %v, want 3", got)
	}
	if got := sum("busy"); got != 0 {
		t.Fatalf("NoCapacityInvocationFailures of busy = %v, want 0", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := c.DescribeAlarms(ctx, &cloudwatch.DescribeAlarmsInput{AlarmNames: []string{"idle-no-capacity", "busy-no-capacity"}})
		if err != nil {
			t.Fatal(err)
		}
		states := map[string]cwtypes.StateValue{}
		for _, a := range out.MetricAlarms {
			states[aws.ToString(a.AlarmName)] = a.StateValue
		}
		if states["idle-no-capacity"] == cwtypes.StateValueAlarm {
			if states["busy-no-capacity"] == cwtypes.StateValueAlarm {
				t.Fatalf("the alarm of a component with copies went to ALARM: %v", states)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alarm states %v; want idle-no-capacity in ALARM", states)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
