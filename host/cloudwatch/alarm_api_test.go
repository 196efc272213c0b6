package cloudwatch

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func alarmIn(name string, mod func(m map[string]any)) map[string]any {
	m := map[string]any{"AlarmName": name, "Namespace": "AWS/SageMaker", "MetricName": "Invocation5XXErrors",
		"Dimensions": []map[string]string{{"Name": "EndpointName", "Value": "ep"}, {"Name": "VariantName", "Value": "v1"}},
		"Statistic":  "Sum", "Period": 60, "EvaluationPeriods": 1, "Threshold": 0.0, "ComparisonOperator": "GreaterThanThreshold"}
	if mod != nil {
		mod(m)
	}
	return m
}

// TestPutMetricAlarmRefusals: CloudWatch's limits, each refused with its
// code and a message naming the parameter.
func TestPutMetricAlarmRefusals(t *testing.T) {
	s := openTest(t, t.TempDir(), newClock(t0), nil)
	for _, tc := range []struct {
		name string
		mod  func(m map[string]any)
		code string
		msg  string
	}{
		{"no name", func(m map[string]any) { delete(m, "AlarmName") }, CodeMissingParameter, "AlarmName"},
		{"long name", func(m map[string]any) { m["AlarmName"] = strings.Repeat("a", 256) }, CodeInvalidParameterValue, "AlarmName"},
		{"metric math", func(m map[string]any) {
			m["Metrics"] = []map[string]any{{"Id": "e1", "Expression": "m1*2"}}
		}, CodeInvalidParameterValue, "not served"},
		{"period 20", func(m map[string]any) { m["Period"] = 20 }, CodeInvalidParameterValue, "Period must be 10, 30, or a multiple of 60"},
		{"period -60", func(m map[string]any) { m["Period"] = -60 }, CodeInvalidParameterValue, "Period"},
		{"no period", func(m map[string]any) { delete(m, "Period") }, CodeMissingParameter, "Period"},
		{"0 periods", func(m map[string]any) { m["EvaluationPeriods"] = 0 }, CodeInvalidParameterValue, "EvaluationPeriods"},
		{"over a day", func(m map[string]any) { m["EvaluationPeriods"] = 1441 }, CodeInvalidParameterValue, "more than a day"},
		{"absurd periods", func(m map[string]any) { m["EvaluationPeriods"] = 2147483647; m["Period"] = 2147483640 }, CodeInvalidParameterValue, "more than a day"},
		{"M > N", func(m map[string]any) { m["EvaluationPeriods"] = 2; m["DatapointsToAlarm"] = 3 }, CodeInvalidParameterCombination, "DatapointsToAlarm"},
		{"M 0", func(m map[string]any) { m["DatapointsToAlarm"] = 0 }, CodeInvalidParameterValue, "DatapointsToAlarm"},
		{"both statistics", func(m map[string]any) { m["ExtendedStatistic"] = "p99" }, CodeInvalidParameterCombination, "Statistic"},
		{"no statistic", func(m map[string]any) { delete(m, "Statistic") }, CodeInvalidParameterCombination, "Statistic"},
		{"bad statistic", func(m map[string]any) { m["Statistic"] = "Median" }, CodeInvalidParameterValue, "Statistic"},
		{"trimmed mean", func(m map[string]any) { delete(m, "Statistic"); m["ExtendedStatistic"] = "tm90" }, CodeInvalidParameterValue, "not served"},
		{"anomaly band", func(m map[string]any) { m["ComparisonOperator"] = "LessThanLowerOrGreaterThanUpperThreshold" }, CodeInvalidParameterValue, "anomaly detection"},
		{"bad operator", func(m map[string]any) { m["ComparisonOperator"] = "Equal" }, CodeInvalidParameterValue, "ComparisonOperator"},
		{"bad treatment", func(m map[string]any) { m["TreatMissingData"] = "zero" }, CodeInvalidParameterValue, "TreatMissingData"},
		{"no threshold", func(m map[string]any) { delete(m, "Threshold") }, CodeMissingParameter, "Threshold"},
		{"huge threshold", func(m map[string]any) { m["Threshold"] = 1e308 }, "", ""},
		{"bad unit", func(m map[string]any) { m["Unit"] = "Furlongs" }, CodeInvalidParameterValue, "Unit"},
		{"6 actions", func(m map[string]any) {
			m["AlarmActions"] = []string{"arn:1", "arn:2", "arn:3", "arn:4", "arn:5", "arn:6"}
		}, CodeInvalidParameterValue, "AlarmActions"},
		{"not an ARN", func(m map[string]any) { m["OKActions"] = []string{"mailto:x"} }, CodeInvalidParameterValue, "OKActions.member.1"},
		{"31 dimensions", func(m map[string]any) {
			var d []map[string]string
			for i := range 31 {
				d = append(d, map[string]string{"Name": fmt.Sprint("d", i), "Value": "v"})
			}
			m["Dimensions"] = d
		}, CodeInvalidParameterValue, "Dimensions"},
		{"long description", func(m map[string]any) { m["AlarmDescription"] = strings.Repeat("d", 1025) }, CodeInvalidParameterValue, "AlarmDescription"},
		{"empty tag key", func(m map[string]any) { m["Tags"] = []map[string]string{{"Key": "", "Value": "v"}} }, CodeInvalidParameterValue, "Tags"},
		{"string period", func(m map[string]any) { m["Period"] = "60" }, CodeSerialization, "Period"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, _ := callJSON(t, s, "PutMetricAlarm", alarmIn("a", tc.mod))
			if tc.code == "" {
				if code != http.StatusOK {
					t.Fatalf("%d %v, want 200", code, out)
				}
				return
			}
			msg, _ := out["message"].(string)
			if code != http.StatusBadRequest || !strings.HasSuffix(fmt.Sprint(out["__type"]), "#"+typeOf(tc.code)) || !strings.Contains(msg, tc.msg) {
				t.Errorf("%d %v, want 400 %s mentioning %q", code, out, tc.code, tc.msg)
			}
		})
	}
}

func typeOf(code string) string {
	switch code {
	case CodeInvalidParameterValue:
		return "InvalidParameterValueException"
	case CodeInvalidParameterCombination:
		return "InvalidParameterCombinationException"
	case CodeMissingParameter:
		return "MissingRequiredParameterException"
	}
	return code
}

func alarmNames(t testing.TB, out map[string]any) []string {
	t.Helper()
	var names []string
	for _, a := range out["MetricAlarms"].([]any) {
		names = append(names, a.(map[string]any)["AlarmName"].(string))
	}
	return names
}

// TestAlarmsLifecycle: create, update (state kept, configuration
// replaced, tags of an update ignored), describe with every filter and
// page, SetAlarmState until the next evaluation, history, delete.
func TestAlarmsLifecycle(t *testing.T) {
	c := newClock(t0)
	s := openTest(t, t.TempDir(), c, func(o *Options) { o.AlarmInterval = time.Hour })
	for i := range 7 {
		okJSON(t, s, "PutMetricAlarm", alarmIn(fmt.Sprintf("ep-%d", i), func(m map[string]any) {
			if i%2 == 0 {
				m["AlarmActions"] = []string{"arn:aws:sns:us-east-1:000000000000:pager"}
			}
			m["Tags"] = []map[string]string{{"Key": "team", "Value": "ml"}}
		}))
	}
	okJSON(t, s, "PutMetricAlarm", alarmIn("other", nil))
	out := okJSON(t, s, "DescribeAlarms", map[string]any{"AlarmNames": []string{"ep-3"}})
	a := out["MetricAlarms"].([]any)[0].(map[string]any)
	if a["StateValue"] != "INSUFFICIENT_DATA" || a["StateReason"] != "Unchecked: Initial alarm creation" ||
		a["AlarmArn"] != "arn:aws:cloudwatch:us-east-1:000000000000:alarm:ep-3" || a["ActionsEnabled"] != true ||
		a["TreatMissingData"] != "missing" || a["Period"] != 60.0 || len(out["CompositeAlarms"].([]any)) != 0 {
		t.Errorf("DescribeAlarms ep-3: %v", out)
	}
	if got := alarmNames(t, okJSON(t, s, "DescribeAlarms", map[string]any{"AlarmNamePrefix": "ep-", "ActionPrefix": "arn:aws:sns:"})); fmt.Sprint(got) != "[ep-0 ep-2 ep-4 ep-6]" {
		t.Errorf("prefix and action prefix: %v", got)
	}
	if got := okJSON(t, s, "DescribeAlarms", map[string]any{"AlarmTypes": []string{"CompositeAlarm"}}); len(got["MetricAlarms"].([]any)) != 0 {
		t.Errorf("composite only: %v", got)
	}
	// Pages of 3.
	var all []string
	var tok any
	for pages := 0; ; pages++ {
		in := map[string]any{"MaxRecords": 3}
		if tok != nil {
			in["NextToken"] = tok
		}
		out := okJSON(t, s, "DescribeAlarms", in)
		all = append(all, alarmNames(t, out)...)
		if tok = out["NextToken"]; tok == nil {
			break
		}
	}
	if len(all) != 8 || all[7] != "other" {
		t.Errorf("paged: %v", all)
	}

	// SetAlarmState holds until the next evaluation changes it.
	okJSON(t, s, "SetAlarmState", map[string]any{"AlarmName": "ep-1", "StateValue": "ALARM", "StateReason": "testing the pager",
		"StateReasonData": `{"by":"test"}`})
	if got := alarmNames(t, okJSON(t, s, "DescribeAlarms", map[string]any{"StateValue": "ALARM"})); fmt.Sprint(got) != "[ep-1]" {
		t.Errorf("StateValue ALARM: %v", got)
	}
	h := mustSeries(t, s, "AWS/SageMaker", "Invocation5XXErrors", epDims, "None", Standard)
	h.Observe(0)
	c.Add(10 * time.Second)
	s.EvaluateAlarms()
	if st := stateOf(t, s, "ep-1"); st != StateOK {
		t.Errorf("after an evaluation with no error: %s, want OK", st)
	}

	// An update keeps the state, replaces the configuration, ignores tags.
	okJSON(t, s, "PutMetricAlarm", alarmIn("ep-1", func(m map[string]any) {
		m["Threshold"] = 3.0
		m["Tags"] = []map[string]string{{"Key": "x", "Value": "y"}}
	}))
	a = okJSON(t, s, "DescribeAlarms", map[string]any{"AlarmNames": []string{"ep-1"}})["MetricAlarms"].([]any)[0].(map[string]any)
	if a["StateValue"] != "OK" || a["Threshold"] != 3.0 {
		t.Errorf("updated: %v", a)
	}
	if tags := s.al.byName["ep-1"].tags; len(tags) != 1 || tags[0].Key != "team" {
		t.Errorf("tags after an update: %v", tags)
	}

	// History: newest first; filtered by type; paged.
	hist := okJSON(t, s, "DescribeAlarmHistory", map[string]any{"AlarmName": "ep-1"})
	var kinds []string
	for _, it := range hist["AlarmHistoryItems"].([]any) {
		m := it.(map[string]any)
		kinds = append(kinds, m["HistoryItemType"].(string)+":"+m["HistorySummary"].(string))
	}
	want := `[ConfigurationUpdate:Alarm "ep-1" updated StateUpdate:Alarm updated from ALARM to OK StateUpdate:Alarm updated from INSUFFICIENT_DATA to ALARM ConfigurationUpdate:Alarm "ep-1" created]`
	if fmt.Sprint(kinds) != want {
		t.Errorf("history %v\nwant %s", kinds, want)
	}
	st := okJSON(t, s, "DescribeAlarmHistory", map[string]any{"HistoryItemType": "StateUpdate", "MaxRecords": 1, "ScanBy": "TimestampAscending"})
	items := st["AlarmHistoryItems"].([]any)
	if len(items) != 1 || !strings.Contains(items[0].(map[string]any)["HistorySummary"].(string), "INSUFFICIENT_DATA to ALARM") || st["NextToken"] == nil {
		t.Errorf("first state update: %v", st)
	}
	code, e, _ := callJSON(t, s, "DescribeAlarmHistory", map[string]any{"NextToken": st["NextToken"]})
	if code != 400 || e["__type"] != shapePrefix+"InvalidNextToken" {
		t.Errorf("a token of another request: %d %v", code, e)
	}
	if got := okJSON(t, s, "DescribeAlarmHistory", map[string]any{"EndDate": float64(t0.Unix() - 1)}); len(got["AlarmHistoryItems"].([]any)) != 0 {
		t.Errorf("before anything: %v", got)
	}

	// SetAlarmState of no alarm; bad StateReasonData.
	code, e, _ = callJSON(t, s, "SetAlarmState", map[string]any{"AlarmName": "nope", "StateValue": "OK", "StateReason": "x"})
	if code != 404 || e["__type"] != shapePrefix+"ResourceNotFound" {
		t.Errorf("SetAlarmState of no alarm: %d %v", code, e)
	}
	code, e, _ = callJSON(t, s, "SetAlarmState", map[string]any{"AlarmName": "ep-1", "StateValue": "OK", "StateReason": "x", "StateReasonData": "{"})
	if code != 400 || e["__type"] != shapePrefix+"InvalidFormatFault" {
		t.Errorf("StateReasonData not JSON: %d %v", code, e)
	}

	// Delete: unknown names are passed over.
	okJSON(t, s, "DeleteAlarms", map[string]any{"AlarmNames": []string{"ep-0", "ep-1", "nope"}})
	if n := len(s.Alarms()); n != 6 {
		t.Errorf("%d alarms after deleting 2", n)
	}
}

// TestAlarmsHostile: the 5,001st alarm, huge and forged tokens, oversized
// lists.
func TestAlarmsHostile(t *testing.T) {
	c := newClock(t0)
	s := openTest(t, t.TempDir(), c, func(o *Options) { o.AlarmInterval = time.Hour })
	for i := range defaultMaxAlarms {
		if _, e := s.putMetricAlarm(mustPut(alarmIn(fmt.Sprintf("a%05d", i), nil))); e != nil {
			t.Fatal(e)
		}
	}
	code, out, _ := callJSON(t, s, "PutMetricAlarm", alarmIn("one-more", nil))
	if code != 400 || out["__type"] != shapePrefix+"LimitExceededFault" || !strings.Contains(fmt.Sprint(out["message"]), "5000") {
		t.Errorf("the 5,001st alarm: %d %v", code, out)
	}
	// Updating one of the 5,000 is still allowed.
	okJSON(t, s, "PutMetricAlarm", alarmIn("a00042", func(m map[string]any) { m["Threshold"] = 9.0 }))
	s.EvaluateAlarms() // its cost is BenchmarkEvaluateAlarms
	if n := len(okJSON(t, s, "DescribeAlarms", map[string]any{"StateValue": "OK"})["MetricAlarms"].([]any)); n != 0 {
		t.Errorf("after an evaluation with no data: %d OK alarms, want none (missing data: INSUFFICIENT_DATA)", n)
	}

	for _, tok := range []string{strings.Repeat("A", 1<<19), "%%%", nameToken(strings.Repeat("x", 300)), ""} {
		for _, op := range []string{"DescribeAlarms", "DescribeAlarmHistory"} {
			code, out, _ := callJSON(t, s, op, map[string]any{"NextToken": tok})
			if code != 400 || out["__type"] != shapePrefix+"InvalidNextToken" {
				t.Errorf("%s with a token of %d bytes: %d %v", op, len(tok), code, out)
			}
		}
	}
	names := make([]string, 101)
	for i := range names {
		names[i] = "a"
	}
	for _, op := range []string{"DescribeAlarms", "DeleteAlarms"} {
		if code, out, _ := callJSON(t, s, op, map[string]any{"AlarmNames": names}); code != 400 || !strings.Contains(fmt.Sprint(out["message"]), "100") {
			t.Errorf("%s of 101 names: %d %v", op, code, out)
		}
	}
	if code, _, _ := callJSON(t, s, "DescribeAlarms", map[string]any{"MaxRecords": 101}); code != 400 {
		t.Errorf("MaxRecords 101: %d", code)
	}
}

// mustPut decodes a JSON input as the wire would.
func mustPut(m map[string]any) *putMetricAlarmInput {
	b, _ := jsonMarshal(m)
	var in putMetricAlarmInput
	if e := decodeJSON(b, &in); e != nil {
		panic(e)
	}
	return &in
}

// TestAlarmsSurviveRestart: alarms, their state, tags and history come
// back after Close and Open; a corrupt file is moved aside, not fatal.
func TestAlarmsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	c := newClock(t0)
	s := openTest(t, dir, c, func(o *Options) { o.AlarmInterval = time.Hour })
	okJSON(t, s, "PutMetricAlarm", alarmIn("kept", func(m map[string]any) {
		m["Tags"] = []map[string]string{{"Key": "k", "Value": "v"}}
		m["AlarmDescription"] = "survives"
	}))
	okJSON(t, s, "PutMetricAlarm", alarmIn("deleted", nil))
	okJSON(t, s, "SetAlarmState", map[string]any{"AlarmName": "kept", "StateValue": "ALARM", "StateReason": "by hand"})
	okJSON(t, s, "DeleteAlarms", map[string]any{"AlarmNames": []string{"deleted"}})
	before := s.Alarms()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A corrupt file and a leftover temporary file beside them.
	if err := os.WriteFile(filepath.Join(dir, alarmDirName, alarmFileName("torn")), []byte(`{"version":1,"alarm":{"AlarmNa`), 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, alarmDirName, ".tmp-123"), []byte("x"), 0o600)

	s2 := openTest(t, dir, c, func(o *Options) { o.AlarmInterval = time.Hour })
	after := s2.Alarms()
	ja, _ := json.Marshal(after)
	jb, _ := json.Marshal(before)
	if string(ja) != string(jb) || len(after) != 1 || after[0].StateValue != StateAlarm {
		t.Errorf("after a restart:\n%s\nbefore:\n%s", ja, jb)
	}
	if st := s2.Stats(); st.AlarmFilesQuarantined != 1 || st.Alarms != 1 {
		t.Errorf("stats %+v", st)
	}
	hist := okJSON(t, s2, "DescribeAlarmHistory", map[string]any{"AlarmName": "kept"})
	if n := len(hist["AlarmHistoryItems"].([]any)); n != 2 {
		t.Errorf("history after a restart: %d items, want 2", n)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, alarmDirName))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 2 || !strings.Contains(strings.Join(names, " "), ".corrupt-") {
		t.Errorf("files: %v", names)
	}
}

// TestAlarmsOverQuery: the query protocol's forms and XML.
func TestAlarmsOverQuery(t *testing.T) {
	s := openTest(t, t.TempDir(), newClock(t0), nil)
	post := func(form url.Values) (int, string) {
		form.Set("Version", APIVersion)
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", contentTypeForm)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	code, body := post(url.Values{"Action": {"PutMetricAlarm"}, "AlarmName": {"q"}, "Namespace": {"AWS/SageMaker"},
		"MetricName": {"ModelLatency"}, "Dimensions.member.1.Name": {"EndpointName"}, "Dimensions.member.1.Value": {"ep"},
		"ExtendedStatistic": {"p99"}, "Period": {"60"}, "EvaluationPeriods": {"3"}, "DatapointsToAlarm": {"2"},
		"Threshold": {"2.5e5"}, "ComparisonOperator": {"GreaterThanOrEqualToThreshold"}, "TreatMissingData": {"ignore"},
		"AlarmActions.member.1": {"arn:aws:sns:us-east-1:000000000000:t"}, "ActionsEnabled": {"false"}})
	if code != 200 || !strings.Contains(body, "<PutMetricAlarmResponse") {
		t.Fatalf("%d %s", code, body)
	}
	code, body = post(url.Values{"Action": {"DescribeAlarms"}, "AlarmNames.member.1": {"q"}})
	for _, want := range []string{"<ExtendedStatistic>p99</ExtendedStatistic>", "<Threshold>250000</Threshold>", "<DatapointsToAlarm>2</DatapointsToAlarm>",
		"<ActionsEnabled>false</ActionsEnabled>", "<AlarmActions><member>arn:aws:sns:us-east-1:000000000000:t</member></AlarmActions>",
		"<StateValue>INSUFFICIENT_DATA</StateValue>", "<CompositeAlarms></CompositeAlarms>"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("DescribeAlarms lacks %s: %d %s", want, code, body)
		}
	}
	code, body = post(url.Values{"Action": {"PutMetricAlarm"}, "AlarmName": {"q"}, "Threshold": {"NaN"}})
	if code != 400 || !strings.Contains(body, "<Code>InvalidParameterValue</Code>") || !strings.Contains(body, "Threshold") {
		t.Errorf("Threshold NaN: %d %s", code, body)
	}
	code, body = post(url.Values{"Action": {"DescribeAlarmHistory"}, "AlarmName": {"q"}, "StartDate": {t0.Add(-time.Hour).Format(time.RFC3339)}})
	if code != 200 || !strings.Contains(body, "<HistoryItemType>ConfigurationUpdate</HistoryItemType>") {
		t.Errorf("DescribeAlarmHistory: %d %s", code, body)
	}
	code, body = post(url.Values{"Action": {"SetAlarmState"}, "AlarmName": {"nope"}, "StateValue": {"OK"}, "StateReason": {"x"}})
	if code != 404 || !strings.Contains(body, "<Code>ResourceNotFound</Code>") {
		t.Errorf("SetAlarmState of no alarm: %d %s", code, body)
	}
	code, body = post(url.Values{"Action": {"DeleteAlarms"}, "AlarmNames.member.1": {"q"}})
	if code != 200 || len(s.Alarms()) != 0 {
		t.Errorf("DeleteAlarms: %d %s", code, body)
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
