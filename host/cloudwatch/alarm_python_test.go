package cloudwatch

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The alarms with boto3 1.43 (AWS JSON 1.0), Debian's boto3 1.26 (the
// query protocol) and boto3 1.43 told to prefer RPC v2 CBOR, as
// TestBoto3Clients does for the metrics.

const botoAlarmScript = `
import os, sys, json, datetime
import boto3, botocore
if os.environ.get("CW_PROTOCOL"):
    import botocore.model
    first = os.environ["CW_PROTOCOL"]
    botocore.model.PRIORITY_ORDERED_SUPPORTED_PROTOCOLS = (first,) + tuple(
        p for p in botocore.model.PRIORITY_ORDERED_SUPPORTED_PROTOCOLS if p != first)
url = sys.argv[1]
cw = boto3.client("cloudwatch", endpoint_url=url, region_name="us-east-1")
dims = [{"Name": "EndpointName", "Value": "ep"}, {"Name": "VariantName", "Value": "v1"}]
out = {}
for i in range(3):
    cw.put_metric_alarm(AlarmName="errors-%d" % i, Namespace="AWS/SageMaker", MetricName="Invocation5XXErrors",
        Dimensions=dims, Statistic="Sum", Period=60, EvaluationPeriods=3, DatapointsToAlarm=2, Threshold=0.5,
        ComparisonOperator="GreaterThanThreshold", TreatMissingData="notBreaching",
        AlarmActions=["arn:aws:sns:us-east-1:000000000000:pager"], Tags=[{"Key": "team", "Value": "ml"}])
cw.set_alarm_state(AlarmName="errors-1", StateValue="ALARM", StateReason="by hand", StateReasonData='{"a": 1}')
alarms = [a for p in cw.get_paginator("describe_alarms").paginate(AlarmNamePrefix="errors-", PaginationConfig={"PageSize": 2})
          for a in p["MetricAlarms"]]
out["alarms"] = [[a["AlarmName"], a["StateValue"], a["Threshold"], a["DatapointsToAlarm"], a["AlarmActions"],
                  a["StateUpdatedTimestamp"].year] for a in alarms]
r = cw.describe_alarms(StateValue="ALARM")
out["alarming"] = [a["AlarmName"] for a in r["MetricAlarms"]] + [len(r["CompositeAlarms"])]
h = cw.describe_alarm_history(AlarmName="errors-1", HistoryItemType="StateUpdate")
out["history"] = [i["HistorySummary"] for i in h["AlarmHistoryItems"]]
try:
    cw.put_metric_alarm(AlarmName="bad", Namespace="AWS/SageMaker", MetricName="M", Statistic="Sum", Period=45,
        EvaluationPeriods=1, Threshold=1, ComparisonOperator="GreaterThanThreshold")
    out["err"] = None
except botocore.exceptions.ClientError as e:
    out["err"] = [type(e).__name__, e.response["Error"]["Code"], e.response["Error"]["Message"]]
try:
    cw.set_alarm_state(AlarmName="nope", StateValue="OK", StateReason="x")
    out["notfound"] = None
except botocore.exceptions.ClientError as e:
    out["notfound"] = [type(e).__name__, e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]]
cw.delete_alarms(AlarmNames=["errors-0", "errors-1", "errors-2"])
out["left"] = len(cw.describe_alarms()["MetricAlarms"])
print(json.dumps(out))
`

func TestBoto3Alarms(t *testing.T) {
	forEachBoto3(t, func(t *testing.T, tc boto3Client) {
		s := openTest(t, t.TempDir(), newClock(t0), func(o *Options) { o.AlarmInterval = time.Hour })
		url, protocols := countingServer(t, s)
		outb := tc.run(t, botoAlarmScript, url)
		spoke(t, protocols(), tc.protocol, tc.what)
		var got struct {
			Alarms   [][]any  `json:"alarms"`
			Alarming []any    `json:"alarming"`
			History  []string `json:"history"`
			Err      []any    `json:"err"`
			NotFound []any    `json:"notfound"`
			Left     int      `json:"left"`
		}
		if err := json.Unmarshal(outb, &got); err != nil {
			t.Fatalf("%s printed %q", tc.what, outb)
		}
		pager := []any{"arn:aws:sns:us-east-1:000000000000:pager"}
		want := fmt.Sprint([][]any{{"errors-0", "INSUFFICIENT_DATA", 0.5, 2.0, pager, 2026.0},
			{"errors-1", "ALARM", 0.5, 2.0, pager, 2026.0}, {"errors-2", "INSUFFICIENT_DATA", 0.5, 2.0, pager, 2026.0}})
		if fmt.Sprint(got.Alarms) != want {
			t.Errorf("describe_alarms paginated: %v\nwant %s", got.Alarms, want)
		}
		if fmt.Sprint(got.Alarming) != "[errors-1 0]" {
			t.Errorf("StateValue=ALARM: %v", got.Alarming)
		}
		if fmt.Sprint(got.History) != "[Alarm updated from INSUFFICIENT_DATA to ALARM]" {
			t.Errorf("history: %v", got.History)
		}
		if len(got.Err) != 3 || got.Err[0] != "InvalidParameterValueException" || got.Err[1] != CodeInvalidParameterValue ||
			!strings.Contains(fmt.Sprint(got.Err[2]), "Period") {
			t.Errorf("Period 45: %v", got.Err)
		}
		if fmt.Sprint(got.NotFound) != "[ResourceNotFound ResourceNotFound 404]" {
			t.Errorf("set_alarm_state of no alarm: %v", got.NotFound)
		}
		if got.Left != 0 {
			t.Errorf("%d alarms left after delete_alarms", got.Left)
		}
	})
}
