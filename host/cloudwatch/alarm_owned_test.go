package cloudwatch

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestPutAlarmInGo: PutAlarm makes the alarm PutMetricAlarm would, refuses
// what it refuses, replaces keeping the state, and DeleteAlarms deletes
// any number of names.
func TestPutAlarmInGo(t *testing.T) {
	c := newClock(t0.Add(2 * time.Second))
	s := openTest(t, t.TempDir(), c, func(o *Options) { o.AlarmInterval = time.Hour })
	spec := AlarmSpec{AlarmName: "high", Namespace: "AWS/SageMaker", MetricName: "InvocationsPerInstance", Dimensions: epDims,
		Statistic: "Sum", Period: 60, EvaluationPeriods: 3, DatapointsToAlarm: 3, Threshold: 100, ComparisonOperator: "GreaterThanThreshold",
		AlarmActions: []string{"arn:aws:autoscaling:us-east-1:000000000000:scalingPolicy:x:resource/sagemaker/endpoint/ep/variant/v1:policyName/p"}}
	if err := s.PutAlarm(spec); err != nil {
		t.Fatal(err)
	}
	a, ok := s.Alarm("high")
	if !ok || a.StateValue != StateInsufficientData || a.Threshold != 100 || a.AlarmArn != s.AlarmArn("high") || len(a.AlarmActions) != 1 ||
		a.DatapointsToAlarm == nil || *a.DatapointsToAlarm != 3 || a.TreatMissingData != "missing" {
		t.Fatalf("%+v", a)
	}
	mustSeries(t, s, "AWS/SageMaker", "InvocationsPerInstance", epDims, "None", Standard).Observe(500)
	s.EvaluateAlarms()
	spec.Threshold = 200
	if err := s.PutAlarm(spec); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Alarm("high"); a.StateValue != StateAlarm || a.Threshold != 200 {
		t.Errorf("replaced: %+v", a)
	}
	bad := spec
	bad.Period = 45
	var api *APIError
	if err := s.PutAlarm(bad); !errors.As(err, &api) || api.Code != CodeInvalidParameterValue {
		t.Errorf("Period 45: %v", err)
	}
	names := []string{"high"}
	for i := range 150 {
		names = append(names, fmt.Sprintf("none-%d", i))
	}
	if err := s.DeleteAlarms(names...); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Alarm("high"); ok || len(s.Alarms()) != 0 {
		t.Errorf("left: %v", s.Alarms())
	}
}
