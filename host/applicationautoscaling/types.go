package applicationautoscaling

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// The operations' inputs and outputs, named as the API reference names
// their members (AWS JSON 1.1: timestamps are epoch seconds).

// epoch is a timestamp as AWS JSON 1.1 writes it: seconds since the epoch,
// with milliseconds.
type epoch struct{ time.Time }

func (t epoch) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', -1, 64)), nil
}

func (t *epoch) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 253402300799 {
		return errBadTimestamp
	}
	sec, frac := math.Modf(f)
	t.Time = time.Unix(int64(sec), int64(frac*1e9)).UTC()
	return nil
}

func epochOf(t time.Time) *epoch {
	if t.IsZero() {
		return nil
	}
	return &epoch{t.UTC().Truncate(time.Millisecond)}
}

// SuspendedState is a scalable target's suspension of scaling.
type SuspendedState struct {
	DynamicScalingInSuspended  *bool `json:"DynamicScalingInSuspended,omitempty"`
	DynamicScalingOutSuspended *bool `json:"DynamicScalingOutSuspended,omitempty"`
	ScheduledScalingSuspended  *bool `json:"ScheduledScalingSuspended,omitempty"`
}

func (s *SuspendedState) in() bool {
	return s != nil && s.DynamicScalingInSuspended != nil && *s.DynamicScalingInSuspended
}
func (s *SuspendedState) out() bool {
	return s != nil && s.DynamicScalingOutSuspended != nil && *s.DynamicScalingOutSuspended
}
func (s *SuspendedState) scheduled() bool {
	return s != nil && s.ScheduledScalingSuspended != nil && *s.ScheduledScalingSuspended
}

// ScalableTarget is a registered target as DescribeScalableTargets
// answers it.
type ScalableTarget struct {
	ServiceNamespace  string          `json:"ServiceNamespace"`
	ResourceID        string          `json:"ResourceId"`
	ScalableDimension string          `json:"ScalableDimension"`
	MinCapacity       int32           `json:"MinCapacity"`
	MaxCapacity       int32           `json:"MaxCapacity"`
	RoleARN           string          `json:"RoleARN"`
	CreationTime      epoch           `json:"CreationTime"`
	SuspendedState    *SuspendedState `json:"SuspendedState,omitempty"`
	ScalableTargetARN string          `json:"ScalableTargetARN"`
}

// MetricDimension is a CloudWatch dimension of a customized metric.
type MetricDimension struct {
	Name  string `json:"Name"`
	Value string `json:"Value"`
}

// PredefinedMetricSpecification names one of SageMaker's predefined
// metrics.
type PredefinedMetricSpecification struct {
	PredefinedMetricType string  `json:"PredefinedMetricType"`
	ResourceLabel        *string `json:"ResourceLabel,omitempty"`
}

// CustomizedMetricSpecification is a CloudWatch metric of the user's.
type CustomizedMetricSpecification struct {
	MetricName *string           `json:"MetricName,omitempty"`
	Namespace  *string           `json:"Namespace,omitempty"`
	Dimensions []MetricDimension `json:"Dimensions,omitempty"`
	Statistic  *string           `json:"Statistic,omitempty"`
	Unit       *string           `json:"Unit,omitempty"`
	Metrics    json.RawMessage   `json:"Metrics,omitempty"`
}

// TargetTrackingConfig is TargetTrackingScalingPolicyConfiguration.
type TargetTrackingConfig struct {
	TargetValue                   *float64                       `json:"TargetValue"`
	PredefinedMetricSpecification *PredefinedMetricSpecification `json:"PredefinedMetricSpecification,omitempty"`
	CustomizedMetricSpecification *CustomizedMetricSpecification `json:"CustomizedMetricSpecification,omitempty"`
	ScaleOutCooldown              *int32                         `json:"ScaleOutCooldown,omitempty"`
	ScaleInCooldown               *int32                         `json:"ScaleInCooldown,omitempty"`
	DisableScaleIn                *bool                          `json:"DisableScaleIn,omitempty"`
}

// StepAdjustment is one step of a step scaling policy: its bounds are
// relative to the alarm's threshold.
type StepAdjustment struct {
	MetricIntervalLowerBound *float64 `json:"MetricIntervalLowerBound,omitempty"`
	MetricIntervalUpperBound *float64 `json:"MetricIntervalUpperBound,omitempty"`
	ScalingAdjustment        *int32   `json:"ScalingAdjustment"`
}

// StepConfig is StepScalingPolicyConfiguration.
type StepConfig struct {
	AdjustmentType         *string          `json:"AdjustmentType,omitempty"`
	StepAdjustments        []StepAdjustment `json:"StepAdjustments,omitempty"`
	MinAdjustmentMagnitude *int32           `json:"MinAdjustmentMagnitude,omitempty"`
	Cooldown               *int32           `json:"Cooldown,omitempty"`
	MetricAggregationType  *string          `json:"MetricAggregationType,omitempty"`
}

// AlarmRef names an alarm of a policy.
type AlarmRef struct {
	AlarmName string `json:"AlarmName"`
	AlarmARN  string `json:"AlarmARN"`
}

// ScalingPolicy is a policy as DescribeScalingPolicies answers it.
type ScalingPolicy struct {
	PolicyARN                                string                `json:"PolicyARN"`
	PolicyName                               string                `json:"PolicyName"`
	ServiceNamespace                         string                `json:"ServiceNamespace"`
	ResourceID                               string                `json:"ResourceId"`
	ScalableDimension                        string                `json:"ScalableDimension"`
	PolicyType                               string                `json:"PolicyType"`
	StepScalingPolicyConfiguration           *StepConfig           `json:"StepScalingPolicyConfiguration,omitempty"`
	TargetTrackingScalingPolicyConfiguration *TargetTrackingConfig `json:"TargetTrackingScalingPolicyConfiguration,omitempty"`
	Alarms                                   []AlarmRef            `json:"Alarms"`
	CreationTime                             epoch                 `json:"CreationTime"`
}

// ScalableTargetAction is a scheduled action's new bounds.
type ScalableTargetAction struct {
	MinCapacity *int32 `json:"MinCapacity,omitempty"`
	MaxCapacity *int32 `json:"MaxCapacity,omitempty"`
}

// ScheduledAction is a scheduled action as DescribeScheduledActions
// answers it.
type ScheduledAction struct {
	ScheduledActionName  string                `json:"ScheduledActionName"`
	ScheduledActionARN   string                `json:"ScheduledActionARN"`
	ServiceNamespace     string                `json:"ServiceNamespace"`
	Schedule             string                `json:"Schedule"`
	Timezone             *string               `json:"Timezone,omitempty"`
	ResourceID           string                `json:"ResourceId"`
	ScalableDimension    string                `json:"ScalableDimension"`
	StartTime            *epoch                `json:"StartTime,omitempty"`
	EndTime              *epoch                `json:"EndTime,omitempty"`
	ScalableTargetAction *ScalableTargetAction `json:"ScalableTargetAction,omitempty"`
	CreationTime         epoch                 `json:"CreationTime"`
}

// Activity is a scaling activity as DescribeScalingActivities answers it.
type Activity struct {
	ActivityID        string `json:"ActivityId"`
	ServiceNamespace  string `json:"ServiceNamespace"`
	ResourceID        string `json:"ResourceId"`
	ScalableDimension string `json:"ScalableDimension"`
	Description       string `json:"Description"`
	Cause             string `json:"Cause"`
	StartTime         epoch  `json:"StartTime"`
	EndTime           *epoch `json:"EndTime,omitempty"`
	StatusCode        string `json:"StatusCode"`
	StatusMessage     string `json:"StatusMessage,omitempty"`
}

// The activities' status codes mce writes.
const (
	StatusInProgress = "InProgress"
	StatusSuccessful = "Successful"
	StatusFailed     = "Failed"
)

type targetKey struct {
	ServiceNamespace  string `json:"ServiceNamespace"`
	ResourceID        string `json:"ResourceId"`
	ScalableDimension string `json:"ScalableDimension"`
}

type registerInput struct {
	targetKey
	MinCapacity    *int32            `json:"MinCapacity"`
	MaxCapacity    *int32            `json:"MaxCapacity"`
	RoleARN        *string           `json:"RoleARN"`
	SuspendedState *SuspendedState   `json:"SuspendedState"`
	Tags           map[string]string `json:"Tags"`
}

type describeTargetsInput struct {
	ServiceNamespace  string   `json:"ServiceNamespace"`
	ResourceIDs       []string `json:"ResourceIds"`
	ScalableDimension string   `json:"ScalableDimension"`
	MaxResults        *int32   `json:"MaxResults"`
	NextToken         *string  `json:"NextToken"`
}

type putPolicyInput struct {
	targetKey
	PolicyName                               string                `json:"PolicyName"`
	PolicyType                               *string               `json:"PolicyType"`
	StepScalingPolicyConfiguration           *StepConfig           `json:"StepScalingPolicyConfiguration"`
	TargetTrackingScalingPolicyConfiguration *TargetTrackingConfig `json:"TargetTrackingScalingPolicyConfiguration"`
	PredictiveScalingPolicyConfiguration     json.RawMessage       `json:"PredictiveScalingPolicyConfiguration"`
}

type describePoliciesInput struct {
	ServiceNamespace  string   `json:"ServiceNamespace"`
	PolicyNames       []string `json:"PolicyNames"`
	ResourceID        string   `json:"ResourceId"`
	ScalableDimension string   `json:"ScalableDimension"`
	MaxResults        *int32   `json:"MaxResults"`
	NextToken         *string  `json:"NextToken"`
}

type deletePolicyInput struct {
	targetKey
	PolicyName string `json:"PolicyName"`
}

type describeActivitiesInput struct {
	ServiceNamespace           string  `json:"ServiceNamespace"`
	ResourceID                 string  `json:"ResourceId"`
	ScalableDimension          string  `json:"ScalableDimension"`
	MaxResults                 *int32  `json:"MaxResults"`
	NextToken                  *string `json:"NextToken"`
	IncludeNotScaledActivities *bool   `json:"IncludeNotScaledActivities"`
}

type putScheduledInput struct {
	targetKey
	ScheduledActionName  string                `json:"ScheduledActionName"`
	Schedule             *string               `json:"Schedule"`
	Timezone             *string               `json:"Timezone"`
	StartTime            *epoch                `json:"StartTime"`
	EndTime              *epoch                `json:"EndTime"`
	ScalableTargetAction *ScalableTargetAction `json:"ScalableTargetAction"`
}

type describeScheduledInput struct {
	ServiceNamespace     string   `json:"ServiceNamespace"`
	ScheduledActionNames []string `json:"ScheduledActionNames"`
	ResourceID           string   `json:"ResourceId"`
	ScalableDimension    string   `json:"ScalableDimension"`
	MaxResults           *int32   `json:"MaxResults"`
	NextToken            *string  `json:"NextToken"`
}

type deleteScheduledInput struct {
	targetKey
	ScheduledActionName string `json:"ScheduledActionName"`
}
