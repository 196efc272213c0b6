package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// DeploymentConfig is deployment guardrails' configuration of an endpoint
// update (CreateEndpoint and UpdateEndpoint,
// https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DeploymentConfig.html),
// with SageMaker's member names: DescribeEndpoint echoes it as
// LastDeploymentConfig.
type DeploymentConfig struct {
	BlueGreenUpdatePolicy     *BlueGreenUpdatePolicy `json:"BlueGreenUpdatePolicy,omitempty"`
	RollingUpdatePolicy       *RollingUpdatePolicy   `json:"RollingUpdatePolicy,omitempty"`
	AutoRollbackConfiguration *AutoRollbackConfig    `json:"AutoRollbackConfiguration,omitempty"`
}

// BlueGreenUpdatePolicy: a new (green) fleet beside the old (blue) one,
// traffic shifted to it as TrafficRoutingConfiguration says.
type BlueGreenUpdatePolicy struct {
	TrafficRoutingConfiguration      *TrafficRoutingConfig `json:"TrafficRoutingConfiguration,omitempty"`
	TerminationWaitInSeconds         *int32                `json:"TerminationWaitInSeconds,omitempty"`
	MaximumExecutionTimeoutInSeconds *int32                `json:"MaximumExecutionTimeoutInSeconds,omitempty"`
}

// TrafficRoutingConfig is how traffic moves from blue to green.
type TrafficRoutingConfig struct {
	Type                  string        `json:"Type,omitempty"` // ALL_AT_ONCE, CANARY, LINEAR
	WaitIntervalInSeconds *int32        `json:"WaitIntervalInSeconds,omitempty"`
	CanarySize            *CapacitySize `json:"CanarySize,omitempty"`
	LinearStepSize        *CapacitySize `json:"LinearStepSize,omitempty"`
}

// CapacitySize is a number of instances or a percentage of a fleet.
type CapacitySize struct {
	Type  string `json:"Type,omitempty"` // INSTANCE_COUNT, CAPACITY_PERCENT
	Value *int32 `json:"Value,omitempty"`
}

// RollingUpdatePolicy replaces a fleet in batches.
type RollingUpdatePolicy struct {
	MaximumBatchSize                 *CapacitySize `json:"MaximumBatchSize,omitempty"`
	WaitIntervalInSeconds            *int32        `json:"WaitIntervalInSeconds,omitempty"`
	MaximumExecutionTimeoutInSeconds *int32        `json:"MaximumExecutionTimeoutInSeconds,omitempty"`
	RollbackMaximumBatchSize         *CapacitySize `json:"RollbackMaximumBatchSize,omitempty"`
}

// AutoRollbackConfig names the CloudWatch alarms that roll a deployment
// back when one of them is in ALARM.
type AutoRollbackConfig struct {
	Alarms []AlarmRef `json:"Alarms,omitempty"`
}

// AlarmRef is one alarm of AutoRollbackConfig, by name.
type AlarmRef struct {
	AlarmName string `json:"AlarmName,omitempty"`
}

// The traffic routing types and capacity size types.
const (
	TrafficAllAtOnce = "ALL_AT_ONCE"
	TrafficCanary    = "CANARY"
	TrafficLinear    = "LINEAR"
	InstanceCount    = "INSTANCE_COUNT"
	CapacityPercent  = "CAPACITY_PERCENT"
)

// The bounds of botocore's sagemaker model.
const (
	maxWaitSeconds    = 3600
	minExecTimeoutSec = 600
	maxExecTimeoutSec = 28800
	maxAlarms         = 10
	maxAlarmNameLen   = 255
)

// ParseDeploymentConfig decodes a DeploymentConfig member: nil when it is
// absent or null. Unknown members are refused as the rest of the control
// plane's decoding refuses them.
func ParseDeploymentConfig(raw json.RawMessage) (*DeploymentConfig, error) {
	if !present(raw) {
		return nil, nil
	}
	var d DeploymentConfig
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, &ValidationError{Messages: []string{"DeploymentConfig is not valid: " + err.Error()}}
	}
	return &d, nil
}

// Validate checks the constraints of SageMaker's model (one message per
// failed constraint, in its wording), then the rules between members as
// whole sentences.
func (d *DeploymentConfig) Validate() error {
	var c checker
	const p = "deploymentConfig"
	if bg := d.BlueGreenUpdatePolicy; bg != nil {
		bp := p + ".blueGreenUpdatePolicy"
		if t := bg.TrafficRoutingConfiguration; t == nil {
			c.fail("null", bp+".trafficRoutingConfiguration", "Member must not be null")
		} else {
			tp := bp + ".trafficRoutingConfiguration"
			if c.required(tp+".type", t.Type) {
				c.enum(tp+".type", t.Type, TrafficAllAtOnce, TrafficCanary, TrafficLinear)
			}
			if t.WaitIntervalInSeconds == nil {
				c.fail("null", tp+".waitIntervalInSeconds", "Member must not be null")
			}
			c.intRange(tp+".waitIntervalInSeconds", t.WaitIntervalInSeconds, 0, maxWaitSeconds)
			c.capacity(tp+".canarySize", t.CanarySize)
			c.capacity(tp+".linearStepSize", t.LinearStepSize)
		}
		c.intRange(bp+".terminationWaitInSeconds", bg.TerminationWaitInSeconds, 0, maxWaitSeconds)
		c.intRange(bp+".maximumExecutionTimeoutInSeconds", bg.MaximumExecutionTimeoutInSeconds, minExecTimeoutSec, maxExecTimeoutSec)
	}
	if r := d.RollingUpdatePolicy; r != nil {
		rp := p + ".rollingUpdatePolicy"
		if r.MaximumBatchSize == nil {
			c.fail("null", rp+".maximumBatchSize", "Member must not be null")
		}
		c.capacity(rp+".maximumBatchSize", r.MaximumBatchSize)
		if r.WaitIntervalInSeconds == nil {
			c.fail("null", rp+".waitIntervalInSeconds", "Member must not be null")
		}
		c.intRange(rp+".waitIntervalInSeconds", r.WaitIntervalInSeconds, 0, maxWaitSeconds)
		c.intRange(rp+".maximumExecutionTimeoutInSeconds", r.MaximumExecutionTimeoutInSeconds, minExecTimeoutSec, maxExecTimeoutSec)
		c.capacity(rp+".rollbackMaximumBatchSize", r.RollbackMaximumBatchSize)
	}
	c.alarms(d.AutoRollbackConfiguration)
	if err := c.err(); err != nil {
		return err
	}
	var s semantic
	switch {
	case d.BlueGreenUpdatePolicy != nil && d.RollingUpdatePolicy != nil:
		s.add("DeploymentConfig may have a BlueGreenUpdatePolicy or a RollingUpdatePolicy, not both.")
	case d.BlueGreenUpdatePolicy == nil && d.RollingUpdatePolicy == nil:
		s.add("DeploymentConfig needs a BlueGreenUpdatePolicy or a RollingUpdatePolicy.")
	}
	if bg := d.BlueGreenUpdatePolicy; bg != nil {
		t := bg.TrafficRoutingConfiguration
		switch t.Type {
		case TrafficCanary:
			if t.CanarySize == nil {
				s.add("CanarySize is required when the TrafficRoutingConfiguration Type is CANARY.")
			} else if t.CanarySize.Type == CapacityPercent && *t.CanarySize.Value > 50 {
				s.add("CanarySize must be at most 50% of the new fleet's capacity; it is " + strconv.Itoa(int(*t.CanarySize.Value)) + "%.")
			}
			if t.LinearStepSize != nil {
				s.add("LinearStepSize is only valid when the TrafficRoutingConfiguration Type is LINEAR.")
			}
		case TrafficLinear:
			if t.LinearStepSize == nil {
				s.add("LinearStepSize is required when the TrafficRoutingConfiguration Type is LINEAR.")
			} else if t.LinearStepSize.Type == CapacityPercent && *t.LinearStepSize.Value > 100 {
				s.add("LinearStepSize must be at most 100% of the new fleet's capacity; it is " + strconv.Itoa(int(*t.LinearStepSize.Value)) + "%.")
			}
			if t.CanarySize != nil {
				s.add("CanarySize is only valid when the TrafficRoutingConfiguration Type is CANARY.")
			}
		case TrafficAllAtOnce:
			if t.CanarySize != nil || t.LinearStepSize != nil {
				s.add("CanarySize and LinearStepSize are not valid when the TrafficRoutingConfiguration Type is ALL_AT_ONCE.")
			}
		}
		if m := bg.MaximumExecutionTimeoutInSeconds; m != nil {
			waits := int(*t.WaitIntervalInSeconds) + int(deref(bg.TerminationWaitInSeconds))
			if int(*m) <= waits {
				s.add(fmt.Sprintf("MaximumExecutionTimeoutInSeconds (%d) must be greater than WaitIntervalInSeconds plus TerminationWaitInSeconds (%d).", *m, waits))
			}
		}
	}
	if r := d.RollingUpdatePolicy; r != nil {
		if m := r.MaximumExecutionTimeoutInSeconds; m != nil && *m <= *r.WaitIntervalInSeconds {
			s.add(fmt.Sprintf("MaximumExecutionTimeoutInSeconds (%d) must be greater than WaitIntervalInSeconds (%d).", *m, *r.WaitIntervalInSeconds))
		}
		for _, cs := range []*CapacitySize{r.MaximumBatchSize, r.RollbackMaximumBatchSize} {
			if cs != nil && cs.Type == CapacityPercent && *cs.Value > 100 {
				s.add("A batch size of type CAPACITY_PERCENT must be at most 100; it is " + strconv.Itoa(int(*cs.Value)) + ".")
			}
		}
	}
	return s.err()
}

// alarms checks AutoRollbackConfiguration.
func (c *checker) alarms(a *AutoRollbackConfig) {
	if a == nil {
		return
	}
	ap := "deploymentConfig.autoRollbackConfiguration.alarms"
	c.listLen(ap, len(a.Alarms), 1, maxAlarms)
	for i, al := range a.Alarms {
		n := member1(ap, i) + ".alarmName"
		if c.required(n, al.AlarmName) {
			c.str(n, al.AlarmName, maxAlarmNameLen, nil, "")
			if blank(al.AlarmName) {
				c.fail(quote(al.AlarmName), n, "Member must satisfy regular expression pattern: (?!\\s*$).+")
			}
		}
	}
}

// capacity checks a CapacitySize member.
func (c *checker) capacity(path string, cs *CapacitySize) {
	if cs == nil {
		return
	}
	if c.required(path+".type", cs.Type) {
		c.enum(path+".type", cs.Type, InstanceCount, CapacityPercent)
	}
	if cs.Value == nil {
		c.fail("null", path+".value", "Member must not be null")
	}
	c.intRange(path+".value", cs.Value, 1, -1)
}

func blank(s string) bool {
	for _, r := range s {
		if r != ' ' && r != '\t' && r != '\n' && r != '\r' && r != '\f' && r != '\v' {
			return false
		}
	}
	return true
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// Alarms lists the names AutoRollbackConfiguration watches.
func (d *DeploymentConfig) Alarms() []string {
	if d == nil || d.AutoRollbackConfiguration == nil {
		return nil
	}
	var out []string
	for _, a := range d.AutoRollbackConfiguration.Alarms {
		out = append(out, a.AlarmName)
	}
	return out
}

// Instances is how many of a fleet of n instances a CapacitySize is, at
// least 1 and at most n (a percentage rounds up, as a canary of 10% of 3
// instances is one instance).
func (cs *CapacitySize) Instances(n int) int {
	if cs == nil || cs.Value == nil || n <= 0 {
		return n
	}
	k := int(*cs.Value)
	if cs.Type == CapacityPercent {
		k = (k*n + 99) / 100
	}
	return max(1, min(k, n))
}

// Seconds turns an optional count of seconds into a duration.
func Seconds(p *int32) time.Duration { return time.Duration(deref(p)) * time.Second }

// The capacity size types of an inference component's rolling update.
const (
	CopyCount = "COPY_COUNT"
)

// AllAtOnce is a batch that holds every copy: a rollback without
// RollbackMaximumBatchSize brings the whole old capacity back at once.
const AllAtOnce = 1 << 30

// ComponentRolling is what an inference component's rolling update takes
// of its DeploymentConfig.
type ComponentRolling struct {
	Batch  int           // copies a batch replaces; 0: no DeploymentConfig
	Wait   time.Duration // the bake after each batch
	Alarms []string      // AutoRollbackConfiguration's
	// RollbackBatch is how many copies a rollback brings back at a time
	// (RollbackMaximumBatchSize; without it AllAtOnce, SageMaker's
	// default); 0: no DeploymentConfig.
	RollbackBatch int
	// Timeout is MaximumExecutionTimeoutInSeconds: an update still rolling
	// after it is rolled back; 0: none.
	Timeout time.Duration
}

// ComponentBatch reads UpdateInferenceComponent's DeploymentConfig
// (InferenceComponentDeploymentConfig: a RollingUpdatePolicy whose sizes
// count copies) for a component of copies copies.
func ComponentBatch(raw json.RawMessage, copies int) (ComponentRolling, error) {
	d, err := ParseDeploymentConfig(raw)
	if err != nil || d == nil {
		return ComponentRolling{}, err
	}
	var c checker
	const p = "deploymentConfig"
	if d.BlueGreenUpdatePolicy != nil {
		return ComponentRolling{}, &ValidationError{Messages: []string{"An inference component's DeploymentConfig has a RollingUpdatePolicy only."}}
	}
	r := d.RollingUpdatePolicy
	if r == nil {
		c.fail("null", p+".rollingUpdatePolicy", "Member must not be null")
		return ComponentRolling{}, c.err()
	}
	rp := p + ".rollingUpdatePolicy"
	size := func(path string, cs *CapacitySize) {
		if cs == nil {
			return
		}
		if c.required(path+".type", cs.Type) {
			c.enum(path+".type", cs.Type, CopyCount, CapacityPercent)
		}
		if cs.Value == nil {
			c.fail("null", path+".value", "Member must not be null")
		}
		c.intRange(path+".value", cs.Value, 1, -1)
	}
	if r.MaximumBatchSize == nil {
		c.fail("null", rp+".maximumBatchSize", "Member must not be null")
	}
	size(rp+".maximumBatchSize", r.MaximumBatchSize)
	if r.WaitIntervalInSeconds == nil {
		c.fail("null", rp+".waitIntervalInSeconds", "Member must not be null")
	}
	c.intRange(rp+".waitIntervalInSeconds", r.WaitIntervalInSeconds, 0, maxWaitSeconds)
	c.intRange(rp+".maximumExecutionTimeoutInSeconds", r.MaximumExecutionTimeoutInSeconds, minExecTimeoutSec, maxExecTimeoutSec)
	size(rp+".rollbackMaximumBatchSize", r.RollbackMaximumBatchSize)
	c.alarms(d.AutoRollbackConfiguration)
	if err := c.err(); err != nil {
		return ComponentRolling{}, err
	}
	count := func(cs CapacitySize) int {
		if cs.Type == CopyCount {
			cs.Type = InstanceCount
		}
		return cs.Instances(max(copies, 1))
	}
	out := ComponentRolling{Batch: count(*r.MaximumBatchSize), Wait: Seconds(r.WaitIntervalInSeconds), Alarms: d.Alarms()}
	out.RollbackBatch = AllAtOnce
	if rb := r.RollbackMaximumBatchSize; rb != nil {
		out.RollbackBatch = count(*rb)
	}
	if r.MaximumExecutionTimeoutInSeconds != nil {
		out.Timeout = Seconds(r.MaximumExecutionTimeoutInSeconds)
	}
	return out, nil
}
