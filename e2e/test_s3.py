#!/usr/bin/python3
"""End-to-end checks of s3:// model data against a real S3 server (versitygw).

e2e/run.sh starts versitygw on 127.0.0.1 (POSIX backend in a temporary folder,
random root keys) and mce with --s3-endpoint/--s3-path-style and those keys in
AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, then runs this script. Model data goes
up with both real clients: the aws CLI (aws s3 mb/cp --endpoint-url) and boto3
(upload_file, put_object). Then, through mce's SageMaker API:

- a Direct model whose two containers' ModelDataUrl are s3:// archives (one
  uploaded by each client), created and invoked with boto3 and the aws CLI;
- a multi-model endpoint whose ModelDataUrl is an s3:// prefix (created with
  the aws CLI), every TargetModel checked against the answer computed when the
  model was generated, and a TargetModel with no object under the prefix;
- ModelDataSource.S3DataSource with S3DataType S3Prefix and CompressionType
  None: an uncompressed folder the container sees file by file. Debian's
  botocore (1.29) and aws CLI (2.9) predate ModelDataSource, so that
  CreateModel goes as SageMaker's awsJson1_1 by hand; the rest is boto3;
- inference code as the SageMaker Python SDK ships it to the framework
  image (mce-framework/sklearn): a model.tar.gz repacked as its
  utils.repack_model writes it (Python's tarfile, add(model_dir,
  arcname="/"), so the first entry is "/", with code/inference.py inside),
  and a model without repacking whose SAGEMAKER_SUBMIT_DIRECTORY is an
  s3://…/sourcedir.tar.gz (as SKLearnModel(entry_point, source_dir) sets it),
  each created and invoked with boto3.

Output: PASS/FAIL lines, then "N passed, M failed". Standard library and boto3.
"""

import argparse
import gzip
import http.client
import json
import os
import subprocess
import sys
import tarfile
import tempfile

import boto3
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python3 -I leaves the script's folder out
import e2elib  # noqa: E402

AWS_CLI = "/usr/bin/aws"
REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/mce-e2e"
BUCKET = "mce-e2e-models"
REVIEW = {"instances": ["What a wonderful, helpful service. I love it!"]}
REVIEW_DE = {"instances": ["Das Essen war wunderbar und der Service sehr freundlich."]}


# The user's script, as the SDK's entry_point: it answers with the greeting
# read from the model folder and its own location, so the check sees which
# copy of the code ran.
INFERENCE_PY = """import json, os

def model_fn(model_dir):
    with open(os.path.join(model_dir, "greeting.txt")) as f:
        return f.read().strip()

def input_fn(body, content_type):
    return json.loads(body)

def predict_fn(data, model):
    return {"greeting": model, "name": data.get("name"), "code": os.path.dirname(os.path.abspath(__file__))}

def output_fn(prediction, accept):
    return json.dumps(prediction), "application/json"
"""


def write_files(root, files):
    for rel, body in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(body)


def sdk_repacked_archive(path):
    """model.tar.gz exactly as sagemaker.utils.repack_model writes it."""
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = os.path.join(tmp, "model")
        write_files(model_dir, {"greeting.txt": "hello from the repacked model\n", "code/inference.py": INFERENCE_PY})
        with tarfile.open(path, mode="w:gz") as t:
            t.add(model_dir, arcname=os.path.sep)
    return first_entry_name(path)


def first_entry_name(path):
    """The first entry's name as written (tarfile's reader drops a directory's trailing "/")."""
    with gzip.open(path) as f:
        data = f.read()
    off, pax = 0, {}
    while off + 512 <= len(data):
        h = data[off:off + 512]
        size = int(h[124:136].strip(b"\0 ") or b"0", 8)
        if h[156:157] in (b"x", b"g"):  # PAX extended header: records "LEN key=value\n"
            for rec in data[off + 512:off + 512 + size].decode("utf-8", "replace").splitlines():
                key, _, value = rec.partition(" ")[2].partition("=")
                pax[key] = value
            off += 512 + (size + 511) // 512 * 512
            continue
        return pax.get("path", h[:100].rstrip(b"\0").decode("utf-8", "replace"))
    return None


def sdk_sourcedir_archive(path):
    """sourcedir.tar.gz as the SDK's tar_and_upload_dir writes it: the files at the top."""
    with tempfile.TemporaryDirectory() as tmp:
        write_files(tmp, {"inference.py": INFERENCE_PY})
        with tarfile.open(path, mode="w:gz") as t:
            t.add(os.path.join(tmp, "inference.py"), arcname="inference.py")


def model_only_archive(path):
    with tempfile.TemporaryDirectory() as tmp:
        write_files(tmp, {"greeting.txt": "hello from the model without code\n"})
        with tarfile.open(path, mode="w:gz") as t:
            t.add(os.path.join(tmp, "greeting.txt"), arcname="greeting.txt")


def label(body):
    try:
        p = json.loads(body)["predictions"][0]
        return p.get("language"), p.get("label")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return body


class Run:
    def __init__(self, a):
        self.a = a
        self.ck = e2elib.Checks("s3")
        s3_creds = dict(aws_access_key_id=a.s3_key, aws_secret_access_key=a.s3_secret, region_name=REGION)
        self.s3 = boto3.client("s3", endpoint_url=a.s3_url, **s3_creds)
        self.sm = boto3.client("sagemaker", endpoint_url=a.url, region_name=REGION)
        self.rt = boto3.client("sagemaker-runtime", endpoint_url=a.url, region_name=REGION)
        # The aws CLI talks to S3 with the server's keys, to mce with the e2e ones.
        self.s3_env = dict(os.environ, AWS_ACCESS_KEY_ID=a.s3_key, AWS_SECRET_ACCESS_KEY=a.s3_secret)

    def cli(self, args, env=None, endpoint=None):
        r = subprocess.run([AWS_CLI] + args + ["--endpoint-url", endpoint or self.a.url, "--region", REGION,
                                               "--output", "json"],
                           capture_output=True, text=True, env=env or os.environ, timeout=120)
        return r

    def cli_ok(self, what, args, **kw):
        r = self.cli(args, **kw)
        self.ck.ok(what, r.returncode == 0, "" if r.returncode == 0 else (r.stderr.strip() or r.stdout)[-400:])
        return r

    def upload(self):
        a, ck = self.a, self.ck
        s3 = dict(env=self.s3_env, endpoint=a.s3_url)
        self.cli_ok("aws s3 mb s3://%s" % BUCKET, ["s3", "mb", "s3://" + BUCKET], **s3)
        self.cli_ok("aws s3 cp sentiment-en.tar.gz",
                    ["s3", "cp", os.path.join(a.models, "sentiment-en.tar.gz"), "s3://%s/single/en/model.tar.gz" % BUCKET], **s3)
        self.cli_ok("aws s3 cp --recursive of the multi-model artifacts",
                    ["s3", "cp", "--recursive", "--exclude", "*", "--include", "model-00[01].tar.gz",
                     a.mme_dir, "s3://%s/mme/" % BUCKET], **s3)
        try:
            self.s3.upload_file(os.path.join(a.models, "sentiment-de.tar.gz"), BUCKET, "single/de/model.tar.gz")
            self.s3.upload_file(os.path.join(a.mme_dir, "model-002.tar.gz"), BUCKET, "mme/model-002.tar.gz")
            self.s3.put_object(Bucket=BUCKET, Key="folder/tag", Body=b"s3-folder-e2e\n")
            self.s3.put_object(Bucket=BUCKET, Key="folder/weights/w.bin", Body=b"0123456789")
            self.s3.put_object(Bucket=BUCKET, Key="folder-other/x", Body=b"not under folder/")
            ck.ok("boto3 upload_file and put_object", True)
        except ClientError as e:
            ck.ok("boto3 upload_file and put_object", False, str(e))
        r = self.cli(["s3", "ls", "--recursive", "s3://" + BUCKET], env=self.s3_env, endpoint=a.s3_url)
        keys = sorted(line.split()[-1] for line in r.stdout.splitlines() if line.strip())
        ck.eq("aws s3 ls --recursive lists what both clients put", keys,
              ["folder-other/x", "folder/tag", "folder/weights/w.bin", "mme/model-000.tar.gz",
               "mme/model-001.tar.gz", "mme/model-002.tar.gz", "single/de/model.tar.gz", "single/en/model.tar.gz"])

    def create_model_raw(self, name, model_kwargs):
        """CreateModel as awsJson1_1 by hand, for fields the installed botocore lacks."""
        host, port = self.a.url[len("http://"):].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        body = dict(model_kwargs, ModelName=name, ExecutionRoleArn=ROLE)
        conn.request("POST", "/", body=json.dumps(body).encode(), headers={
            "Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "SageMaker.CreateModel"})
        resp = conn.getresponse()
        raw = resp.read().decode("utf-8", "replace")
        conn.close()
        if resp.status != 200:
            raise RuntimeError("CreateModel: HTTP %d: %s" % (resp.status, raw[:300]))

    def endpoint(self, name, model_kwargs, via_cli=False, raw=False):
        """CreateModel, CreateEndpointConfig, CreateEndpoint; waits for InService."""
        ck = self.ck
        try:
            if raw:
                self.create_model_raw(name, model_kwargs)
            elif via_cli:
                self.cli_ok("aws sagemaker create-model %s" % name,
                            ["sagemaker", "create-model", "--model-name", name, "--execution-role-arn", ROLE,
                             "--cli-input-json", json.dumps(model_kwargs)])
            else:
                self.sm.create_model(ModelName=name, ExecutionRoleArn=ROLE, **model_kwargs)
            self.sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
                "VariantName": "AllTraffic", "ModelName": name, "InitialInstanceCount": 1,
                "InstanceType": "ml.c5.large"}])
            self.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
            self.sm.get_waiter("endpoint_in_service").wait(EndpointName=name,
                                                            WaiterConfig={"Delay": 1, "MaxAttempts": 120})
            return ck.ok("%s InService" % name, True)
        except Exception as e:  # noqa: BLE001 — any failure is this check's
            d = {}
            try:
                d = self.sm.describe_endpoint(EndpointName=name)
            except ClientError:
                pass
            return ck.ok("%s InService" % name, False, "%s; FailureReason %r" % (e, d.get("FailureReason")))

    def delete(self, name):
        for op, kw in (("delete_endpoint", {"EndpointName": name}),
                       ("delete_endpoint_config", {"EndpointConfigName": name}),
                       ("delete_model", {"ModelName": name})):
            try:
                getattr(self.sm, op)(**kw)
            except ClientError:
                pass

    def invoke_cli(self, name, body, **extra):
        with tempfile.TemporaryDirectory() as d:
            req, out = os.path.join(d, "req"), os.path.join(d, "out")
            with open(req, "wb") as f:
                f.write(body)
            args = ["sagemaker-runtime", "invoke-endpoint", "--endpoint-name", name,
                    "--content-type", "application/json", "--body", "fileb://" + req]
            for k, v in extra.items():
                args += ["--" + e2elib.kebab(k), v]
            r = self.cli(args + [out])
            data = open(out, "rb").read() if os.path.exists(out) else b""
            return r, data

    def direct(self):
        ck, name = self.ck, "e2e-s3-sentiment"
        url = "s3://%s/single/%s/model.tar.gz"
        if not self.endpoint(name, {"Containers": [
                {"ContainerHostname": "english", "Image": "mce-example/sentiment:latest", "ModelDataUrl": url % (BUCKET, "en")},
                {"ContainerHostname": "german", "Image": "mce-example/sentiment:latest", "ModelDataUrl": url % (BUCKET, "de")}],
                "InferenceExecutionConfig": {"Mode": "Direct"}}):
            return
        for host, review, lang in (("english", REVIEW, "en"), ("german", REVIEW_DE, "de")):
            body = json.dumps(review).encode()
            try:
                r = self.rt.invoke_endpoint(EndpointName=name, TargetContainerHostname=host,
                                            ContentType="application/json", Body=body)
                ck.eq("boto3 invoke %s (model from s3://)" % host, label(r["Body"].read()), (lang, "POSITIVE"))
            except ClientError as e:
                ck.ok("boto3 invoke %s (model from s3://)" % host, False, str(e))
            r, data = self.invoke_cli(name, body, TargetContainerHostname=host)
            ck.eq("aws CLI invoke %s (model from s3://)" % host, (r.returncode, label(data)), (0, (lang, "POSITIVE")))

    def mme(self):
        ck, name = self.ck, "e2e-s3-mme"
        if not self.endpoint(name, {"PrimaryContainer": {
                "Image": "mce-example/modelserver:latest", "Mode": "MultiModel",
                "ModelDataUrl": "s3://%s/mme/" % BUCKET}}, via_cli=True):
            return
        man = json.load(open(os.path.join(self.a.mme_dir, "manifest.json")))
        for m in man["models"][:3]:
            body = json.dumps(m["request"]).encode()
            try:
                r = self.rt.invoke_endpoint(EndpointName=name, TargetModel=m["target_model"],
                                            ContentType="application/json", Body=body)
                ck.eq("boto3 TargetModel %s from the s3:// prefix" % m["target_model"],
                      json.loads(r["Body"].read()), m["response"])
            except ClientError as e:
                ck.ok("boto3 TargetModel %s from the s3:// prefix" % m["target_model"], False, str(e))
            r, data = self.invoke_cli(name, body, TargetModel=m["target_model"])
            got = json.loads(data) if r.returncode == 0 and data else (r.returncode, r.stderr[-300:])
            ck.eq("aws CLI TargetModel %s from the s3:// prefix" % m["target_model"], got, m["response"])
        try:
            self.rt.invoke_endpoint(EndpointName=name, TargetModel="model-404.tar.gz",
                                    ContentType="application/json", Body=b"{}")
            ck.ok("TargetModel with no object under the prefix is refused", False, "it answered")
        except ClientError as e:
            err = e.response["Error"]
            ck.ok("TargetModel with no object under the prefix is refused",
                  err.get("Code") == "ValidationError" and "model-404.tar.gz" in err.get("Message", ""),
                  "%s: %s" % (err.get("Code"), err.get("Message")))

    def prefix(self):
        ck, name = self.ck, "e2e-s3-prefix"
        if not self.endpoint(name, {"PrimaryContainer": {
                "Image": "mce-example/probe:latest",
                "ModelDataSource": {"S3DataSource": {"S3Uri": "s3://%s/folder/" % BUCKET, "S3DataType": "S3Prefix",
                                                     "CompressionType": "None"}}}}, raw=True):
            return
        try:
            r = self.rt.invoke_endpoint(EndpointName=name, ContentType="text/plain", Body=b"x", CustomAttributes="info")
            info = json.loads(r["Body"].read())
            ck.eq("boto3: the S3Prefix folder reaches /opt/ml/model", (info.get("model_tag"), sorted(
                f["path"] for f in info.get("model_files", []))), ("s3-folder-e2e", ["tag", "weights/w.bin"]))
        except (ClientError, ValueError) as e:
            ck.ok("boto3: the S3Prefix folder reaches /opt/ml/model", False, str(e))
        r, data = self.invoke_cli(name, b"x", CustomAttributes="info")
        try:
            tag = json.loads(data).get("model_tag")
        except ValueError:
            tag = (r.returncode, r.stderr[-300:])
        ck.eq("aws CLI: the S3Prefix folder's tag file", tag, "s3-folder-e2e")

    def sdk_code(self):
        """The SDK's two ways of shipping inference code to a framework image."""
        ck, image = self.ck, self.a.framework_image
        with tempfile.TemporaryDirectory() as d:
            repacked, source, model = (os.path.join(d, n) for n in ("repacked.tar.gz", "sourcedir.tar.gz", "model.tar.gz"))
            ck.eq("the repacked archive's first entry (Python tarfile, arcname=os.path.sep)", sdk_repacked_archive(repacked), "/")
            sdk_sourcedir_archive(source)
            model_only_archive(model)
            try:
                self.s3.upload_file(repacked, BUCKET, "sdk/repacked/model.tar.gz")
                self.s3.upload_file(model, BUCKET, "sdk/plain/model.tar.gz")
                self.s3.upload_file(source, BUCKET, "sdk/plain/source/sourcedir.tar.gz")
            except ClientError as e:
                ck.ok("boto3 upload of the SDK-style archives", False, str(e))
                return
        cases = (
            ("e2e-s3-sdk-repacked", {"Image": image, "ModelDataUrl": "s3://%s/sdk/repacked/model.tar.gz" % BUCKET,
                                     "Environment": {"SAGEMAKER_PROGRAM": "inference.py",
                                                     "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code"}},
             {"greeting": "hello from the repacked model", "name": "e2e", "code": "/opt/ml/model/code"}),
            ("e2e-s3-sdk-submitdir", {"Image": image, "ModelDataUrl": "s3://%s/sdk/plain/model.tar.gz" % BUCKET,
                                      "Environment": {"SAGEMAKER_PROGRAM": "inference.py",
                                                      "SAGEMAKER_SUBMIT_DIRECTORY": "s3://%s/sdk/plain/source/sourcedir.tar.gz" % BUCKET,
                                                      "SAGEMAKER_CONTAINER_LOG_LEVEL": "20", "SAGEMAKER_REGION": REGION}},
             {"greeting": "hello from the model without code", "name": "e2e", "code": "/opt/ml/code"}),
        )
        for name, container, want in cases:
            if not self.endpoint(name, {"PrimaryContainer": container}):
                continue
            try:
                r = self.rt.invoke_endpoint(EndpointName=name, ContentType="application/json", Body=b'{"name": "e2e"}')
                ck.eq("boto3 invoke %s (the SDK's inference.py ran)" % name, json.loads(r["Body"].read()), want)
            except (ClientError, ValueError) as e:
                ck.ok("boto3 invoke %s (the SDK's inference.py ran)" % name, False, str(e))
        # A code archive that is not there fails the endpoint, saying which.
        name, url = "e2e-s3-sdk-nocode", "s3://%s/sdk/missing/sourcedir.tar.gz" % BUCKET
        try:
            self.sm.create_model(ModelName=name, ExecutionRoleArn=ROLE, PrimaryContainer={
                "Image": image, "ModelDataUrl": "s3://%s/sdk/plain/model.tar.gz" % BUCKET,
                "Environment": {"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_SUBMIT_DIRECTORY": url}})
            self.sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
                "VariantName": "AllTraffic", "ModelName": name, "InitialInstanceCount": 1, "InstanceType": "ml.c5.large"}])
            self.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
            try:
                self.sm.get_waiter("endpoint_in_service").wait(EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
            except Exception:  # noqa: BLE001 — the waiter stops at Failed, as wanted
                pass
            d = self.sm.describe_endpoint(EndpointName=name)
            reason = d.get("FailureReason", "")
            ck.ok("a missing SAGEMAKER_SUBMIT_DIRECTORY archive fails the endpoint, naming it",
                  d["EndpointStatus"] == "Failed" and "SAGEMAKER_SUBMIT_DIRECTORY" in reason and url in reason
                  and "not found" in reason,
                  "%s: %s" % (d["EndpointStatus"], reason))
        except ClientError as e:
            ck.ok("a missing SAGEMAKER_SUBMIT_DIRECTORY archive fails the endpoint, naming it", False, str(e))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True, help="mce's endpoint URL")
    p.add_argument("--s3-url", required=True)
    p.add_argument("--s3-key", required=True)
    p.add_argument("--s3-secret", required=True)
    p.add_argument("--models", required=True, help="folder of the example model archives")
    p.add_argument("--mme-dir", required=True, help="folder of model-000.tar.gz … and manifest.json")
    p.add_argument("--framework-image", default="mce-framework/sklearn:latest",
                   help="mce's scikit-learn framework image, for the SDK's inference code")
    a = p.parse_args()
    run = Run(a)
    names = ["e2e-s3-sentiment", "e2e-s3-mme", "e2e-s3-prefix", "e2e-s3-sdk-repacked", "e2e-s3-sdk-submitdir", "e2e-s3-sdk-nocode"]
    try:
        run.upload()
        run.direct()
        run.mme()
        run.prefix()
        run.sdk_code()
    finally:
        for n in names:
            run.delete(n)
    for line in run.ck.lines:
        print(line)
    print("%d passed, %d failed" % (run.ck.passed, run.ck.failed))
    return 1 if run.ck.failed else 0


if __name__ == "__main__":
    sys.exit(main())
