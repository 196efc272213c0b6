#!/usr/bin/python3
"""End-to-end check of mce's InvokeEndpointAsync with boto3 and the aws CLI.

Given an mce URL whose endpoint ENDPOINT is asynchronous (AsyncInferenceConfig
with S3OutputPath s3://BUCKET/out and S3FailurePath s3://BUCKET/failed, the
probe container behind it) and the S3-compatible store mce writes to, it puts
inputs into S3 with boto3's s3 client, calls invoke_endpoint_async (boto3)
and `aws sagemaker-runtime invoke-endpoint-async` (the CLI), and polls S3 for
the answers and failures. S3 credentials come from the environment
(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY); the runtime calls are unsigned.

Output: one line per check (PASS/FAIL what: detail), then "N passed, M
failed". Exit status 1 if any check failed.
"""

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
import urllib.request

import boto3
import botocore
from botocore.exceptions import ClientError

AWS_CLI = "/usr/bin/aws"
passed = 0
failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"PASS {what}")
    else:
        failed += 1
        print(f"FAIL {what}: {detail}")


def wait_object(s3, url, within=30.0):
    """The body of the object at s3://bucket/key once it exists, or None."""
    bucket, _, key = url[len("s3://"):].partition("/")
    deadline = time.time() + within
    while time.time() < deadline:
        try:
            return s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError:
            time.sleep(0.1)
    return None


def wait_object_full(s3, url, within=30.0):
    """get_object's answer for s3://bucket/key once it exists, or None."""
    bucket, _, key = url[len("s3://"):].partition("/")
    deadline = time.time() + within
    while time.time() < deadline:
        try:
            return s3.get_object(Bucket=bucket, Key=key)
        except ClientError:
            time.sleep(0.1)
    return None


def create(a, s3, unsigned, name, container):
    """The asynchronous endpoint name on one container, through boto3
    (CreateModel, CreateEndpointConfig with AsyncInferenceConfig,
    CreateEndpoint), then the endpoint_in_service waiter."""
    sm = boto3.client("sagemaker", endpoint_url=a.url, region_name="us-east-1", config=unsigned)
    sm.create_model(ModelName=name, PrimaryContainer=container,
                    ExecutionRoleArn="arn:aws:iam::123456789012:role/e2e")
    # Sent by hand: Debian's botocore 1.29 predates OutputConfig.S3FailurePath
    # (newer boto3 sends this same JSON with sm.create_endpoint_config).
    req = urllib.request.Request(a.url + "/", method="POST", data=json.dumps({
        "EndpointConfigName": name,
        "ProductionVariants": [{"VariantName": "AllTraffic", "ModelName": name, "InitialInstanceCount": 1,
                                "InstanceType": "ml.m5.large"}],
        "AsyncInferenceConfig": {"OutputConfig": {"S3OutputPath": f"s3://{a.bucket}/out",
                                                  "S3FailurePath": f"s3://{a.bucket}/failed"},
                                 "ClientConfig": {"MaxConcurrentInvocationsPerInstance": 2}},
    }).encode(), headers={"Content-Type": "application/x-amz-json-1.1",
                          "X-Amz-Target": "SageMaker.CreateEndpointConfig"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        check(resp.status == 200, "CreateEndpointConfig with AsyncInferenceConfig", resp.status)
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    sm.get_waiter("endpoint_in_service").wait(EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    desc = sm.describe_endpoint(EndpointName=name)
    check(desc.get("AsyncInferenceConfig", {}).get("OutputConfig", {}).get("S3OutputPath") == f"s3://{a.bucket}/out",
          "DescribeEndpoint shows the AsyncInferenceConfig", desc.get("AsyncInferenceConfig"))


def check_csv_model(a, s3, rt, unsigned):
    """A model that takes only text/csv and JSON (the ticket classifier; any
    other type is its 415) answers an input stored as text/csv and invoked
    with no ContentType, as the SageMaker SDK's AsyncPredictor invokes."""
    with tarfile.open(a.csv_model) as tf:
        model = json.load(tf.extractfile("model.json"))
    width, labels = len(model["weights"][0]), model["labels"]
    name = a.endpoint + "-csv"
    create(a, s3, unsigned, name, {"Image": a.csv_image, "ModelDataUrl": "file://" + os.path.abspath(a.csv_model)})
    s3.put_object(Bucket=a.bucket, Key="e2e/features.csv", Body=(",".join(["0.5"] * width) + "\n").encode(),
                  ContentType="text/csv")
    out = rt.invoke_endpoint_async(EndpointName=name, InputLocation=f"s3://{a.bucket}/e2e/features.csv",
                                   InferenceId="e2e-csv-model")
    body = wait_object(s3, out["OutputLocation"])
    failure = wait_object(s3, out.get("FailureLocation") or out["ResponseMetadata"]["HTTPHeaders"].get(
        "x-amzn-sagemaker-failurelocation"), within=0.5) if body is None else None
    check(body is not None and any(l.encode() in body for l in labels),
          "CSV model answers an input stored as text/csv, invoked without ContentType", body or failure)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True, help="mce's URL")
    ap.add_argument("--s3-endpoint", required=True, help="the S3-compatible store's URL")
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--endpoint", required=True, help="the asynchronous endpoint's name")
    ap.add_argument("--s3-key", help="the S3 store's access key (default: AWS_ACCESS_KEY_ID)")
    ap.add_argument("--s3-secret", help="the S3 store's secret key (default: AWS_SECRET_ACCESS_KEY)")
    ap.add_argument("--create", metavar="IMAGE",
                    help="first create the bucket and the endpoint (AsyncInferenceConfig, one IMAGE container)")
    ap.add_argument("--csv-model", metavar="PATH",
                    help="the ticket classifier's model.tar.gz (build/models/classifier.tar.gz, inside mce's model "
                         "roots): also create ENDPOINT-csv on --csv-image and check a text/csv input the SDK's way")
    ap.add_argument("--csv-image", default="mce-example/classifier:latest")
    a = ap.parse_args()

    unsigned = botocore.config.Config(signature_version=botocore.UNSIGNED, retries={"max_attempts": 1})
    rt = boto3.client("sagemaker-runtime", endpoint_url=a.url, region_name="us-east-1", config=unsigned)
    keys = {}
    if a.s3_key:
        keys = {"aws_access_key_id": a.s3_key, "aws_secret_access_key": a.s3_secret}
    s3 = boto3.client("s3", endpoint_url=a.s3_endpoint, region_name="us-east-1",
                      config=botocore.config.Config(s3={"addressing_style": "path"}), **keys)
    if a.create:
        s3.create_bucket(Bucket=a.bucket)
        create(a, s3, unsigned, a.endpoint, {"Image": a.create})

    # boto3: an answer at OutputLocation, the probe's echo of the input.
    s3.put_object(Bucket=a.bucket, Key="e2e/in.json", Body=b'{"e2e": "boto3"}')
    out = rt.invoke_endpoint_async(EndpointName=a.endpoint, InputLocation=f"s3://{a.bucket}/e2e/in.json",
                                   ContentType="application/json", InferenceId="e2e-boto3")
    meta = out["ResponseMetadata"]
    check(meta["HTTPStatusCode"] == 202, "boto3 invoke_endpoint_async answers 202", meta["HTTPStatusCode"])
    check(out.get("InferenceId") == "e2e-boto3", "boto3 InferenceId", out.get("InferenceId"))
    check(out.get("OutputLocation") == f"s3://{a.bucket}/out/e2e-boto3.out", "boto3 OutputLocation", out.get("OutputLocation"))
    # Older botocore (Debian's 1.29) does not model FailureLocation; the header is there either way.
    failure = out.get("FailureLocation") or meta["HTTPHeaders"].get("x-amzn-sagemaker-failurelocation")
    check(failure == f"s3://{a.bucket}/failed/e2e-boto3-error.out", "boto3 FailureLocation", failure)
    body = wait_object(s3, out["OutputLocation"])
    check(body == b'{"e2e": "boto3"}', "boto3 answer in S3", body)

    # boto3: a missing input goes to the failure location.
    out = rt.invoke_endpoint_async(EndpointName=a.endpoint, InputLocation=f"s3://{a.bucket}/e2e/absent",
                                   InferenceId="e2e-missing", RequestTTLSeconds=60)
    failure = out.get("FailureLocation") or out["ResponseMetadata"]["HTTPHeaders"].get("x-amzn-sagemaker-failurelocation")
    check(failure == f"s3://{a.bucket}/failed/e2e-missing-error.out", "boto3 FailureLocation of a missing input", failure)
    body = wait_object(s3, failure)
    check(body is not None and b"there is no object at InputLocation" in body, "boto3 missing input at FailureLocation", body)
    # The failure is SageMaker's JSON error body, which the SageMaker SDK's
    # AsyncInferenceResponse runs through its (often JSON) deserializer
    # before raising AsyncInferenceModelError.
    obj = wait_object_full(s3, failure)
    try:
        doc = json.loads(obj["Body"].read())
    except (TypeError, ValueError) as e:
        doc = {"error": str(e)}
    check(obj is not None and obj["ContentType"] == "application/json" and doc.get("__type") == "ValidationError"
          and "there is no object at InputLocation" in doc.get("Message", ""),
          "failure object is a JSON error body", (obj or {}).get("ContentType"))

    # What the SageMaker Python SDK's AsyncPredictor does: the input object
    # carries the serializer's Content-Type, the call none. The probe answers
    # with the Content-Type it was called with.
    s3.put_object(Bucket=a.bucket, Key="e2e/rows.csv", Body=b"1,2\n", ContentType="text/csv")
    out = rt.invoke_endpoint_async(EndpointName=a.endpoint, InputLocation=f"s3://{a.bucket}/e2e/rows.csv",
                                   InferenceId="e2e-sdk-csv")
    obj = wait_object_full(s3, out["OutputLocation"])
    check(obj is not None and obj["ContentType"] == "text/csv" and obj["Body"].read() == b"1,2\n",
          "no ContentType on the call: the container gets the input object's text/csv", (obj or {}).get("ContentType"))
    if a.csv_model:
        check_csv_model(a, s3, rt, unsigned)

    # boto3: a malformed InputLocation is a ValidationError at once.
    try:
        rt.invoke_endpoint_async(EndpointName=a.endpoint, InputLocation="file:///etc/passwd")
        check(False, "boto3 file:// InputLocation refused", "accepted")
    except ClientError as e:
        err = e.response["Error"]
        check(err["Code"] == "ValidationError" and "inputLocation" in err["Message"], "boto3 file:// InputLocation refused", err)

    # The aws CLI (2.9 has invoke-endpoint-async).
    if os.path.exists(AWS_CLI):
        p = subprocess.run([AWS_CLI, "sagemaker-runtime", "invoke-endpoint-async", "--endpoint-url", a.url,
                            "--region", "us-east-1", "--no-sign-request", "--endpoint-name", a.endpoint,
                            "--input-location", f"s3://{a.bucket}/e2e/in.json", "--inference-id", "e2e-cli"],
                           capture_output=True, text=True, timeout=60)
        try:
            out = json.loads(p.stdout)
        except ValueError:
            out = {}
        check(p.returncode == 0 and out.get("OutputLocation") == f"s3://{a.bucket}/out/e2e-cli.out",
              "aws CLI invoke-endpoint-async", p.stdout + p.stderr)
        body = wait_object(s3, f"s3://{a.bucket}/out/e2e-cli.out")
        check(body == b'{"e2e": "boto3"}', "aws CLI answer in S3", body)

    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
