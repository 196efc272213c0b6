package cloudwatch

import (
	"math"
	"strconv"
	"strings"

	"github.com/mce-run/mce/internal/awsquery"
)

// The alarm operations over the query protocol: their forms read into the
// same inputs, their answers written as XML.

func decodeAlarmQuery(q *queryReader, in any) {
	switch in := in.(type) {
	case *putMetricAlarmInput:
		in.AlarmName = q.str("AlarmName")
		in.AlarmDescription = q.str("AlarmDescription")
		in.ActionsEnabled = q.bool("ActionsEnabled")
		in.OKActions = q.strs("OKActions")
		in.AlarmActions = q.strs("AlarmActions")
		in.InsufficientDataActions = q.strs("InsufficientDataActions")
		in.MetricName = q.str("MetricName")
		in.Namespace = q.str("Namespace")
		in.Statistic = q.str("Statistic")
		in.ExtendedStatistic = q.str("ExtendedStatistic")
		in.Dimensions = q.dims("Dimensions")
		in.Period = q.int("Period")
		in.Unit = q.str("Unit")
		in.EvaluationPeriods = q.int("EvaluationPeriods")
		in.DatapointsToAlarm = q.int("DatapointsToAlarm")
		in.Threshold = q.float("Threshold")
		in.ComparisonOperator = q.str("ComparisonOperator")
		in.TreatMissingData = q.str("TreatMissingData")
		in.EvaluateLowSampleCountPercentile = q.str("EvaluateLowSampleCountPercentile")
		// Metric math is refused whatever its queries say: one is enough.
		for range q.f.Members("Metrics") {
			in.Metrics = append(in.Metrics, metricDataQuery{})
		}
		for _, m := range q.f.Members("Tags") {
			k, _ := q.f.String(m + ".Key")
			v, _ := q.f.String(m + ".Value")
			in.Tags = append(in.Tags, Tag{Key: k, Value: v})
		}
		in.ThresholdMetricID = q.str("ThresholdMetricId")
		if q.f.Has("EvaluationCriteria") {
			in.EvaluationCriteria = true
		}
		in.EvaluationInterval = q.int("EvaluationInterval")
	case *describeAlarmsInput:
		in.AlarmNames = q.strs("AlarmNames")
		in.AlarmNamePrefix = q.str("AlarmNamePrefix")
		in.AlarmTypes = q.strs("AlarmTypes")
		in.ChildrenOfAlarmName = q.str("ChildrenOfAlarmName")
		in.ParentsOfAlarmName = q.str("ParentsOfAlarmName")
		in.StateValue = q.str("StateValue")
		in.ActionPrefix = q.str("ActionPrefix")
		in.MaxRecords = q.int("MaxRecords")
		in.NextToken = q.str("NextToken")
	case *deleteAlarmsInput:
		in.AlarmNames = q.strs("AlarmNames")
		if in.AlarmNames == nil && q.f.Has("AlarmNames") {
			in.AlarmNames = []string{}
		}
	case *setAlarmStateInput:
		in.AlarmName = q.str("AlarmName")
		in.StateValue = q.str("StateValue")
		in.StateReason = q.str("StateReason")
		in.StateReasonData = q.str("StateReasonData")
	case *describeAlarmHistoryInput:
		in.AlarmName = q.str("AlarmName")
		in.AlarmContributorID = q.str("AlarmContributorId")
		in.AlarmTypes = q.strs("AlarmTypes")
		in.HistoryItemType = q.str("HistoryItemType")
		in.StartDate = q.time("StartDate")
		in.EndDate = q.time("EndDate")
		in.MaxRecords = q.int("MaxRecords")
		in.NextToken = q.str("NextToken")
		in.ScanBy = q.str("ScanBy")
	}
}

func (q *queryReader) float(name string) *float64 {
	s, ok := q.f.String(name)
	if !ok {
		return nil
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		q.bad(&awsquery.ValueError{Name: name, Value: s})
		return nil
	}
	return &v
}

func encodeAlarmQuery(x *awsquery.Writer, out any) {
	switch o := out.(type) {
	case *describeAlarmsOutput:
		x.Start("CompositeAlarms")
		x.End()
		x.Start("MetricAlarms")
		for i := range o.MetricAlarms {
			x.Start("member")
			writeAlarmXML(x, &o.MetricAlarms[i])
			x.End()
		}
		x.End()
		if o.NextToken != nil {
			x.Text("NextToken", *o.NextToken)
		}
	case *describeAlarmHistoryOutput:
		x.Start("AlarmHistoryItems")
		for _, h := range o.AlarmHistoryItems {
			x.Start("member")
			x.Text("AlarmName", h.AlarmName)
			x.Text("AlarmType", h.AlarmType)
			x.Time("Timestamp", h.Timestamp.Time)
			x.Text("HistoryItemType", h.HistoryItemType)
			x.Text("HistorySummary", h.HistorySummary)
			x.Text("HistoryData", h.HistoryData)
			x.End()
		}
		x.End()
		if o.NextToken != nil {
			x.Text("NextToken", *o.NextToken)
		}
	case *emptyOutput:
	}
}

func writeAlarmXML(x *awsquery.Writer, a *Alarm) {
	opt := func(name string, v *string) {
		if v != nil {
			x.Text(name, *v)
		}
	}
	list := func(name string, l []string) {
		x.Start(name)
		for _, v := range l {
			x.Text("member", v)
		}
		x.End()
	}
	x.Text("AlarmName", a.AlarmName)
	x.Text("AlarmArn", a.AlarmArn)
	opt("AlarmDescription", a.AlarmDescription)
	x.Time("AlarmConfigurationUpdatedTimestamp", a.AlarmConfigurationUpdatedTimestamp.Time)
	x.Text("ActionsEnabled", strconv.FormatBool(a.ActionsEnabled))
	list("OKActions", a.OKActions)
	list("AlarmActions", a.AlarmActions)
	list("InsufficientDataActions", a.InsufficientDataActions)
	x.Text("StateValue", string(a.StateValue))
	x.Text("StateReason", a.StateReason)
	opt("StateReasonData", a.StateReasonData)
	x.Time("StateUpdatedTimestamp", a.StateUpdatedTimestamp.Time)
	x.Time("StateTransitionedTimestamp", a.StateTransitionedTimestamp.Time)
	x.Text("MetricName", a.MetricName)
	x.Text("Namespace", a.Namespace)
	opt("Statistic", a.Statistic)
	opt("ExtendedStatistic", a.ExtendedStatistic)
	x.Start("Dimensions")
	for _, d := range a.Dimensions {
		x.Start("member")
		x.Text("Name", d.Name)
		x.Text("Value", d.Value)
		x.End()
	}
	x.End()
	x.Text("Period", strconv.Itoa(int(a.Period)))
	opt("Unit", a.Unit)
	x.Text("EvaluationPeriods", strconv.Itoa(int(a.EvaluationPeriods)))
	if a.DatapointsToAlarm != nil {
		x.Text("DatapointsToAlarm", strconv.Itoa(int(*a.DatapointsToAlarm)))
	}
	x.Float("Threshold", a.Threshold)
	x.Text("ComparisonOperator", a.ComparisonOperator)
	x.Text("TreatMissingData", a.TreatMissingData)
	opt("EvaluateLowSampleCountPercentile", a.EvaluateLowSampleCountPercentile)
}
