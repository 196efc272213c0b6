package cloudwatch

import (
	"strconv"
	"strings"
)

// MetricText is what the alarm watches, as one line for a person:
// "AWS/SageMaker Invocation5XXErrors EndpointName=ep VariantName=v1".
func (a *Alarm) MetricText() string {
	var b strings.Builder
	b.WriteString(a.Namespace)
	b.WriteByte(' ')
	b.WriteString(a.MetricName)
	for _, d := range a.Dimensions {
		b.WriteByte(' ')
		b.WriteString(d.Name)
		b.WriteByte('=')
		b.WriteString(d.Value)
	}
	return b.String()
}

// comparisonSymbols are the comparison operators PutMetricAlarm takes,
// as symbols.
var comparisonSymbols = map[string]string{
	"GreaterThanOrEqualToThreshold": ">=", "GreaterThanThreshold": ">",
	"LessThanThreshold": "<", "LessThanOrEqualToThreshold": "<=",
}

// ConditionText is the alarm's rule, as one line for a person:
// "Sum > 0 for 2 of 3 periods of 60 s (missing data: notBreaching)".
func (a *Alarm) ConditionText() string {
	stat := ""
	switch {
	case a.Statistic != nil:
		stat = *a.Statistic
	case a.ExtendedStatistic != nil:
		stat = *a.ExtendedStatistic
	}
	op := comparisonSymbols[a.ComparisonOperator]
	if op == "" {
		op = a.ComparisonOperator
	}
	m := a.EvaluationPeriods
	if a.DatapointsToAlarm != nil {
		m = *a.DatapointsToAlarm
	}
	return stat + " " + op + " " + strconv.FormatFloat(a.Threshold, 'g', -1, 64) +
		" for " + strconv.Itoa(int(m)) + " of " + strconv.Itoa(int(a.EvaluationPeriods)) +
		" periods of " + strconv.Itoa(int(a.Period)) + " s (missing data: " + a.TreatMissingData + ")"
}
