#!/usr/bin/python3
"""End-to-end check of the A/B loop with CloudWatch, as AWS's A/B-testing notebook runs it.

With the python3 that runs it (its boto3) and the aws CLI given by --aws (a matching release: Debian's pair
speaks CloudWatch's query protocol, boto3 1.43 / aws CLI 1.45 speak AWS JSON 1.0; the script reports which), it:

- deploys an endpoint of two production variants of the probe image (VariantA, VariantB, weight 1 each) with
  DataCaptureConfig at 100 % into the S3 store (--s3-url), as the notebook deploys its two models;
- sends N calls to each variant with TargetVariant, and calls to VariantA that the model answers 404 and 503;
- reads each variant's figures back as the notebook does — get_metric_statistics(Namespace="AWS/SageMaker",
  MetricName="Invocations", Dimensions=[EndpointName, VariantName], Period=60, Statistics=["Sum"]) — and checks
  them: Invocations Sum = the calls sent, ModelLatency/OverheadLatency SampleCount = the calls answered 2xx,
  Invocation4XXErrors / 5XXErrors / InvocationModelErrors, p50/p99 through ExtendedStatistics,
  GetMetricData for both variants in one call, ListMetrics finding both; the aws CLI reads the same figures;
- shifts all traffic to VariantB with UpdateEndpointWeightsAndCapacities, sends calls without TargetVariant, and
  checks that only VariantB's Invocations grew;
- reads the captured records back from S3: one per answered call of each variant, under
  DESTINATION/ENDPOINT/VARIANT/yyyy/mm/dd/hh/, with what was sent and answered;
- checks CloudWatch's refusals (a Period that is not a multiple of 60, a time range of years at one minute,
  an unknown statistic) and that an unknown namespace answers no datapoints.

Output: one line per check (PASS/FAIL [client] what: detail), then "N passed, M failed". Exit status 1 if any
check failed. Standard library and boto3 only.
"""

import argparse
import base64
import datetime
import json
import os
import subprocess
import sys
import time

import boto3
import botocore
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python3 -I leaves the script's folder out
import e2elib  # noqa: E402

REGION = "us-east-1"
BUCKET = "e2e-ab-capture"
N_A, N_B, N_SHIFT = 12, 8, 10
WAIT = 30  # seconds for captured files to appear (mce writes them within --capture-interval)


def decoded(d):
    """A captured body as text: text/plain is neither CSV nor JSON, so SageMaker writes it BASE64."""
    return base64.b64decode(d["data"]).decode() if d.get("encoding") == "BASE64" else d["data"]


def utc(t):
    return datetime.datetime.fromtimestamp(t, tz=datetime.timezone.utc)


def iso(t):
    return utc(t).strftime("%Y-%m-%dT%H:%M:%SZ")


class Run:
    def __init__(self, a):
        self.a = a
        self.ck = e2elib.Checks("boto3 %s" % boto3.__version__)
        self.cli = e2elib.Checks("aws-cli %s" % a.aws)
        self.sm = boto3.client("sagemaker", endpoint_url=a.url, region_name=REGION)
        self.rt = boto3.client("sagemaker-runtime", endpoint_url=a.url, region_name=REGION)
        self.cw = boto3.client("cloudwatch", endpoint_url=a.url, region_name=REGION)
        self.s3 = boto3.client("s3", endpoint_url=a.s3_url, region_name=REGION, aws_access_key_id=a.s3_key,
                               aws_secret_access_key=a.s3_secret,
                               config=botocore.config.Config(s3={"addressing_style": "path"}))
        self.endpoint = a.prefix + "-ab"
        self.start = time.time() - 60
        self.wire = set()  # the Content-Types this boto3 sent CloudWatch: the protocol it speaks
        self.cw.meta.events.register("before-send.cloudwatch", self.saw)

    def saw(self, request, **_):
        ct = request.headers.get("Content-Type") or b""
        self.wire.add(ct.decode() if isinstance(ct, bytes) else ct)

    # --- deploy
    def deploy(self):
        e = self.endpoint
        for v in ("A", "B"):
            self.sm.create_model(ModelName="%s-%s" % (e, v), ExecutionRoleArn="arn:aws:iam::123456789012:role/e2e",
                                 PrimaryContainer={"Image": "mce-example/probe:latest",
                                                   "Environment": {"PROBE_TAG": " from " + v}})
        self.sm.create_endpoint_config(
            EndpointConfigName=e,
            ProductionVariants=[{"VariantName": "Variant" + v, "ModelName": "%s-%s" % (e, v), "InitialInstanceCount": 1,
                                 "InstanceType": "ml.m5.large", "InitialVariantWeight": 1.0} for v in ("A", "B")],
            DataCaptureConfig={"EnableCapture": True, "InitialSamplingPercentage": 100,
                               "DestinationS3Uri": "s3://%s/ab" % BUCKET,
                               "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}]})
        self.sm.create_endpoint(EndpointName=e, EndpointConfigName=e)
        self.sm.get_waiter("endpoint_in_service").wait(EndpointName=e, WaiterConfig={"Delay": 1, "MaxAttempts": 120})

    def remove(self):
        e = self.endpoint
        for f, kw in ((self.sm.delete_endpoint, {"EndpointName": e}), (self.sm.delete_endpoint_config, {"EndpointConfigName": e}),
                      (self.sm.delete_model, {"ModelName": e + "-A"}), (self.sm.delete_model, {"ModelName": e + "-B"})):
            try:
                f(**kw)
            except ClientError:
                pass

    def invoke(self, body, variant=None, attrs=None):
        kw = {"EndpointName": self.endpoint, "Body": body, "ContentType": "text/plain"}
        if variant:
            kw["TargetVariant"] = variant
        if attrs:
            kw["CustomAttributes"] = attrs
        try:
            r = self.rt.invoke_endpoint(**kw)
            return r["InvokedProductionVariant"], r["Body"].read().decode()
        except ClientError as e:
            return None, e.response["Error"].get("Code")

    # --- CloudWatch
    def dims(self, variant):
        return [{"Name": "EndpointName", "Value": self.endpoint}, {"Name": "VariantName", "Value": variant}]

    def stat(self, variant, metric, stat="Sum", ext=None):
        """The statistic summed (or maxed, for percentiles) over the test's minutes."""
        kw = {"Namespace": "AWS/SageMaker", "MetricName": metric, "Dimensions": self.dims(variant),
              "StartTime": utc(self.start), "EndTime": utc(time.time() + 60), "Period": 60}
        if ext:
            kw["ExtendedStatistics"] = ext
        else:
            kw["Statistics"] = [stat]
        dps = self.cw.get_metric_statistics(**kw)["Datapoints"]
        if ext:
            return {p: max([d["ExtendedStatistics"][p] for d in dps] or [0]) for p in ext}
        return sum(d[stat] for d in dps)

    def cli_stat(self, variant, metric, stat="Sum"):
        args = [self.a.aws, "cloudwatch", "get-metric-statistics", "--endpoint-url", self.a.url, "--region", REGION,
                "--output", "json", "--namespace", "AWS/SageMaker", "--metric-name", metric,
                "--dimensions", "Name=EndpointName,Value=" + self.endpoint, "Name=VariantName,Value=" + variant,
                "--start-time", iso(self.start), "--end-time", iso(time.time() + 60), "--period", "60",
                "--statistics", stat]
        p = subprocess.run(args, capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            return "error: " + p.stderr.strip()[-300:]
        return sum(d[stat] for d in json.loads(p.stdout)["Datapoints"])

    def run(self):
        ck = self.ck
        self.s3.create_bucket(Bucket=BUCKET) if BUCKET not in [b["Name"] for b in self.s3.list_buckets()["Buckets"]] else None
        self.deploy()
        answered = {"VariantA": [], "VariantB": []}
        for v, n in (("VariantA", N_A), ("VariantB", N_B)):
            for i in range(n):
                got, out = self.invoke(("%s call %d" % (v, i)).encode(), variant=v)
                ck.ok("call %d to %s answered by it" % (i, v), got == v, "%s %s" % (got, out)) if got != v else None
                if got == v:
                    answered[v].append(out)
        for attrs in ("status=404", "status=503"):
            got, code = self.invoke(b"x", variant="VariantA", attrs=attrs)
            ck.eq("a call the model answers %s is a ModelError" % attrs, code, "ModelError")

        # The notebook's question, per variant.
        ck.eq("VariantA Invocations Sum (calls sent, errors included)", self.stat("VariantA", "Invocations"), N_A + 2)
        ck.eq("VariantB Invocations Sum", self.stat("VariantB", "Invocations"), N_B)
        ck.eq("VariantA Invocation4XXErrors Sum", self.stat("VariantA", "Invocation4XXErrors"), 1)
        ck.eq("VariantA Invocation5XXErrors Sum", self.stat("VariantA", "Invocation5XXErrors"), 1)
        ck.eq("VariantA InvocationModelErrors Sum", self.stat("VariantA", "InvocationModelErrors"), 2)
        ck.eq("VariantB Invocation4XXErrors Sum", self.stat("VariantB", "Invocation4XXErrors"), 0)
        for v, n in (("VariantA", N_A), ("VariantB", N_B)):
            for m in ("ModelLatency", "OverheadLatency"):
                ck.eq("%s %s SampleCount (calls answered 2xx)" % (v, m), self.stat(v, m, "SampleCount"), n)
            pct = self.stat(v, "ModelLatency", ext=["p50", "p99"])
            ck.ok("%s ModelLatency p50 and p99 (µs) come back" % v, 0 < pct["p50"] <= pct["p99"], repr(pct))
        names = {"application/x-amz-json-1.0": "AWS JSON 1.0", "application/cbor": "RPC v2 CBOR",
                 "application/x-www-form-urlencoded; charset=utf-8": "query"}
        spoke = sorted(set(names.get(w, w) for w in self.wire))
        ck.eq("botocore %s spoke CloudWatch's %s" % (botocore.__version__, self.a.protocol), spoke, [self.a.protocol])
        # The aws CLI reads the same figures.
        for v, n in (("VariantA", N_A + 2), ("VariantB", N_B)):
            self.cli.eq("%s Invocations Sum read with the aws CLI" % v, self.cli_stat(v, "Invocations"), n)
        self.cli.eq("VariantA Invocation4XXErrors Sum read with the aws CLI", self.cli_stat("VariantA", "Invocation4XXErrors"), 1)

        # GetMetricData: both variants in one call.
        q = [{"Id": "calls" + v[-1].lower(), "MetricStat": {"Metric": {"Namespace": "AWS/SageMaker", "MetricName": "Invocations",
                                                                        "Dimensions": self.dims(v)}, "Period": 60, "Stat": "Sum"}}
             for v in ("VariantA", "VariantB")]
        out = self.cw.get_metric_data(MetricDataQueries=q, StartTime=utc(self.start), EndTime=utc(time.time() + 60))
        got = {r["Id"]: sum(r["Values"]) for r in out["MetricDataResults"]}
        ck.eq("GetMetricData Invocations of both variants", got, {"callsa": N_A + 2, "callsb": N_B})
        lm = self.cw.list_metrics(Namespace="AWS/SageMaker", MetricName="Invocations",
                                  Dimensions=[{"Name": "EndpointName", "Value": self.endpoint}])
        ck.eq("ListMetrics finds Invocations of both variants",
              sorted(d["Value"] for m in lm["Metrics"] for d in m["Dimensions"] if d["Name"] == "VariantName"),
              ["VariantA", "VariantB"])

        # The weight shift: everything to VariantB.
        self.sm.update_endpoint_weights_and_capacities(EndpointName=self.endpoint, DesiredWeightsAndCapacities=[
            {"VariantName": "VariantA", "DesiredWeight": 0.0}, {"VariantName": "VariantB", "DesiredWeight": 1.0}])
        self.sm.get_waiter("endpoint_in_service").wait(EndpointName=self.endpoint, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
        served = [self.invoke(b"after the shift")[0] for _ in range(N_SHIFT)]
        ck.eq("after the weight shift every call is served by VariantB", set(served), {"VariantB"})
        ck.eq("VariantB Invocations grew by the calls after the shift", self.stat("VariantB", "Invocations"), N_B + N_SHIFT)
        ck.eq("VariantA Invocations did not grow", self.stat("VariantA", "Invocations"), N_A + 2)

        # The captured records, one per answered call, under each variant's folder.
        want = {"VariantA": N_A, "VariantB": N_B + N_SHIFT}
        deadline = time.time() + WAIT
        while True:
            recs = self.captured()
            counts = {v: len(recs.get(v, [])) for v in want}
            if counts == want or time.time() > deadline:
                break
            time.sleep(0.5)
        ck.eq("captured records per variant (100 %, answered calls)", counts, want)
        a_out = sorted(decoded(r["captureData"]["endpointOutput"]) for r in recs.get("VariantA", []))
        ck.eq("VariantA's captured answers are what VariantA answered", a_out, sorted(answered["VariantA"]))

        # Refusals and odd questions.
        for what, kw, code in (
                ("a Period of 61", {"Period": 61}, "InvalidParameterValue"),
                ("ten years at one minute", {"StartTime": utc(time.time() - 10 * 365 * 86400)}, "InvalidParameterCombination"),
                ("an unknown statistic", {"Statistics": ["Median"]}, "InvalidParameterValue")):
            args = {"Namespace": "AWS/SageMaker", "MetricName": "Invocations", "Dimensions": self.dims("VariantA"),
                    "StartTime": utc(self.start), "EndTime": utc(time.time()), "Period": 60, "Statistics": ["Sum"]}
            args.update(kw)
            try:
                self.cw.get_metric_statistics(**args)
                ck.ok("%s is refused" % what, False, "answered")
            except ClientError as e:
                ck.eq("%s is refused with %s" % (what, code), e.response["Error"]["Code"], code)
        out = self.cw.get_metric_statistics(Namespace="No/Such", MetricName="Invocations", StartTime=utc(self.start),
                                            EndTime=utc(time.time()), Period=60, Statistics=["Sum"])
        ck.eq("an unknown namespace has no datapoints", out["Datapoints"], [])

    def captured(self):
        """{variant: [record]} of every capture file under s3://BUCKET/ab/ENDPOINT/."""
        out = {}
        token = None
        while True:
            kw = {"Bucket": BUCKET, "Prefix": "ab/%s/" % self.endpoint}
            if token:
                kw["ContinuationToken"] = token
            page = self.s3.list_objects_v2(**kw)
            for o in page.get("Contents", []):
                variant = o["Key"].split("/")[2]
                body = self.s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read().decode()
                out.setdefault(variant, []).extend(json.loads(line) for line in body.splitlines() if line)
            token = page.get("NextContinuationToken")
            if not token:
                return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True, help="mce's URL")
    ap.add_argument("--aws", default="/usr/bin/aws", help="the aws CLI of the same release as this python's boto3")
    ap.add_argument("--prefix", default="cw", help="names this run's endpoint (two runs, two clients)")
    ap.add_argument("--protocol", required=True, choices=["query", "AWS JSON 1.0", "RPC v2 CBOR"],
                    help="the protocol this python's boto3 must speak to CloudWatch")
    ap.add_argument("--s3-url", required=True)
    ap.add_argument("--s3-key", required=True)
    ap.add_argument("--s3-secret", required=True)
    a = ap.parse_args()
    r = Run(a)
    try:
        r.run()
    except Exception as e:  # noqa: BLE001 — reported as a failed check
        r.ck.ok("the A/B flow ran to its end", False, repr(e)[:400])
    finally:
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
