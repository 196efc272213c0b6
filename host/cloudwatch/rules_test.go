package cloudwatch

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// TestGetMetricStatisticsRules: the period rules, the time window, the
// 1,440-datapoint limit, the statistics' forms and the required members,
// each refused with CloudWatch's code.
func TestGetMetricStatisticsRules(t *testing.T) {
	c := newClock(t0)
	s := openTest(t, t.TempDir(), c, nil)
	hour := t0.Add(time.Hour)
	for _, tc := range []struct {
		name       string
		mod        func(m map[string]any)
		code, text string // "" code: accepted
	}{
		{"period 60", func(m map[string]any) {}, "", ""},
		{"period 1", func(m map[string]any) { m["Period"] = 1; m["EndTime"] = float64(t0.Add(10 * time.Minute).Unix()) }, "", ""},
		{"period 5", func(m map[string]any) { m["Period"] = 5 }, "", ""},
		{"period 10", func(m map[string]any) { m["Period"] = 10 }, "", ""},
		{"period 20", func(m map[string]any) { m["Period"] = 20 }, "", ""},
		{"period 30", func(m map[string]any) { m["Period"] = 30 }, "", ""},
		{"period 300", func(m map[string]any) { m["Period"] = 300 }, "", ""},
		{"period 86400", func(m map[string]any) { m["Period"] = 86400 }, "", ""},
		{"period 61", func(m map[string]any) { m["Period"] = 61 }, CodeInvalidParameterValue, "Period must be 1, 5, 10, 20, 30, or a multiple of 60"},
		{"period 90", func(m map[string]any) { m["Period"] = 90 }, CodeInvalidParameterValue, "Period"},
		{"period 7", func(m map[string]any) { m["Period"] = 7 }, CodeInvalidParameterValue, "Period"},
		{"period 0", func(m map[string]any) { m["Period"] = 0 }, CodeInvalidParameterValue, "Period"},
		{"period -60", func(m map[string]any) { m["Period"] = -60 }, CodeInvalidParameterValue, "Period"},
		{"period not a number", func(m map[string]any) { m["Period"] = "60" }, CodeSerialization, "Period"},
		{"start equals end", func(m map[string]any) { m["EndTime"] = m["StartTime"] }, CodeInvalidParameterValue, "The parameter StartTime must be less than the parameter EndTime."},
		{"start after end", func(m map[string]any) { m["StartTime"] = float64(hour.Add(time.Minute).Unix()) }, CodeInvalidParameterValue, "StartTime must be less than"},
		{"1440 per minute", func(m map[string]any) { m["EndTime"] = float64(t0.Add(24 * time.Hour).Unix()) }, "", ""},
		{"1441 per minute", func(m map[string]any) { m["EndTime"] = float64(t0.Add(24*time.Hour + time.Minute).Unix()) }, CodeInvalidParameterCombination,
			"You have requested up to 1441 datapoints, which exceeds the limit of 1440. You may reduce the datapoints requested by increasing Period, or decreasing the time range."},
		{"years at one second", func(m map[string]any) {
			m["Period"] = 1
			m["StartTime"] = float64(t0.AddDate(-30, 0, 0).Unix())
		}, CodeInvalidParameterCombination, "exceeds the limit of 1440"},
		{"years per day", func(m map[string]any) {
			m["Period"] = 86400 * 30
			m["StartTime"] = float64(t0.AddDate(-30, 0, 0).Unix())
		}, "", ""},
		{"timestamp beyond range", func(m map[string]any) { m["EndTime"] = 1e300 }, CodeSerialization, "timestamp"},
		{"no statistics", func(m map[string]any) { delete(m, "Statistics") }, CodeInvalidParameterCombination, "Must specify either Statistics or ExtendedStatistics."},
		{"both kinds", func(m map[string]any) { m["ExtendedStatistics"] = []string{"p99"} }, CodeInvalidParameterCombination, "mutually exclusive"},
		{"unknown statistic", func(m map[string]any) { m["Statistics"] = []string{"Sum", "Median"} }, CodeInvalidParameterValue,
			"The parameter Statistics.member.2 must be a value in the set [ SampleCount, Average, Sum, Minimum, Maximum ]."},
		{"six statistics", func(m map[string]any) {
			m["Statistics"] = []string{"Sum", "Sum", "Sum", "Sum", "Sum", "Sum"}
		}, CodeInvalidParameterValue, "Statistics must not have a size greater than 5"},
		{"percentiles", func(m map[string]any) {
			delete(m, "Statistics")
			m["ExtendedStatistics"] = []string{"p0", "p0.0", "p50", "p99.99", "p100"}
		}, "", ""},
		{"p101", func(m map[string]any) { delete(m, "Statistics"); m["ExtendedStatistics"] = []string{"p101"} }, CodeInvalidParameterValue, "ExtendedStatistics.member.1"},
		{"p-1", func(m map[string]any) { delete(m, "Statistics"); m["ExtendedStatistics"] = []string{"p-1"} }, CodeInvalidParameterValue, "p0.0 and p100"},
		{"P99", func(m map[string]any) { delete(m, "Statistics"); m["ExtendedStatistics"] = []string{"P99"} }, CodeInvalidParameterValue, "p0.0 and p100"},
		{"trimmed mean", func(m map[string]any) { delete(m, "Statistics"); m["ExtendedStatistics"] = []string{"tm99"} }, CodeInvalidParameterValue, "mce computes percentiles (p0.0 to p100) only"},
		{"TM range", func(m map[string]any) { delete(m, "Statistics"); m["ExtendedStatistics"] = []string{"TM(10%:90%)"} }, CodeInvalidParameterValue, "not served"},
		{"eleven percentiles", func(m map[string]any) {
			delete(m, "Statistics")
			m["ExtendedStatistics"] = strings.Split("p1 p2 p3 p4 p5 p6 p7 p8 p9 p10 p11", " ")
		}, CodeInvalidParameterValue, "ExtendedStatistics must not have a size greater than 10"},
		{"unit", func(m map[string]any) { m["Unit"] = "Count/Second" }, "", ""},
		{"bad unit", func(m map[string]any) { m["Unit"] = "Furlongs" }, CodeInvalidParameterValue, "The parameter Unit must be a value in the set"},
		{"no namespace", func(m map[string]any) { delete(m, "Namespace") }, CodeMissingParameter, "The parameter Namespace is required."},
		{"no metric name", func(m map[string]any) { delete(m, "MetricName") }, CodeMissingParameter, "The parameter MetricName is required."},
		{"no start", func(m map[string]any) { delete(m, "StartTime") }, CodeMissingParameter, "StartTime"},
		{"no end", func(m map[string]any) { delete(m, "EndTime") }, CodeMissingParameter, "EndTime"},
		{"no period", func(m map[string]any) { delete(m, "Period") }, CodeMissingParameter, "Period"},
		{"namespace with colon", func(m map[string]any) { m["Namespace"] = ":x" }, CodeInvalidParameterValue, "Namespace"},
		{"long metric name", func(m map[string]any) { m["MetricName"] = strings.Repeat("m", 256) }, CodeInvalidParameterValue, "MetricName"},
		{"31 dimensions", func(m map[string]any) {
			var d []map[string]string
			for i := range 31 {
				d = append(d, map[string]string{"Name": fmt.Sprint("n", i), "Value": "v"})
			}
			m["Dimensions"] = d
		}, CodeInvalidParameterValue, "Dimensions must not have a size greater than 30"},
		{"empty dimension value", func(m map[string]any) {
			m["Dimensions"] = []map[string]string{{"Name": "EndpointName", "Value": ""}}
		}, CodeInvalidParameterValue, "Dimensions.member.1.Value"},
		{"dimension twice", func(m map[string]any) {
			m["Dimensions"] = []map[string]string{{"Name": "A", "Value": "1"}, {"Name": "A", "Value": "2"}}
		}, CodeInvalidParameterValue, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := gms(t0, hour, 60, []string{"Sum"}, nil)
			tc.mod(m)
			code, out, hdr := callJSON(t, s, "GetMetricStatistics", m)
			if tc.code == "" {
				if code != http.StatusOK {
					t.Fatalf("%d %v, want 200", code, out)
				}
				return
			}
			if code != http.StatusBadRequest {
				t.Fatalf("%d %v, want 400", code, out)
			}
			gotCode := strings.TrimSuffix(hdr.Get(headerQueryErr), ";Sender")
			if gotCode == "" {
				gotCode = strings.TrimPrefix(out["__type"].(string), shapePrefix)
			}
			if gotCode != tc.code || !strings.Contains(fmt.Sprint(out["message"]), tc.text) {
				t.Errorf("got %s %q, want %s containing %q", gotCode, out["message"], tc.code, tc.text)
			}
		})
	}
}

// TestWindowAlignment: StartTime is rounded down to the minute (periods of
// a minute or more) or to the period; EndTime is exclusive.
func TestWindowAlignment(t *testing.T) {
	for _, tc := range []struct {
		start, end time.Time
		period     int32
		from, to   int64
		periods    int64
	}{
		{t0.Add(32 * time.Second), t0.Add(5 * time.Minute), 60, t0.Unix(), t0.Unix() + 300, 5},
		{t0.Add(32 * time.Second), t0.Add(5 * time.Minute), 300, t0.Unix(), t0.Unix() + 300, 1},
		{t0.Add(90 * time.Second), t0.Add(11 * time.Minute), 300, t0.Unix() + 60, t0.Unix() + 660, 2},
		{t0.Add(23 * time.Second), t0.Add(time.Minute), 10, t0.Unix() + 20, t0.Unix() + 60, 4},
		{t0.Add(23 * time.Second), t0.Add(time.Minute), 5, t0.Unix() + 20, t0.Unix() + 60, 8},
		{t0, t0.Add(59*time.Second + 500*time.Millisecond), 60, t0.Unix(), t0.Unix() + 60, 1},
	} {
		w := windowOf(tc.start, tc.end, tc.period)
		if w.from != tc.from || w.to != tc.to || w.periods() != tc.periods {
			t.Errorf("windowOf(%v, %v, %d) = %+v (%d periods), want from %d to %d, %d periods",
				tc.start, tc.end, tc.period, w, w.periods(), tc.from, tc.to, tc.periods)
		}
	}
	// A value at the end's second is outside; at the start's inside.
	c := newClock(t0)
	s := openTest(t, t.TempDir(), c, nil)
	h := mustSeries(t, s, "AWS/SageMaker", "ModelLatency", epDims, "None", Standard)
	h.Observe(1)
	c.Set(t0.Add(time.Minute))
	s.Flush()
	h.Observe(100)
	dps := datapoints(t, okJSON(t, s, "GetMetricStatistics", gms(t0, t0.Add(time.Minute), 60, []string{"Sum"}, nil)))
	if len(dps) != 1 || dps[0]["Sum"] != 1.0 {
		t.Errorf("[t0, t0+1m): %v, want only the first minute", dps)
	}
}

// TestGetMetricDataRules: labels, ReturnData, ScanBy, MaxDatapoints and
// NextToken paging with PartialData, and CloudWatch's refusals.
func TestGetMetricDataRules(t *testing.T) {
	c := newClock(t0)
	s := openTest(t, t.TempDir(), c, nil)
	h := mustSeries(t, s, "AWS/SageMaker", "Invocations", epDims, "Count", Standard)
	for m := range 5 {
		c.Set(t0.Add(time.Duration(m) * time.Minute))
		s.Flush()
		h.Observe(float64(m + 1))
	}
	stat := func(stat string) map[string]any {
		return map[string]any{"Metric": map[string]any{"Namespace": "AWS/SageMaker", "MetricName": "Invocations",
			"Dimensions": []map[string]string{{"Name": "VariantName", "Value": "v1"}, {"Name": "EndpointName", "Value": "ep"}}},
			"Period": 60, "Stat": stat}
	}
	in := map[string]any{
		"StartTime": t0.Unix(), "EndTime": t0.Add(5 * time.Minute).Unix(),
		"MetricDataQueries": []map[string]any{
			{"Id": "a", "MetricStat": stat("Sum"), "Label": "calls"},
			{"Id": "hidden", "MetricStat": stat("Sum"), "ReturnData": false},
			{"Id": "b", "MetricStat": stat("p50")},
		},
	}
	out := okJSON(t, s, "GetMetricData", in)
	res := out["MetricDataResults"].([]any)
	if len(res) != 2 {
		t.Fatalf("%d results, want 2 (ReturnData false is not returned)", len(res))
	}
	a := res[0].(map[string]any)
	if a["Id"] != "a" || a["Label"] != "calls" || fmt.Sprint(a["Values"]) != "[5 4 3 2 1]" || a["StatusCode"] != "Complete" {
		t.Errorf("first result (newest first by default): %v", a)
	}
	if b := res[1].(map[string]any); b["Label"] != "Invocations" || fmt.Sprint(b["Values"]) != "[5 4 3 2 1]" {
		t.Errorf("p50 result (default label is the metric name): %v", b)
	}
	if _, ok := out["NextToken"]; ok {
		t.Errorf("a complete answer has no NextToken: %v", out)
	}

	// Paging: 3 datapoints a page over 10 in all.
	in["MaxDatapoints"] = 3
	in["ScanBy"] = "TimestampAscending"
	var all []string
	var pages int
	for {
		out := okJSON(t, s, "GetMetricData", in)
		pages++
		for _, r := range out["MetricDataResults"].([]any) {
			r := r.(map[string]any)
			all = append(all, fmt.Sprint(r["Id"], r["Values"], r["StatusCode"]))
		}
		tok, ok := out["NextToken"]
		if !ok {
			break
		}
		in["NextToken"] = tok
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	want := "[a[1 2 3]PartialData b[]PartialData a[4 5]Complete b[1]PartialData a[]Complete b[2 3 4]PartialData a[]Complete b[5]Complete]"
	if fmt.Sprint(all) != want || pages != 4 {
		t.Errorf("pages %d: %v\nwant %s", pages, all, want)
	}

	in["NextToken"] = "bm90IGEgdG9rZW4"
	if code, out, hdr := callJSON(t, s, "GetMetricData", in); code != 400 || hdr.Get(headerQueryErr) != "InvalidNextToken;Sender" {
		t.Errorf("a token that is not ours: %d %v", code, out)
	}
	delete(in, "NextToken")
	tok := okJSON(t, s, "GetMetricData", in)["NextToken"]
	in["MaxDatapoints"] = 4
	in["NextToken"] = tok
	if code, out, _ := callJSON(t, s, "GetMetricData", in); code != 400 {
		t.Errorf("a token of another request: %d %v", code, out)
	}
	delete(in, "NextToken")

	for _, tc := range []struct {
		name string
		mod  func(m map[string]any)
		text string
	}{
		{"expression", func(m map[string]any) {
			m["MetricDataQueries"] = []map[string]any{{"Id": "e", "Expression": "m1/m2"}}
		}, "mce does not evaluate metric math"},
		{"both", func(m map[string]any) {
			m["MetricDataQueries"] = []map[string]any{{"Id": "e", "Expression": "m1", "MetricStat": stat("Sum")}}
		}, "exactly one of MetricStat and Expression"},
		{"bad id", func(m map[string]any) {
			m["MetricDataQueries"] = []map[string]any{{"Id": "A1", "MetricStat": stat("Sum")}}
		}, "Id is invalid"},
		{"same id", func(m map[string]any) {
			m["MetricDataQueries"] = []map[string]any{{"Id": "a", "MetricStat": stat("Sum")}, {"Id": "a", "MetricStat": stat("Sum")}}
		}, "not unique"},
		{"bad stat", func(m map[string]any) {
			m["MetricDataQueries"] = []map[string]any{{"Id": "a", "MetricStat": stat("Median")}}
		}, "is not a valid statistic"},
		{"bad period", func(m map[string]any) {
			st := stat("Sum")
			st["Period"] = 45
			m["MetricDataQueries"] = []map[string]any{{"Id": "a", "MetricStat": st}}
		}, "Period must be 1, 5, 10, 20, 30, or a multiple of 60"},
		{"501 queries", func(m map[string]any) {
			var q []map[string]any
			for i := range 501 {
				q = append(q, map[string]any{"Id": fmt.Sprint("q", i), "MetricStat": stat("Sum")})
			}
			m["MetricDataQueries"] = q
		}, "must not have a size greater than 500"},
		{"start equals end", func(m map[string]any) { m["EndTime"] = m["StartTime"] }, "The parameter StartTime must not equal parameter EndTime."},
		{"bad scan", func(m map[string]any) { m["ScanBy"] = "Sideways" }, "ScanBy"},
		{"zero max", func(m map[string]any) { m["MaxDatapoints"] = 0 }, "MaxDatapoints"},
	} {
		m := map[string]any{"StartTime": t0.Unix(), "EndTime": t0.Add(5 * time.Minute).Unix(),
			"MetricDataQueries": []map[string]any{{"Id": "a", "MetricStat": stat("Sum")}}}
		tc.mod(m)
		code, out, hdr := callJSON(t, s, "GetMetricData", m)
		if code != 400 || hdr.Get(headerQueryErr) != "ValidationError;Sender" || !strings.Contains(fmt.Sprint(out["message"]), tc.text) {
			t.Errorf("%s: %d %v %v, want ValidationError containing %q", tc.name, code, hdr.Get(headerQueryErr), out, tc.text)
		}
	}
}

// TestListMetricsFilters: namespace, name and dimension filters (a name
// alone matches any value), RecentlyActive, and a metric with two units
// listed once.
func TestListMetricsFilters(t *testing.T) {
	c := newClock(t0)
	s := openTest(t, t.TempDir(), c, nil)
	obs := func(ns, name string, dims []Dimension, unit string) {
		mustSeries(t, s, ns, name, dims, unit, Standard).Observe(1)
	}
	obs("AWS/SageMaker", "Invocations", epDims, "Count")
	obs("AWS/SageMaker", "Invocations", []Dimension{{"EndpointName", "ep"}, {"VariantName", "v2"}}, "Count")
	obs("AWS/SageMaker", "ModelLatency", epDims, "Microseconds")
	obs("AWS/SageMaker", "ModelLatency", epDims, "Milliseconds")
	obs("/aws/sagemaker/Endpoints", "CPUUtilization", epDims, "Percent")
	mustSeries(t, s, "AWS/SageMaker", "NeverObserved", epDims, "Count", Standard)
	c.Set(t0.Add(4 * time.Hour))
	obs("AWS/SageMaker", "Invocation4XXErrors", epDims, "Count")

	count := func(in map[string]any) int {
		out := okJSON(t, s, "ListMetrics", in)
		return len(out["Metrics"].([]any))
	}
	for _, tc := range []struct {
		in   map[string]any
		want int
	}{
		{map[string]any{}, 5},
		{map[string]any{"Namespace": "AWS/SageMaker"}, 4},
		{map[string]any{"Namespace": "AWS/SageMaker", "MetricName": "Invocations"}, 2},
		{map[string]any{"Dimensions": []map[string]any{{"Name": "VariantName", "Value": "v2"}}}, 1},
		{map[string]any{"Dimensions": []map[string]any{{"Name": "VariantName"}}}, 5},
		{map[string]any{"Dimensions": []map[string]any{{"Name": "Nope"}}}, 0},
		{map[string]any{"RecentlyActive": "PT3H"}, 1},
	} {
		if got := count(tc.in); got != tc.want {
			t.Errorf("ListMetrics %v: %d metrics, want %d", tc.in, got, tc.want)
		}
	}
	for _, in := range []map[string]any{
		{"RecentlyActive": "PT1H"},
		{"NextToken": "!!"},
		{"Dimensions": []map[string]any{{"Value": "x"}}},
	} {
		if code, out, _ := callJSON(t, s, "ListMetrics", in); code != 400 {
			t.Errorf("ListMetrics %v: %d %v, want 400", in, code, out)
		}
	}
}

// TestErrorShapesPerProtocol: each protocol writes errors in its own shape:
// JSON and CBOR a __type and message with x-amzn-query-error, the query
// protocol an ErrorResponse; an unknown operation and an authorization
// refusal included.
func TestErrorShapesPerProtocol(t *testing.T) {
	c := newClock(t0)
	s := openTest(t, t.TempDir(), c, func(o *Options) {
		o.Authorize = func(_ ctxT, r *http.Request, action string) error {
			if r.Header.Get("X-Deny") != "" {
				return fmt.Errorf("User: bob is not authorized to perform: %s", action)
			}
			return nil
		}
	})
	send := func(p protocol, op string, body []byte, deny bool) *httptest.ResponseRecorder {
		var req *http.Request
		switch p {
		case protoJSON:
			req = httptest.NewRequest("POST", "/", bytes.NewReader(body))
			req.Header.Set("X-Amz-Target", TargetPrefix+op)
			req.Header.Set("Content-Type", contentTypeJSON)
		case protoCBOR:
			req = httptest.NewRequest("POST", CBORPathPrefix+op, bytes.NewReader(body))
			req.Header.Set("Smithy-Protocol", "rpc-v2-cbor")
			req.Header.Set("Content-Type", contentTypeCBOR)
		case protoQuery:
			req = httptest.NewRequest("POST", "/", bytes.NewReader(body))
			req.Header.Set("Content-Type", contentTypeForm)
		}
		if deny {
			req.Header.Set("X-Deny", "1")
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	cborBody, _ := cbor.Marshal(map[string]any{"Namespace": "AWS/SageMaker", "MetricName": "m", "StartTime": cbor.Tag{Number: 1, Content: t0.Unix()},
		"EndTime": cbor.Tag{Number: 1, Content: float64(t0.Unix()) + 3600.5}, "Period": 61, "Statistics": []string{"Sum"}})
	for _, tc := range []struct {
		p        protocol
		op       string
		body     []byte
		deny     bool
		status   int
		code     string
		contains string
	}{
		{protoJSON, "GetMetricStatistics", []byte(`{"Namespace":"AWS/SageMaker","MetricName":"m","StartTime":1,"EndTime":2,"Period":61,"Statistics":["Sum"]}`), false, 400, "InvalidParameterValue", "Period"},
		{protoCBOR, "GetMetricStatistics", cborBody, false, 400, "InvalidParameterValue", "Period"},
		{protoQuery, "", []byte("Action=GetMetricStatistics&Version=2010-08-01&Namespace=AWS%2FSageMaker&MetricName=m&StartTime=2026-11-28T10:00:00Z&EndTime=2026-11-28T11:00:00Z&Period=61&Statistics.member.1=Sum"), false, 400, "InvalidParameterValue", "Period"},
		{protoJSON, "ListMetrics", []byte(`{}`), true, 403, "AccessDenied", "not authorized to perform: cloudwatch:ListMetrics"},
		{protoCBOR, "ListMetrics", []byte{0xa0}, true, 403, "AccessDenied", "not authorized to perform: cloudwatch:ListMetrics"},
		{protoQuery, "", []byte("Action=ListMetrics&Version=2010-08-01"), true, 403, "AccessDenied", "not authorized to perform: cloudwatch:ListMetrics"},
		{protoJSON, "PutMetricData", []byte(`{}`), false, 400, "UnknownOperationException", "SetAlarmState and DescribeAlarmHistory only"},
		{protoCBOR, "PutMetricData", nil, false, 400, "UnknownOperationException", "not served"},
		{protoQuery, "", []byte("Action=PutMetricData&Version=2010-08-01"), false, 400, "InvalidAction", "not valid"},
		{protoQuery, "", []byte("Action=ListMetrics&Version=2010-08-01&A=1&A=2"), false, 400, "MalformedQueryString", "more than once"},
		{protoJSON, "ListMetrics", []byte(`{"Namespace":`), false, 400, "SerializationException", "JSON"},
		{protoCBOR, "ListMetrics", []byte{0xbf, 0x61}, false, 400, "SerializationException", "CBOR"},
	} {
		rec := send(tc.p, tc.op, tc.body, tc.deny)
		if rec.Code != tc.status {
			t.Errorf("%v %s: status %d, want %d: %s", tc.p, tc.op, rec.Code, tc.status, rec.Body)
			continue
		}
		var code, msg string
		switch tc.p {
		case protoQuery:
			b := rec.Body.String()
			if rec.Header().Get("Content-Type") != "text/xml" || !strings.Contains(b, "<ErrorResponse") || !strings.Contains(b, "<Type>Sender</Type>") {
				t.Errorf("query error: %s", b)
			}
			code = between(b, "<Code>", "</Code>")
			msg = between(b, "<Message>", "</Message>")
		case protoJSON, protoCBOR:
			var m map[string]string
			var err error
			if tc.p == protoJSON {
				err = jsonUnmarshal(rec.Body.Bytes(), &m)
			} else {
				err = cbor.Unmarshal(rec.Body.Bytes(), &m)
				if rec.Header().Get("Smithy-Protocol") != "rpc-v2-cbor" || rec.Header().Get("Content-Type") != "application/cbor" {
					t.Errorf("CBOR error headers: %v", rec.Header())
				}
			}
			if err != nil || !strings.HasPrefix(m["__type"], shapePrefix) {
				t.Errorf("%v error body %q: %v", tc.p, rec.Body.Bytes(), err)
			}
			code, _, _ = strings.Cut(rec.Header().Get(headerQueryErr), ";")
			if code == "" {
				code = strings.TrimPrefix(m["__type"], shapePrefix)
			}
			msg = m["message"]
		}
		if code != tc.code || !strings.Contains(msg, tc.contains) {
			t.Errorf("%v %s: %s %q, want %s containing %q", tc.p, tc.op, code, msg, tc.code, tc.contains)
		}
		if rec.Header().Get(headerRequestID) == "" {
			t.Errorf("%v %s: no x-amzn-RequestId", tc.p, tc.op)
		}
	}
}

func between(s, a, b string) string {
	_, rest, _ := strings.Cut(s, a)
	v, _, _ := strings.Cut(rest, b)
	return v
}

// TestMayBeRequest tells CloudWatch's calls from others by headers and
// path alone; a form of another query-protocol service passes that test and
// is refused by Serve with InvalidAction.
func TestMayBeRequest(t *testing.T) {
	mk := func(method, path string, hdr map[string]string, body string) *http.Request {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		return r
	}
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
	for _, tc := range []struct {
		r    *http.Request
		want bool
	}{
		{mk("POST", "/", map[string]string{"X-Amz-Target": "GraniteServiceVersion20100801.GetMetricData"}, ""), true},
		{mk("POST", "/", map[string]string{"X-Amz-Target": "SageMaker.ListEndpoints"}, ""), false},
		{mk("POST", "/", map[string]string{"X-Amz-Target": "Logs_20140328.FilterLogEvents"}, ""), false},
		{mk("POST", "/service/GraniteServiceVersion20100801/operation/ListMetrics", nil, ""), true},
		{mk("POST", "/service/Other/operation/ListMetrics", nil, ""), false},
		{mk("POST", "/", form, ""), true},
		{mk("POST", "/endpoints/ep/invocations", form, ""), false},
		{mk("GET", "/", form, ""), false},
	} {
		if got := MayBeRequest(tc.r); got != tc.want {
			t.Errorf("MayBeRequest(%s %s %v) = %v", tc.r.Method, tc.r.URL.Path, tc.r.Header, got)
		}
	}
	s := openTest(t, t.TempDir(), newClock(t0), nil)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, mk("POST", "/", form, "Action=GetCallerIdentity&Version=2011-06-15"))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "<Code>InvalidAction</Code>") {
		t.Errorf("STS's form: %d %s, want 400 InvalidAction", w.Code, w.Body)
	}
}
