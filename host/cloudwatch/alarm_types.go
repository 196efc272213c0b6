package cloudwatch

// The alarm operations' inputs and outputs, named as CloudWatch's API
// reference names their members; like types.go, one set of structs for
// JSON 1.0 and CBOR (through the tags) and the query protocol (query.go
// and alarm_query.go fill and read them by hand).

// State is an alarm's state: OK, ALARM or INSUFFICIENT_DATA.
type State string

// The three states of an alarm.
const (
	StateOK               State = "OK"
	StateAlarm            State = "ALARM"
	StateInsufficientData State = "INSUFFICIENT_DATA"
)

func validState(s string) bool {
	return s == string(StateOK) || s == string(StateAlarm) || s == string(StateInsufficientData)
}

// Tag is a key/value pair given to an alarm at its creation.
type Tag struct {
	Key   string `json:"Key" cbor:"Key"`
	Value string `json:"Value" cbor:"Value"`
}

// Alarm is a metric alarm as DescribeAlarms answers it (CloudWatch's
// MetricAlarm): its configuration and its state. A value handed to an
// OnStateChange hook is a copy; its slices must not be changed.
type Alarm struct {
	AlarmName                          string      `json:"AlarmName" cbor:"AlarmName"`
	AlarmArn                           string      `json:"AlarmArn" cbor:"AlarmArn"`
	AlarmDescription                   *string     `json:"AlarmDescription,omitempty" cbor:"AlarmDescription,omitempty"`
	AlarmConfigurationUpdatedTimestamp Timestamp   `json:"AlarmConfigurationUpdatedTimestamp" cbor:"AlarmConfigurationUpdatedTimestamp"`
	ActionsEnabled                     bool        `json:"ActionsEnabled" cbor:"ActionsEnabled"`
	OKActions                          []string    `json:"OKActions" cbor:"OKActions"`
	AlarmActions                       []string    `json:"AlarmActions" cbor:"AlarmActions"`
	InsufficientDataActions            []string    `json:"InsufficientDataActions" cbor:"InsufficientDataActions"`
	StateValue                         State       `json:"StateValue" cbor:"StateValue"`
	StateReason                        string      `json:"StateReason" cbor:"StateReason"`
	StateReasonData                    *string     `json:"StateReasonData,omitempty" cbor:"StateReasonData,omitempty"`
	StateUpdatedTimestamp              Timestamp   `json:"StateUpdatedTimestamp" cbor:"StateUpdatedTimestamp"`
	StateTransitionedTimestamp         Timestamp   `json:"StateTransitionedTimestamp" cbor:"StateTransitionedTimestamp"`
	MetricName                         string      `json:"MetricName" cbor:"MetricName"`
	Namespace                          string      `json:"Namespace" cbor:"Namespace"`
	Statistic                          *string     `json:"Statistic,omitempty" cbor:"Statistic,omitempty"`
	ExtendedStatistic                  *string     `json:"ExtendedStatistic,omitempty" cbor:"ExtendedStatistic,omitempty"`
	Dimensions                         []Dimension `json:"Dimensions" cbor:"Dimensions"`
	Period                             int32       `json:"Period" cbor:"Period"`
	Unit                               *string     `json:"Unit,omitempty" cbor:"Unit,omitempty"`
	EvaluationPeriods                  int32       `json:"EvaluationPeriods" cbor:"EvaluationPeriods"`
	DatapointsToAlarm                  *int32      `json:"DatapointsToAlarm,omitempty" cbor:"DatapointsToAlarm,omitempty"`
	Threshold                          float64     `json:"Threshold" cbor:"Threshold"`
	ComparisonOperator                 string      `json:"ComparisonOperator" cbor:"ComparisonOperator"`
	TreatMissingData                   string      `json:"TreatMissingData" cbor:"TreatMissingData"`
	EvaluateLowSampleCountPercentile   *string     `json:"EvaluateLowSampleCountPercentile,omitempty" cbor:"EvaluateLowSampleCountPercentile,omitempty"`
}

// HistoryItem is one entry of DescribeAlarmHistory (AlarmHistoryItem).
type HistoryItem struct {
	AlarmName       string    `json:"AlarmName" cbor:"AlarmName"`
	AlarmType       string    `json:"AlarmType" cbor:"AlarmType"`
	Timestamp       Timestamp `json:"Timestamp" cbor:"Timestamp"`
	HistoryItemType string    `json:"HistoryItemType" cbor:"HistoryItemType"`
	HistorySummary  string    `json:"HistorySummary" cbor:"HistorySummary"`
	HistoryData     string    `json:"HistoryData" cbor:"HistoryData"`
}

type putMetricAlarmInput struct {
	AlarmName                        *string           `json:"AlarmName" cbor:"AlarmName"`
	AlarmDescription                 *string           `json:"AlarmDescription" cbor:"AlarmDescription"`
	ActionsEnabled                   *bool             `json:"ActionsEnabled" cbor:"ActionsEnabled"`
	OKActions                        []string          `json:"OKActions" cbor:"OKActions"`
	AlarmActions                     []string          `json:"AlarmActions" cbor:"AlarmActions"`
	InsufficientDataActions          []string          `json:"InsufficientDataActions" cbor:"InsufficientDataActions"`
	MetricName                       *string           `json:"MetricName" cbor:"MetricName"`
	Namespace                        *string           `json:"Namespace" cbor:"Namespace"`
	Statistic                        *string           `json:"Statistic" cbor:"Statistic"`
	ExtendedStatistic                *string           `json:"ExtendedStatistic" cbor:"ExtendedStatistic"`
	Dimensions                       []Dimension       `json:"Dimensions" cbor:"Dimensions"`
	Period                           *int32            `json:"Period" cbor:"Period"`
	Unit                             *string           `json:"Unit" cbor:"Unit"`
	EvaluationPeriods                *int32            `json:"EvaluationPeriods" cbor:"EvaluationPeriods"`
	DatapointsToAlarm                *int32            `json:"DatapointsToAlarm" cbor:"DatapointsToAlarm"`
	Threshold                        *float64          `json:"Threshold" cbor:"Threshold"`
	ComparisonOperator               *string           `json:"ComparisonOperator" cbor:"ComparisonOperator"`
	TreatMissingData                 *string           `json:"TreatMissingData" cbor:"TreatMissingData"`
	EvaluateLowSampleCountPercentile *string           `json:"EvaluateLowSampleCountPercentile" cbor:"EvaluateLowSampleCountPercentile"`
	Metrics                          []metricDataQuery `json:"Metrics" cbor:"Metrics"`
	Tags                             []Tag             `json:"Tags" cbor:"Tags"`
	ThresholdMetricID                *string           `json:"ThresholdMetricId" cbor:"ThresholdMetricId"`
	EvaluationCriteria               any               `json:"EvaluationCriteria" cbor:"EvaluationCriteria"`
	EvaluationInterval               *int32            `json:"EvaluationInterval" cbor:"EvaluationInterval"`
}

type describeAlarmsInput struct {
	AlarmNames          []string `json:"AlarmNames" cbor:"AlarmNames"`
	AlarmNamePrefix     *string  `json:"AlarmNamePrefix" cbor:"AlarmNamePrefix"`
	AlarmTypes          []string `json:"AlarmTypes" cbor:"AlarmTypes"`
	ChildrenOfAlarmName *string  `json:"ChildrenOfAlarmName" cbor:"ChildrenOfAlarmName"`
	ParentsOfAlarmName  *string  `json:"ParentsOfAlarmName" cbor:"ParentsOfAlarmName"`
	StateValue          *string  `json:"StateValue" cbor:"StateValue"`
	ActionPrefix        *string  `json:"ActionPrefix" cbor:"ActionPrefix"`
	MaxRecords          *int32   `json:"MaxRecords" cbor:"MaxRecords"`
	NextToken           *string  `json:"NextToken" cbor:"NextToken"`
}

type describeAlarmsOutput struct {
	CompositeAlarms []struct{} `json:"CompositeAlarms" cbor:"CompositeAlarms"`
	MetricAlarms    []Alarm    `json:"MetricAlarms" cbor:"MetricAlarms"`
	NextToken       *string    `json:"NextToken,omitempty" cbor:"NextToken,omitempty"`
}

type deleteAlarmsInput struct {
	AlarmNames []string `json:"AlarmNames" cbor:"AlarmNames"`
}

type setAlarmStateInput struct {
	AlarmName       *string `json:"AlarmName" cbor:"AlarmName"`
	StateValue      *string `json:"StateValue" cbor:"StateValue"`
	StateReason     *string `json:"StateReason" cbor:"StateReason"`
	StateReasonData *string `json:"StateReasonData" cbor:"StateReasonData"`
}

type describeAlarmHistoryInput struct {
	AlarmName          *string    `json:"AlarmName" cbor:"AlarmName"`
	AlarmContributorID *string    `json:"AlarmContributorId" cbor:"AlarmContributorId"`
	AlarmTypes         []string   `json:"AlarmTypes" cbor:"AlarmTypes"`
	HistoryItemType    *string    `json:"HistoryItemType" cbor:"HistoryItemType"`
	StartDate          *Timestamp `json:"StartDate" cbor:"StartDate"`
	EndDate            *Timestamp `json:"EndDate" cbor:"EndDate"`
	MaxRecords         *int32     `json:"MaxRecords" cbor:"MaxRecords"`
	NextToken          *string    `json:"NextToken" cbor:"NextToken"`
	ScanBy             *string    `json:"ScanBy" cbor:"ScanBy"`
}

type describeAlarmHistoryOutput struct {
	AlarmHistoryItems []HistoryItem `json:"AlarmHistoryItems" cbor:"AlarmHistoryItems"`
	NextToken         *string       `json:"NextToken,omitempty" cbor:"NextToken,omitempty"`
}

// emptyOutput answers the operations without an output
// (PutMetricAlarm, DeleteAlarms, SetAlarmState): {} in JSON and CBOR.
type emptyOutput struct{}
