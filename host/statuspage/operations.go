package statuspage

import (
	"sort"
	"time"
)

// The page's operations sections: CloudWatch's alarms and Application
// Auto Scaling's targets with their recent activities, each from a source
// in Options (nil: no such section).

// Alarm is one CloudWatch metric alarm as the page shows it.
type Alarm struct {
	Name  string `json:"AlarmName"`
	State string `json:"StateValue"`
	// Metric names what the alarm watches: namespace, metric and
	// dimensions, as one line.
	Metric string `json:"Metric"`
	// Condition is the rule: statistic, comparison, threshold, datapoints
	// out of periods, as one line.
	Condition string    `json:"Condition"`
	Reason    string    `json:"StateReason"`
	Updated   time.Time `json:"StateUpdatedTimestamp"`
}

// ScalingTarget is one Application Auto Scaling scalable target: its
// bounds, the capacity it has now, its policies and its latest
// activities, newest first.
type ScalingTarget struct {
	ResourceID string `json:"ResourceId"`
	Dimension  string `json:"ScalableDimension"`
	Min        int    `json:"MinCapacity"`
	Max        int    `json:"MaxCapacity"`
	// Current is the capacity the resource has now; -1 when unknown (the
	// resource is gone).
	Current    int               `json:"CurrentCapacity"`
	Policies   []string          `json:"Policies"`
	Activities []ScalingActivity `json:"Activities"`
}

// ScalingActivity is one scaling activity.
type ScalingActivity struct {
	Start       time.Time `json:"StartTime"`
	Status      string    `json:"StatusCode"`
	Description string    `json:"Description"`
	Cause       string    `json:"Cause"`
	Message     string    `json:"StatusMessage,omitempty"`
}

// Bounds on what the operations sections carry: the page lists at most
// pageAlarms alarms (those not OK first) and pageActivities activities per
// target; status.json has every alarm and target, and the same activities.
const (
	pageAlarms     = 100
	pageActivities = 10
)

// operations reads the alarms and the scaling targets, sorted for the
// page: alarms in ALARM, then INSUFFICIENT_DATA, then OK, each by name;
// targets by resource and dimension.
func (p *Page) operations() ([]Alarm, []ScalingTarget) {
	var alarms []Alarm
	if p.o.Alarms != nil {
		alarms = p.o.Alarms()
		rank := map[string]int{"ALARM": 0, "INSUFFICIENT_DATA": 1}
		order := func(s string) int {
			if r, ok := rank[s]; ok {
				return r
			}
			return 2
		}
		sort.SliceStable(alarms, func(i, j int) bool {
			if a, b := order(alarms[i].State), order(alarms[j].State); a != b {
				return a < b
			}
			return alarms[i].Name < alarms[j].Name
		})
	}
	var targets []ScalingTarget
	if p.o.Scaling != nil {
		targets = p.o.Scaling()
		sort.SliceStable(targets, func(i, j int) bool {
			if targets[i].ResourceID != targets[j].ResourceID {
				return targets[i].ResourceID < targets[j].ResourceID
			}
			return targets[i].Dimension < targets[j].Dimension
		})
		for i := range targets {
			t := &targets[i]
			sort.SliceStable(t.Activities, func(a, b int) bool { return t.Activities[a].Start.After(t.Activities[b].Start) })
			if len(t.Activities) > pageActivities {
				t.Activities = t.Activities[:pageActivities]
			}
			if t.Policies == nil {
				t.Policies = []string{}
			}
			if t.Activities == nil {
				t.Activities = []ScalingActivity{}
			}
		}
	}
	return alarms, targets
}
