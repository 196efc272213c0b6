#!/usr/bin/python3
"""End-to-end checks of shadow variants (CreateEndpointConfig's ShadowProductionVariants) with the real AWS clients.

Each client (boto3, and the aws CLI: /usr/bin/aws, unmodified Debian packages, only the endpoint URL changed)
builds its own endpoint on the real example images: the English sentiment model as the production variant and
the probe (tag -shadow) as the shadow variant, weight 1 (every call copied). Then: DescribeEndpointConfig echoes
the shadow, DescribeEndpoint lists it under ShadowProductionVariants, InvokeEndpoint answers with the sentiment
model only (x-Amzn-Invoked-Production-Variant AllTraffic), the shadow's copies show in mce's Prometheus series
(/metrics on mce's listener, as `mce serve` serves it with no policies on loopback) under the shadow's own
VariantName, TargetVariant naming the shadow is a ValidationError, UpdateEndpointWeightsAndCapacities to weight 0
stops the copies, SageMaker's rules refuse a second shadow variant, the InferenceExperiment operations are refused
naming ShadowProductionVariants, and DeleteEndpoint removes the shadow's container (docker ps, label
io.mce.shadow=true). e2e/run.sh calls it with --url after the other scripts of its first mce.

Output: one line per check (PASS/FAIL [client] what: detail), then "N passed, M failed". Exit status 1 if any
check failed. Standard library and boto3 only.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

import boto3
from botocore.exceptions import ClientError, ParamValidationError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python3 -I leaves the script's folder out
import e2elib  # noqa: E402

AWS_CLI = "/usr/bin/aws"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "build", "models")
Res = e2elib.Res


class Boto:
    name = "boto3"
    prefix = "shb"

    def __init__(self, url):
        self.sm = boto3.client("sagemaker", endpoint_url=url)
        self.rt = boto3.client("sagemaker-runtime", endpoint_url=url)

    def call(self, op, **params):
        try:
            out = getattr(self.sm, re.sub(r"(?<!^)(?=[A-Z])", "_", op).lower())(**params)
        except ParamValidationError as e:
            return Res(False, client_side=True, message=str(e))
        except ClientError as e:
            err = e.response.get("Error", {})
            return Res(False, code=err.get("Code"), message=err.get("Message"))
        out.pop("ResponseMetadata", None)
        return Res(True, out)

    def invoke(self, endpoint, body, variant=None):
        """Res with out {"Body", "Variant"}."""
        kw = {"EndpointName": endpoint, "Body": body, "ContentType": "text/plain"}
        if variant:
            kw["TargetVariant"] = variant
        try:
            r = self.rt.invoke_endpoint(**kw)
        except ClientError as e:
            return Res(False, code=e.response["Error"].get("Code"), message=e.response["Error"].get("Message"))
        return Res(True, {"Body": r["Body"].read().decode(), "Variant": r.get("InvokedProductionVariant")})


class Cli:
    name = "aws-cli"
    prefix = "shc"

    def __init__(self, url, tmp):
        self.url, self.tmp = url, tmp

    def run(self, args):
        p = subprocess.run([AWS_CLI] + args + ["--endpoint-url", self.url, "--output", "json"], capture_output=True,
                           timeout=120)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")

    def call(self, op, **params):
        rc, out, err = self.run(["sagemaker", e2elib.kebab(op), "--cli-input-json", json.dumps(params)])
        if rc == 0:
            return Res(True, json.loads(out) if out.strip() else {})
        return e2elib.cli_error(err)

    def invoke(self, endpoint, body, variant=None):
        fd, inp = tempfile.mkstemp(dir=self.tmp, suffix=".in")
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        out = inp[:-3] + ".out"
        args = ["sagemaker-runtime", "invoke-endpoint", "--endpoint-name", endpoint, "--body", "fileb://" + inp,
                "--content-type", "text/plain"]
        if variant:
            args += ["--target-variant", variant]
        try:
            rc, stdout, err = self.run(args + [out])
        finally:
            os.unlink(inp)
        if rc != 0:
            return e2elib.cli_error(err)
        with open(out, "rb") as f:
            data = f.read().decode()
        os.unlink(out)
        return Res(True, {"Body": data, "Variant": json.loads(stdout).get("InvokedProductionVariant")})


def metric(url, series):
    """The value of one series in mce's /metrics, or None."""
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    m = re.search(r"^" + re.escape(series) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def wait_metric(url, series, want, timeout=60):
    deadline = time.monotonic() + timeout
    got = metric(url, series)
    while got != want and time.monotonic() < deadline:
        time.sleep(0.2)
        got = metric(url, series)
    return got


def wait_status(c, name, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = c.call("DescribeEndpoint", EndpointName=name)
        if r.ok and r.out.get("EndpointStatus") in ("InService", "Failed"):
            return r
        time.sleep(0.2)
    return r


def shadow_containers(endpoint):
    out = subprocess.run(["docker", "ps", "-q", "--filter", "label=io.mce.shadow=true",
                          "--filter", "label=io.mce.endpoint=" + endpoint], capture_output=True, timeout=60)
    return out.stdout.decode().split()


def run(c, url):
    ck = e2elib.Checks(c.name)
    p = c.prefix
    prod, shadow, cfg, ep = p + "-english", p + "-challenger", p + "-config", p + "-endpoint"
    ck.success("CreateModel (production)", c.call("CreateModel", ModelName=prod, ExecutionRoleArn="arn:aws:iam::123456789012:role/e2e",
                                                  PrimaryContainer={"Image": "mce-example/sentiment:latest",
                                                                    "ModelDataUrl": "file://" + os.path.join(MODELS, "sentiment-en.tar.gz")}))
    ck.success("CreateModel (shadow)", c.call("CreateModel", ModelName=shadow, ExecutionRoleArn="arn:aws:iam::123456789012:role/e2e",
                                              PrimaryContainer={"Image": "mce-example/probe:latest", "Environment": {"PROBE_TAG": "-shadow"}}))

    def variant(name, model, weight=1.0):
        return {"VariantName": name, "ModelName": model, "InitialInstanceCount": 1, "InstanceType": "ml.c5.large",
                "InitialVariantWeight": weight}

    two = c.call("CreateEndpointConfig", EndpointConfigName=p + "-two", ProductionVariants=[variant("AllTraffic", prod)],
                 ShadowProductionVariants=[variant("S1", shadow), variant("S2", shadow)])
    ck.ok("CreateEndpointConfig with two shadow variants is refused", not two.ok and two.code == "ValidationException" and
          "one variant for ShadowProductionVariants" in (two.message or ""), repr(two))
    ck.success("CreateEndpointConfig with a shadow variant",
               c.call("CreateEndpointConfig", EndpointConfigName=cfg, ProductionVariants=[variant("AllTraffic", prod)],
                      ShadowProductionVariants=[variant("Shadow", shadow)]))
    d = c.call("DescribeEndpointConfig", EndpointConfigName=cfg)
    ck.eq("DescribeEndpointConfig echoes ShadowProductionVariants",
          [(v.get("VariantName"), v.get("ModelName")) for v in d.out.get("ShadowProductionVariants", [])], [("Shadow", shadow)])
    ck.success("CreateEndpoint", c.call("CreateEndpoint", EndpointName=ep, EndpointConfigName=cfg))
    r = wait_status(c, ep)
    ck.eq("the endpoint comes InService", r.out.get("EndpointStatus"), "InService")
    ck.eq("DescribeEndpoint lists the production variant",
          [v.get("VariantName") for v in r.out.get("ProductionVariants", [])], ["AllTraffic"])
    ck.eq("DescribeEndpoint lists the shadow variant (ShadowProductionVariants)",
          [(v.get("VariantName"), v.get("CurrentWeight"), v.get("CurrentInstanceCount"))
           for v in r.out.get("ShadowProductionVariants", [])], [("Shadow", 1.0, 1)])
    ck.eq("one container labelled io.mce.shadow=true", len(shadow_containers(ep)), 1)

    n = 6
    answers = [c.invoke(ep, b"What a wonderful, helpful service. I love it!") for _ in range(n)]
    ck.ok("InvokeEndpoint answers with the production variant only",
          all(a.ok and a.out["Variant"] == "AllTraffic" and '"language":"en"' in a.out["Body"] and "POSITIVE" in a.out["Body"]
              for a in answers), repr(answers[0]))
    got = wait_metric(url, 'mce_invocations_total{endpoint="%s",variant="Shadow"}' % ep, n)
    ck.eq("mce_invocations_total of the shadow variant counts its copies", got, n)
    ck.eq("mce_model_latency_seconds_count of the shadow variant",
          metric(url, 'mce_model_latency_seconds_count{endpoint="%s",variant="Shadow"}' % ep), n)
    ck.eq("mce_invocations_total of the production variant",
          metric(url, 'mce_invocations_total{endpoint="%s",variant="AllTraffic"}' % ep), n)
    t = c.invoke(ep, b"x", variant="Shadow")
    ck.ok("TargetVariant naming the shadow is a ValidationError",
          not t.ok and t.code == "ValidationError" and "is a shadow variant" in (t.message or ""), repr(t))

    u = c.call("UpdateEndpointWeightsAndCapacities", EndpointName=ep,
               DesiredWeightsAndCapacities=[{"VariantName": "Shadow", "DesiredWeight": 0}])
    ck.success("UpdateEndpointWeightsAndCapacities on the shadow variant", u)
    r = wait_status(c, ep)
    ck.eq("the shadow's weight is 0", [v.get("CurrentWeight") for v in r.out.get("ShadowProductionVariants", [])], [0.0])
    answers = [c.invoke(ep, b"a terrible day") for _ in range(3)]
    ck.ok("the production variant still answers", all(a.ok and "NEGATIVE" in a.out["Body"] for a in answers), repr(answers[0]))
    time.sleep(1)  # a copy, if one were sent, would be counted by now
    ck.eq("a shadow of weight 0 gets no copies", metric(url, 'mce_invocations_total{endpoint="%s",variant="Shadow"}' % ep), n)

    ie = c.call("ListInferenceExperiments")
    ck.ok("ListInferenceExperiments is refused, naming ShadowProductionVariants",
          not ie.ok and ie.code == "UnknownOperationException" and "ShadowProductionVariants" in (ie.message or ""), repr(ie))
    ie = c.call("DescribeInferenceExperiment", Name="x")
    ck.ok("DescribeInferenceExperiment is refused, naming ShadowProductionVariants",
          not ie.ok and ie.code == "UnknownOperationException" and "ShadowProductionVariants" in (ie.message or ""), repr(ie))

    ck.success("DeleteEndpoint", c.call("DeleteEndpoint", EndpointName=ep))
    deadline = time.monotonic() + 60
    while shadow_containers(ep) and time.monotonic() < deadline:
        time.sleep(0.2)
    ck.eq("the shadow's container goes with its endpoint", shadow_containers(ep), [])
    for op, kw in (("DeleteEndpointConfig", {"EndpointConfigName": cfg}), ("DeleteModel", {"ModelName": prod}),
                   ("DeleteModel", {"ModelName": shadow})):
        c.call(op, **kw)
    return ck


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True, help="mce's listener, e.g. http://127.0.0.1:8080")
    a = ap.parse_args()
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for c in (Boto(a.url), Cli(a.url, tmp)):
            ck = run(c, a.url)
            print("\n".join(ck.lines), flush=True)
            passed, failed = passed + ck.passed, failed + ck.failed
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
