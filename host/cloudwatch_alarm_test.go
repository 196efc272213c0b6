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
}
