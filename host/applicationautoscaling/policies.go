package applicationautoscaling

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/mce-run/mce/host/cloudwatch"
)

// Scaling policies: PutScalingPolicy, DescribeScalingPolicies,
// DeleteScalingPolicy, and the alarms target tracking owns.

const (
	typeStep           = "StepScaling"
	typeTargetTracking = "TargetTrackingScaling"
	typePredictive     = "PredictiveScaling"

	adjChange  = "ChangeInCapacity"
	adjPercent = "PercentChangeInCapacity"
	adjExact   = "ExactCapacity"

	// TargetValue's range in AWS's API reference.
	minTargetValue = 8.515920e-109
	maxTargetValue = 1.174271e+108
	maxCooldown    = 86400 // a day: mce's bound on cooldowns
	maxStepAdjust  = 1_000_000
)

// predefinedMetric is the CloudWatch metric a predefined metric type
// stands for, and the alarms target tracking makes on it.
type predefinedMetric struct {
	dimension  string
	metric     string
	statistic  string
	highPeriod int32 // the scale-out alarm's period; its evaluation is 3 of 3
}

var predefined = map[string]predefinedMetric{
	"SageMakerVariantInvocationsPerInstance":                             {DimensionVariant, "InvocationsPerInstance", "Sum", 60},
	"SageMakerVariantConcurrentRequestsPerModelHighResolution":           {DimensionVariant, "ConcurrentRequestsPerModel", "Average", 10},
	"SageMakerInferenceComponentInvocationsPerCopy":                      {DimensionComponent, "InvocationsPerCopy", "Sum", 60},
	"SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution": {DimensionComponent, "ConcurrentRequestsPerCopy", "Average", 10},
}

var metricTypes = []string{"DynamoDBReadCapacityUtilization", "DynamoDBWriteCapacityUtilization", "ALBRequestCountPerTarget",
	"RDSReaderAverageCPUUtilization", "RDSReaderAverageDatabaseConnections", "EC2SpotFleetRequestAverageCPUUtilization",
	"EC2SpotFleetRequestAverageNetworkIn", "EC2SpotFleetRequestAverageNetworkOut", "SageMakerVariantInvocationsPerInstance",
	"ECSServiceAverageCPUUtilization", "ECSServiceAverageMemoryUtilization", "AppStreamAverageCapacityUtilization",
	"ComprehendInferenceUtilization", "LambdaProvisionedConcurrencyUtilization", "CassandraReadCapacityUtilization",
	"CassandraWriteCapacityUtilization", "KafkaBrokerStorageUtilization", "ElastiCacheEngineCPUUtilization",
	"ElastiCacheDatabaseMemoryUsagePercentage", "ElastiCachePrimaryEngineCPUUtilization", "ElastiCacheReplicaEngineCPUUtilization",
	"ElastiCacheDatabaseMemoryUsageCountedForEvictPercentage", "NeptuneReaderAverageCPUUtilization",
	"SageMakerVariantProvisionedConcurrencyUtilization", "ElastiCacheDatabaseCapacityUsageCountedForEvictPercentage",
	"SageMakerInferenceComponentInvocationsPerCopy", "WorkSpacesAverageUserSessionsCapacityUtilization",
	"SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution", "SageMakerVariantConcurrentRequestsPerModelHighResolution"}

func checkPolicyName(member, name string) *APIError {
	if name == "" {
		return required(member)
	}
	if len(name) > 256 {
		return validation("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must have length less than or equal to 256", name, member)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return validation("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: \\p{Print}+", name, member)
		}
	}
	return nil
}

func checkCooldown(member string, v *int32) *APIError {
	if v != nil && (*v < 0 || *v > maxCooldown) {
		return validation("The %s %d is out of range: 0 to %d seconds.", member, *v, maxCooldown)
	}
	return nil
}

func checkTargetTracking(c *TargetTrackingConfig, dim string) *APIError {
	if c == nil {
		return validation("TargetTrackingScalingPolicyConfiguration is required for a policy of type TargetTrackingScaling.")
	}
	if c.TargetValue == nil {
		return required("targetTrackingScalingPolicyConfiguration.targetValue")
	}
	if v := *c.TargetValue; math.IsNaN(v) || v < minTargetValue || v > maxTargetValue {
		return validation("The target value %v is out of range: it must be between %v and %v.", v, minTargetValue, maxTargetValue)
	}
	if e := checkCooldown("ScaleOutCooldown", c.ScaleOutCooldown); e != nil {
		return e
	}
	if e := checkCooldown("ScaleInCooldown", c.ScaleInCooldown); e != nil {
		return e
	}
	switch p, cm := c.PredefinedMetricSpecification, c.CustomizedMetricSpecification; {
	case (p == nil) == (cm == nil):
		return validation("Exactly one of PredefinedMetricSpecification and CustomizedMetricSpecification must be specified.")
	case p != nil:
		if p.PredefinedMetricType == "" {
			return required("targetTrackingScalingPolicyConfiguration.predefinedMetricSpecification.predefinedMetricType")
		}
		if !slices.Contains(metricTypes, p.PredefinedMetricType) {
			return enumError("targetTrackingScalingPolicyConfiguration.predefinedMetricSpecification.predefinedMetricType", p.PredefinedMetricType, metricTypes)
		}
		m, ok := predefined[p.PredefinedMetricType]
		if !ok || m.dimension != dim {
			return validation("The predefined metric type %s does not apply to the scalable dimension %s.", p.PredefinedMetricType, dim)
		}
		if p.ResourceLabel != nil && (len(*p.ResourceLabel) < 1 || len(*p.ResourceLabel) > 1023) {
			return validation("The ResourceLabel must be 1 to 1023 characters.")
		}
	default:
		if len(cm.Metrics) > 0 {
			return validation("mce does not serve metric math in target tracking (CustomizedMetricSpecification.Metrics): give MetricName, Namespace, Dimensions and Statistic.")
		}
		if cm.MetricName == nil || *cm.MetricName == "" || cm.Namespace == nil || *cm.Namespace == "" || cm.Statistic == nil {
			return validation("A CustomizedMetricSpecification needs MetricName, Namespace and Statistic.")
		}
		if !slices.Contains([]string{"Average", "Minimum", "Maximum", "SampleCount", "Sum"}, *cm.Statistic) {
			return enumError("targetTrackingScalingPolicyConfiguration.customizedMetricSpecification.statistic", *cm.Statistic,
				[]string{"Average", "Minimum", "Maximum", "SampleCount", "Sum"})
		}
		if len(cm.Dimensions) > 30 {
			return validation("A CustomizedMetricSpecification has at most 30 dimensions.")
		}
	}
	return nil
}

func checkStep(c *StepConfig) *APIError {
	if c == nil {
		return validation("StepScalingPolicyConfiguration is required for a policy of type StepScaling.")
	}
	if c.AdjustmentType == nil {
		return validation("AdjustmentType is required for a step scaling policy.")
	}
	if at := *c.AdjustmentType; at != adjChange && at != adjPercent && at != adjExact {
		return enumError("stepScalingPolicyConfiguration.adjustmentType", at, []string{adjChange, adjPercent, adjExact})
	}
	if len(c.StepAdjustments) == 0 {
		return validation("StepAdjustments must hold at least one step adjustment.")
	}
	if len(c.StepAdjustments) > 20 {
		return validation("A step scaling policy has at most 20 step adjustments.")
	}
	if e := checkCooldown("Cooldown", c.Cooldown); e != nil {
		return e
	}
	if c.MinAdjustmentMagnitude != nil {
		if *c.AdjustmentType != adjPercent {
			return validation("MinAdjustmentMagnitude may only be specified with the adjustment type PercentChangeInCapacity.")
		}
		if *c.MinAdjustmentMagnitude < 1 || *c.MinAdjustmentMagnitude > maxStepAdjust {
			return validation("MinAdjustmentMagnitude must be between 1 and %d.", maxStepAdjust)
		}
	}
	if c.MetricAggregationType != nil && !slices.Contains([]string{"Average", "Minimum", "Maximum"}, *c.MetricAggregationType) {
		return enumError("stepScalingPolicyConfiguration.metricAggregationType", *c.MetricAggregationType, []string{"Average", "Minimum", "Maximum"})
	}
	type iv struct{ lo, hi float64 }
	var ivs []iv
	for i, st := range c.StepAdjustments {
		if st.ScalingAdjustment == nil {
			return required("stepScalingPolicyConfiguration.stepAdjustments." + itoa(i+1) + ".member.scalingAdjustment")
		}
		a := *st.ScalingAdjustment
		if a > maxStepAdjust || a < -maxStepAdjust {
			return validation("The scaling adjustment %d is out of range (%d to %d).", a, -maxStepAdjust, maxStepAdjust)
		}
		if *c.AdjustmentType == adjExact && a < 0 {
			return validation("The scaling adjustment of an ExactCapacity step must not be negative.")
		}
		lo, hi := math.Inf(-1), math.Inf(1)
		if st.MetricIntervalLowerBound != nil {
			lo = *st.MetricIntervalLowerBound
		}
		if st.MetricIntervalUpperBound != nil {
			hi = *st.MetricIntervalUpperBound
		}
		if math.IsNaN(lo) || math.IsNaN(hi) || (st.MetricIntervalLowerBound != nil && math.IsInf(lo, 0)) || (st.MetricIntervalUpperBound != nil && math.IsInf(hi, 0)) {
			return validation("Step adjustment bounds must be finite numbers.")
		}
		if st.MetricIntervalLowerBound == nil && st.MetricIntervalUpperBound == nil && len(c.StepAdjustments) > 1 {
			return validation("Only one step adjustment may have neither bound, and then it is the only one.")
		}
		if lo >= hi {
			return validation("The upper bound of step adjustment %d must be greater than its lower bound.", i+1)
		}
		ivs = append(ivs, iv{lo, hi})
	}
	slices.SortFunc(ivs, func(a, b iv) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	for i := 1; i < len(ivs); i++ {
		if ivs[i].lo < ivs[i-1].hi {
			return validation("Step adjustments must not overlap.")
		}
		if ivs[i].lo > ivs[i-1].hi {
			return validation("Step adjustments must not have gaps between them.")
		}
	}
	return nil
}

func itoa(i int) string { return strconv.Itoa(i) }

func (s *Service) policyARN(resourceID, name string) string {
	return "arn:aws:autoscaling:" + s.region + ":" + s.account + ":scalingPolicy:" + newUUID() + ":resource/" + Namespace + "/" + resourceID + ":policyName/" + name
}

// ownedAlarms are the alarms of a target tracking policy.
func ownedAlarms(p *ScalingPolicy) []string {
	if p.PolicyType != typeTargetTracking {
		return nil
	}
	var out []string
	for _, a := range p.Alarms {
		out = append(out, a.AlarmName)
	}
	return out
}

// alarmSpecs are the two alarms of a target tracking policy, as AWS makes
// them: AlarmHigh above the target for 3 of 3 periods, AlarmLow below 90%
// of it for 15 of 15 minutes; both invoke the policy.
func alarmSpecs(p *ScalingPolicy, high, low string) []cloudwatch.AlarmSpec {
	c := p.TargetTrackingScalingPolicyConfiguration
	base := cloudwatch.AlarmSpec{
		AlarmDescription: "DO NOT EDIT OR DELETE. For TargetTrackingScaling policy " + p.PolicyARN + ".",
		AlarmActions:     []string{p.PolicyARN},
		Namespace:        "AWS/SageMaker",
	}
	highPeriod := int32(60)
	if pm := c.PredefinedMetricSpecification; pm != nil {
		m := predefined[pm.PredefinedMetricType]
		base.MetricName, base.Statistic, highPeriod = m.metric, m.statistic, m.highPeriod
		if m.dimension == DimensionVariant {
			ep, variant := splitVariant(p.ResourceID)
			base.Dimensions = []cloudwatch.Dimension{{Name: "EndpointName", Value: ep}, {Name: "VariantName", Value: variant}}
		} else {
			base.Dimensions = []cloudwatch.Dimension{{Name: "InferenceComponentName", Value: strings.TrimPrefix(p.ResourceID, "inference-component/")}}
		}
	} else {
		cm := c.CustomizedMetricSpecification
		base.Namespace, base.MetricName, base.Statistic = *cm.Namespace, *cm.MetricName, *cm.Statistic
		if cm.Unit != nil {
			base.Unit = *cm.Unit
		}
		for _, d := range cm.Dimensions {
			base.Dimensions = append(base.Dimensions, cloudwatch.Dimension{Name: d.Name, Value: d.Value})
		}
	}
	h, l := base, base
	h.AlarmName, h.Period, h.EvaluationPeriods, h.DatapointsToAlarm = high, highPeriod, 3, 3
	h.Threshold, h.ComparisonOperator = *c.TargetValue, "GreaterThanThreshold"
	l.AlarmName, l.Period, l.EvaluationPeriods, l.DatapointsToAlarm = low, 60, 15, 15
	l.Threshold, l.ComparisonOperator = *c.TargetValue*0.9, "LessThanThreshold"
	out := []cloudwatch.AlarmSpec{h}
	if c.DisableScaleIn == nil || !*c.DisableScaleIn {
		out = append(out, l)
	}
	return out
}

func splitVariant(id string) (endpoint, variant string) {
	m := variantID.FindStringSubmatch(id)
	if m == nil {
		return "", ""
	}
	return m[1], m[3]
}

func (s *Service) putPolicy(_ context.Context, in *putPolicyInput) (any, *APIError) {
	s.policyMu.Lock()
	defer s.policyMu.Unlock()
	if e := checkPolicyName("policyName", in.PolicyName); e != nil {
		return nil, e
	}
	if e := checkTargetKey(in.ServiceNamespace, in.ResourceID, in.ScalableDimension); e != nil {
		return nil, e
	}
	pt := typeStep
	if in.PolicyType != nil {
		pt = *in.PolicyType
	}
	switch pt {
	case typeStep:
		if in.TargetTrackingScalingPolicyConfiguration != nil {
			return nil, validation("A StepScaling policy takes a StepScalingPolicyConfiguration, not a TargetTrackingScalingPolicyConfiguration.")
		}
		if e := checkStep(in.StepScalingPolicyConfiguration); e != nil {
			return nil, e
		}
	case typeTargetTracking:
		if in.StepScalingPolicyConfiguration != nil {
			return nil, validation("A TargetTrackingScaling policy takes a TargetTrackingScalingPolicyConfiguration, not a StepScalingPolicyConfiguration.")
		}
		if e := checkTargetTracking(in.TargetTrackingScalingPolicyConfiguration, in.ScalableDimension); e != nil {
			return nil, e
		}
	case typePredictive:
		return nil, validation("mce does not serve predictive scaling policies: it forecasts nothing. Use TargetTrackingScaling or StepScaling.")
	default:
		return nil, enumError("policyType", pt, []string{typeStep, typeTargetTracking, typePredictive})
	}
	k := key(in.ScalableDimension, in.ResourceID)
	s.mu.Lock()
	t := s.targets[k]
	if t == nil {
		s.mu.Unlock()
		return nil, notRegistered(in.targetKey)
	}
	i := slices.IndexFunc(t.Policies, func(p *ScalingPolicy) bool { return p.PolicyName == in.PolicyName })
	if i < 0 && len(t.Policies) >= maxPoliciesTarget {
		s.mu.Unlock()
		return nil, limitExceeded("A scalable target has at most %d scaling policies.", maxPoliciesTarget)
	}
	p := &ScalingPolicy{PolicyName: in.PolicyName, ServiceNamespace: in.ServiceNamespace, ResourceID: in.ResourceID,
		ScalableDimension: in.ScalableDimension, PolicyType: pt, StepScalingPolicyConfiguration: in.StepScalingPolicyConfiguration,
		TargetTrackingScalingPolicyConfiguration: in.TargetTrackingScalingPolicyConfiguration, Alarms: []AlarmRef{}}
	var old *ScalingPolicy
	if i >= 0 {
		old = t.Policies[i]
		p.PolicyARN, p.CreationTime = old.PolicyARN, old.CreationTime
	} else {
		p.PolicyARN, p.CreationTime = s.policyARN(in.ResourceID, in.PolicyName), epoch{s.now().Truncate(1e6)}
	}
	s.mu.Unlock()

	// Target tracking's alarms: made (or replaced, keeping their names and
	// states) before the policy is kept, so a policy never names an alarm
	// that is not there.
	var stale []string
	if pt == typeTargetTracking {
		high, low := "", ""
		if old != nil {
			for _, a := range ownedAlarms(old) {
				switch {
				case strings.Contains(a, "-AlarmHigh-"):
					high = a
				case strings.Contains(a, "-AlarmLow-"):
					low = a
				}
			}
		}
		if high == "" {
			high = "TargetTracking-" + in.ResourceID + "-AlarmHigh-" + newUUID()
		}
		if low == "" {
			low = "TargetTracking-" + in.ResourceID + "-AlarmLow-" + newUUID()
		}
		specs := alarmSpecs(p, high, low)
		for _, sp := range specs {
			if err := s.cw.PutAlarm(sp); err != nil {
				return nil, newErr(400, CodeFailedResourceAccess, "The policy's CloudWatch alarm %s could not be made: %s", sp.AlarmName, err.Error())
			}
			p.Alarms = append(p.Alarms, AlarmRef{AlarmName: sp.AlarmName, AlarmARN: s.cw.AlarmArn(sp.AlarmName)})
		}
		if len(specs) == 1 {
			stale = append(stale, low) // scale-in disabled: no AlarmLow
		}
	} else if old != nil {
		stale = ownedAlarms(old)
	}
	s.mu.Lock()
	t = s.targets[k]
	if t == nil {
		s.mu.Unlock()
		s.cw.DeleteAlarms(ownedAlarms(p)...)
		return nil, notRegistered(in.targetKey)
	}
	if i := slices.IndexFunc(t.Policies, func(x *ScalingPolicy) bool { return x.PolicyName == in.PolicyName }); i >= 0 {
		t.Policies[i] = p
	} else {
		t.Policies = append(t.Policies, p)
	}
	s.mu.Unlock()
	if len(stale) > 0 {
		s.cw.DeleteAlarms(stale...)
	}
	if err := s.persist(k); err != nil {
		return nil, internal("The scaling policy could not be written to mce's state folder.")
	}
	return struct {
		PolicyARN string
		Alarms    []AlarmRef `json:",omitempty"`
	}{p.PolicyARN, p.Alarms}, nil
}

func (s *Service) describePolicies(_ context.Context, in *describePoliciesInput) (any, *APIError) {
	if e := checkFilter(in.ServiceNamespace, in.ScalableDimension); e != nil {
		return nil, e
	}
	if e := checkIDs("policyNames", in.PolicyNames); e != nil {
		return nil, e
	}
	if in.ResourceID != "" {
		if e := checkResourceID("resourceId", in.ResourceID); e != nil {
			return nil, e
		}
	}
	s.mu.Lock()
	var list []ScalingPolicy
	for _, t := range s.targets {
		if in.ScalableDimension != "" && t.T.ScalableDimension != in.ScalableDimension || in.ResourceID != "" && t.T.ResourceID != in.ResourceID {
			continue
		}
		for _, p := range t.Policies {
			if len(in.PolicyNames) > 0 && !slices.Contains(in.PolicyNames, p.PolicyName) {
				continue
			}
			list = append(list, *p)
		}
	}
	s.mu.Unlock()
	items, next, e := page(list, func(p ScalingPolicy) string { return p.ResourceID + "|" + p.ScalableDimension + "|" + p.PolicyName }, in.MaxResults, 10, in.NextToken)
	if e != nil {
		return nil, e
	}
	return struct {
		ScalingPolicies []ScalingPolicy
		NextToken       *string `json:",omitempty"`
	}{items, next}, nil
}

func (s *Service) deletePolicy(_ context.Context, in *deletePolicyInput) (any, *APIError) {
	s.policyMu.Lock()
	defer s.policyMu.Unlock()
	if e := checkPolicyName("policyName", in.PolicyName); e != nil {
		return nil, e
	}
	k, t, e := s.lockTarget(in.targetKey)
	if e != nil {
		return nil, e
	}
	i := slices.IndexFunc(t.Policies, func(p *ScalingPolicy) bool { return p.PolicyName == in.PolicyName })
	if i < 0 {
		s.mu.Unlock()
		return nil, notFound("No scaling policy found for service namespace: %s, resource ID: %s, scalable dimension: %s, policy name: %s",
			in.ServiceNamespace, in.ResourceID, in.ScalableDimension, in.PolicyName)
	}
	gone := t.Policies[i]
	t.Policies = slices.Delete(t.Policies, i, i+1)
	s.mu.Unlock()
	if err := s.persist(k); err != nil {
		return nil, internal("The scaling policy's removal could not be written to mce's state folder.")
	}
	if err := s.cw.DeleteAlarms(ownedAlarms(gone)...); err != nil {
		s.log.Error().Err(err).Msg("applicationautoscaling: deleting a policy's alarms")
	}
	return struct{}{}, nil
}
