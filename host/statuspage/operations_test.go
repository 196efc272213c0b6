package statuspage

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestOperationsSections: the alarms (in ALARM first, then by name; the
// page lists 100 and says how many more status.json has) and the scaling
// targets with their latest activities, newest first and at most 10, in
// the page and in status.json; names are escaped; without sources neither
// section is there.
func TestOperationsSections(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var alarms []Alarm
	for i := range 120 {
		alarms = append(alarms, Alarm{Name: fmt.Sprintf("a%03d", i), State: "OK", Metric: "AWS/SageMaker Invocations", Condition: "Sum > 1", Updated: t0})
	}
	alarms[50].State, alarms[70].State = "ALARM", "INSUFFICIENT_DATA"
	alarms[0].Name = `<script>x</script>`
	var acts []ScalingActivity
	for i := range 15 {
		acts = append(acts, ScalingActivity{Start: t0.Add(time.Duration(i) * time.Minute), Status: "Successful",
			Description: fmt.Sprintf("Setting desired instance count to %d.", i), Cause: "monitor alarm TargetTracking-x-AlarmHigh"})
	}
	p := New(Options{
		Alarms: func() []Alarm { return append([]Alarm(nil), alarms...) },
		Scaling: func() []ScalingTarget {
			return []ScalingTarget{
				{ResourceID: "inference-component/ic", Dimension: "sagemaker:inference-component:DesiredCopyCount", Min: 0, Max: 4, Current: -1},
				{ResourceID: "endpoint/ep/variant/AllTraffic", Dimension: "sagemaker:variant:DesiredInstanceCount", Min: 1, Max: 3, Current: 2,
					Policies: []string{"tt"}, Activities: append([]ScalingActivity(nil), acts...)},
			}
		},
	})
	var rep Report
	if err := json.Unmarshal([]byte(serve(t, p, "/status.json", false)), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Alarms) != 120 || rep.Alarms[0].Name != "a050" || rep.Alarms[1].Name != "a070" || rep.Alarms[2].Name != `<script>x</script>` || rep.Alarms[3].Name != "a001" { // "<" sorts before "a"
		t.Fatalf("alarms: %d, first %v", len(rep.Alarms), rep.Alarms[:3])
	}
	if len(rep.Scaling) != 2 || rep.Scaling[0].ResourceID != "endpoint/ep/variant/AllTraffic" {
		t.Fatalf("scaling %+v", rep.Scaling)
	}
	if a := rep.Scaling[0].Activities; len(a) != 10 || !a[0].Start.Equal(t0.Add(14*time.Minute)) || !a[9].Start.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("activities: %d, %v … %v", len(a), a[0].Start, a[len(a)-1].Start)
	}
	if rep.Scaling[1].Policies == nil || rep.Scaling[1].Activities == nil {
		t.Errorf("empty lists must be [] in status.json: %+v", rep.Scaling[1])
	}

	page := serve(t, p, "/status", false)
	if n := strings.Count(page, `<tr class="alarm">`); n != 100 || !strings.Contains(page, "20 more in status.json") {
		t.Errorf("%d alarm rows; the page must list 100 and say 20 more", n)
	}
	if strings.Contains(page, "<script>x") || !strings.Contains(page, "&lt;script&gt;x") {
		t.Error("an alarm's name is not escaped")
	}
	if n := strings.Count(page, `<div class="scaling-activity">`); n != 10 {
		t.Errorf("%d activities on the page, want 10", n)
	}
	if !strings.Contains(page, "Setting desired instance count to 14.") || strings.Contains(page, "Setting desired instance count to 4.") {
		t.Error("the page does not show the 10 latest activities")
	}
	if i, j := strings.Index(page, "a050"), strings.Index(page, "a001"); i < 0 || j < 0 || i > j {
		t.Error("the alarm in ALARM is not listed first")
	}

	bare := serve(t, New(Options{}), "/status", false)
	if strings.Contains(bare, `id="alarms"`) || strings.Contains(bare, `id="autoscaling"`) {
		t.Error("a page without sources shows operations sections")
	}
	if js := serve(t, New(Options{}), "/status.json", false); strings.Contains(js, `"Alarms"`) || strings.Contains(js, `"Scaling"`) {
		t.Error("status.json without sources has Alarms or Scaling")
	}
}
