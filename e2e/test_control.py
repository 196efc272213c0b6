#!/usr/bin/python3
"""End-to-end checks of mce's SageMaker control plane with the real AWS clients.

Every case runs twice: through boto3 (boto3.client("sagemaker",
endpoint_url=URL)) and through the aws CLI (/usr/bin/aws sagemaker ...
--endpoint-url URL, JSON output), both unmodified Debian packages; the
constraints botocore checks itself (it refuses the request before sending it)
are also sent raw (http.client, a hand-built awsJson1_1 body) to see mce's own
answer. The whole lifecycle runs on the real example images: CreateModel (a
Direct model of English and German sentiment containers), CreateEndpointConfig,
CreateEndpoint, the endpoint_in_service waiter, InvokeEndpoint,
DescribeEndpoint, UpdateEndpointWeightsAndCapacities, UpdateEndpoint under
traffic, the List* operations with filters, sorting and paging, DeleteEndpoint
and the endpoint_deleted waiter, DeleteEndpointConfig, DeleteModel; then the
validation errors. e2e/run.sh starts mce (with e2e/endpoints.yaml, whose five
e2e-* endpoints the list checks page through) and calls this script with
--url after e2e/test_runtime.py. Standard library and boto3 only.

Output: one line per check (PASS/FAIL [client] what: detail), INFO lines (the
CreateEndpoint-to-InService times among them), then the summary line
"N passed, M failed". Exit status 1 if any check failed.
"""

import argparse
import concurrent.futures
import datetime
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import boto3
import botocore
from botocore import xform_name
from botocore.exceptions import ClientError, ParamValidationError, WaiterError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python3 -I leaves the script's folder out
import e2elib  # noqa: E402

ACCOUNT = "123456789012"
REGION = "us-east-1"
AWS_CLI = "/usr/bin/aws"
ROLE = "arn:aws:iam::%s:role/mce-e2e" % ACCOUNT  # required by these botocore models; mce ignores it
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "build", "models")
SENTIMENT_IMAGE = "mce-example/sentiment:latest"
PROBE_IMAGE = "mce-example/probe:latest"
VALIDATION = "ValidationException"
E2E_ENDPOINTS = ["e2e-probe-chain", "e2e-probe-direct", "e2e-sentiment", "e2e-tickets", "e2e-variants"]
REVIEW = {"instances": ["What a wonderful, helpful service. I love it!"]}
REVIEW_DE = {"instances": ["Das Essen war wunderbar und der Service sehr freundlich."]}


def arn(kind, name):
    return "arn:aws:sagemaker:%s:%s:%s/%s" % (REGION, ACCOUNT, kind, name.lower())


def not_found(kind, name):
    noun = "endpoint configuration" if kind == "endpoint-config" else kind
    return 'Could not find %s "%s".' % (noun, arn(kind, name))


def exists(kind, name):
    noun = "endpoint configuration" if kind == "endpoint-config" else kind
    return 'Cannot create already existing %s "%s".' % (noun, arn(kind, name))


def sentiment(host, lang):
    return {"ContainerHostname": host, "Image": SENTIMENT_IMAGE,
            "ModelDataUrl": "file://" + os.path.join(MODELS, "sentiment-%s.tar.gz" % lang)}


def probe(host=None, **env):
    c = {"Image": PROBE_IMAGE}
    if host:
        c["ContainerHostname"] = host
    if env:
        c["Environment"] = env
    return c


def variant(model, name="AllTraffic", count=1, weight=None):
    v = {"VariantName": name, "ModelName": model, "InitialInstanceCount": count, "InstanceType": "ml.c5.large"}
    if weight is not None:
        v["InitialVariantWeight"] = weight
    return v


Res = e2elib.Res


# ---------------------------------------------------------------- clients

class Boto:
    name = "boto3"
    prefix = "ctlb"
    slow = "8s"  # how long case_in_progress's endpoint stays Creating

    def __init__(self, url):
        self.url = url
        self.local = threading.local()

    def sm(self):
        c = getattr(self.local, "sm", None)
        if c is None:
            c = self.local.sm = boto3.client("sagemaker", endpoint_url=self.url)
        return c

    def rt(self):
        c = getattr(self.local, "rt", None)
        if c is None:
            c = self.local.rt = boto3.client("sagemaker-runtime", endpoint_url=self.url)
        return c

    def call(self, op, **params):
        try:
            out = getattr(self.sm(), xform_name(op))(**params)
        except ParamValidationError as e:
            return Res(False, client_side=True, message=str(e))
        except ClientError as e:
            err = e.response.get("Error", {})
            return Res(False, code=err.get("Code"), message=err.get("Message"))
        out.pop("ResponseMetadata", None)
        return Res(True, out)

    def invoke(self, endpoint, body, host=None):
        """(ok, body or error text)"""
        kw = {"EndpointName": endpoint, "Body": body, "ContentType": "application/json"}
        if host:
            kw["TargetContainerHostname"] = host
        try:
            return True, self.rt().invoke_endpoint(**kw)["Body"].read()
        except ClientError as e:
            return False, "%s: %s" % (e.response["Error"].get("Code"), e.response["Error"].get("Message"))

    def wait(self, waiter, name, timeout=120, confirm=False, interval=None):
        try:
            self.sm().get_waiter(waiter).wait(EndpointName=name,
                                               WaiterConfig={"Delay": 1, "MaxAttempts": timeout})
            return True, ""
        except WaiterError as e:
            return False, str(e)

    def timestamp(self, v):
        return v if isinstance(v, datetime.datetime) and v.tzinfo is not None else None

    def paginate(self, op, key, **params):
        """All items through boto3's paginator with pages of one, and the page count."""
        pages = list(self.sm().get_paginator(xform_name(op)).paginate(
            PaginationConfig={"PageSize": 1}, **params))
        return [x for p in pages for x in p.get(key, [])], len(pages)


kebab = e2elib.kebab


class Cli:
    name = "aws-cli"
    stats = [0, 0.0]  # processes run, their seconds in all (all instances)
    stats_lock = threading.Lock()
    prefix = "ctlc"
    slow = "30s"  # CLI calls take seconds each on a busy machine

    def __init__(self, url, tmp, slots=None):
        self.url = url
        self.tmp = tmp
        self.slots = slots  # a semaphore: CLI processes at a time; None: no limit

    def run(self, args):
        if self.slots:
            self.slots.acquire()
        t = time.monotonic()
        try:
            p = subprocess.run([AWS_CLI] + args + ["--endpoint-url", self.url, "--output", "json"],
                               capture_output=True, timeout=120)
        finally:
            with Cli.stats_lock:
                Cli.stats[0] += 1
                Cli.stats[1] += time.monotonic() - t
            if self.slots:
                self.slots.release()
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")

    def call(self, op, **params):
        # --no-paginate: MaxResults and NextToken go to mce as given.
        rc, out, err = self.run(["sagemaker", kebab(op), "--no-paginate", "--cli-input-json", json.dumps(params)])
        if rc == 0:
            return Res(True, json.loads(out) if out.strip() else {})
        return e2elib.cli_error(err)

    def invoke(self, endpoint, body, host=None):
        fd, inp = tempfile.mkstemp(dir=self.tmp, suffix=".in")
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        out = inp[:-3] + ".out"
        args = ["sagemaker-runtime", "invoke-endpoint", "--endpoint-name", endpoint, "--body", "fileb://" + inp,
                "--content-type", "application/json"]
        if host:
            args += ["--target-container-hostname", host]
        try:
            rc, _, err = self.run(args + [out])
        finally:
            os.unlink(inp)
        if rc != 0:
            m = re.findall(r"An error occurred \(([^)]*)\).*?: (.*)", err)
            return False, "%s: %s" % m[-1] if m else err[-300:]
        with open(out, "rb") as f:
            data = f.read()
        os.unlink(out)
        return True, data

    def wait(self, waiter, name, timeout=120, confirm=False, interval=0.2):
        """Polls describe-endpoint (the CLI's waiters poll every 30 s); with
        confirm, then runs `aws sagemaker wait`, which must return at once."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.call("DescribeEndpoint", EndpointName=name)
            if waiter == "endpoint_in_service":
                if r.ok and r.out.get("EndpointStatus") == "InService":
                    break
                if (r.ok and r.out.get("EndpointStatus") == "Failed") or (not r.ok and r.code == VALIDATION):
                    return False, repr(r)
            elif not r.ok and r.code == VALIDATION:
                break
            time.sleep(interval)
        else:
            return False, "not reached after %d s" % timeout
        if not confirm:
            return True, ""
        t = time.monotonic()
        rc, _, err = self.run(["sagemaker", "wait", waiter.replace("_", "-"), "--endpoint-name", name])
        # The CLI's waiter polls every 30 s: returning before 25 s means its
        # first poll saw the state. The CLI's own start-up (botocore loading its
        # models) took 10-12 s on a loaded 2-core machine, so a tighter bound
        # measured the machine, not mce.
        if rc != 0 or time.monotonic() - t > 25:
            return False, "aws sagemaker wait %s: rc %d after %.1f s %s" % (
                waiter.replace("_", "-"), rc, time.monotonic() - t, err[-200:])
        return True, ""

    def timestamp(self, v):
        try:
            t = datetime.datetime.fromisoformat(v)
        except (TypeError, ValueError):
            return None
        return t if t.tzinfo is not None else None

    def paginate(self, op, key, **params):
        """All items through the CLI's own pagination (--page-size 1); the
        page count is not visible."""
        args = ["sagemaker", kebab(op), "--page-size", "1"]
        for k, v in params.items():
            args += ["--" + kebab(k), str(v)]
        rc, out, err = self.run(args)
        if rc != 0:
            raise RuntimeError("aws %s: %s" % (" ".join(args), err[-300:]))
        return json.loads(out).get(key, []), None


class Raw:
    """awsJson1_1 by hand, for what botocore refuses to send."""
    name = "raw"

    def __init__(self, url):
        self.host, self.port = url[len("http://"):].split(":")

    def call(self, op, body):
        conn = http.client.HTTPConnection(self.host, int(self.port), timeout=30)
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request("POST", "/", body=data, headers={
            "Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "SageMaker." + op})
        resp = conn.getresponse()
        raw = resp.read().decode("utf-8", "replace")
        conn.close()
        try:
            doc = json.loads(raw) if raw.strip() else {}
        except ValueError:
            doc = {}
        if resp.status == 200:
            return Res(True, doc, raw=raw)
        r = Res(False, code=doc.get("__type"), message=doc.get("Message") or doc.get("message"), raw=raw)
        r.http = resp.status
        return r


# ---------------------------------------------------------------- checks

class Checks(e2elib.Checks):

    def error(self, what, r, code=VALIDATION, message=None, contains=()):
        if r.ok:
            return self.ok(what, False, "succeeded, want %s: %r" % (code, r))
        if r.client_side:
            return self.ok(what, False, "want %s from mce, %r" % (code, r))
        if isinstance(contains, str):
            contains = (contains,)
        good = r.code == code and (message is None or r.message == message) and \
            all(c in (r.message or "") for c in contains)
        if good:
            return self.ok(what, True, "%s: %s" % (r.code, r.message))
        want = "want %s" % code + (" %r" % message if message else "") + \
            ("" if not contains else " containing %r" % (contains,))
        return self.ok(what, False, "%s; got %s: %r" % (want, r.code, r.message))

    def refused(self, what, r, contains):
        """The client refused the request before sending it."""
        good = not r.ok and r.client_side and contains in (r.message or "")
        return self.ok(what + " -> refused by the client (ParamValidation)", good,
                       (r.message or "").replace("\n", " ")[:160] if good else repr(r))


# ---------------------------------------------------------------- the cases

def batch(cl, **calls):
    """Runs independent calls (zero-argument callables): one after the other
    for boto3, all at once for the CLI (each call is a process)."""
    if isinstance(cl, Boto):
        return {k: fn() for k, fn in calls.items()}
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futs = {k: pool.submit(fn) for k, fn in calls.items()}
        return {k: f.result() for k, f in futs.items()}


def call(cl, op, **params):
    return lambda: cl.call(op, **params)


def images(o):
    return [d.get("SpecifiedImage") for d in (o.get("ProductionVariants") or [{}])[0].get("DeployedImages", [])]


def case_lifecycle(cl, ck):
    p = cl.prefix
    model, model2 = p + "-sentiment", p + "-sentiment-v2"
    cfg, cfg2 = p + "-sentiment-cfg", p + "-sentiment-cfg-v2"
    ep = p.capitalize() + "-Main"  # mixed case: the ARN lower-cases it
    en, de = json.dumps(REVIEW).encode(), json.dumps(REVIEW_DE).encode()
    got = batch(cl, m1=call(cl, "CreateModel", ModelName=model, ExecutionRoleArn=ROLE,
                            Containers=[sentiment("english", "en"), sentiment("german", "de")],
                            InferenceExecutionConfig={"Mode": "Direct"}),
                # v2: "english" is now a probe that echoes with "-v2"; german stays.
                m2=call(cl, "CreateModel", ModelName=model2, ExecutionRoleArn=ROLE,
                        Containers=[probe("english", PROBE_TAG="-v2"), sentiment("german", "de")],
                        InferenceExecutionConfig={"Mode": "Direct"}))
    if ck.success("CreateModel (Direct: english, german)", got["m1"]):
        ck.eq("CreateModel ModelArn", got["m1"].out.get("ModelArn"), arn("model", model))
    ck.success("CreateModel v2 (english is a probe)", got["m2"])
    got = batch(cl, dm=call(cl, "DescribeModel", ModelName=model),
                c1=call(cl, "CreateEndpointConfig", EndpointConfigName=cfg, ProductionVariants=[variant(model)]),
                c2=call(cl, "CreateEndpointConfig", EndpointConfigName=cfg2, ProductionVariants=[variant(model2)]))
    r = got["dm"]
    if ck.success("DescribeModel", r):
        ck.eq("DescribeModel ModelName", r.out.get("ModelName"), model)
        ck.eq("DescribeModel ModelArn", r.out.get("ModelArn"), arn("model", model))
        ck.eq("DescribeModel container hostnames", [c.get("ContainerHostname") for c in r.out.get("Containers", [])],
              ["english", "german"])
        ck.eq("DescribeModel ModelDataUrl", r.out.get("Containers", [{}])[0].get("ModelDataUrl"),
              sentiment("english", "en")["ModelDataUrl"])
        ck.eq("DescribeModel InferenceExecutionConfig", r.out.get("InferenceExecutionConfig"), {"Mode": "Direct"})
        ck.ok("DescribeModel CreationTime is a timestamp", cl.timestamp(r.out.get("CreationTime")) is not None,
              repr(r.out.get("CreationTime")))
    for k, c in (("c1", cfg), ("c2", cfg2)):
        if ck.success("CreateEndpointConfig %s" % c, got[k]):
            ck.eq("CreateEndpointConfig %s EndpointConfigArn" % c, got[k].out.get("EndpointConfigArn"),
                  arn("endpoint-config", c))

    # ---- CreateEndpoint -> InService
    t0 = time.monotonic()
    got = batch(cl, ce=call(cl, "CreateEndpoint", EndpointName=ep, EndpointConfigName=cfg),
                dc=call(cl, "DescribeEndpointConfig", EndpointConfigName=cfg))
    r = got["dc"]
    if ck.success("DescribeEndpointConfig", r):
        pv = (r.out.get("ProductionVariants") or [{}])[0]
        ck.eq("DescribeEndpointConfig variant", (pv.get("VariantName"), pv.get("ModelName"),
                                                 pv.get("InitialInstanceCount"), pv.get("InstanceType")),
              ("AllTraffic", model, 1, "ml.c5.large"))
        ck.ok("DescribeEndpointConfig CreationTime is a timestamp",
              cl.timestamp(r.out.get("CreationTime")) is not None, repr(r.out.get("CreationTime")))
    r = got["ce"]
    if not ck.success("CreateEndpoint %s" % ep, r):
        return
    ck.eq("CreateEndpoint EndpointArn (name lower-cased)", r.out.get("EndpointArn"), arn("endpoint", ep))
    if isinstance(cl, Boto):
        r = cl.call("DescribeEndpoint", EndpointName=ep)
        ck.eq("EndpointStatus right after CreateEndpoint", r.out.get("EndpointStatus") if r.ok else repr(r),
              "Creating")
    ok, why = cl.wait("endpoint_in_service", ep, confirm=True)
    took = time.monotonic() - t0
    if not ck.ok("endpoint_in_service waiter", ok, why or "%.1f s" % took):
        return
    got = batch(cl, d=call(cl, "DescribeEndpoint", EndpointName=ep),
                en=lambda: cl.invoke(ep, en, host="english"), de=lambda: cl.invoke(ep, de, host="german"),
                # existing resources
                em=call(cl, "CreateModel", ModelName=model, ExecutionRoleArn=ROLE, PrimaryContainer=probe()),
                ec=call(cl, "CreateEndpointConfig", EndpointConfigName=cfg, ProductionVariants=[variant(model)]),
                ee=call(cl, "CreateEndpoint", EndpointName=ep.lower(), EndpointConfigName=cfg))
    r = got["d"]
    inservice = None
    if r.ok:
        c, m = cl.timestamp(r.out.get("CreationTime")), cl.timestamp(r.out.get("LastModifiedTime"))
        inservice = (m - c).total_seconds() if c and m else None
    ck.info("CreateEndpoint -> InService: %.1f s seen by the client (%s); %s s by the endpoint's "
            "LastModifiedTime - CreationTime" % (took, "waiter, Delay 1" if isinstance(cl, Boto) else
                                                 "describe-endpoint polls",
                                                 "%.2f" % inservice if inservice is not None else "?"))
    # The client's time includes its own processes' start-up (seconds each for
    # the CLI on a busy machine); the endpoint's timestamps are mce's.
    ck.ok("CreateEndpoint -> InService within 30 s (LastModifiedTime - CreationTime)",
          inservice is not None and 0 <= inservice < 30, repr(inservice))
    for host, lang in (("english", "en"), ("german", "de")):
        ok, body = got[lang]
        if ck.ok("InvokeEndpoint TargetContainerHostname=%s succeeds" % host, ok, "" if ok else body):
            ck.eq("InvokeEndpoint %s answer" % host, label(body), (lang, "POSITIVE"))
    if ck.success("DescribeEndpoint", r):
        o = r.out
        ck.eq("DescribeEndpoint EndpointName (caller's case)", o.get("EndpointName"), ep)
        ck.eq("DescribeEndpoint EndpointArn", o.get("EndpointArn"), arn("endpoint", ep))
        ck.eq("DescribeEndpoint EndpointStatus", o.get("EndpointStatus"), "InService")
        ck.eq("DescribeEndpoint EndpointConfigName", o.get("EndpointConfigName"), cfg)
        ck.eq("DescribeEndpoint ProductionVariants (name, Current/Desired weight, Current/Desired count)",
              variants(o), [("AllTraffic", 1.0, 1.0, 1, 1)])
        ck.eq("DescribeEndpoint DeployedImages", images(o), [SENTIMENT_IMAGE, SENTIMENT_IMAGE])
        c, m = cl.timestamp(o.get("CreationTime")), cl.timestamp(o.get("LastModifiedTime"))
        ck.ok("DescribeEndpoint CreationTime is a datetime", c is not None, repr(o.get("CreationTime")))
        ck.ok("DescribeEndpoint LastModifiedTime >= CreationTime", c is not None and m is not None and m >= c,
              "%s, %s" % (c, m))
        ck.eq("DescribeEndpoint no FailureReason", o.get("FailureReason"), None)
    ck.error("CreateModel of an existing model", got["em"], message=exists("model", model))
    ck.error("CreateEndpointConfig of an existing config", got["ec"], message=exists("endpoint-config", cfg))
    ck.error("CreateEndpoint of an existing endpoint (name in other case)", got["ee"], message=exists("endpoint", ep))

    # ---- UpdateEndpointWeightsAndCapacities: 2 instances, weight 2
    r = cl.call("UpdateEndpointWeightsAndCapacities", EndpointName=ep, DesiredWeightsAndCapacities=[
        {"VariantName": "AllTraffic", "DesiredWeight": 2.0, "DesiredInstanceCount": 2}])
    if ck.success("UpdateEndpointWeightsAndCapacities (2 instances, weight 2)", r):
        ck.eq("UpdateEndpointWeightsAndCapacities EndpointArn", r.out.get("EndpointArn"), arn("endpoint", ep))
        if isinstance(cl, Boto):
            d = cl.call("DescribeEndpoint", EndpointName=ep)
            v = variants(d.out) if d.ok else repr(d)
            ck.eq("while Updating: status, DesiredWeight, CurrentInstanceCount, DesiredInstanceCount",
                  (d.out.get("EndpointStatus"), [(x[0], x[2], x[3], x[4]) for x in v]),
                  ("Updating", [("AllTraffic", 2.0, 1, 2)]))
            ck.info("CurrentWeight while Updating: %r (mce applies weights at once)" % [x[1] for x in v])
        ok, why = cl.wait("endpoint_in_service", ep)
        ck.ok("InService again after UpdateEndpointWeightsAndCapacities", ok, why)
        got = batch(cl, d=call(cl, "DescribeEndpoint", EndpointName=ep),
                    en=lambda: cl.invoke(ep, en, host="english"))
        if ck.success("DescribeEndpoint after the scaling", got["d"]):
            ck.eq("DescribeEndpoint weights and counts after the scaling", variants(got["d"].out),
                  [("AllTraffic", 2.0, 2.0, 2, 2)])
        ok, body = got["en"]
        ck.ok("InvokeEndpoint after the scaling", ok and label(body) == ("en", "POSITIVE"), repr(body)[:200])

    # ---- UpdateEndpoint to v2 under traffic
    traffic = Traffic(cl, ep)
    traffic.start()
    traffic.wait_answers(1 if isinstance(cl, Cli) else 5)
    t1 = time.monotonic()
    r = cl.call("UpdateEndpoint", EndpointName=ep, EndpointConfigName=cfg2)
    if ck.success("UpdateEndpoint to %s under traffic" % cfg2, r):
        ck.eq("UpdateEndpoint EndpointArn", r.out.get("EndpointArn"), arn("endpoint", ep))
        ok, why = cl.wait("endpoint_in_service", ep)
        ck.ok("InService after UpdateEndpoint", ok, why or "%.1f s" % (time.monotonic() - t1))
        traffic.wait_new(1 if isinstance(cl, Cli) else 5)
    traffic.stop()
    kinds = traffic.kinds()
    ck.info("traffic during UpdateEndpoint: %d invocations: %s" % (len(kinds), compress(kinds)))
    ck.ok("zero failed invocations during UpdateEndpoint", "fail" not in kinds,
          "%d failed, e.g. %s" % (kinds.count("fail"), "; ".join(sorted(set(traffic.failures))[:2]))
          if "fail" in kinds else "%d calls" % len(kinds))
    ck.ok("answers from the old model before the switch", "old" in kinds, compress(kinds))
    ck.ok("answers switch to the new model", "new" in kinds, compress(kinds))
    first_new = kinds.index("new") if "new" in kinds else len(kinds)
    ck.ok("no old answer after the first new one", "old" not in kinds[first_new:], compress(kinds))
    got = batch(cl, d=call(cl, "DescribeEndpoint", EndpointName=ep), de=lambda: cl.invoke(ep, de, host="german"))
    d = got["d"]
    if ck.success("DescribeEndpoint after UpdateEndpoint", d):
        ck.eq("DescribeEndpoint EndpointConfigName after UpdateEndpoint", d.out.get("EndpointConfigName"), cfg2)
        ck.eq("DescribeEndpoint variants after UpdateEndpoint (the new config's)", variants(d.out),
              [("AllTraffic", 1.0, 1.0, 1, 1)])
        ck.eq("DescribeEndpoint DeployedImages after UpdateEndpoint", images(d.out), [PROBE_IMAGE, SENTIMENT_IMAGE])
    ok, body = got["de"]
    ck.ok("german still answers after UpdateEndpoint", ok and label(body) == ("de", "POSITIVE"), repr(body)[:200])

    # ---- delete
    t2 = time.monotonic()
    r = cl.call("DeleteEndpoint", EndpointName=ep)
    ck.success("DeleteEndpoint", r)
    ok, why = cl.wait("endpoint_deleted", ep, confirm=True)
    ck.ok("endpoint_deleted waiter", ok, why or "%.1f s" % (time.monotonic() - t2))
    calls = dict(d=call(cl, "DescribeEndpoint", EndpointName=ep),
                 c1=call(cl, "DeleteEndpointConfig", EndpointConfigName=cfg),
                 c2=call(cl, "DeleteEndpointConfig", EndpointConfigName=cfg2),
                 m1=call(cl, "DeleteModel", ModelName=model), m2=call(cl, "DeleteModel", ModelName=model2))
    if isinstance(cl, Boto):  # (the CLI checks these on missing names in case_validation)
        calls["dd"] = call(cl, "DeleteEndpoint", EndpointName=ep)
        calls["inv"] = lambda: cl.invoke(ep, en, host="english")
    got = batch(cl, **calls)
    ck.error("DescribeEndpoint of the deleted endpoint", got["d"], message=not_found("endpoint", ep))
    if "dd" in got:
        ck.error("DeleteEndpoint of the deleted endpoint", got["dd"], message=not_found("endpoint", ep))
    if "inv" in got:
        ok, body = got["inv"]
        ck.ok("InvokeEndpoint of the deleted endpoint -> ValidationError", not ok and body.startswith(
            "ValidationError: "), repr(body))
    for k, what in (("c1", "DeleteEndpointConfig %s" % cfg), ("c2", "DeleteEndpointConfig %s" % cfg2),
                    ("m1", "DeleteModel %s" % model), ("m2", "DeleteModel %s" % model2)):
        ck.success(what, got[k])
    calls = dict(dc=call(cl, "DescribeEndpointConfig", EndpointConfigName=cfg),
                 dm=call(cl, "DescribeModel", ModelName=model))
    if isinstance(cl, Boto):
        calls.update(xm=call(cl, "DeleteModel", ModelName=model), xc=call(cl, "DeleteEndpointConfig",
                                                                          EndpointConfigName=cfg))
    got = batch(cl, **calls)
    ck.error("DescribeEndpointConfig of the deleted config", got["dc"], message=not_found("endpoint-config", cfg))
    ck.error("DescribeModel of the deleted model", got["dm"], message=not_found("model", model))
    if "xm" in got:
        ck.error("DeleteModel of the deleted model", got["xm"], message=not_found("model", model))
        ck.error("DeleteEndpointConfig of the deleted config", got["xc"], message=not_found("endpoint-config", cfg))


def label(body):
    try:
        p = json.loads(body)["predictions"][0]
        return p.get("language"), p.get("label")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return body


def variants(o):
    return [(v.get("VariantName"), float(v.get("CurrentWeight", -1)), float(v.get("DesiredWeight", -1)),
             v.get("CurrentInstanceCount"), v.get("DesiredInstanceCount")) for v in o.get("ProductionVariants") or []]


def compress(kinds):
    """old old old new new -> old x3, new x2"""
    out = []
    for k in kinds:
        if out and out[-1][0] == k:
            out[-1][1] += 1
        else:
            out.append([k, 1])
    return ", ".join("%s x%d" % (k, n) for k, n in out)


class Traffic(threading.Thread):
    """Invokes the english container one call after the other: "old" is the
    sentiment model's answer, "new" the v2 probe's echo."""

    def __init__(self, cl, ep):
        super().__init__(daemon=True)
        self.cl, self.ep = cl, ep
        self.body = json.dumps(REVIEW).encode()
        self.results = []
        self.failures = []
        self.halt = threading.Event()
        self.cond = threading.Condition()

    def run(self):
        deadline = time.monotonic() + 90
        while not self.halt.is_set() and time.monotonic() < deadline:
            ok, body = self.cl.invoke(self.ep, self.body, host="english")
            if not ok:
                kind = "fail"
                self.failures.append(body)
            elif body == self.body + b"-v2":
                kind = "new"
            elif label(body) == ("en", "POSITIVE"):
                kind = "old"
            else:
                kind = "fail"
                self.failures.append("unexpected answer %r" % body[:200])
            with self.cond:
                self.results.append(kind)
                self.cond.notify_all()

    def wait_answers(self, n, timeout=60):
        with self.cond:
            self.cond.wait_for(lambda: len(self.results) >= n, timeout)

    def wait_new(self, n, timeout=60):
        with self.cond:
            self.cond.wait_for(lambda: self.results.count("new") >= n, timeout)

    def stop(self):
        self.halt.set()
        self.join(120)

    def kinds(self):
        with self.cond:
            return list(self.results)


def case_in_progress(cl, ck):
    """An endpoint that stays Creating (its probe answers /ping only after a
    while): updates are refused while it is not InService."""
    name = cl.prefix + "-slow"
    got = batch(cl, m=call(cl, "CreateModel", ModelName=name, ExecutionRoleArn=ROLE,
                           PrimaryContainer=probe(PROBE_READY_AFTER=cl.slow)))
    ck.success("CreateModel (probe ready after %s)" % cl.slow, got["m"])
    ck.success("CreateEndpointConfig", cl.call("CreateEndpointConfig", EndpointConfigName=name,
                                               ProductionVariants=[variant(name)]))
    t = time.monotonic()
    r = cl.call("CreateEndpoint", EndpointName=name, EndpointConfigName=name)
    if not ck.success("CreateEndpoint (stays Creating for %s)" % cl.slow, r):
        return
    got = batch(cl, update=call(cl, "UpdateEndpoint", EndpointName=name, EndpointConfigName=name),
                weights=call(cl, "UpdateEndpointWeightsAndCapacities", EndpointName=name,
                             DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredWeight": 2.0}]),
                describe=call(cl, "DescribeEndpoint", EndpointName=name))
    took = time.monotonic() - t
    if took > int(cl.slow[:-1]) - 2:
        ck.info("SKIPPED the checks on a Creating endpoint: the calls took %.1f s, the endpoint may be "
                "InService already (machine too busy)" % took)
        cl.call("DeleteEndpoint", EndpointName=name)
        cl.wait("endpoint_deleted", name, timeout=60, interval=4)
        cl.call("DeleteEndpointConfig", EndpointConfigName=name)
        cl.call("DeleteModel", ModelName=name)
        return
    d = got["describe"]
    if ck.success("DescribeEndpoint while Creating", d):
        ck.eq("DescribeEndpoint EndpointStatus while Creating", d.out.get("EndpointStatus"), "Creating")
        ck.eq("DescribeEndpoint no ProductionVariants while Creating", d.out.get("ProductionVariants"), None)
    msg = 'Cannot update in-progress endpoint "%s".' % arn("endpoint", name)
    ck.error("UpdateEndpoint of a Creating endpoint", got["update"], message=msg)
    ck.error("UpdateEndpointWeightsAndCapacities of a Creating endpoint", got["weights"], message=msg)
    ck.info("the checks on the Creating endpoint answered %.1f s after CreateEndpoint" % took)
    t = time.monotonic()
    ck.success("DeleteEndpoint of a Creating endpoint", cl.call("DeleteEndpoint", EndpointName=name))
    ok, why = cl.wait("endpoint_deleted", name, timeout=60, interval=4)
    ck.ok("endpoint_deleted waiter (Creating endpoint)", ok, why or "%.1f s" % (time.monotonic() - t))
    ck.info("DeleteEndpoint of the Creating endpoint took %.1f s (mce lets the launch finish first)"
            % (time.monotonic() - t))
    got = batch(cl, c=call(cl, "DeleteEndpointConfig", EndpointConfigName=name),
                m=call(cl, "DeleteModel", ModelName=name))
    ck.success("DeleteEndpointConfig", got["c"])
    ck.success("DeleteModel", got["m"])


def case_lists(cl, ck, fx):
    """List* with NameContains, SortBy, SortOrder, MaxResults and NextToken;
    fx (boto3) makes the fixtures, created one after the other."""
    p = cl.prefix + "-ls-"
    names = [p + x for x in ("c", "a", "b")]  # created in this order
    for n in names:
        ck.success("CreateModel %s" % n, fx.call("CreateModel", ModelName=n, ExecutionRoleArn=ROLE,
                                                 PrimaryContainer=probe()))
    for n in names:
        ck.success("CreateEndpointConfig %s" % n, fx.call("CreateEndpointConfig", EndpointConfigName=n,
                                                          ProductionVariants=[variant(names[0])]))
    asc = sorted(names)
    e2e = dict(NameContains="e2e-", SortBy="Name", SortOrder="Ascending", MaxResults=2)
    queries = {}
    for op in ("ListModels", "ListEndpointConfigs"):
        queries.update({
            (op, "Name Ascending"): (op, dict(NameContains=p, SortBy="Name", SortOrder="Ascending")),
            (op, "Name Descending"): (op, dict(NameContains=p, SortBy="Name", SortOrder="Descending")),
            (op, "page 1"): (op, dict(NameContains=p, SortBy="Name", SortOrder="Ascending", MaxResults=2)),
        })
    queries[("ListEndpoints", "page 1")] = ("ListEndpoints", e2e)
    queries[("ListEndpoints", "desc")] = ("ListEndpoints", dict(NameContains="e2e-", SortBy="Name",
                                                                SortOrder="Descending"))
    if isinstance(cl, Boto):  # a few more, where calls are cheap
        queries[("ListEndpoints", "status")] = ("ListEndpoints", dict(
            NameContains="e2e-probe", StatusEquals="InService", SortBy="Name", SortOrder="Ascending"))
        for op in ("ListModels", "ListEndpointConfigs"):
            queries[(op, "default order")] = (op, dict(NameContains=p))
            queries[(op, "CreationTime Ascending")] = (op, dict(NameContains=p, SortBy="CreationTime",
                                                                SortOrder="Ascending"))
        queries[("ListEndpoints", "ctime")] = ("ListEndpoints", dict(NameContains="e2e-", SortBy="CreationTime",
                                                                     SortOrder="Ascending"))
        queries[("ListEndpoints", "none")] = ("ListEndpoints", dict(NameContains="no-such-endpoint-anywhere"))
        queries[("ListModels", "SortBy Status")] = ("ListModels", dict(SortBy="Status"))
        queries[("ListModels", "bad NextToken")] = ("ListModels", dict(NextToken="not-a-token!"))
    got = batch(cl, **{"%s|%s" % k: call(cl, op, **kw) for k, (op, kw) in queries.items()})
    got = {tuple(k.split("|")): v for k, v in got.items()}

    def rows(op, q, key, field):
        r = got[(op, q)]
        if not r.ok:
            ck.success("%s %s" % (op, q), r)
            return None
        return [x.get(field) for x in r.out.get(key, [])]

    for op, key, field in (("ListModels", "Models", "ModelName"),
                           ("ListEndpointConfigs", "EndpointConfigs", "EndpointConfigName")):
        kind = "model" if key == "Models" else "endpoint-config"
        v = rows(op, "Name Ascending", key, field)
        if v is not None:
            items = got[(op, "Name Ascending")].out.get(key, [])
            ck.eq("%s NameContains, SortBy Name Ascending" % op, v, asc)
            ck.eq("%s ARNs" % op, [x.get(key[:-1] + "Arn") for x in items], [arn(kind, n) for n in asc])
            ck.ok("%s CreationTime are timestamps" % op, all(cl.timestamp(x.get("CreationTime")) for x in items),
                  repr([x.get("CreationTime") for x in items]))
            ck.eq("%s no NextToken when all fit" % op, got[(op, "Name Ascending")].out.get("NextToken"), None)
        v = rows(op, "Name Descending", key, field)
        if v is not None:
            ck.eq("%s SortBy Name Descending" % op, v, asc[::-1])
        if (op, "CreationTime Ascending") in got:
            v = rows(op, "default order", key, field)
            if v is not None:
                ck.eq("%s default order: CreationTime Descending" % op, v, names[::-1])
            v = rows(op, "CreationTime Ascending", key, field)
            if v is not None:
                ck.eq("%s SortBy CreationTime Ascending (creation order)" % op, v, names)
        v = rows(op, "page 1", key, field)
        if v is not None:
            ck.eq("%s MaxResults 2: first page" % op, v, asc[:2])
            token = got[(op, "page 1")].out.get("NextToken")
            if ck.ok("%s MaxResults 2: NextToken" % op, bool(token), repr(token)):
                r = cl.call(op, NameContains=p, SortBy="Name", SortOrder="Ascending", MaxResults=2, NextToken=token)
                if ck.success("%s second page" % op, r):
                    ck.eq("%s second page with NextToken" % op, [x.get(field) for x in r.out.get(key, [])], asc[2:])
                    ck.eq("%s no NextToken after the last page" % op, r.out.get("NextToken"), None)
        try:
            items, pages = cl.paginate(op, key, NameContains=p, SortBy="Name", SortOrder="Ascending")
            ck.eq("%s through the client's own paginator, pages of 1" % op,
                  ([x.get(field) for x in items], pages), (asc, 3 if pages is not None else None))
        except Exception as e:
            ck.ok("%s through the client's own paginator" % op, False, "raised %s: %s" % (type(e).__name__, e))

    # ListEndpoints over the five e2e-* endpoints of endpoints.yaml, in pages of 2.
    r = got[("ListEndpoints", "page 1")]
    seen, pages = [], 1
    while ck.success("ListEndpoints page %d" % pages, r):
        seen.append([x.get("EndpointName") for x in r.out.get("Endpoints", [])])
        token = r.out.get("NextToken")
        if not token or pages >= 5:
            break
        pages += 1
        r = cl.call("ListEndpoints", NextToken=token, **e2e)
    ck.eq("ListEndpoints NameContains e2e-, SortBy Name, MaxResults 2, NextToken", seen,
          [E2E_ENDPOINTS[0:2], E2E_ENDPOINTS[2:4], E2E_ENDPOINTS[4:]])
    r = got[("ListEndpoints", "desc")]
    if ck.success("ListEndpoints SortOrder Descending", r):
        ck.eq("ListEndpoints SortBy Name Descending", [x.get("EndpointName") for x in r.out.get("Endpoints", [])],
              E2E_ENDPOINTS[::-1])
        x = (r.out.get("Endpoints") or [{}])[0]
        ck.eq("ListEndpoints summary fields", sorted(x), ["CreationTime", "EndpointArn", "EndpointName",
                                                          "EndpointStatus", "LastModifiedTime"])
        ck.eq("ListEndpoints EndpointArn", x.get("EndpointArn"), arn("endpoint", E2E_ENDPOINTS[-1]))
    if ("ListEndpoints", "ctime") in got:
        r = got[("ListEndpoints", "status")]
        if ck.success("ListEndpoints StatusEquals InService", r):
            ck.eq("ListEndpoints StatusEquals InService", [(x.get("EndpointName"), x.get("EndpointStatus"))
                                                           for x in r.out.get("Endpoints", [])],
                  [("e2e-probe-chain", "InService"), ("e2e-probe-direct", "InService")])
        r = got[("ListEndpoints", "ctime")]
        if ck.success("ListEndpoints SortBy CreationTime", r):
            ts = [cl.timestamp(x.get("CreationTime")) for x in r.out.get("Endpoints", [])]
            ck.ok("ListEndpoints SortBy CreationTime Ascending is ordered",
                  len(ts) == 5 and all(ts) and ts == sorted(ts), repr(ts))
        r = got[("ListEndpoints", "none")]
        if ck.success("ListEndpoints matching nothing", r):
            ck.eq("ListEndpoints matching nothing", (r.out.get("Endpoints"), r.out.get("NextToken")), ([], None))
        ck.error("ListModels SortBy Status (not a model sort key)", got[("ListModels", "SortBy Status")],
                 contains="sortBy")
        ck.error("ListModels with a bad NextToken", got[("ListModels", "bad NextToken")])
    for n in names:
        fx.call("DeleteEndpointConfig", EndpointConfigName=n)
        fx.call("DeleteModel", ModelName=n)
    r = fx.call("ListModels", NameContains=p)
    ck.eq("ListModels after deleting them", r.out.get("Models") if r.ok else repr(r), [])


def validation_calls(p):
    """(what, op, params, check) with check one of ("error", message or None,
    contains) or ("refused", contains, raw_contains). A what starting with
    "+" is an extra, checked with boto3 (and raw) only to save CLI calls."""
    ok_model = p + "-vmodel"
    two = [probe("one"), probe("two")]
    return [
        ("bad ModelName pattern", "CreateModel",
         dict(ModelName="bad_name", ExecutionRoleArn=ROLE, PrimaryContainer=probe()),
         ("error", "1 validation error detected: Value 'bad_name' at 'modelName' failed to satisfy constraint: "
                   "Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9])*", ())),
        ("+ModelName over 63 characters", "CreateModel",
         dict(ModelName="m" * 64, ExecutionRoleArn=ROLE, PrimaryContainer=probe()),
         ("error", None, ("modelName", "length less than or equal to 63"))),
        ("16 containers", "CreateModel",
         dict(ModelName=p + "-v16", ExecutionRoleArn=ROLE, Containers=[probe("c%d" % i) for i in range(16)]),
         ("error", None, ("'containers'", "less than or equal to 15"))),
        ("bad ContainerHostname", "CreateModel",
         dict(ModelName=p + "-vhost", ExecutionRoleArn=ROLE, Containers=[probe("one"), probe("bad_host")]),
         ("error", None, ("'bad_host'", "containers.2.member.containerHostname", "regular expression"))),
        ("Direct mode without hostnames", "CreateModel",
         dict(ModelName=p + "-vdirect", ExecutionRoleArn=ROLE, Containers=[probe(), probe()],
              InferenceExecutionConfig={"Mode": "Direct"}),
         ("error", None, ("ContainerHostname must be specified for every container",))),
        ("one container names a hostname, the other not", "CreateModel",
         dict(ModelName=p + "-vpartial", ExecutionRoleArn=ROLE, Containers=[probe("one"), probe()]),
         ("error", None, ("If ContainerHostname is specified for one container it must be specified for all",))),
        ("two MultiModel containers", "CreateModel",
         dict(ModelName=p + "-vmme", ExecutionRoleArn=ROLE, Containers=[
             dict(probe("one"), Mode="MultiModel", ModelDataUrl="file:///tmp/mme-a/"),
             dict(probe("two"), Mode="MultiModel", ModelDataUrl="file:///tmp/mme-b/")]),
         ("error", "More than one container in MultiModel mode is not supported with inference pipeline.", ())),
        ("Environment key pattern", "CreateModel",
         dict(ModelName=p + "-venv", ExecutionRoleArn=ROLE, PrimaryContainer=probe(**{"1BAD-KEY": "x"})),
         ("error", None, ("'1BAD-KEY'", "primaryContainer.environment", "[a-zA-Z_][a-zA-Z0-9_]*"))),
        ("+bad InferenceExecutionConfig Mode", "CreateModel",
         dict(ModelName=p + "-vmode", ExecutionRoleArn=ROLE, Containers=two,
              InferenceExecutionConfig={"Mode": "Parallel"}),
         ("error", None, ("'Parallel'", "inferenceExecutionConfig.mode", "enum value set: [Serial, Direct]"))),
        ("+CreateModel without ExecutionRoleArn", "CreateModel",
         dict(ModelName=p + "-vrole", PrimaryContainer=probe()),
         ("refused", "ExecutionRoleArn", None)),
        ("negative InitialVariantWeight", "CreateEndpointConfig",
         dict(EndpointConfigName=p + "-vweight", ProductionVariants=[variant(ok_model, weight=-1.0)]),
         ("refused", "InitialVariantWeight", "initialVariantWeight")),
        ("InitialInstanceCount 0", "CreateEndpointConfig",
         dict(EndpointConfigName=p + "-vcount", ProductionVariants=[variant(ok_model, count=0)]),
         ("refused", "InitialInstanceCount", "initialInstanceCount")),
        ("+no ProductionVariants", "CreateEndpointConfig",
         dict(EndpointConfigName=p + "-vnone", ProductionVariants=[]),
         ("refused", "ProductionVariants", "productionVariants")),
        ("duplicate VariantName", "CreateEndpointConfig",
         dict(EndpointConfigName=p + "-vdup", ProductionVariants=[variant(ok_model, "A"), variant(ok_model, "A")]),
         ("error", None, ("VariantName must be unique", '"A"'))),
        ("+bad VariantName pattern", "CreateEndpointConfig",
         dict(EndpointConfigName=p + "-vvname", ProductionVariants=[variant(ok_model, "all traffic")]),
         ("error", None, ("'all traffic'", "productionVariants.1.member.variantName"))),
        ("+bad EndpointConfigName pattern", "CreateEndpointConfig",
         dict(EndpointConfigName="-bad", ProductionVariants=[variant(ok_model)]),
         ("error", None, ("'-bad'", "endpointConfigName", "regular expression"))),
        ("config naming a missing model", "CreateEndpointConfig",
         dict(EndpointConfigName=p + "-vmissing", ProductionVariants=[variant(p + "-No-Such-Model")]),
         ("error", not_found("model", p + "-No-Such-Model"), ())),
        ("endpoint naming a missing config", "CreateEndpoint",
         dict(EndpointName=p + "-vep", EndpointConfigName=p + "-No-Such-Config"),
         ("error", not_found("endpoint-config", p + "-No-Such-Config"), ())),
        ("bad EndpointName pattern", "CreateEndpoint",
         dict(EndpointName="bad.name", EndpointConfigName=p + "-vcfg"),
         ("error", None, ("'bad.name'", "endpointName", "regular expression"))),
        ("DescribeModel of a missing model", "DescribeModel", dict(ModelName=p + "-Gone"),
         ("error", not_found("model", p + "-Gone"), ())),
        ("DeleteModel of a missing model", "DeleteModel", dict(ModelName=p + "-Gone"),
         ("error", not_found("model", p + "-Gone"), ())),
        ("DescribeEndpointConfig of a missing config", "DescribeEndpointConfig",
         dict(EndpointConfigName=p + "-Gone"), ("error", not_found("endpoint-config", p + "-Gone"), ())),
        ("DeleteEndpointConfig of a missing config", "DeleteEndpointConfig",
         dict(EndpointConfigName=p + "-Gone"), ("error", not_found("endpoint-config", p + "-Gone"), ())),
        ("DescribeEndpoint of a missing endpoint", "DescribeEndpoint", dict(EndpointName=p + "-Gone"),
         ("error", not_found("endpoint", p + "-Gone"), ())),
        ("DeleteEndpoint of a missing endpoint", "DeleteEndpoint", dict(EndpointName=p + "-Gone"),
         ("error", not_found("endpoint", p + "-Gone"), ())),
        ("+UpdateEndpoint of a missing endpoint", "UpdateEndpoint",
         dict(EndpointName=p + "-Gone", EndpointConfigName=p + "-vcfg"),
         ("error", not_found("endpoint", p + "-Gone"), ())),
        ("+UpdateEndpoint to a missing config", "UpdateEndpoint",
         dict(EndpointName="e2e-variants", EndpointConfigName=p + "-No-Such-Config"),
         ("error", not_found("endpoint-config", p + "-No-Such-Config"), ())),
        ("UpdateEndpointWeightsAndCapacities naming an unknown variant", "UpdateEndpointWeightsAndCapacities",
         dict(EndpointName="e2e-variants", DesiredWeightsAndCapacities=[{"VariantName": "Nope", "DesiredWeight": 1.0}]),
         ("error", None, ("Nope", arn("endpoint", "e2e-variants")))),
        ("+UpdateEndpointWeightsAndCapacities negative weight", "UpdateEndpointWeightsAndCapacities",
         dict(EndpointName="e2e-variants", DesiredWeightsAndCapacities=[{"VariantName": "Heavy",
                                                                         "DesiredWeight": -2.0}]),
         ("refused", "DesiredWeight", "desiredWeight")),
        ("+UpdateEndpointWeightsAndCapacities empty list", "UpdateEndpointWeightsAndCapacities",
         dict(EndpointName="e2e-variants", DesiredWeightsAndCapacities=[]),
         ("refused", "DesiredWeightsAndCapacities", "desiredWeightsAndCapacities")),
    ]


def case_validation_setup(cl, p):
    """A valid model (and config) the validation cases refer to."""
    cl.call("CreateModel", ModelName=p + "-vmodel", ExecutionRoleArn=ROLE, PrimaryContainer=probe())
    cl.call("CreateEndpointConfig", EndpointConfigName=p + "-vcfg", ProductionVariants=[variant(p + "-vmodel")])


def case_validation(cl, ck, part=None, raw=None):
    calls = [c for c in validation_calls(cl.prefix) if isinstance(cl, Boto) or not c[0].startswith("+")]
    if part is not None:
        calls = calls[part::3]
    if isinstance(cl, Cli):
        got = batch(cl, **{str(i): call(cl, op, **params) for i, (_, op, params, _) in enumerate(calls)})
    else:
        got = {str(i): cl.call(op, **params) for i, (_, op, params, _) in enumerate(calls)}
    for i, (what, op, params, (kind, a, b)) in enumerate(calls):
        what, r = what.lstrip("+"), got[str(i)]
        if kind == "error":
            ck.error("%s -> %s" % (what, VALIDATION), r, message=a, contains=b)
            continue
        ck.refused(what, r, a)
        if raw is not None and b is not None:
            rr = raw.call(op, params)
            client, ck.client = ck.client, raw.name
            ck.error("%s sent raw -> %s" % (what, VALIDATION), rr, contains=b)
            ck.eq("%s sent raw: HTTP status" % what, getattr(rr, "http", None), 400)
            ck.client = client


def case_raw(raw, ck):
    """Requests no SDK sends: what mce itself answers."""
    p = "ctlr"
    r = raw.call("CreateModel", dict(ModelName=p + "-norole", PrimaryContainer=probe()))
    if ck.success("CreateModel without ExecutionRoleArn (optional for mce, required by these botocore models)", r):
        ck.eq("CreateModel ModelArn", r.out.get("ModelArn"), arn("model", p + "-norole"))
        raw.call("DeleteModel", dict(ModelName=p + "-norole"))
    r = raw.call("CreateModel", dict(PrimaryContainer=probe()))
    ck.error("CreateModel without ModelName", r, contains=("Value null at 'modelName'", "must not be null"))
    r = raw.call("DescribeEndpoint", {})
    ck.error("DescribeEndpoint without EndpointName", r, contains="Value null at 'endpointName'")
    r = raw.call("ListModels", dict(MaxResults=0))
    ck.error("ListModels MaxResults 0", r, contains="maxResults")
    r = raw.call("ListModels", dict(MaxResults=101))
    ck.error("ListModels MaxResults 101", r, contains="maxResults")
    r = raw.call("CreateModel", b"{not json")
    ck.error("CreateModel with a body that is not JSON", r)
    r = raw.call("CreateTrainingJob", {})
    ck.ok("an operation mce does not implement -> HTTP 400 with a __type", not r.ok and getattr(r, "http", 0) == 400
          and bool(r.code), "%s %s: %s" % (getattr(r, "http", None), r.code, r.message))


def run_case(case, cl, *args):
    ck = Checks(cl.name)
    try:
        case(cl, ck, *args)
    except Exception as e:  # a crash is a failed check, not an aborted run
        ck.ok(case.__name__, False, "raised %s: %s" % (type(e).__name__, e))
    return ck


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True, help="mce's URL, http://127.0.0.1:PORT")
    ap.add_argument("--jobs", type=int, default=3,
                    help="aws CLI processes at a time besides the lifecycle's (which runs unthrottled)")
    args = ap.parse_args()
    if not re.match(r"^http://127\.0\.0\.1:\d+$", args.url):
        sys.exit("--url must be http://127.0.0.1:PORT")
    for m in ("sentiment-en", "sentiment-de"):
        if not os.path.isfile(os.path.join(MODELS, m + ".tar.gz")):
            sys.exit("%s/%s.tar.gz is missing: run 'make models'" % (MODELS, m))
    print("clients: boto3 %s (botocore %s), %s" % (
        boto3.__version__, botocore.__version__,
        subprocess.run([AWS_CLI, "--version"], capture_output=True, text=True).stdout.strip()), flush=True)

    passed = failed = 0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mce-e2e-ctl-") as tmp:
        boto, raw = Boto(args.url), Raw(args.url)
        cli = Cli(args.url, tmp)  # the lifecycle (the longest chain of calls) and the timed cases
        cli_bg = Cli(args.url, tmp, threading.Semaphore(max(1, args.jobs)))
        for p in (boto.prefix, cli.prefix):
            case_validation_setup(boto, p)
        # The CLI's cases run in threads (its calls are processes) while boto3
        # goes through its cases in this thread; the lines come out by client.
        cli_cases = [(case_lifecycle, cli), (case_in_progress, cli), (case_lists, cli_bg, boto),
                     (case_validation, cli_bg, 0), (case_validation, cli_bg, 1), (case_validation, cli_bg, 2)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(cli_cases)) as pool:
            futures = [pool.submit(run_case, c[0], *c[1:]) for c in cli_cases]
            for case, extra in ((case_lifecycle, ()), (case_in_progress, ()), (case_lists, (boto,)),
                                (case_validation, (None, raw))):
                ck = run_case(case, boto, *extra)
                print("\n".join(ck.lines), flush=True)
                passed, failed = passed + ck.passed, failed + ck.failed
            ck = run_case(case_raw, raw)
            print("\n".join(ck.lines), flush=True)
            passed, failed = passed + ck.passed, failed + ck.failed
            print("boto3 and raw done after %.1f s" % (time.monotonic() - t0), flush=True)
            for f in futures:
                ck = f.result()
                print("\n".join(ck.lines), flush=True)
                passed, failed = passed + ck.passed, failed + ck.failed
            print("aws CLI done after %.1f s (%d aws processes, %.1f s each on average; load average %s)" % (
                time.monotonic() - t0, Cli.stats[0], Cli.stats[1] / max(1, Cli.stats[0]),
                open("/proc/loadavg").read().split()[0]), flush=True)
        for p in (boto.prefix, cli.prefix):
            boto.call("DeleteEndpointConfig", EndpointConfigName=p + "-vcfg")
            boto.call("DeleteModel", ModelName=p + "-vmodel")
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
