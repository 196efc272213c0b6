package spec

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func parseDC(t *testing.T, s string) *DeploymentConfig {
	t.Helper()
	d, err := ParseDeploymentConfig(json.RawMessage(s))
	if err != nil {
		t.Fatalf("ParseDeploymentConfig(%s): %v", s, err)
	}
	return d
}

// TestDeploymentConfigMessages: each constraint of SageMaker's model fails
// with its message, and each rule between members with its sentence.
func TestDeploymentConfigMessages(t *testing.T) {
	const tr = `"TrafficRoutingConfiguration":`
	cases := []struct{ in, want string }{
		{`{"BlueGreenUpdatePolicy":{}}`,
			"1 validation error detected: Value null at 'deploymentConfig.blueGreenUpdatePolicy.trafficRoutingConfiguration' failed to satisfy constraint: Member must not be null"},
		{`{"BlueGreenUpdatePolicy":{` + tr + `{"Type":"FAST","WaitIntervalInSeconds":1}}}`,
			"1 validation error detected: Value 'FAST' at 'deploymentConfig.blueGreenUpdatePolicy.trafficRoutingConfiguration.type' failed to satisfy constraint: Member must satisfy enum value set: [ALL_AT_ONCE, CANARY, LINEAR]"},
		{`{"BlueGreenUpdatePolicy":{` + tr + `{"Type":"ALL_AT_ONCE"}}}`,
			"1 validation error detected: Value null at 'deploymentConfig.blueGreenUpdatePolicy.trafficRoutingConfiguration.waitIntervalInSeconds' failed to satisfy constraint: Member must not be null"},
		{`{"BlueGreenUpdatePolicy":{` + tr + `{"Type":"ALL_AT_ONCE","WaitIntervalInSeconds":3601},"MaximumExecutionTimeoutInSeconds":599}}`,
			"2 validation errors detected: Value '3601' at 'deploymentConfig.blueGreenUpdatePolicy.trafficRoutingConfiguration.waitIntervalInSeconds' failed to satisfy constraint: Member must have value less than or equal to 3600; " +
				"Value '599' at 'deploymentConfig.blueGreenUpdatePolicy.maximumExecutionTimeoutInSeconds' failed to satisfy constraint: Member must have value greater than or equal to 600"},
		{`{"BlueGreenUpdatePolicy":{` + tr + `{"Type":"ALL_AT_ONCE","WaitIntervalInSeconds":0},"TerminationWaitInSeconds":-1,"MaximumExecutionTimeoutInSeconds":28801}}`,
			"2 validation errors detected: Value '-1' at 'deploymentConfig.blueGreenUpdatePolicy.terminationWaitInSeconds' failed to satisfy constraint: Member must have value greater than or equal to 0; " +
				"Value '28801' at 'deploymentConfig.blueGreenUpdatePolicy.maximumExecutionTimeoutInSeconds' failed to satisfy constraint: Member must have value less than or equal to 28800"},
		{`{"BlueGreenUpdatePolicy":{` + tr + `{"Type":"CANARY","WaitIntervalInSeconds":1,"CanarySize":{"Type":"HALF","Value":0}}}}`,
			"2 validation errors detected: Value 'HALF' at 'deploymentConfig.blueGreenUpdatePolicy.trafficRoutingConfiguration.canarySize.type' failed to satisfy constraint: Member must satisfy enum value set: [INSTANCE_COUNT, CAPACITY_PERCENT]; " +
				"Value '0' at 'deploymentConfig.blueGreenUpdatePolicy.trafficRoutingConfiguration.canarySize.value' failed to satisfy constraint: Member must have value greater than or equal to 1"},
		{`{"BlueGreenUpdatePolicy":{` + tr + `{"Type":"LINEAR","WaitIntervalInSeconds":1,"LinearStepSize":{"Type":"INSTANCE_COUNT"}}}}`,
			"1 validation error detected: Value null at 'deploymentConfig.blueGreenUpdatePolicy.trafficRoutingConfiguration.linearStepSize.value' failed to satisfy constraint: Member must not be null"},
		{`{"RollingUpdatePolicy":{}}`,
			"2 validation errors detected: Value null at 'deploymentConfig.rollingUpdatePolicy.maximumBatchSize' failed to satisfy constraint: Member must not be null; " +
				"Value null at 'deploymentConfig.rollingUpdatePolicy.waitIntervalInSeconds' failed to satisfy constraint: Member must not be null"},
		{`{"BlueGreenUpdatePolicy":{` + tr + `{"Type":"ALL_AT_ONCE","WaitIntervalInSeconds":1}},"AutoRollbackConfiguration":{"Alarms":[]}}`,
			"1 validation error detected: Value at 'deploymentConfig.autoRollbackConfiguration.alarms' failed to satisfy constraint: Member must have length greater than or equal to 1"},
		{`{"BlueGreenUpdatePolicy":{` + tr + `{"Type":"ALL_AT_ONCE","WaitIntervalInSeconds":1}},"AutoRollbackConfiguration":{"Alarms":[{"AlarmName":"  "},{}]}}`,
			"2 validation errors detected: Value '  ' at 'deploymentConfig.autoRollbackConfiguration.alarms.1.member.alarmName' failed to satisfy constraint: Member must satisfy regular expression pattern: (?!\\s*$).+; " +
				"Value null at 'deploymentConfig.autoRollbackConfiguration.alarms.2.member.alarmName' failed to satisfy constraint: Member must not be null"},
		{`{"BlueGreenUpdatePolicy":{` + tr + `{"Type":"ALL_AT_ONCE","WaitIntervalInSeconds":1}},"AutoRollbackConfiguration":{"Alarms":[` + strings.Repeat(`{"AlarmName":"a"},`, 10) + `{"AlarmName":"a"}]}}`,
			"1 validation error detected: Value at 'deploymentConfig.autoRollbackConfiguration.alarms' failed to satisfy constraint: Member must have length less than or equal to 10"},
		// The rules between members.
		{`{}`, "DeploymentConfig needs a BlueGreenUpdatePolicy or a RollingUpdatePolicy."},
		{`{"BlueGreenUpdatePolicy":{` + tr + `{"Type":"ALL_AT_ONCE","WaitIntervalInSeconds":1}},"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1},"WaitIntervalInSeconds":1}}`,
			"DeploymentConfig may have a BlueGreenUpdatePolicy or a RollingUpdatePolicy, not both."},
		{`{"BlueGreenUpdatePolicy":{` + tr + `{"Type":"CANARY","WaitIntervalInSeconds":1}}}`,
			"CanarySize is required when the TrafficRoutingConfiguration Type is CANARY."},
		{`{"BlueGreenUpdatePolicy":{` + tr + `{"Type":"CANARY","WaitIntervalInSeconds":1,"CanarySize":{"Type":"CAPACITY_PERCENT","Value":51}}}}`,
			"CanarySize must be at most 50% of the new fleet's capacity; it is 51%."},
		{`{"BlueGreenUpdatePolicy":{` + tr + `{"Type":"LINEAR","WaitIntervalInSeconds":1}}}`,
			"LinearStepSize is required when the TrafficRoutingConfiguration Type is LINEAR."},
		{`{"BlueGreenUpdatePolicy":{` + tr + `{"Type":"LINEAR","WaitIntervalInSeconds":1,"LinearStepSize":{"Type":"CAPACITY_PERCENT","Value":101}}}}`,
			"LinearStepSize must be at most 100% of the new fleet's capacity; it is 101%."},
		{`{"BlueGreenUpdatePolicy":{` + tr + `{"Type":"ALL_AT_ONCE","WaitIntervalInSeconds":1,"CanarySize":{"Type":"INSTANCE_COUNT","Value":1}}}}`,
			"CanarySize and LinearStepSize are not valid when the TrafficRoutingConfiguration Type is ALL_AT_ONCE."},
		{`{"BlueGreenUpdatePolicy":{` + tr + `{"Type":"ALL_AT_ONCE","WaitIntervalInSeconds":600},"TerminationWaitInSeconds":100,"MaximumExecutionTimeoutInSeconds":700}}`,
			"MaximumExecutionTimeoutInSeconds (700) must be greater than WaitIntervalInSeconds plus TerminationWaitInSeconds (700)."},
		{`{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"CAPACITY_PERCENT","Value":200},"WaitIntervalInSeconds":1}}`,
			"A batch size of type CAPACITY_PERCENT must be at most 100; it is 200."},
	}
	for _, c := range cases {
		err := parseDC(t, c.in).Validate()
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: error %v, want a ValidationError", c.in, err)
			continue
		}
		if got := ve.Message(); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.in, got, c.want)
		}
	}
}

func TestDeploymentConfigAcceptedAndEchoed(t *testing.T) {
	in := `{"BlueGreenUpdatePolicy":{"TrafficRoutingConfiguration":{"Type":"CANARY","WaitIntervalInSeconds":300,"CanarySize":{"Type":"CAPACITY_PERCENT","Value":10}},"TerminationWaitInSeconds":120,"MaximumExecutionTimeoutInSeconds":1800},"AutoRollbackConfiguration":{"Alarms":[{"AlarmName":"a"},{"AlarmName":"b"}]}}`
	d := parseDC(t, in)
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(d)
	if string(out) != in {
		t.Errorf("echo\n got %s\nwant %s", out, in)
	}
	if got := d.Alarms(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("Alarms() = %v", got)
	}
	if d, err := ParseDeploymentConfig(json.RawMessage(`null`)); d != nil || err != nil {
		t.Errorf("null: %v %v", d, err)
	}
	if _, err := ParseDeploymentConfig(json.RawMessage(`{"BlueGreen":{}}`)); err == nil {
		t.Error("an unknown member was accepted")
	}
}

func TestCapacitySizeInstances(t *testing.T) {
	v := func(n int32) *int32 { return &n }
	cases := []struct {
		cs   CapacitySize
		n    int
		want int
	}{
		{CapacitySize{Type: InstanceCount, Value: v(1)}, 4, 1},
		{CapacitySize{Type: InstanceCount, Value: v(9)}, 4, 4},
		{CapacitySize{Type: CapacityPercent, Value: v(10)}, 3, 1}, // rounds up
		{CapacitySize{Type: CapacityPercent, Value: v(50)}, 4, 2},
		{CapacitySize{Type: CapacityPercent, Value: v(34)}, 3, 2},
		{CapacitySize{Type: CapacityPercent, Value: v(100)}, 5, 5},
	}
	for _, c := range cases {
		if got := c.cs.Instances(c.n); got != c.want {
			t.Errorf("%s %d of %d = %d, want %d", c.cs.Type, *c.cs.Value, c.n, got, c.want)
		}
	}
}

func TestComponentBatch(t *testing.T) {
	got, err := ComponentBatch(json.RawMessage(`{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"CAPACITY_PERCENT","Value":30},"WaitIntervalInSeconds":120},"AutoRollbackConfiguration":{"Alarms":[{"AlarmName":"a"}]}}`), 5)
	if err != nil || got.Batch != 2 || got.Wait != 2*time.Minute || !reflect.DeepEqual(got.Alarms, []string{"a"}) ||
		got.RollbackBatch != AllAtOnce || got.Timeout != 0 {
		t.Errorf("30%% of 5 copies: %+v %v", got, err)
	}
	got, err = ComponentBatch(json.RawMessage(`{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"COPY_COUNT","Value":1},"WaitIntervalInSeconds":60,`+
		`"MaximumExecutionTimeoutInSeconds":900,"RollbackMaximumBatchSize":{"Type":"CAPACITY_PERCENT","Value":50}}}`), 4)
	if err != nil || got.Batch != 1 || got.RollbackBatch != 2 || got.Timeout != 15*time.Minute {
		t.Errorf("rollback of 50%% of 4 copies, 900 s: %+v %v", got, err)
	}
	if got, err := ComponentBatch(nil, 5); err != nil || got.Batch != 0 {
		t.Errorf("none: %+v %v", got, err)
	}
	for in, want := range map[string]string{
		`{}`: "1 validation error detected: Value null at 'deploymentConfig.rollingUpdatePolicy' failed to satisfy constraint: Member must not be null",
		`{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"COPY_COUNT","Value":0},"WaitIntervalInSeconds":4000}}`: "2 validation errors detected: Value '0' at 'deploymentConfig.rollingUpdatePolicy.maximumBatchSize.value' failed to satisfy constraint: Member must have value greater than or equal to 1; " +
			"Value '4000' at 'deploymentConfig.rollingUpdatePolicy.waitIntervalInSeconds' failed to satisfy constraint: Member must have value less than or equal to 3600",
		`{"BlueGreenUpdatePolicy":{}}`: "An inference component's DeploymentConfig has a RollingUpdatePolicy only.",
	} {
		_, err := ComponentBatch(json.RawMessage(in), 3)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Message() != want {
			t.Errorf("%s: %v, want %s", in, err, want)
		}
	}
}

// FuzzDeploymentConfig: no input makes the parse, the checks or the
// component reading panic, and whatever passes the checks can be
// marshalled back and passes again.
func FuzzDeploymentConfig(f *testing.F) {
	f.Add(`{"BlueGreenUpdatePolicy":{"TrafficRoutingConfiguration":{"Type":"CANARY","WaitIntervalInSeconds":1,"CanarySize":{"Type":"INSTANCE_COUNT","Value":1}}}}`)
	f.Add(`{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"COPY_COUNT","Value":1},"WaitIntervalInSeconds":1},"AutoRollbackConfiguration":{"Alarms":[{"AlarmName":"a"}]}}`)
	f.Add(`{"BlueGreenUpdatePolicy":{"TrafficRoutingConfiguration":{"Type":"LINEAR","LinearStepSize":{}}}}`)
	f.Fuzz(func(t *testing.T, in string) {
		ComponentBatch(json.RawMessage(in), 3)
		d, err := ParseDeploymentConfig(json.RawMessage(in))
		if err != nil || d == nil || d.Validate() != nil {
			return
		}
		b, _ := json.Marshal(d)
		again, err := ParseDeploymentConfig(b)
		if err != nil || again.Validate() != nil {
			t.Fatalf("%s passed, its echo %s does not: %v", in, b, err)
		}
	})
}
