package cloudwatch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
)

// TestSDKGoV2Alarms: aws-sdk-go-v2's client (RPC v2 CBOR) creates an
// alarm, sees it go to ALARM, sets its state, reads its history page by
// page, deletes it, and gets CloudWatch's modeled errors.
func TestSDKGoV2Alarms(t *testing.T) {
	c := newClock(t0.Add(2 * time.Second))
	s := openTest(t, t.TempDir(), c, func(o *Options) { o.AlarmInterval = time.Hour })
	cw, sn := sdkServer(t, s)
	ctx := context.Background()
	dims := []types.Dimension{{Name: aws.String("EndpointName"), Value: aws.String("ep")}, {Name: aws.String("VariantName"), Value: aws.String("v1")}}
	_, err := cw.PutMetricAlarm(ctx, &cloudwatch.PutMetricAlarmInput{
		AlarmName: aws.String("errors"), Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("Invocation5XXErrors"),
		Dimensions: dims, Statistic: types.StatisticSum, Period: aws.Int32(60), EvaluationPeriods: aws.Int32(2),
		DatapointsToAlarm: aws.Int32(1), Threshold: aws.Float64(0), ComparisonOperator: types.ComparisonOperatorGreaterThanThreshold,
		TreatMissingData: aws.String("notBreaching"), AlarmActions: []string{"arn:aws:sns:us-east-1:000000000000:pager"},
		AlarmDescription: aws.String("5xx of ep/v1"), Tags: []types.Tag{{Key: aws.String("team"), Value: aws.String("ml")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := sn.last(); r.URL.Path != CBORPathPrefix+"PutMetricAlarm" {
		t.Errorf("the SDK did not speak RPC v2 CBOR: %s", r.URL.Path)
	}
	mustSeries(t, s, "AWS/SageMaker", "Invocation5XXErrors", epDims, "None", Standard).Observe(1)
	s.EvaluateAlarms()
	out, err := cw.DescribeAlarms(ctx, &cloudwatch.DescribeAlarmsInput{AlarmNamePrefix: aws.String("err")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.MetricAlarms) != 1 {
		t.Fatalf("%+v", out)
	}
	a := out.MetricAlarms[0]
	if a.StateValue != types.StateValueAlarm || !strings.HasPrefix(aws.ToString(a.StateReason), "Threshold Crossed: 1 out of the last 2 datapoints") ||
		!strings.Contains(aws.ToString(a.StateReasonData), `"recentDatapoints":[1]`) || a.StateTransitionedTimestamp == nil ||
		!a.StateTransitionedTimestamp.Equal(c.Now().Truncate(time.Millisecond)) || aws.ToInt32(a.DatapointsToAlarm) != 1 ||
		aws.ToString(a.AlarmDescription) != "5xx of ep/v1" || a.Statistic != types.StatisticSum || len(a.Dimensions) != 2 ||
		aws.ToFloat64(a.Threshold) != 0 || a.ComparisonOperator != types.ComparisonOperatorGreaterThanThreshold {
		t.Errorf("alarm %+v reason %q data %q", a, aws.ToString(a.StateReason), aws.ToString(a.StateReasonData))
	}
	if _, err := cw.SetAlarmState(ctx, &cloudwatch.SetAlarmStateInput{AlarmName: aws.String("errors"), StateValue: types.StateValueOk,
		StateReason: aws.String("acknowledged")}); err != nil {
		t.Fatal(err)
	}
	var summaries []string
	hp := cloudwatch.NewDescribeAlarmHistoryPaginator(cw, &cloudwatch.DescribeAlarmHistoryInput{AlarmName: aws.String("errors"), MaxRecords: aws.Int32(1),
		ScanBy: types.ScanByTimestampAscending})
	for hp.HasMorePages() {
		p, err := hp.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range p.AlarmHistoryItems {
			summaries = append(summaries, string(h.HistoryItemType)+": "+aws.ToString(h.HistorySummary))
		}
	}
	want := `ConfigurationUpdate: Alarm "errors" created|StateUpdate: Alarm updated from INSUFFICIENT_DATA to ALARM|StateUpdate: Alarm updated from ALARM to OK`
	if got := strings.Join(summaries, "|"); got != want {
		t.Errorf("history %s\nwant %s", got, want)
	}

	_, err = cw.SetAlarmState(ctx, &cloudwatch.SetAlarmStateInput{AlarmName: aws.String("nope"), StateValue: types.StateValueOk, StateReason: aws.String("x")})
	var rnf *types.ResourceNotFound
	if !errors.As(err, &rnf) || rnf.ErrorCode() != "ResourceNotFound" {
		t.Errorf("SetAlarmState of no alarm: %v", err)
	}
	_, err = cw.PutMetricAlarm(ctx, &cloudwatch.PutMetricAlarmInput{AlarmName: aws.String("math"), EvaluationPeriods: aws.Int32(1),
		Threshold: aws.Float64(1), ComparisonOperator: types.ComparisonOperatorGreaterThanThreshold,
		Metrics: []types.MetricDataQuery{{Id: aws.String("e1"), Expression: aws.String("m1/m2")}}})
	var ipv *types.InvalidParameterValueException
	if !errors.As(err, &ipv) || !strings.Contains(ipv.ErrorMessage(), "not served") {
		t.Errorf("a metric math alarm: %v", err)
	}
	_, err = cw.DescribeAlarms(ctx, &cloudwatch.DescribeAlarmsInput{NextToken: aws.String(strings.Repeat("x", 5000))})
	var bad *types.InvalidNextToken
	if !errors.As(err, &bad) {
		t.Errorf("a forged NextToken: %v", err)
	}
	if _, err := cw.DeleteAlarms(ctx, &cloudwatch.DeleteAlarmsInput{AlarmNames: []string{"errors"}}); err != nil {
		t.Fatal(err)
	}
	out, err = cw.DescribeAlarms(ctx, &cloudwatch.DescribeAlarmsInput{})
	if err != nil || len(out.MetricAlarms) != 0 {
		t.Errorf("after DeleteAlarms: %+v %v", out, err)
	}
}
