#!/usr/bin/python3
"""End-to-end check of mce's data capture with boto3 and the aws CLI.

Given an mce URL (started with --capture-interval 1s, its S3 store the
versitygw at --s3-url) and the ticket classifier (--model, a model.tar.gz
inside mce's model roots, on --image), it:

- replays, with boto3, the requests the SageMaker Python SDK sends for
  Model.deploy(data_capture_config=DataCaptureConfig(...)) (CreateModel,
  CreateEndpointConfig with DataCaptureConfig._to_request_dict, CreateEndpoint,
  the endpoint_in_service waiter), checks DescribeEndpoint's and
  DescribeEndpointConfig's DataCaptureConfig, invokes the endpoint with CSV
  and JSON bodies, and reads the captured .jsonl objects back from S3 (boto3
  and `aws s3`), checking every field against what was sent and answered;
- replays Predictor.disable_data_capture(), enable_data_capture() and
  update_data_capture_config() (DescribeEndpoint, DescribeEndpointConfig,
  ListTags, CreateEndpointConfig from the existing one, DescribeEndpoint,
  UpdateEndpoint, the waiter) and checks what is captured after each:
  nothing while stopped, SageMaker's 20 % sampling within statistical
  bounds after enable_data_capture, everything at 100 %;
- does the same with the aws CLI (create-endpoint-config
  --data-capture-config, update-endpoint, describe-endpoint,
  sagemaker-runtime invoke-endpoint), and checks that configurations outside
  SageMaker's constraints get its ValidationException.

The SDK's default destination, s3://sagemaker-REGION-ACCOUNT/model-monitor/
data-capture (DataCaptureConfig without destination_s3_uri, as
enable_data_capture builds it), is a bucket the script creates first, as
the SDK's Session.default_bucket() does.

Output: one line per check (PASS/FAIL [client] what: detail), then "N
passed, M failed". Exit status 1 if any check failed.
"""

import argparse
import base64
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time

import boto3
import botocore
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python3 -I leaves the script's folder out
import e2elib  # noqa: E402

AWS_CLI = "/usr/bin/aws"
REGION = "us-east-1"
ACCOUNT = "123456789012"
BUCKET = "sagemaker-%s-%s" % (REGION, ACCOUNT)  # the SDK's Session.default_bucket()
DEST = "s3://%s/model-monitor/data-capture" % BUCKET  # DataCaptureConfig's default destination
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
WAIT = 30  # seconds for captured files to appear (mce writes them within --capture-interval)


def sdk_capture(enable, pct=20, dest=DEST):
    """sagemaker.model_monitor.DataCaptureConfig(...)._to_request_dict() with the SDK's defaults:
    both capture options, text/csv as CSV, application/json as JSON."""
    return {"EnableCapture": enable, "InitialSamplingPercentage": pct, "DestinationS3Uri": dest,
            "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
            "CaptureContentTypeHeader": {"CsvContentTypes": ["text/csv"], "JsonContentTypes": ["application/json"]}}


def variant(model):
    """sagemaker.session.production_variant(model, "ml.m5.large", initial_instance_count=1)."""
    return {"ModelName": model, "VariantName": "AllTraffic", "InitialVariantWeight": 1, "InitialInstanceCount": 1,
            "InstanceType": "ml.m5.large"}


class Captured:
    """The capture files under DEST/ENDPOINT/, read with boto3's S3 client."""

    def __init__(self, s3):
        self.s3 = s3

    def keys(self, endpoint, dest=DEST):
        bucket, _, prefix = dest[len("s3://"):].partition("/")
        prefix = (prefix + "/" if prefix else "") + endpoint + "/"
        keys, token = [], None
        while True:
            kw = {"Bucket": bucket, "Prefix": prefix}
            if token:
                kw["ContinuationToken"] = token
            out = self.s3.list_objects_v2(**kw)
            keys += [o["Key"] for o in out.get("Contents", [])]
            token = out.get("NextContinuationToken")
            if not token:
                return bucket, sorted(keys)

    def records(self, endpoint, dest=DEST):
        """[(key, Content-Type, record)] of every line of every file."""
        bucket, keys = self.keys(endpoint, dest)
        out = []
        for k in keys:
            obj = self.s3.get_object(Bucket=bucket, Key=k)
            body = obj["Body"].read().decode("utf-8")
            for line in body.splitlines():
                out.append((k, obj.get("ContentType"), json.loads(line)))
        return out

    def wait_for(self, endpoint, ids, dest=DEST, within=WAIT):
        """The records once every inference ID of ids is captured (or the time is up)."""
        deadline = time.time() + within
        while True:
            recs = self.records(endpoint, dest)
            have = {r["eventMetadata"].get("inferenceId") for _, _, r in recs}
            if set(ids) <= have or time.time() > deadline:
                return recs
            time.sleep(0.5)


def payload_bytes(p):
    return base64.b64decode(p["data"]) if p.get("encoding") == "BASE64" else p.get("data", "").encode("utf-8")


def check_record(ck, what, key, ctype, rec, endpoint, sent, sent_type, answer, answer_type, inference_id, dest=DEST):
    """One captured call, field by field, against what was sent and answered."""
    prefix = dest[len("s3://"):].partition("/")[2] + "/" + endpoint + "/AllTraffic/"
    ck.ok(what + ": file at DEST/ENDPOINT/VARIANT/yyyy/mm/dd/hh/mm-ss-SSS-UUID.jsonl",
          re.fullmatch(re.escape(prefix) + r"\d{4}/\d{2}/\d{2}/\d{2}/\d{2}-\d{2}-\d{3}-" + UUID + r"\.jsonl", key) is not None, key)
    ck.eq(what + ": file Content-Type", ctype, "application/jsonlines")
    ck.eq(what + ": members", sorted(rec), ["captureData", "eventMetadata", "eventVersion"])
    ck.eq(what + ": eventVersion", rec.get("eventVersion"), "0")
    meta = rec.get("eventMetadata", {})
    ck.ok(what + ": eventId is a UUID", re.fullmatch(UUID, meta.get("eventId", "")) is not None, meta.get("eventId"))
    ck.eq(what + ": inferenceId", meta.get("inferenceId"), inference_id)
    ck.ok(what + ": inferenceTime is UTC to the second",
          re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", meta.get("inferenceTime", "")) is not None, meta.get("inferenceTime"))
    data = rec.get("captureData", {})
    for p, mode, body, ct in ((data.get("endpointInput"), "INPUT", sent, sent_type),
                              (data.get("endpointOutput"), "OUTPUT", answer, answer_type)):
        if not ck.ok("%s: %s captured" % (what, mode), p is not None, "" if p is not None else json.dumps(data)[:200]):
            continue
        media = ct.split(";")[0].strip().lower()
        want_enc = {"text/csv": "CSV", "application/json": "JSON"}.get(media, "BASE64")
        ck.eq("%s: %s mode" % (what, mode), p.get("mode"), mode)
        ck.eq("%s: %s observedContentType" % (what, mode), p.get("observedContentType"), ct)
        ck.eq("%s: %s encoding" % (what, mode), p.get("encoding"), want_enc)
        got = payload_bytes(p)
        ck.ok("%s: %s data is what was %s (%d bytes)" % (what, mode, "sent" if mode == "INPUT" else "answered", len(body)),
              got == body, "" if got == body else "got %r, want %r" % (got[:120], body[:120]))


class BotoFlow:
    """The SageMaker Python SDK's requests, sent with boto3."""

    def __init__(self, a, s3):
        self.a = a
        self.ck = e2elib.Checks("boto3")
        self.sm = boto3.client("sagemaker", endpoint_url=a.url, region_name=REGION)
        self.rt = boto3.client("sagemaker-runtime", endpoint_url=a.url, region_name=REGION)
        self.cap = Captured(s3)

    def wait(self, name):
        self.sm.get_waiter("endpoint_in_service").wait(EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})

    def deploy(self, name, model, capture):
        """Model.deploy(..., data_capture_config=...): Session.endpoint_from_production_variants."""
        self.sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[variant(model)], DataCaptureConfig=capture)
        self.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
        self.wait(name)

    def update_data_capture_config(self, endpoint, capture, new_name):
        """Predictor.update_data_capture_config (and enable_/disable_data_capture):
        Session.create_endpoint_config_from_existing, then Session.update_endpoint."""
        existing = self.sm.describe_endpoint(EndpointName=endpoint)["EndpointConfigName"]
        desc = self.sm.describe_endpoint_config(EndpointConfigName=existing)
        req = {"EndpointConfigName": new_name, "ProductionVariants": desc["ProductionVariants"]}
        tags = self.sm.list_tags(ResourceArn=desc["EndpointConfigArn"]).get("Tags")
        if tags:
            req["Tags"] = tags
        if desc.get("KmsKeyId"):
            req["KmsKeyId"] = desc["KmsKeyId"]
        dc = capture or desc.get("DataCaptureConfig")
        if dc is not None:
            req["DataCaptureConfig"] = dc
        if desc.get("AsyncInferenceConfig"):
            req["AsyncInferenceConfig"] = desc["AsyncInferenceConfig"]
        self.sm.create_endpoint_config(**req)
        self.sm.describe_endpoint(EndpointName=endpoint)  # update_endpoint checks that it exists
        self.sm.update_endpoint(EndpointName=endpoint, EndpointConfigName=new_name)
        self.wait(endpoint)

    def invoke(self, endpoint, body, content_type, accept=None, inference_id=None):
        kw = {"EndpointName": endpoint, "Body": body, "ContentType": content_type}
        if accept:
            kw["Accept"] = accept
        if inference_id:
            kw["InferenceId"] = inference_id
        out = self.rt.invoke_endpoint(**kw)
        return out["Body"].read(), out["ContentType"]

    def summary(self, endpoint):
        return self.sm.describe_endpoint(EndpointName=endpoint).get("DataCaptureConfig")

    def run(self, width):
        a, ck, sm = self.a, self.ck, self.sm
        name = "e2e-capture"
        sm.create_model(ModelName=name, PrimaryContainer={"Image": a.image, "ModelDataUrl": "file://" + os.path.abspath(a.model)},
                        ExecutionRoleArn="arn:aws:iam::%s:role/e2e" % ACCOUNT)
        first = sdk_capture(True, 100)
        first["KmsKeyId"] = "alias/e2e-capture"
        self.deploy(name, name, first)
        ck.eq("DescribeEndpointConfig gives DataCaptureConfig back as sent",
              sm.describe_endpoint_config(EndpointConfigName=name).get("DataCaptureConfig"), first)
        ck.eq("DescribeEndpoint's DataCaptureConfig after deploy", self.summary(name),
              {"EnableCapture": True, "CaptureStatus": "Started", "CurrentSamplingPercentage": 100,
               "DestinationS3Uri": DEST, "KmsKeyId": "alias/e2e-capture"})

        # CSV in, the model's default JSON out; JSON in, CSV out (Accept).
        csv = (",".join(["0.25"] * width) + "\n").encode()
        js = json.dumps({"instances": [[0.5] * width, [0.0] * width]}).encode()
        csv_answer, csv_type = self.invoke(name, csv, "text/csv", inference_id="e2e-csv-1")
        js_answer, js_type = self.invoke(name, js, "application/json", accept="text/csv", inference_id="e2e-json-1")
        recs = self.cap.wait_for(name, ["e2e-csv-1", "e2e-json-1"])
        by_id = {r["eventMetadata"].get("inferenceId"): (k, t, r) for k, t, r in recs}
        ck.eq("two calls, two records", len(recs), 2)
        for iid, sent, sent_type, answer, answer_type in (("e2e-csv-1", csv, "text/csv", csv_answer, csv_type),
                                                         ("e2e-json-1", js, "application/json", js_answer, js_type)):
            if ck.ok("call %s captured" % iid, iid in by_id, "" if iid in by_id else str(sorted(by_id))):
                k, t, r = by_id[iid]
                check_record(ck, iid, k, t, r, name, sent, sent_type, answer, answer_type, iid)

        # disable_data_capture(): DataCaptureConfig(enable_capture=False) with the SDK's defaults.
        self.update_data_capture_config(name, sdk_capture(False), name + "-off")
        ck.eq("DescribeEndpoint after disable_data_capture", self.summary(name),
              {"EnableCapture": False, "CaptureStatus": "Stopped", "CurrentSamplingPercentage": 20, "DestinationS3Uri": DEST})
        for i in range(5):
            self.invoke(name, csv, "text/csv", inference_id="e2e-off-%d" % i)
        # enable_data_capture(): sampling at the SDK's default 20 %.
        self.update_data_capture_config(name, sdk_capture(True), name + "-on")
        ck.eq("DescribeEndpoint after enable_data_capture", self.summary(name),
              {"EnableCapture": True, "CaptureStatus": "Started", "CurrentSamplingPercentage": 20, "DestinationS3Uri": DEST})
        n = 200
        for i in range(n):
            self.invoke(name, csv, "text/csv", inference_id="e2e-20pct-%03d" % i)
        # update_data_capture_config(DataCaptureConfig(True, sampling_percentage=100, ...)): a marker call.
        self.update_data_capture_config(name, sdk_capture(True, 100), name + "-all")
        self.invoke(name, csv, "text/csv", inference_id="e2e-marker")
        recs = self.cap.wait_for(name, ["e2e-marker"])
        ids = [r["eventMetadata"].get("inferenceId") for _, _, r in recs]
        ck.eq("nothing captured while capture was disabled", [i for i in ids if i.startswith("e2e-off-")], [])
        sampled = len([i for i in ids if i.startswith("e2e-20pct-")])
        # Binomial(200, 0.2): mean 40, standard deviation 5.7; 5 deviations either way.
        ck.ok("about 20 %% of %d calls captured after enable_data_capture (12-68)" % n, 12 <= sampled <= 68, str(sampled))
        ck.ok("captured again at 100 % after update_data_capture_config", "e2e-marker" in ids, str(len(ids)))

        # Outside SageMaker's constraints: its ValidationException.
        for bad, want in (({"InitialSamplingPercentage": 101}, "Member must have value less than or equal to 100"),
                          ({"DestinationS3Uri": "https://%s.s3.amazonaws.com/x" % BUCKET}, "s3:// locations only"),
                          ({"CaptureOptions": [{"CaptureMode": "Request"}]}, "Member must satisfy enum value set")):
            dc = dict(sdk_capture(True), **bad)
            try:
                sm.create_endpoint_config(EndpointConfigName=name + "-bad", ProductionVariants=[variant(name)], DataCaptureConfig=dc)
                ck.ok("DataCaptureConfig %s refused" % json.dumps(bad), False, "accepted")
            except ClientError as e:
                err = e.response["Error"]
                ck.ok("DataCaptureConfig %s refused" % json.dumps(bad),
                      err.get("Code") == "ValidationException" and want in err.get("Message", ""), str(err))
        self.cleanup(name, [name, name + "-off", name + "-on", name + "-all"])
        return name

    def cleanup(self, endpoint, configs):
        self.sm.delete_endpoint(EndpointName=endpoint)
        self.sm.get_waiter("endpoint_deleted").wait(EndpointName=endpoint, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
        for c in configs:
            self.sm.delete_endpoint_config(EndpointConfigName=c)


class CliFlow:
    """The same with the aws CLI: create-endpoint-config --data-capture-config, update-endpoint,
    describe-endpoint, invoke-endpoint, and `aws s3` to read the files."""

    def __init__(self, a, s3, tmp):
        self.a = a
        self.ck = e2elib.Checks("aws-cli")
        self.tmp = tmp
        self.cap = Captured(s3)
        self.s3_env = dict(os.environ, AWS_ACCESS_KEY_ID=a.s3_key, AWS_SECRET_ACCESS_KEY=a.s3_secret)

    def aws(self, args, s3=False):
        p = subprocess.run([AWS_CLI] + args + ["--endpoint-url", self.a.s3_url if s3 else self.a.url, "--region", REGION,
                                               "--output", "json"],
                           capture_output=True, env=self.s3_env if s3 else os.environ, timeout=120)
        return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")

    def sm(self, what, *args):
        rc, out, err = self.aws(["sagemaker"] + list(args))
        self.ck.ok(what, rc == 0, err[-300:])
        return json.loads(out) if rc == 0 and out.strip() else {}

    def wait(self, name):
        deadline = time.time() + 120
        while time.time() < deadline:
            rc, out, _ = self.aws(["sagemaker", "describe-endpoint", "--endpoint-name", name])
            if rc == 0 and json.loads(out).get("EndpointStatus") == "InService":
                return json.loads(out)
            time.sleep(0.5)
        self.ck.ok("endpoint %s InService" % name, False, "not after 120 s")
        return {}

    def invoke(self, name, body, content_type, inference_id):
        inp = os.path.join(self.tmp, inference_id + ".in")
        out = os.path.join(self.tmp, inference_id + ".out")
        with open(inp, "wb") as f:
            f.write(body)
        rc, meta, err = self.aws(["sagemaker-runtime", "invoke-endpoint", "--endpoint-name", name, "--body", "fileb://" + inp,
                                  "--content-type", content_type, "--inference-id", inference_id, out])
        if not self.ck.ok("invoke-endpoint " + inference_id, rc == 0, err[-300:]):
            return b"", ""
        with open(out, "rb") as f:
            return f.read(), json.loads(meta).get("ContentType", "")

    def run(self, width, model):
        ck = self.ck
        name = "e2e-capture-cli"
        dest = DEST + "/cli"
        dc = sdk_capture(True, 100, dest)
        self.sm("create-endpoint-config --data-capture-config", "create-endpoint-config", "--endpoint-config-name", name,
                "--production-variants", json.dumps([variant(model)]), "--data-capture-config", json.dumps(dc))
        self.sm("create-endpoint", "create-endpoint", "--endpoint-name", name, "--endpoint-config-name", name)
        desc = self.wait(name)
        ck.eq("describe-endpoint's DataCaptureConfig", desc.get("DataCaptureConfig"),
              {"EnableCapture": True, "CaptureStatus": "Started", "CurrentSamplingPercentage": 100, "DestinationS3Uri": dest})
        ck.eq("describe-endpoint-config gives DataCaptureConfig back",
              self.sm("describe-endpoint-config", "describe-endpoint-config", "--endpoint-config-name", name).get("DataCaptureConfig"), dc)
        csv = (",".join(["1"] * width) + "\n").encode()
        answer, answer_type = self.invoke(name, csv, "text/csv", "e2e-cli-csv")
        recs = self.cap.wait_for(name, ["e2e-cli-csv"], dest=dest)
        # Read with `aws s3` too: ls the endpoint's files, cp one to stdout.
        bucket, keys = self.cap.keys(name, dest)
        rc, out, err = self.aws(["s3", "ls", "--recursive", "s3://%s/model-monitor/data-capture/cli/%s/" % (bucket, name)], s3=True)
        listed = sorted(l.split()[-1] for l in out.decode().splitlines() if l.strip())
        ck.eq("aws s3 ls --recursive lists the capture files", listed, keys)
        if ck.ok("one file captured", len(keys) == 1, str(keys)):
            rc, out, err = self.aws(["s3", "cp", "s3://%s/%s" % (bucket, keys[0]), "-"], s3=True)
            lines = out.decode().splitlines()
            if ck.ok("aws s3 cp of the capture file", rc == 0 and len(lines) == 1, err[-300:]):
                check_record(ck, "e2e-cli-csv", keys[0], recs[0][1], json.loads(lines[0]), name, csv, "text/csv",
                             answer, answer_type, "e2e-cli-csv", dest=dest)
        # disable_data_capture, with the CLI.
        off = dict(dc, EnableCapture=False)
        self.sm("create-endpoint-config (capture disabled)", "create-endpoint-config", "--endpoint-config-name", name + "-off",
                "--production-variants", json.dumps([variant(model)]), "--data-capture-config", json.dumps(off))
        self.sm("update-endpoint", "update-endpoint", "--endpoint-name", name, "--endpoint-config-name", name + "-off")
        deadline = time.time() + 120
        while time.time() < deadline:
            desc = self.wait(name)
            if desc.get("EndpointConfigName") == name + "-off":
                break
            time.sleep(0.5)
        ck.eq("describe-endpoint after update-endpoint to a disabled capture", desc.get("DataCaptureConfig"),
              {"EnableCapture": False, "CaptureStatus": "Stopped", "CurrentSamplingPercentage": 100, "DestinationS3Uri": dest})
        self.invoke(name, csv, "text/csv", "e2e-cli-off")
        time.sleep(3)  # three --capture-interval periods: a captured call would be written by now
        ids = [r["eventMetadata"].get("inferenceId") for _, _, r in self.cap.records(name, dest)]
        ck.eq("nothing captured while disabled", ids, ["e2e-cli-csv"])
        self.aws(["sagemaker", "delete-endpoint", "--endpoint-name", name])
        deadline = time.time() + 60
        while time.time() < deadline and self.aws(["sagemaker", "describe-endpoint", "--endpoint-name", name])[0] == 0:
            time.sleep(0.5)
        for c in (name, name + "-off"):
            self.aws(["sagemaker", "delete-endpoint-config", "--endpoint-config-name", c])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True, help="mce's URL")
    ap.add_argument("--s3-url", required=True, help="the S3 store mce writes to")
    ap.add_argument("--s3-key", required=True)
    ap.add_argument("--s3-secret", required=True)
    ap.add_argument("--model", required=True, help="the ticket classifier's model.tar.gz, inside mce's model roots")
    ap.add_argument("--image", default="mce-example/classifier:latest")
    a = ap.parse_args()
    with tarfile.open(a.model) as tf:
        width = len(json.load(tf.extractfile("model.json"))["weights"][0])
    s3 = boto3.client("s3", endpoint_url=a.s3_url, region_name=REGION, aws_access_key_id=a.s3_key,
                      aws_secret_access_key=a.s3_secret, config=botocore.config.Config(s3={"addressing_style": "path"}))
    s3.create_bucket(Bucket=BUCKET)  # Session.default_bucket()
    checks = []
    boto = BotoFlow(a, s3)
    checks.append(boto.ck)
    try:
        model = boto.run(width)
    except Exception as e:  # noqa: BLE001 — reported as a failed check, the rest still runs
        boto.ck.ok("boto3 flow ran to its end", False, repr(e)[:400])
        model = "e2e-capture"
    with tempfile.TemporaryDirectory() as tmp:
        cli = CliFlow(a, s3, tmp)
        checks.append(cli.ck)
        try:
            cli.run(width, model)
        except Exception as e:  # noqa: BLE001
            cli.ck.ok("aws CLI flow ran to its end", False, repr(e)[:400])
    try:
        boto3.client("sagemaker", endpoint_url=a.url, region_name=REGION).delete_model(ModelName=model)
    except ClientError:
        pass
    passed = failed = 0
    for ck in checks:
        for line in ck.lines:
            print(line)
        passed += ck.passed
        failed += ck.failed
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
