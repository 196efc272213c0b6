package cloudwatch

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// putAlarm creates an alarm on ModelLatency of epDims (Sum > 5 a minute).
func putAlarm(t testing.TB, s *Service, name string, n, m int, treat string) {
	t.Helper()
	in := map[string]any{"AlarmName": name, "Namespace": "AWS/SageMaker", "MetricName": "ModelLatency",
		"Dimensions": []map[string]string{{"Name": "EndpointName", "Value": "ep"}, {"Name": "VariantName", "Value": "v1"}},
		"Statistic":  "Sum", "Period": 60, "EvaluationPeriods": n, "DatapointsToAlarm": m, "Threshold": 5.0,
		"ComparisonOperator": "GreaterThanThreshold", "TreatMissingData": treat}
	okJSON(t, s, "PutMetricAlarm", in)
}

func stateOf(t testing.TB, s *Service, name string) State {
	t.Helper()
	for _, a := range s.Alarms() {
		if a.AlarmName == name {
			return a.StateValue
		}
	}
	t.Fatalf("no alarm %q", name)
	return ""
}

// replay records one minute per character of row, oldest first ('0' a
// value within the threshold, 'X' one beyond it, '-' nothing), the last
// being the minute now is in.
func replay(t testing.TB, s *Service, c *clock, row string) {
	t.Helper()
	h := mustSeries(t, s, "AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard)
	for i, ch := range strings.ReplaceAll(row, " ", "") {
		c.Set(t0.Add(time.Duration(i)*time.Minute + time.Second))
		s.Flush()
		switch ch {
		case '0':
			h.Observe(1)
		case 'X':
			h.Observe(10)
		}
	}
	c.Add(30 * time.Second)
}

// TestMissingDataTablesOfTheUserGuide: the two tables of the CloudWatch
// user guide's "Configuring how CloudWatch alarms treat missing data"
// (evaluation range of 5 periods; 3 of 3, then 2 of 3), replayed through
// the store, each row under each TreatMissingData. "keep" is the guide's
// "Retain current state", checked from OK and from ALARM.
func TestMissingDataTablesOfTheUserGuide(t *testing.T) {
	const keep = State("keep")
	type row struct {
		points                                   string
		missing, ignore, breaching, notBreaching State
	}
	tables := []struct {
		n, m int
		rows []row
	}{
		{3, 3, []row{
			{"0 - X - X", StateOK, StateOK, StateOK, StateOK},
			{"- - - - 0", StateOK, StateOK, StateOK, StateOK},
			{"- - - - -", StateInsufficientData, keep, StateAlarm, StateOK},
			{"0 X X - X", StateAlarm, StateAlarm, StateAlarm, StateAlarm},
			{"- - X - -", StateAlarm, keep, StateAlarm, StateOK},
		}},
		{3, 2, []row{
			{"0 - X - X", StateAlarm, StateAlarm, StateAlarm, StateAlarm},
			{"0 0 X 0 X", StateAlarm, StateAlarm, StateAlarm, StateAlarm},
			{"0 - X - -", StateOK, StateOK, StateAlarm, StateOK},
			{"- - - - 0", StateOK, StateOK, StateAlarm, StateOK},
			{"- - - X -", StateAlarm, keep, StateAlarm, StateOK},
		}},
	}
	for _, tb := range tables {
		for _, r := range tb.rows {
			for treat, want := range map[string]State{"missing": r.missing, "ignore": r.ignore, "breaching": r.breaching, "notBreaching": r.notBreaching} {
				starts := []State{StateInsufficientData}
				if want == keep {
					starts = []State{StateOK, StateAlarm}
				}
				for _, start := range starts {
					name := fmt.Sprintf("%d of %d [%s] %s from %s", tb.m, tb.n, r.points, treat, start)
					t.Run(name, func(t *testing.T) {
						c := newClock(t0)
						s := openTest(t, t.TempDir(), c, func(o *Options) { o.AlarmInterval = time.Hour })
						putAlarm(t, s, "a", tb.n, tb.m, treat)
						replay(t, s, c, r.points)
						if start != StateInsufficientData {
							okJSON(t, s, "SetAlarmState", map[string]any{"AlarmName": "a", "StateValue": start, "StateReason": "test"})
						}
						s.EvaluateAlarms()
						w := want
						if w == keep {
							w = start
						}
						if got := stateOf(t, s, "a"); got != w {
							t.Errorf("state %s, want %s", got, w)
						}
					})
				}
			}
		}
	}
}

// TestAlarmMOfNOverTime: a 2-of-3 alarm followed minute by minute as a
// series goes bad and recovers, with missing data treated as notBreaching.
func TestAlarmMOfNOverTime(t *testing.T) {
	c := newClock(t0)
	s := openTest(t, t.TempDir(), c, func(o *Options) { o.AlarmInterval = time.Hour })
	putAlarm(t, s, "a", 3, 2, "notBreaching")
	h := mustSeries(t, s, "AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard)
	var changes []string
	s.OnStateChange(func(a Alarm, old, new State) { changes = append(changes, string(old)+">"+string(new)) })
	// Each minute's value ('-' none) and the state expected at its end.
	steps := []struct {
		v    byte
		want State
	}{
		{'0', StateOK}, {'X', StateOK}, {'0', StateOK}, {'X', StateAlarm}, {'X', StateAlarm},
		{'0', StateAlarm}, {'0', StateOK}, {'-', StateOK}, {'X', StateOK}, {'-', StateOK}, {'X', StateAlarm},
	}
	for i, st := range steps {
		c.Set(t0.Add(time.Duration(i)*time.Minute + time.Second))
		s.Flush()
		switch st.v {
		case '0':
			h.Observe(1)
		case 'X':
			h.Observe(10)
		}
		c.Add(50 * time.Second)
		s.EvaluateAlarms()
		if got := stateOf(t, s, "a"); got != st.want {
			t.Fatalf("minute %d (%c): %s, want %s", i, st.v, got, st.want)
		}
	}
	want := "INSUFFICIENT_DATA>OK OK>ALARM ALARM>OK OK>ALARM"
	if got := strings.Join(changes, " "); got != want {
		t.Errorf("hook saw %s, want %s", got, want)
	}
}

// TestAlarmText: the page's one-line views of an alarm's metric and rule.
func TestAlarmText(t *testing.T) {
	s := openTest(t, t.TempDir(), newClock(t0), nil)
	putAlarm(t, s, "text", 3, 2, "notBreaching")
	a := s.Alarms()[0]
	if got, want := a.MetricText(), "AWS/SageMaker ModelLatency EndpointName=ep VariantName=v1"; got != want {
		t.Errorf("MetricText = %q, want %q", got, want)
	}
	if got, want := a.ConditionText(), "Sum > 5 for 2 of 3 periods of 60 s (missing data: notBreaching)"; got != want {
		t.Errorf("ConditionText = %q, want %q", got, want)
	}
}
