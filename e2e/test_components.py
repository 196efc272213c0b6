#!/usr/bin/python3
"""End-to-end checks of mce's inference components with the real AWS clients.

Every case runs twice: through boto3 (boto3.client("sagemaker") and
("sagemaker-runtime"), endpoint_url=URL) and through the aws CLI (AWS sagemaker
... --endpoint-url URL, JSON output), unmodified but for the endpoint URL.
Debian's botocore 1.29 predates inference components, so e2e/run.sh runs this
script with the first python3 whose botocore has CreateInferenceComponent and
passes the first aws CLI that has create-inference-component (--aws).

Each client, with its own names: an endpoint configuration without models
(ExecutionRoleArn, a variant with no ModelName) and its endpoint; components of
the example images (a sentiment model by ModelName, the German sentiment model
by Container{Image, ArtifactUrl}, the probe by Container{Image, Environment})
created, described, listed (filters, sorting, paging), invoked by
InferenceComponentName (answers from the models: labels of reviews, the probe's
echo and tag) and with a response stream, tagged on their ARN, updated to a new
specification and scaled up, down, to 0 and back while calls keep coming (none
may fail), every error of docs/inference-components.md's Errors table as the
client surfaces it (code and message), deleted; and the components that
e2e/endpoints.yaml declares (mce serve -f: a probe and the German sentiment
model by a file:// ArtifactUrl relative to the file, tagged) described, listed,
tagged and invoked. e2e/run.sh starts mce (with e2e/endpoints.yaml:
e2e-sentiment and e2e-probe-chain are endpoints of models)
and calls this script with --url, --aws and --models. Standard library and boto3
only.

Output: one line per check (PASS/FAIL [client] what: detail), INFO lines, then
the summary line "N passed, M failed". Exit status 1 if any check failed.
"""

import argparse
import concurrent.futures
import datetime
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
from botocore.exceptions import ClientError, EventStreamError, ParamValidationError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python3 -I leaves the script's folder out
import e2elib  # noqa: E402

ACCOUNT = "123456789012"
REGION = "us-east-1"
ROLE = "arn:aws:iam::%s:role/mce-e2e" % ACCOUNT
SENTIMENT_IMAGE = "mce-example/sentiment:latest"
PROBE_IMAGE = "mce-example/probe:latest"
VALIDATION = "ValidationException"  # the control plane's code
RUNTIME_VALIDATION = "ValidationError"  # the runtime's code
MODELS_ENDPOINT = "e2e-probe-chain"  # an endpoint of models (e2e/endpoints.yaml)
REVIEWS = {
    "en": ["What a wonderful, helpful service. I love it!",
           "This is terrible. The product is broken and the support was awful."],
    "de": ["Das Essen war wunderbar und der Service sehr freundlich.",
           "Das Essen war leider kalt und der Service schlecht."],
}
NO_CAPACITY = ("Inference Component has no capacity to process this request. ApplicationAutoScaling may be "
               "in-progress (if configured) or try to increase the capacity by invoking "
               "UpdateInferenceComponentRuntimeConfig API.")
HEADER_REQUIRED = ("Inference Component Name header is required for endpoints to which you plan to deploy "
                   "inference components. Please include Inference Component Name header or consider using "
                   "SageMaker models.")
HEADER_NOT_ALLOWED = ("Inference Component Name header is not allowed for endpoints to which you dont plan to "
                      "deploy inference components. Please remove the Inference Component Name header and try again.")
NOT_SUPPORTED = ("Inference Components are not supported in this Endpoint. Please make sure this endpoint can "
                 "deploy inference components.")


def arn(kind, name):
    return "arn:aws:sagemaker:%s:%s:%s/%s" % (REGION, ACCOUNT, kind, name.lower())


def probe_parts(n, body_len, tag=""):
    """What the probe streams for stream=n with a body of body_len bytes."""
    return "".join("part %d of %d, %d bytes in%s\n" % (i, n, body_len, tag) for i in range(1, n + 1)).encode()


Res = e2elib.Res


# ---------------------------------------------------------------- clients

class Boto:
    name = "boto3"
    prefix = "icb"

    def __init__(self, url):
        self.url = url
        self.local = threading.local()

    def _client(self, service):
        c = getattr(self.local, service, None)
        if c is None:
            c = boto3.client(service, endpoint_url=self.url)
            setattr(self.local, service, c)
        return c

    def call(self, op, **params):
        try:
            out = getattr(self._client("sagemaker"), xform_name(op))(**params)
        except ParamValidationError as e:
            return Res(False, client_side=True, message=str(e))
        except ClientError as e:
            err = e.response.get("Error", {})
            return Res(False, code=err.get("Code"), message=err.get("Message"))
        out.pop("ResponseMetadata", None)
        return Res(True, out)

    def invoke(self, endpoint, body, ic=None, content_type="application/json"):
        kw = {"EndpointName": endpoint, "Body": body, "ContentType": content_type}
        if ic is not None:
            kw["InferenceComponentName"] = ic
        try:
            r = self._client("sagemaker-runtime").invoke_endpoint(**kw)
        except ClientError as e:
            err = e.response.get("Error", {})
            return Res(False, code=err.get("Code"), message=err.get("Message"))
        return Res(True, {"Body": r["Body"].read(), "ContentType": r.get("ContentType")})

    def stream(self, endpoint, body, ic, attrs):
        """(the PayloadParts joined, the error event's code and message or None)"""
        r = self._client("sagemaker-runtime").invoke_endpoint_with_response_stream(
            EndpointName=endpoint, InferenceComponentName=ic, Body=body, CustomAttributes=attrs)
        parts = b""
        try:
            for ev in r["Body"]:
                parts += ev.get("PayloadPart", {}).get("Bytes", b"")
        except EventStreamError as e:
            return parts, (e.response.get("Error", {}).get("Code"), e.response.get("Error", {}).get("Message"))
        return parts, None

    def can_stream(self):
        return True

    def timestamp(self, v):
        return v if isinstance(v, datetime.datetime) and v.tzinfo is not None else None

    def paginate(self, **params):
        """Names through boto3's own paginator, pages of one; and the page count."""
        pages = list(self._client("sagemaker").get_paginator("list_inference_components").paginate(
            PaginationConfig={"PageSize": 1}, **params))
        return [c["InferenceComponentName"] for p in pages for c in p.get("InferenceComponents", [])], len(pages)


class Cli:
    name = "aws-cli"
    prefix = "icc"
    stats = [0, 0.0]  # processes run, their seconds in all
    stats_lock = threading.Lock()

    def __init__(self, url, aws, tmp):
        self.url, self.aws, self.tmp = url, aws, tmp

    def run(self, args):
        t = time.monotonic()
        try:
            p = subprocess.run([self.aws] + args + ["--endpoint-url", self.url, "--output", "json"],
                               capture_output=True, timeout=120)
        finally:
            with Cli.stats_lock:
                Cli.stats[0] += 1
                Cli.stats[1] += time.monotonic() - t
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")

    def call(self, op, **params):
        # --no-paginate: MaxResults and NextToken go to mce as given.
        rc, out, err = self.run(["sagemaker", e2elib.kebab(op), "--no-paginate", "--cli-input-json",
                                 json.dumps(params, default=str)])
        if rc == 0:
            return Res(True, json.loads(out) if out.strip() else {})
        return e2elib.cli_error(err)

    def invoke(self, endpoint, body, ic=None, content_type="application/json"):
        fd, inp = tempfile.mkstemp(dir=self.tmp, suffix=".in")
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        out = inp[:-3] + ".out"
        args = ["sagemaker-runtime", "invoke-endpoint", "--endpoint-name", endpoint, "--body", "fileb://" + inp,
                "--content-type", content_type]
        if ic is not None:
            args += ["--inference-component-name", ic]
        try:
            rc, stdout, err = self.run(args + [out])
        finally:
            os.unlink(inp)
        if rc != 0:
            return e2elib.cli_error(err)
        with open(out, "rb") as f:
            data = f.read()
        os.unlink(out)
        meta = json.loads(stdout) if stdout.strip() else {}
        return Res(True, {"Body": data, "ContentType": meta.get("ContentType")})

    def can_stream(self):
        rc, _, _ = self.run(["sagemaker-runtime", "invoke-endpoint-with-response-stream", "help"])
        return rc == 0

    def timestamp(self, v):
        """The CLI v1 prints timestamps as they came (seconds since the epoch); v2 in ISO 8601."""
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return datetime.datetime.fromtimestamp(v, datetime.timezone.utc)
        try:
            t = datetime.datetime.fromisoformat(v)
        except (TypeError, ValueError):
            return None
        return t if t.tzinfo is not None else None

    def paginate(self, **params):
        """Names through the CLI's own pagination (--page-size 1); the page count is not visible."""
        args = ["sagemaker", "list-inference-components", "--page-size", "1"]
        for k, v in params.items():
            args += ["--" + e2elib.kebab(k), str(v)]
        rc, out, err = self.run(args)
        if rc != 0:
            raise RuntimeError("aws %s: %s" % (" ".join(args), err[-300:]))
        return [c["InferenceComponentName"] for c in json.loads(out).get("InferenceComponents", [])], None


# ---------------------------------------------------------------- checks

class Checks(e2elib.Checks):

    def error(self, what, r, code=VALIDATION, message=None, prefix=None):
        """An error from mce with code and the exact message (or one that starts with prefix)."""
        if r.ok:
            return self.ok(what, False, "succeeded, want %s: %r" % (code, r))
        if r.client_side:
            return self.ok(what, False, "want %s from mce, %r" % (code, r))
        good = r.code == code and (message is None or r.message == message) and \
            (prefix is None or (r.message or "").startswith(prefix))
        if good:
            return self.ok(what, True, "%s: %s" % (r.code, r.message))
        want = "want %s" % code + (" %r" % message if message else "") + (" starting %r" % prefix if prefix else "")
        return self.ok(what, False, "%s; got %s: %r" % (want, r.code, r.message))


def describe(cl, name):
    return cl.call("DescribeInferenceComponent", InferenceComponentName=name)


def wait_ic(cl, name, timeout=180, interval=0.2):
    """Polls DescribeInferenceComponent while the status is Creating, Updating or Deleting (as the SageMaker
    Python SDK does: botocore has no waiter for components); the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        r = describe(cl, name)
        if not r.ok or r.out.get("InferenceComponentStatus") not in ("Creating", "Updating", "Deleting"):
            return r
        if time.monotonic() > deadline:
            return r
        time.sleep(interval)


def wait_gone(cl, name, timeout=120):
    deadline = time.monotonic() + timeout
    while True:
        r = describe(cl, name)
        if not r.ok or time.monotonic() > deadline:
            return r
        time.sleep(0.3)


def labels(body):
    try:
        return [(p.get("language"), p.get("label")) for p in json.loads(body).get("predictions", [])]
    except (ValueError, AttributeError):
        return body


class Traffic:
    """Workers invoking a component until stopped: every answer must be one of want."""

    def __init__(self, cl, endpoint, ic, want, workers):
        self.cl, self.endpoint, self.ic, self.want = cl, endpoint, ic, want
        self.ok = self.failed = 0
        self.seen = set()
        self.errors = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(workers)]
        for t in self.threads:
            t.start()

    def _run(self):
        while not self.stop.is_set():
            r = self.cl.invoke(self.endpoint, b"x", ic=self.ic)
            with self.lock:
                if r.ok and r.out["Body"] in self.want:
                    self.ok += 1
                    self.seen.add(r.out["Body"])
                else:
                    self.failed += 1
                    if len(self.errors) < 3:
                        self.errors.append(repr(r))

    def end(self):
        self.stop.set()
        for t in self.threads:
            t.join()
        return "%d calls, %d failed%s" % (self.ok + self.failed, self.failed,
                                          (" (first: %s)" % self.errors[0]) if self.errors else "")


# ---------------------------------------------------------------- the cases

def case_components(cl, ck, models):
    p = cl.prefix
    cfg, ep, ep2 = p + "-cfg", p + "-shared", p + "-other"
    model = p + "-sentiment-en"
    sent, sent_de, probe = p + "-sentiment", p + "-sentiment-de", p + "-probe"

    # ---- an endpoint for components: no ModelName, an ExecutionRoleArn
    variant = {"VariantName": "AllTraffic", "InstanceType": "ml.m5.xlarge", "InitialInstanceCount": 1}
    r = cl.call("CreateEndpointConfig", EndpointConfigName=cfg, ExecutionRoleArn=ROLE, ProductionVariants=[variant])
    if not ck.success("CreateEndpointConfig without ModelName, with ExecutionRoleArn", r):
        return
    r = cl.call("DescribeEndpointConfig", EndpointConfigName=cfg)
    if ck.success("DescribeEndpointConfig", r):
        ck.eq("DescribeEndpointConfig ExecutionRoleArn", r.out.get("ExecutionRoleArn"), ROLE)
        ck.eq("DescribeEndpointConfig variant has no ModelName",
              "ModelName" in (r.out.get("ProductionVariants") or [{}])[0], False)
    for e in (ep, ep2):
        r = cl.call("CreateEndpoint", EndpointName=e, EndpointConfigName=cfg)
        if not ck.success("CreateEndpoint %s" % e, r):
            return
    r = cl.call("DescribeEndpoint", EndpointName=ep)
    ck.eq("endpoint for components is InService at once", r.out.get("EndpointStatus") if r.ok else repr(r),
          "InService")
    r = cl.call("CreateModel", ModelName=model, ExecutionRoleArn=ROLE, PrimaryContainer={
        "Image": SENTIMENT_IMAGE, "ModelDataUrl": "file://" + os.path.join(models, "sentiment-en.tar.gz")})
    ck.success("CreateModel %s (the English sentiment model)" % model, r)

    # ---- CreateInferenceComponent: by ModelName, by Container{Image, ArtifactUrl}, by Container{Image, Environment}
    res = {"NumberOfCpuCoresRequired": 0.5, "MinMemoryRequiredInMb": 128, "MaxMemoryRequiredInMb": 256}
    creates = [
        (sent, {"ModelName": model, "ComputeResourceRequirements": res}, 1, [{"Key": "team", "Value": "e2e"}]),
        (sent_de, {"Container": {"Image": SENTIMENT_IMAGE, "ArtifactUrl": "file://" + os.path.join(
            models, "sentiment-de.tar.gz")}, "ComputeResourceRequirements": res}, 1, []),
        (probe, {"Container": {"Image": PROBE_IMAGE, "Environment": {"PROBE_TAG": "-v1"}},
                 "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 128}}, 2, []),
    ]
    t0 = time.monotonic()
    for name, spec, n, tags in creates:
        params = dict(InferenceComponentName=name, EndpointName=ep, VariantName="AllTraffic", Specification=spec,
                      RuntimeConfig={"CopyCount": n})
        if tags:
            params["Tags"] = tags
        r = cl.call("CreateInferenceComponent", **params)
        if not ck.success("CreateInferenceComponent %s (%d copies)" % (name, n), r):
            return
        ck.eq("CreateInferenceComponent %s InferenceComponentArn" % name, r.out.get("InferenceComponentArn"),
              arn("inference-component", name))
        if name == probe:
            r = describe(cl, name)
            ck.ok("status right after CreateInferenceComponent is Creating or InService",
                  r.ok and r.out.get("InferenceComponentStatus") in ("Creating", "InService"), repr(r))
    for name, spec, n, _ in creates:
        r = wait_ic(cl, name)
        if not ck.eq("%s InService" % name, r.out.get("InferenceComponentStatus") if r.ok else repr(r), "InService"):
            ck.info("%s: %r" % (name, r))
            return
    ck.info("three components, four copies, InService after %.1f s" % (time.monotonic() - t0))
    r = describe(cl, sent)
    if ck.success("DescribeInferenceComponent %s" % sent, r):
        o = r.out
        ck.eq("Describe names and ARNs", (o.get("InferenceComponentName"), o.get("InferenceComponentArn"),
                                          o.get("EndpointName"), o.get("EndpointArn"), o.get("VariantName")),
              (sent, arn("inference-component", sent), ep, arn("endpoint", ep), "AllTraffic"))
        sp = o.get("Specification") or {}
        ck.eq("Describe Specification.ModelName", sp.get("ModelName"), model)
        ck.eq("Describe ComputeResourceRequirements", sp.get("ComputeResourceRequirements"), res)
        ck.eq("Describe RuntimeConfig", o.get("RuntimeConfig"), {"DesiredCopyCount": 1, "CurrentCopyCount": 1})
        ck.ok("Describe CreationTime and LastModifiedTime are timestamps",
              cl.timestamp(o.get("CreationTime")) is not None and cl.timestamp(o.get("LastModifiedTime")) is not None,
              "%r %r" % (o.get("CreationTime"), o.get("LastModifiedTime")))
    r = describe(cl, probe)
    if ck.success("DescribeInferenceComponent %s" % probe, r):
        # The summary of a container has no Image: DeployedImage says what runs.
        c = (r.out.get("Specification") or {}).get("Container") or {}
        ck.eq("Describe Container Environment, DeployedImage.SpecifiedImage",
              (c.get("Environment"), (c.get("DeployedImage") or {}).get("SpecifiedImage")),
              ({"PROBE_TAG": "-v1"}, PROBE_IMAGE))
        ck.eq("Describe RuntimeConfig", r.out.get("RuntimeConfig"), {"DesiredCopyCount": 2, "CurrentCopyCount": 2})

    r = describe(cl, sent_de)
    if ck.success("DescribeInferenceComponent %s" % sent_de, r):
        c = (r.out.get("Specification") or {}).get("Container") or {}
        ck.eq("Describe Container ArtifactUrl, DeployedImage.SpecifiedImage",
              (c.get("ArtifactUrl"), (c.get("DeployedImage") or {}).get("SpecifiedImage")),
              (creates[1][1]["Container"]["ArtifactUrl"], SENTIMENT_IMAGE))

    # ---- invoke by InferenceComponentName: answers from the models
    for name, lang in ((sent, "en"), (sent_de, "de")):
        r = cl.invoke(ep, json.dumps({"instances": REVIEWS[lang]}).encode(), ic=name)
        if ck.success("InvokeEndpoint %s" % name, r):
            ck.eq("InvokeEndpoint %s labels (positive, negative)" % name, labels(r.out["Body"]),
                  [(lang, "POSITIVE"), (lang, "NEGATIVE")])
            ck.eq("InvokeEndpoint %s ContentType" % name, r.out.get("ContentType"), "application/json")
    r = cl.invoke(ep, b"hello", ic=probe, content_type="text/plain")
    if ck.success("InvokeEndpoint %s" % probe, r):
        ck.eq("InvokeEndpoint %s echo and tag" % probe, r.out["Body"], b"hello-v1")
    if cl.can_stream():
        body = b"stream me"
        parts, err = cl.stream(ep, body, probe, "stream=3")
        ck.eq("InvokeEndpointWithResponseStream %s: the PayloadParts" % probe, (parts, err),
              (probe_parts(3, len(body), "-v1"), None))
        parts, err = cl.stream(ep, b"", probe, "stream=3,stall=1")
        ck.ok("InvokeEndpointWithResponseStream %s over the time limit -> ModelStreamError" % probe,
              err is not None and err[0] == "ModelStreamError" and parts == probe_parts(3, 0, "-v1")[:len(parts)],
              "parts %r, error %r" % (parts, err))
    else:
        ck.info("this aws CLI has no invoke-endpoint-with-response-stream (the CLI v1 has no event streams); "
                "boto3 checks the stream of a component")

    # ---- ListInferenceComponents: filters, sorting, paging
    mine = sorted([sent, sent_de, probe])

    def names(r):
        return [c.get("InferenceComponentName") for c in r.out.get("InferenceComponents", [])] if r.ok else repr(r)

    r = cl.call("ListInferenceComponents", NameContains=p + "-", SortBy="Name", SortOrder="Ascending")
    ck.eq("List NameContains, SortBy Name Ascending", names(r), mine)
    if r.ok:
        c = [x for x in r.out["InferenceComponents"] if x.get("InferenceComponentName") == probe]
        c = c[0] if c else {}
        ck.eq("List summary of %s" % probe, (c.get("InferenceComponentArn"), c.get("EndpointName"),
                                             c.get("EndpointArn"), c.get("VariantName"),
                                             c.get("InferenceComponentStatus")),
              (arn("inference-component", probe), ep, arn("endpoint", ep), "AllTraffic", "InService"))
    r = cl.call("ListInferenceComponents", NameContains=p + "-", SortBy="Name", SortOrder="Descending")
    ck.eq("List SortBy Name Descending", names(r), mine[::-1])
    r = cl.call("ListInferenceComponents", NameContains=p + "-", SortBy="CreationTime", SortOrder="Ascending")
    ck.eq("List SortBy CreationTime Ascending (creation order)", names(r), [sent, sent_de, probe])
    r = cl.call("ListInferenceComponents", NameContains=p + "-", SortBy="Name")
    ck.eq("List SortBy Name without SortOrder: Descending, SageMaker's default", names(r), mine[::-1])
    r = cl.call("ListInferenceComponents", EndpointNameEquals=ep, VariantNameEquals="AllTraffic",
                StatusEquals="InService", SortBy="Name", SortOrder="Ascending")
    ck.eq("List EndpointNameEquals, VariantNameEquals, StatusEquals", names(r), mine)
    r = cl.call("ListInferenceComponents", EndpointNameEquals=ep2)
    ck.eq("List EndpointNameEquals an endpoint without components", names(r), [])
    r = cl.call("ListInferenceComponents", NameContains=p + "-", StatusEquals="Failed")
    ck.eq("List StatusEquals Failed", names(r), [])
    future = "2100-01-01T00:00:00Z"
    r = cl.call("ListInferenceComponents", NameContains=p + "-", CreationTimeAfter=future)
    ck.eq("List CreationTimeAfter 2100", names(r), [])
    r = cl.call("ListInferenceComponents", NameContains=p + "-", CreationTimeBefore=future,
                LastModifiedTimeAfter="2000-01-01T00:00:00Z", SortBy="Name", SortOrder="Ascending")
    ck.eq("List CreationTimeBefore 2100, LastModifiedTimeAfter 2000", names(r), mine)
    got, token, pages = [], None, 0
    while pages < 10:
        params = dict(NameContains=p + "-", SortBy="Name", SortOrder="Ascending", MaxResults=1)
        if token:
            params["NextToken"] = token
        r = cl.call("ListInferenceComponents", **params)
        if not ck.success("List page %d (MaxResults 1)" % (pages + 1), r):
            break
        got += names(r)
        pages += 1
        token = r.out.get("NextToken")
        if not token:
            break
    ck.eq("List MaxResults 1 and NextToken: pages, names", (pages, got), (3, mine))
    got, pages = cl.paginate(NameContains=p + "-", SortBy="Name", SortOrder="Ascending")
    ck.eq("List through the client's own pagination (pages of 1)", (got, pages if pages is None else pages >= 3),
          (mine, True if pages is not None else None))

    # ---- tags on the component's ARN
    a = arn("inference-component", sent)

    def tags():
        r = cl.call("ListTags", ResourceArn=a)
        return sorted((t["Key"], t["Value"]) for t in r.out.get("Tags", [])) if r.ok else repr(r)

    ck.eq("ListTags: the tags of CreateInferenceComponent", tags(), [("team", "e2e")])
    ck.success("AddTags", cl.call("AddTags", ResourceArn=a, Tags=[{"Key": "stage", "Value": "test"}]))
    ck.eq("ListTags after AddTags", tags(), [("stage", "test"), ("team", "e2e")])
    ck.success("DeleteTags", cl.call("DeleteTags", ResourceArn=a, TagKeys=["team"]))
    ck.eq("ListTags after DeleteTags", tags(), [("stage", "test")])

    # ---- the Errors table, as the client surfaces it
    spec = {"Container": {"Image": PROBE_IMAGE}, "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 128}}
    r = cl.call("CreateInferenceComponent", InferenceComponentName=p + "-misplaced", EndpointName=MODELS_ENDPOINT,
                VariantName="AllTraffic", Specification=spec, RuntimeConfig={"CopyCount": 1})
    ck.error("component on an endpoint of models", r, message=NOT_SUPPORTED)
    r = cl.call("CreateInferenceComponent", InferenceComponentName=p + "-zero", EndpointName=ep,
                VariantName="AllTraffic", Specification=spec, RuntimeConfig={"CopyCount": 0})
    ck.error("CopyCount 0 on create", r, message="Inference components copy count must be an integer larger than 0 "
             "when the inference component is created; scale it to 0 with UpdateInferenceComponentRuntimeConfig.")
    r = describe(cl, p + "-nothing")
    ck.error("unknown component", r,
             message='Could not find inference component "%s".' % arn("inference-component", p + "-nothing"))
    r = cl.call("CreateInferenceComponent", InferenceComponentName=probe, EndpointName=ep, VariantName="AllTraffic",
                Specification=spec, RuntimeConfig={"CopyCount": 1})
    ck.error("existing name", r,
             message='Cannot create already existing inference component "%s".' % arn("inference-component", probe))
    r = cl.invoke(ep, b"x")
    ck.error("invocation without the header on an endpoint of components", r, RUNTIME_VALIDATION,
             message=HEADER_REQUIRED)
    r = cl.invoke(MODELS_ENDPOINT, b"x", ic=probe)
    ck.error("the header on an endpoint of models", r, RUNTIME_VALIDATION, message=HEADER_NOT_ALLOWED)
    r = cl.invoke(ep, b"x", ic=p + "-nothing")
    ck.error("unknown component in an invocation", r, RUNTIME_VALIDATION,
             message="Inference Component %s of endpoint %s of account %s not found." % (p + "-nothing", ep, ACCOUNT))
    r = cl.invoke(ep2, b"x", ic=probe)
    ck.error("a component of another endpoint in an invocation", r, RUNTIME_VALIDATION,
             message="Inference Component %s of endpoint %s of account %s not found." % (probe, ep2, ACCOUNT))

    # ---- UpdateInferenceComponent: a new specification and copy count under traffic
    workers = 3 if isinstance(cl, Boto) else 2
    tr = Traffic(cl, ep, probe, {b"x-v1", b"x-v2"}, workers)
    time.sleep(0.5)
    new_spec = {"Container": {"Image": PROBE_IMAGE, "Environment": {"PROBE_TAG": "-v2"}},
                "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 128}}
    r = cl.call("UpdateInferenceComponent", InferenceComponentName=probe, Specification=new_spec,
                RuntimeConfig={"CopyCount": 1})
    if ck.success("UpdateInferenceComponent (new Environment, 1 copy)", r):
        ck.eq("UpdateInferenceComponent InferenceComponentArn", r.out.get("InferenceComponentArn"),
              arn("inference-component", probe))
        if isinstance(cl, Boto):  # a CLI process takes longer than the update
            r = describe(cl, probe)
            ck.eq("status right after UpdateInferenceComponent", r.out.get("InferenceComponentStatus") if r.ok
                  else repr(r), "Updating")
    r = wait_ic(cl, probe)
    time.sleep(0.5)
    summary = tr.end()
    ck.ok("calls during UpdateInferenceComponent: none failed", tr.failed == 0 and tr.ok > 0,
          "%s; answers %s" % (summary, sorted(tr.seen)))
    ck.eq("after the update: InService, 1 copy, the new Environment",
          (r.out.get("InferenceComponentStatus"), r.out.get("RuntimeConfig"),
           ((r.out.get("Specification") or {}).get("Container") or {}).get("Environment")) if r.ok else repr(r),
          ("InService", {"DesiredCopyCount": 1, "CurrentCopyCount": 1}, {"PROBE_TAG": "-v2"}))
    r = cl.invoke(ep, b"x", ic=probe)
    ck.eq("invoke after the update answers from the new copies", r.out.get("Body") if r.ok else repr(r), b"x-v2")

    # ---- The SageMaker Python SDK's update_predictor(resources=ResourceRequirements(...)) on a component: a
    # Specification holding only ComputeResourceRequirements keeps the model and changes the resources.
    tr = Traffic(cl, ep, probe, {b"x-v2"}, workers)
    time.sleep(0.3)
    r = cl.call("UpdateInferenceComponent", InferenceComponentName=probe,
                Specification={"ComputeResourceRequirements": {"MinMemoryRequiredInMb": 256}}, RuntimeConfig={"CopyCount": 1})
    ck.success("UpdateInferenceComponent with only ComputeResourceRequirements (update_predictor(resources=...))", r)
    r = wait_ic(cl, probe)
    time.sleep(0.3)
    summary = tr.end()
    ck.ok("calls during the resources-only update: none failed", tr.failed == 0 and tr.ok > 0, summary)
    sp = (r.out.get("Specification") or {}) if r.ok else {}
    ck.eq("after it: InService, the same Container, the new resources",
          (r.out.get("InferenceComponentStatus") if r.ok else repr(r), (sp.get("Container") or {}).get("Environment"),
           (sp.get("ComputeResourceRequirements") or {}).get("MinMemoryRequiredInMb")),
          ("InService", {"PROBE_TAG": "-v2"}, 256))

    # ---- UpdateInferenceComponentRuntimeConfig: up, down, to 0 and back, under traffic
    def scale(n, what):
        t = Traffic(cl, ep, probe, {b"x-v2"}, workers)
        time.sleep(0.3)
        t1 = time.monotonic()
        r = cl.call("UpdateInferenceComponentRuntimeConfig", InferenceComponentName=probe,
                    DesiredRuntimeConfig={"CopyCount": n})
        ck.success("UpdateInferenceComponentRuntimeConfig CopyCount %d" % n, r)
        r = wait_ic(cl, probe)
        took = time.monotonic() - t1
        time.sleep(0.3)
        summary = t.end()
        ck.ok("calls during %s: none failed" % what, t.failed == 0 and t.ok > 0, summary)
        ck.eq("after %s (%.1f s): InService with %d copies" % (what, took, n),
              (r.out.get("InferenceComponentStatus"), r.out.get("RuntimeConfig")) if r.ok else repr(r),
              ("InService", {"DesiredCopyCount": n, "CurrentCopyCount": n}))

    scale(3, "scaling up 1 -> 3")
    scale(1, "scaling down 3 -> 1")
    r = cl.call("UpdateInferenceComponentRuntimeConfig", InferenceComponentName=probe,
                DesiredRuntimeConfig={"CopyCount": 0})
    ck.success("UpdateInferenceComponentRuntimeConfig CopyCount 0 (scale to zero)", r)
    r = wait_ic(cl, probe)
    ck.eq("scaled to 0: InService with 0 copies",
          (r.out.get("InferenceComponentStatus"), r.out.get("RuntimeConfig")) if r.ok else repr(r),
          ("InService", {"DesiredCopyCount": 0, "CurrentCopyCount": 0}))
    r = cl.invoke(ep, b"x", ic=probe)
    ck.error("component with no copy ready (0 copies)", r, RUNTIME_VALIDATION, message=NO_CAPACITY)
    t1 = time.monotonic()
    r = cl.call("UpdateInferenceComponentRuntimeConfig", InferenceComponentName=probe,
                DesiredRuntimeConfig={"CopyCount": 1})
    ck.success("UpdateInferenceComponentRuntimeConfig CopyCount 0 -> 1", r)
    first = None
    while time.monotonic() - t1 < 120:
        r = cl.invoke(ep, b"x", ic=probe)
        if r.ok or r.message != NO_CAPACITY:
            first = r
            break
        time.sleep(0.05)
    ck.eq("scaled 0 -> 1: the first answer that is not 'no capacity' (%.1f s)" % (time.monotonic() - t1),
          first.out.get("Body") if first is not None and first.ok else repr(first), b"x-v2")

    # ---- DeleteInferenceComponent; DeleteEndpoint takes the others with it
    r = cl.call("DeleteInferenceComponent", InferenceComponentName=sent_de)
    ck.success("DeleteInferenceComponent %s" % sent_de, r)
    r = wait_gone(cl, sent_de)
    ck.error("Describe after DeleteInferenceComponent", r,
             message='Could not find inference component "%s".' % arn("inference-component", sent_de))
    r = cl.call("ListInferenceComponents", NameContains=p + "-", SortBy="Name", SortOrder="Ascending")
    ck.eq("List after DeleteInferenceComponent", names(r), [probe, sent])
    r = cl.invoke(ep, b"x", ic=sent_de)
    ck.error("invoke a deleted component", r, RUNTIME_VALIDATION,
             message="Inference Component %s of endpoint %s of account %s not found." % (sent_de, ep, ACCOUNT))
    for e in (ep, ep2):
        ck.success("DeleteEndpoint %s" % e, cl.call("DeleteEndpoint", EndpointName=e))
    for name in (sent, probe):
        r = wait_gone(cl, name)
        ck.error("%s gone with its endpoint" % name, r,
                 message='Could not find inference component "%s".' % arn("inference-component", name))
    ck.success("DeleteEndpointConfig", cl.call("DeleteEndpointConfig", EndpointConfigName=cfg))
    ck.success("DeleteModel", cl.call("DeleteModel", ModelName=model))


def case_file_components(cl, ck, models):
    """The components e2e/endpoints.yaml declares (mce serve -f), seen through this client."""
    ep = "file-components"
    for name, copies in (("file-probe", 2), ("file-sentiment-de", 1)):
        r = wait_ic(cl, name)
        if not ck.success("DescribeInferenceComponent %s (from endpoints.yaml)" % name, r):
            return
        ck.eq("%s from endpoints.yaml: endpoint, status, copies" % name,
              (r.out.get("EndpointName"), r.out.get("InferenceComponentStatus"), r.out.get("RuntimeConfig")),
              (ep, "InService", {"DesiredCopyCount": copies, "CurrentCopyCount": copies}))
    r = describe(cl, "file-sentiment-de")
    if r.ok:
        c = (r.out.get("Specification") or {}).get("Container") or {}
        ck.eq("file-sentiment-de's ArtifactUrl as the file wrote it", c.get("ArtifactUrl"),
              "file://../build/models/sentiment-de.tar.gz")
    r = cl.call("ListTags", ResourceArn=arn("inference-component", "file-sentiment-de"))
    if ck.success("ListTags of file-sentiment-de", r):
        ck.eq("file-sentiment-de's tags from the file", r.out.get("Tags"), [{"Key": "from", "Value": "file"}])
    r = cl.invoke(ep, b"hello", ic="file-probe", content_type="text/plain")
    if ck.success("InvokeEndpoint file-probe", r):
        ck.eq("file-probe's echo and tag", r.out["Body"], b"hello-file")
    r = cl.invoke(ep, json.dumps({"instances": REVIEWS["de"]}).encode(), ic="file-sentiment-de")
    if ck.success("InvokeEndpoint file-sentiment-de (its file:// artifact resolved against the file's folder)", r):
        ck.eq("file-sentiment-de labels (positive, negative)", labels(r.out["Body"]), [("de", "POSITIVE"), ("de", "NEGATIVE")])
    r = cl.call("ListInferenceComponents", EndpointNameEquals=ep, SortBy="Name", SortOrder="Ascending")
    ck.eq("ListInferenceComponents of the file's endpoint",
          [c.get("InferenceComponentName") for c in r.out.get("InferenceComponents", [])] if r.ok else repr(r),
          ["file-probe", "file-sentiment-de"])


def leftovers(boto, prefix):
    """Removes what an earlier run with this prefix left in this mce (a run against a fresh mce finds nothing)."""
    for e in (prefix + "-shared", prefix + "-other"):
        if boto.call("DeleteEndpoint", EndpointName=e).ok:
            wait_gone_endpoint(boto, e)
    boto.call("DeleteEndpointConfig", EndpointConfigName=prefix + "-cfg")
    boto.call("DeleteModel", ModelName=prefix + "-sentiment-en")


def wait_gone_endpoint(cl, name, timeout=60):
    deadline = time.monotonic() + timeout
    while cl.call("DescribeEndpoint", EndpointName=name).ok and time.monotonic() < deadline:
        time.sleep(0.3)


def run_case(case, cl, *args):
    ck = Checks(cl.name)
    try:
        case(cl, ck, *args)
    except Exception as e:  # a crash is a failed check, not an aborted run
        ck.ok(case.__name__, False, "raised %s: %s" % (type(e).__name__, e))
    return ck


def has_ic(aws):
    """Whether this aws CLI knows create-inference-component."""
    p = subprocess.run([aws, "sagemaker", "create-inference-component", "--generate-cli-skeleton", "input"],
                       capture_output=True)
    return p.returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True, help="mce's URL, http://127.0.0.1:PORT")
    ap.add_argument("--aws", required=True, help="an aws CLI that has sagemaker create-inference-component")
    ap.add_argument("--models", required=True, help="the folder of the example models (build/models)")
    args = ap.parse_args()
    if not re.match(r"^http://127\.0\.0\.1:\d+$", args.url):
        sys.exit("--url must be http://127.0.0.1:PORT")
    for m in ("sentiment-en", "sentiment-de"):
        if not os.path.isfile(os.path.join(args.models, m + ".tar.gz")):
            sys.exit("%s/%s.tar.gz is missing: run 'make models'" % (args.models, m))
    if "CreateInferenceComponent" not in boto3.client(
            "sagemaker", endpoint_url=args.url).meta.service_model.operation_names:
        sys.exit("botocore %s has no CreateInferenceComponent" % botocore.__version__)
    if not has_ic(args.aws):
        sys.exit("%s has no 'sagemaker create-inference-component'" % args.aws)
    print("clients: %s with boto3 %s (botocore %s), %s (%s)" % (
        sys.executable, boto3.__version__, botocore.__version__, args.aws,
        subprocess.run([args.aws, "--version"], capture_output=True, text=True).stdout.strip()), flush=True)

    passed = failed = 0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mce-e2e-ic-") as tmp:
        boto, cli = Boto(args.url), Cli(args.url, args.aws, tmp)
        for p in (boto.prefix, cli.prefix):
            leftovers(boto, p)
        # The CLI's case runs in a thread (its calls are processes) while boto3
        # goes through its own in this one; the lines come out by client.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            fut = pool.submit(run_case, case_components, cli, args.models)
            ck = run_case(case_components, boto, args.models)
            print("\n".join(ck.lines), flush=True)
            passed, failed = passed + ck.passed, failed + ck.failed
            ck = run_case(case_file_components, boto, args.models)
            print("\n".join(ck.lines), flush=True)
            passed, failed = passed + ck.passed, failed + ck.failed
            print("boto3 done after %.1f s" % (time.monotonic() - t0), flush=True)
            ck = fut.result()
            print("\n".join(ck.lines), flush=True)
            passed, failed = passed + ck.passed, failed + ck.failed
            ck = run_case(case_file_components, cli, args.models)
            print("\n".join(ck.lines), flush=True)
            passed, failed = passed + ck.passed, failed + ck.failed
            print("aws CLI done after %.1f s (%d aws processes, %.1f s each on average)" % (
                time.monotonic() - t0, Cli.stats[0], Cli.stats[1] / max(1, Cli.stats[0])), flush=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
