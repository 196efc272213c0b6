package applicationautoscaling

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// boto3 against the service: pyenv's python3 (boto3 1.43) and Debian's
// /usr/bin/python3 (boto3 1.26), each as a client of its own release.

const botoScript = `
import sys, json
import boto3, botocore
url = sys.argv[1]
c = boto3.client("application-autoscaling", endpoint_url=url, region_name="us-east-1")
out = {}
rid = "endpoint/ep/variant/v1"
dim = "sagemaker:variant:DesiredInstanceCount"
# ScalableTargetARN came into the model in 2023: boto3 1.26 drops it.
out["arn"] = c.register_scalable_target(ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=dim,
    MinCapacity=1, MaxCapacity=4).get("ScalableTargetARN", "absent/").split("/")[0]
c.register_scalable_target(ServiceNamespace="sagemaker", ResourceId="inference-component/ic1",
    ScalableDimension="sagemaker:inference-component:DesiredCopyCount", MinCapacity=0, MaxCapacity=2)
t = c.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[rid])["ScalableTargets"][0]
out["target"] = [t["MinCapacity"], t["MaxCapacity"], t["CreationTime"].year]
p = c.put_scaling_policy(PolicyName="ipi", ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=dim,
    PolicyType="TargetTrackingScaling", TargetTrackingScalingPolicyConfiguration={"TargetValue": 70.0,
    "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
    "ScaleInCooldown": 300, "ScaleOutCooldown": 60})
out["alarms"] = [a["AlarmName"].split("-Alarm")[1][:4] for a in p["Alarms"]]
c.put_scaling_policy(PolicyName="steps", ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=dim,
    PolicyType="StepScaling", StepScalingPolicyConfiguration={"AdjustmentType": "PercentChangeInCapacity",
    "MinAdjustmentMagnitude": 1, "Cooldown": 120, "MetricAggregationType": "Average",
    "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 50}]})
names = [x["PolicyName"] for pg in c.get_paginator("describe_scaling_policies").paginate(ServiceNamespace="sagemaker",
    PaginationConfig={"PageSize": 1}) for x in pg["ScalingPolicies"]]
out["policies"] = names
c.put_scheduled_action(ServiceNamespace="sagemaker", ScheduledActionName="nightly", ResourceId=rid, ScalableDimension=dim,
    Schedule="cron(0 2 * * ? *)", Timezone="America/New_York", ScalableTargetAction={"MinCapacity": 1, "MaxCapacity": 2})
s = c.describe_scheduled_actions(ServiceNamespace="sagemaker")["ScheduledActions"]
out["scheduled"] = [[x["ScheduledActionName"], x["Schedule"], x["ScalableTargetAction"]["MaxCapacity"]] for x in s]
out["activities"] = len(c.describe_scaling_activities(ServiceNamespace="sagemaker")["ScalingActivities"])
def err(f, **kw):
    try:
        f(**kw)
        return None
    except botocore.exceptions.ClientError as e:
        return [type(e).__name__, e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]]
out["notfound"] = err(c.delete_scaling_policy, PolicyName="nope", ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=dim)
out["invalid"] = err(c.register_scalable_target, ServiceNamespace="ecs", ResourceId="service/a/b",
    ScalableDimension="ecs:service:DesiredCount", MinCapacity=1, MaxCapacity=2)
# Tagging came into the model in 2023 too.
out["unserved"] = err(c.list_tags_for_resource, ResourceARN="arn:aws:application-autoscaling:us-east-1:0:scalable-target/x") \
    if hasattr(c, "list_tags_for_resource") else "absent"
c.delete_scaling_policy(PolicyName="ipi", ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=dim)
c.delete_scheduled_action(ServiceNamespace="sagemaker", ScheduledActionName="nightly", ResourceId=rid, ScalableDimension=dim)
c.deregister_scalable_target(ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=dim)
out["left"] = len(c.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"])
print(json.dumps(out))
`

func TestBoto3(t *testing.T) {
	for _, py := range []struct{ path, what, arn, unserved string }{
		{"python3", "pyenv's boto3 1.43", "arn:aws:application-autoscaling:us-east-1:000000000000:scalable-target",
			"[ClientError UnknownOperationException 400]"},
		{"/usr/bin/python3", "Debian's boto3 1.26", "absent", "absent"},
	} {
		t.Run(py.what, func(t *testing.T) {
			if _, err := exec.LookPath(py.path); err != nil || exec.Command(py.path, "-c", "import boto3").Run() != nil {
				if os.Getenv("CI") != "" {
					t.Fatalf("in CI: %s (%s) has no boto3", py.what, py.path)
				}
				t.Skipf("SKIPPED LOUDLY: %s (%s) has no boto3", py.what, py.path)
			}
			fake := newFake(map[string]int{key(DimensionVariant, vID): 2, key(DimensionComponent, cID): 0})
			f := open(t, "", newClock(t0), fake)
			path := filepath.Join(t.TempDir(), "script.py")
			if err := os.WriteFile(path, []byte(botoScript), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(py.path, path, f.url)
			cmd.Env = []string{"AWS_ACCESS_KEY_ID=AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY=secret", "AWS_DEFAULT_REGION=us-east-1",
				"AWS_EC2_METADATA_DISABLED=true", "NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1"}
			for _, k := range []string{"PATH", "HOME", "PYENV_ROOT", "PYENV_VERSION"} {
				if v, ok := os.LookupEnv(k); ok {
					cmd.Env = append(cmd.Env, k+"="+v)
				}
			}
			outb, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", py.what, err, outb)
			}
			var got map[string]any
			if err := json.Unmarshal(outb, &got); err != nil {
				t.Fatalf("%s printed %q", py.what, outb)
			}
			want := map[string]string{
				"arn":        py.arn,
				"target":     "[1 4 2026]",
				"alarms":     "[High Low-]",
				"policies":   "[ipi steps]",
				"scheduled":  "[[nightly cron(0 2 * * ? *) 2]]",
				"activities": "0",
				"notfound":   "[ObjectNotFoundException ObjectNotFoundException 400]",
				"invalid":    "[ValidationException ValidationException 400]",
				"unserved":   py.unserved,
				"left":       "1", // the component's
			}
			for k, w := range want {
				if g := fmt.Sprint(got[k]); g != w {
					t.Errorf("%s: %s = %s, want %s", py.what, k, g, w)
				}
			}
			if len(f.cw.Alarms()) != 0 {
				t.Errorf("alarms left: %v", strings.Join(func() (n []string) {
					for _, a := range f.cw.Alarms() {
						n = append(n, a.AlarmName)
					}
					return
				}(), ","))
			}
		})
	}
}
