#!/usr/bin/python3
"""End-to-end check of operating an endpoint as SageMaker users do: a rollout that rolls itself back, a rollout
that completes, and a variant and an inference component that scale on their own.

Against an mce started with --time-compression (AWS's minutes pass in a second or so), with the python3 that
runs it (its boto3) and the aws CLI given by --aws, it:

- deploys an endpoint of two instances of the probe image (model v1), and an alarm on its variant's
  Invocation5XXErrors (boto3, CloudWatch);
- while four clients call the endpoint without a pause, updates it (boto3) to a model that answers 500 to every
  call, with a CANARY BlueGreenUpdatePolicy and AutoRollbackConfiguration naming the alarm: the alarm goes to
  ALARM on the canary's errors, the endpoint shows RollingBack, then InService on its old configuration with a
  FailureReason; every call that did not reach the canary answered from v1 (no failed call to the old model);
- updates it (the aws CLI) to a good model v2 with a LINEAR policy of two steps: it completes, answers from v2,
  DescribeEndpoint shows LastDeploymentConfig as sent, and no call failed during the shift;
- registers the variant of a second endpoint (one instance) as a scalable target (1 to 3 instances) with a target
  tracking policy on SageMakerVariantInvocationsPerInstance (boto3, Application Auto Scaling): the policy's two
  alarms are in DescribeAlarms; under load the variant reaches 3 instances, after it 1, no call failed while the
  capacity changed, and DescribeScalingActivities (boto3 and the aws CLI) lists both activities;
- scales an inference component (the probe as its container) to zero copies, wires scale-out from zero as AWS
  documents it (a step policy, and an alarm on NoCapacityInvocationFailures whose action is that policy): the
  first call is refused with SageMaker's ValidationError, the component comes back to one copy by itself and
  answers.

Output: one line per check (PASS/FAIL [client] what: detail), then "N passed, M failed". Exit status 1 if any
check failed. Standard library and boto3 only.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time

import boto3
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python3 -I leaves the script's folder out
import e2elib  # noqa: E402

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/e2e"
IMAGE = "mce-example/probe:latest"


class Traffic:
    """Clients calling an endpoint without a pause; each answer is sorted by who gave it."""

    def __init__(self, rt, endpoint, threads=4, component=None, pause=0.0):
        self.rt, self.endpoint, self.component, self.pause = rt, endpoint, component, pause
        self.stop_at = threading.Event()
        self.lock = threading.Lock()
        self.answers = {}  # the tag an answer ended with, or the error's code
        self.failures = []  # (code, message) of calls that did not reach the canary
        self.canary = 0  # calls the failing canary answered (ModelError, "forced status 500")
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def loop(self):
        kw = {"EndpointName": self.endpoint, "Body": b"x", "ContentType": "text/plain"}
        if self.component:
            kw["InferenceComponentName"] = self.component
        while not self.stop_at.wait(self.pause):
            try:
                body = self.rt.invoke_endpoint(**kw)["Body"].read().decode()
                tag = body[1:].strip() if body.startswith("x") else body[:40]
                with self.lock:
                    self.answers[tag] = self.answers.get(tag, 0) + 1
            except ClientError as e:
                err = e.response["Error"]
                with self.lock:
                    if err.get("Code") == "ModelError" and "forced status 500" in (err.get("Message") or ""):
                        self.canary += 1
                    else:
                        self.failures.append((err.get("Code"), (err.get("Message") or "")[:200]))
            except Exception as e:  # noqa: BLE001 — a connection error is a failed call
                with self.lock:
                    self.failures.append(("client", repr(e)[:200]))

    def stop(self):
        self.stop_at.set()
        for t in self.threads:
            t.join(60)
        return self

    def calls(self):
        with self.lock:
            return sum(self.answers.values()) + len(self.failures) + self.canary


class Run:
    def __init__(self, a):
        self.a = a
        self.ck = e2elib.Checks("boto3 %s" % boto3.__version__)
        self.cli = e2elib.Checks("aws-cli %s" % a.aws)
        kw = {"endpoint_url": a.url, "region_name": REGION}
        self.sm = boto3.client("sagemaker", **kw)
        self.rt = boto3.client("sagemaker-runtime", **kw)
        self.cw = boto3.client("cloudwatch", **kw)
        self.aas = boto3.client("application-autoscaling", **kw)
        self.p = a.prefix
        self.made = []  # (delete function, kwargs), undone in reverse

    def made_by(self, delete, **kw):
        self.made.append((delete, kw))

    def aws(self, service, op, *args):
        """One aws CLI call: (ok, parsed JSON or the error's text)."""
        p = subprocess.run([self.a.aws, service, op, "--endpoint-url", self.a.url, "--region", REGION, "--output", "json",
                            *args], capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            return False, p.stderr.strip()[-400:]
        return True, json.loads(p.stdout) if p.stdout.strip() else {}

    def wait_until(self, what, cond, timeout):
        """Polls cond every 0.1 s; its last value, or None after timeout."""
        deadline = time.time() + timeout
        while True:
            v = cond()
            if v:
                return v
            if time.time() > deadline:
                self.ck.ok(what + " within %d s" % timeout, False)
                return None
            time.sleep(0.1)

    def model(self, name, tag, status=None):
        env = {"PROBE_TAG": " " + tag}
        if status:
            env["PROBE_STATUS"] = str(status)
        self.sm.create_model(ModelName=name, ExecutionRoleArn=ROLE, PrimaryContainer={"Image": IMAGE, "Environment": env})
        self.made_by(self.sm.delete_model, ModelName=name)

    def config(self, name, model, count):
        self.sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": model, "InitialInstanceCount": count, "InstanceType": "ml.m5.large"}])
        self.made_by(self.sm.delete_endpoint_config, EndpointConfigName=name)

    def endpoint(self, name, config):
        self.sm.create_endpoint(EndpointName=name, EndpointConfigName=config)
        self.made_by(self.sm.delete_endpoint, EndpointName=name)
        self.sm.get_waiter("endpoint_in_service").wait(EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})

    def statuses_during(self, endpoint, timeout):
        """DescribeEndpoint every 50 ms until the endpoint is InService (or Failed, or UpdateRollbackFailed)
        again: the statuses seen, in order, and the last answer; a PendingDeploymentSummary seen on the way."""
        seen, pending, d = [], None, {}
        deadline = time.time() + timeout
        while time.time() < deadline:
            d = self.sm.describe_endpoint(EndpointName=endpoint)
            st = d["EndpointStatus"]
            if not seen or seen[-1] != st:
                seen.append(st)
            if d.get("PendingDeploymentSummary") and pending is None:
                pending = d["PendingDeploymentSummary"]
            if st in ("InService", "Failed", "UpdateRollbackFailed") and len(seen) > 1:
                break
            time.sleep(0.05)
        return seen, pending, d

    # --- rollouts ---------------------------------------------------------------------------------------------
    def rollouts(self):
        ck, cli, p = self.ck, self.cli, self.p
        e = p + "-roll"
        self.model(e + "-v1", "v1")
        self.model(e + "-bad", "bad", status=500)
        self.model(e + "-v2", "v2")
        self.config(e + "-v1", e + "-v1", 2)
        self.config(e + "-bad", e + "-bad", 2)
        self.config(e + "-v2", e + "-v2", 2)
        self.endpoint(e, e + "-v1")
        alarm = e + "-5xx"
        self.cw.put_metric_alarm(AlarmName=alarm, Namespace="AWS/SageMaker", MetricName="Invocation5XXErrors",
                                 Dimensions=[{"Name": "EndpointName", "Value": e}, {"Name": "VariantName", "Value": "AllTraffic"}],
                                 Statistic="Sum", Period=60, EvaluationPeriods=1, Threshold=0,
                                 ComparisonOperator="GreaterThanThreshold", TreatMissingData="notBreaching")
        self.made_by(self.cw.delete_alarms, AlarmNames=[alarm])

        # A canary of a model that answers 500: rolled back by the alarm.
        traffic = Traffic(self.rt, e)
        time.sleep(0.5)
        canary = {"BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": {"Type": "CANARY", "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 50},
                                            "WaitIntervalInSeconds": 600},
            "TerminationWaitInSeconds": 0, "MaximumExecutionTimeoutInSeconds": 3600},
            "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": alarm}]}}
        r = self.sm.update_endpoint(EndpointName=e, EndpointConfigName=e + "-bad", DeploymentConfig=canary)
        ck.ok("UpdateEndpoint with a CANARY policy is accepted", "EndpointArn" in r)
        seen, pending, d = self.statuses_during(e, self.a.timeout)
        traffic.stop()
        ck.ok("the endpoint went Updating, RollingBack, InService", seen[:1] == ["Updating"] and "RollingBack" in seen
              and seen[-1] == "InService", " > ".join(seen))
        ck.eq("after the rollback the endpoint is on its old configuration", d.get("EndpointConfigName"), e + "-v1")
        ck.ok("the rollback says why in FailureReason", alarm in (d.get("FailureReason") or ""), d.get("FailureReason"))
        ck.ok("a PendingDeploymentSummary named the new configuration while it ran",
              (pending or {}).get("EndpointConfigName") == e + "-bad", json.dumps(pending, default=str)[:300])
        ck.ok("the canary took calls (and failed them)", traffic.canary > 0, "%d of %d" % (traffic.canary, traffic.calls()))
        ck.ok("no call to the old model failed during the canary and its rollback", not traffic.failures,
              "%d calls, failures %s" % (traffic.calls(), traffic.failures[:3]))
        ck.ok("every answer came from v1", set(traffic.answers) == {"v1"}, repr(traffic.answers))
        # The alarm may be back to OK already (the errors stopped with the rollback, and an AWS minute is a
        # second here): its history says it went to ALARM.
        hist = self.cw.describe_alarm_history(AlarmName=alarm, HistoryItemType="StateUpdate")["AlarmHistoryItems"]
        ck.ok("the alarm's history has its change to ALARM", any("to ALARM" in h["HistorySummary"] for h in hist),
              repr([h["HistorySummary"] for h in hist])[:300])
        ck.info("canary episode: %d calls, %d answered by the canary, statuses %s" % (traffic.calls(), traffic.canary, " > ".join(seen)))

        # The alarm goes back to OK on its own (notBreaching once the errors stop).
        self.wait_until("the alarm back to OK after the rollback",
                        lambda: self.cw.describe_alarms(AlarmNames=[alarm])["MetricAlarms"][0]["StateValue"] == "OK",
                        self.a.timeout)

        # A linear update to a good model, with the aws CLI: it completes in its steps.
        traffic = Traffic(self.rt, e)
        time.sleep(0.5)
        linear = {"BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": {"Type": "LINEAR", "LinearStepSize": {"Type": "CAPACITY_PERCENT", "Value": 50},
                                            "WaitIntervalInSeconds": 60},
            "TerminationWaitInSeconds": 60, "MaximumExecutionTimeoutInSeconds": 3600},
            "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": alarm}]}}
        ok, out = self.aws("sagemaker", "update-endpoint", "--endpoint-name", e, "--endpoint-config-name", e + "-v2",
                           "--deployment-config", json.dumps(linear))
        cli.ok("update-endpoint with a LINEAR policy is accepted", ok, "" if ok else out)
        seen, pending, d = self.statuses_during(e, self.a.timeout)
        traffic.stop()
        cli.ok("the endpoint went Updating, then InService", seen[:1] == ["Updating"] and seen[-1] == "InService"
               and "RollingBack" not in seen, " > ".join(seen))
        ok, d = self.aws("sagemaker", "describe-endpoint", "--endpoint-name", e)
        cli.eq("the endpoint is on the new configuration", d.get("EndpointConfigName") if ok else d, e + "-v2")
        cli.ok("no FailureReason after a completed update", ok and not d.get("FailureReason"), repr(d.get("FailureReason")) if ok else d)
        cli.eq("LastDeploymentConfig is the one sent", (d.get("LastDeploymentConfig") if ok else d), linear)
        cli.ok("no call failed during the linear shift", not traffic.failures and traffic.canary == 0,
               "%d calls, failures %s" % (traffic.calls(), traffic.failures[:3]))
        cli.ok("both versions answered during the shift, v2 at the end", {"v1", "v2"} <= set(traffic.answers), repr(traffic.answers))
        body = self.rt.invoke_endpoint(EndpointName=e, Body=b"x", ContentType="text/plain")["Body"].read().decode()
        cli.eq("a call after the update answers from v2", body, "x v2")

    # --- a variant that scales --------------------------------------------------------------------------------
    def variant_scaling(self):
        ck, cli, p = self.ck, self.cli, self.p
        e = p + "-scale"
        self.model(e, "s")
        self.config(e, e, 1)
        self.endpoint(e, e)
        rid, dim = "endpoint/%s/variant/AllTraffic" % e, "sagemaker:variant:DesiredInstanceCount"
        self.aas.register_scalable_target(ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=dim,
                                          MinCapacity=1, MaxCapacity=3)
        self.made_by(self.aas.deregister_scalable_target, ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=dim)
        pol = self.aas.put_scaling_policy(
            PolicyName=e + "-tt", ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=dim,
            PolicyType="TargetTrackingScaling",
            TargetTrackingScalingPolicyConfiguration={
                "TargetValue": 50.0, "ScaleInCooldown": 60, "ScaleOutCooldown": 60,
                "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"}})
        names = [a["AlarmName"] for a in pol.get("Alarms", [])]
        ck.ok("target tracking made its two alarms", len(names) == 2 and all(n.startswith("TargetTracking-" + rid) for n in names), repr(names))
        got = [a["AlarmName"] for a in self.cw.describe_alarms(AlarmNamePrefix="TargetTracking-" + rid)["MetricAlarms"]]
        ck.eq("DescribeAlarms lists the policy's alarms", sorted(got), sorted(names))

        def count():
            v = self.sm.describe_endpoint(EndpointName=e)["ProductionVariants"][0]
            return v.get("DesiredInstanceCount"), v.get("CurrentInstanceCount")

        traffic = Traffic(self.rt, e)
        up = self.wait_until("the variant scaled out to 3 instances under load", lambda: count() == (3, 3), self.a.timeout)
        ck.ok("under load the variant has 3 instances", up, repr(count()))
        traffic.stop()
        ck.ok("calls went on while it scaled out", traffic.calls() > 100, "%d calls" % traffic.calls())
        # Then a light load: a variant without any call publishes no InvocationsPerInstance, its AlarmLow has no
        # data, and target tracking does not scale in (as on SageMaker); a trickle of calls is below the target.
        light = Traffic(self.rt, e, threads=1, pause=0.1)
        down = self.wait_until("the variant scaled back in to 1 instance after the load",
                               lambda: count() == (1, 1), 3 * self.a.timeout)
        light.stop()
        ck.ok("after the load the variant has 1 instance", down, repr(count()))
        ck.ok("no call failed while the capacity changed", not traffic.failures and not light.failures,
              "%d + %d calls, failures %s" % (traffic.calls(), light.calls(), (traffic.failures + light.failures)[:3]))
        acts = self.aas.describe_scaling_activities(ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=dim)["ScalingActivities"]
        done = [a for a in acts if a["StatusCode"] == "Successful"]
        ck.ok("DescribeScalingActivities lists the scale-out and the scale-in", len(done) >= 2,
              "; ".join("%s %s" % (a["StatusCode"], a["Description"]) for a in acts[:4]))
        ok, out = self.aws("application-autoscaling", "describe-scaling-activities", "--service-namespace", "sagemaker",
                           "--resource-id", rid)
        cli.ok("describe-scaling-activities lists them too", ok and len([a for a in out["ScalingActivities"] if a["StatusCode"] == "Successful"]) >= 2,
               "" if ok else out)
        ok, out = self.aws("application-autoscaling", "describe-scalable-targets", "--service-namespace", "sagemaker",
                           "--resource-ids", rid)
        cli.ok("describe-scalable-targets shows the target's bounds",
               ok and [(t["MinCapacity"], t["MaxCapacity"]) for t in out["ScalableTargets"]] == [(1, 3)], "" if ok else out)

    # --- an inference component that scales out from zero ----------------------------------------------------
    def component_from_zero(self):
        ck, p = self.ck, self.p
        e, ic = p + "-ic", p + "-ic-probe"
        self.sm.create_endpoint_config(EndpointConfigName=e, ExecutionRoleArn=ROLE, ProductionVariants=[{
            "VariantName": "AllTraffic", "InstanceType": "ml.m5.xlarge", "InitialInstanceCount": 1}])
        self.made_by(self.sm.delete_endpoint_config, EndpointConfigName=e)
        self.endpoint(e, e)
        self.sm.create_inference_component(
            InferenceComponentName=ic, EndpointName=e, VariantName="AllTraffic",
            Specification={"Container": {"Image": IMAGE, "Environment": {"PROBE_TAG": " ic"}},
                           "ComputeResourceRequirements": {"NumberOfCpuCoresRequired": 0.5, "MinMemoryRequiredInMb": 128}},
            RuntimeConfig={"CopyCount": 1})
        self.made_by(self.sm.delete_inference_component, InferenceComponentName=ic)

        def copies():
            d = self.sm.describe_inference_component(InferenceComponentName=ic)
            return d["InferenceComponentStatus"], d.get("RuntimeConfig", {}).get("CurrentCopyCount")

        self.wait_until("the component InService with one copy", lambda: copies() == ("InService", 1), self.a.timeout)
        self.sm.update_inference_component_runtime_config(InferenceComponentName=ic, DesiredRuntimeConfig={"CopyCount": 0})
        ck.ok("the component scaled to zero copies", self.wait_until("zero copies", lambda: copies() == ("InService", 0), self.a.timeout),
              repr(copies()))
        rid, dim = "inference-component/" + ic, "sagemaker:inference-component:DesiredCopyCount"
        self.aas.register_scalable_target(ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=dim,
                                          MinCapacity=0, MaxCapacity=2)
        self.made_by(self.aas.deregister_scalable_target, ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=dim)
        arn = self.aas.put_scaling_policy(
            PolicyName=ic + "-from-zero", ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=dim,
            PolicyType="StepScaling",
            StepScalingPolicyConfiguration={"AdjustmentType": "ChangeInCapacity", "MetricAggregationType": "Maximum",
                                            "Cooldown": 60,
                                            "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}]})["PolicyARN"]
        alarm = ic + "-no-capacity"
        self.cw.put_metric_alarm(AlarmName=alarm, AlarmActions=[arn], Namespace="AWS/SageMaker",
                                 MetricName="NoCapacityInvocationFailures",
                                 Dimensions=[{"Name": "InferenceComponentName", "Value": ic}], Statistic="Sum",
                                 Period=60, EvaluationPeriods=1, DatapointsToAlarm=1, Threshold=1,
                                 ComparisonOperator="GreaterThanOrEqualToThreshold", TreatMissingData="missing")
        self.made_by(self.cw.delete_alarms, AlarmNames=[alarm])
        try:
            self.rt.invoke_endpoint(EndpointName=e, InferenceComponentName=ic, Body=b"x", ContentType="text/plain")
            ck.ok("the first call to a component without copies is refused", False, "it was answered")
        except ClientError as err:
            ck.ok("the first call to a component without copies is refused with ValidationError",
                  err.response["Error"]["Code"] == "ValidationError" and "no capacity" in err.response["Error"]["Message"],
                  repr(err.response["Error"]))
        back = self.wait_until("the component back to one copy by itself", lambda: copies() == ("InService", 1), self.a.timeout)
        ck.ok("scale-out from zero brought one copy", back, repr(copies()))
        body = self.rt.invoke_endpoint(EndpointName=e, InferenceComponentName=ic, Body=b"x", ContentType="text/plain")["Body"].read().decode()
        ck.eq("the component answers once it has a copy", body, "x ic")
        # And back to zero when idle, as AWS documents it: target tracking on the copies' concurrency with a
        # minimum of 0 (its AlarmLow sees the idle copy's zeros).
        self.aas.put_scaling_policy(
            PolicyName=ic + "-tt", ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=dim,
            PolicyType="TargetTrackingScaling",
            TargetTrackingScalingPolicyConfiguration={
                "TargetValue": 5.0, "ScaleInCooldown": 60, "ScaleOutCooldown": 60,
                "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"}})
        idle = self.wait_until("the idle component back to zero copies", lambda: copies() == ("InService", 0), 3 * self.a.timeout)
        ck.ok("idle, the component went back to zero copies", idle, repr(copies()))
        acts = self.aas.describe_scaling_activities(ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=dim)["ScalingActivities"]
        ck.ok("its activities say 0 to 1 and 1 to 0", len([a for a in acts if a["StatusCode"] == "Successful"]) >= 2,
              "; ".join("%s %s" % (a["StatusCode"], a["Description"]) for a in acts[:4]))

    def remove(self):
        for delete, kw in reversed(self.made):
            for _ in range(50):  # an endpoint still updating refuses its deletion for a moment
                try:
                    delete(**kw)
                    break
                except ClientError as e:
                    if e.response["Error"].get("Code") in ("ValidationException", "ValidationError", "ObjectNotFoundException") \
                            and "in-progress" not in (e.response["Error"].get("Message") or ""):
                        break
                    time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True, help="mce's URL (an mce serving with --time-compression)")
    ap.add_argument("--aws", default="/usr/bin/aws", help="the aws CLI of the same release as this python's boto3")
    ap.add_argument("--prefix", default="ops", help="names this run's endpoints (two runs, two clients)")
    ap.add_argument("--timeout", type=int, default=60, help="seconds of wall time each episode may take")
    ap.add_argument("--parts", default="rollouts,scaling,components", help="which episodes to run")
    a = ap.parse_args()
    r = Run(a)
    for part in a.parts.split(","):
        try:
            {"rollouts": r.rollouts, "scaling": r.variant_scaling, "components": r.component_from_zero}[part]()
        except Exception as e:  # noqa: BLE001 — reported as a failed check
            r.ck.ok("the %s episode ran to its end" % part, False, repr(e)[:400])
    r.remove()
    passed = failed = 0
    for ck in (r.ck, r.cli):
        for line in ck.lines:
            print(line)
        passed += ck.passed
        failed += ck.failed
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
