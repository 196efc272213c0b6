#!/usr/bin/python3
"""End-to-end checks of mce's InvokeEndpoint with the real AWS clients.

Every case runs twice: through boto3 (boto3.client("sagemaker-runtime",
endpoint_url=URL)) and through the aws CLI (/usr/bin/aws sagemaker-runtime
invoke-endpoint --endpoint-url URL ...), both unmodified Debian packages. The
endpoints come from e2e/endpoints.yaml; e2e/run.sh starts mce and calls this
script with --url. Standard library and boto3 only.

InvokeEndpointWithResponseStream (case_stream) runs with boto3 only: neither
Debian's aws CLI nor its boto3 has the operation, so its event stream is read
off the wire with botocore's own decoder, and through boto3's operation
where the boto3 running the script has it.

Output: one line per check (PASS/FAIL [client] what: detail), then the
summary line "N passed, M failed". Exit status 1 if any check failed.
"""

import argparse
import ast
import collections
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid

import boto3
import botocore
from botocore.eventstream import EventStreamBuffer
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python3 -I leaves the script's folder out
import e2elib  # noqa: E402

ACCOUNT = "123456789012"
MAX_PAYLOAD = 6 * 1024 * 1024  # 6291456 bytes, the BodyBlob maximum
AWS_CLI = "/usr/bin/aws"

SENTIMENT = "e2e-sentiment"  # Direct: english, german
TICKETS = "e2e-tickets"  # Serial: featurizer -> classifier
CHAIN = "e2e-probe-chain"  # Serial: probe-a, probe-b, probe-c (tags a, b, c)
PROBES = "e2e-probe-direct"  # Direct: one, two (tags 1, 2)
VARIANTS = "e2e-variants"  # variants Heavy (weight 3, tag heavy), Light (weight 1, tag light)


class Result:
    """One InvokeEndpoint outcome, the same shape for both clients."""

    def __init__(self, **kw):
        self.ok = False
        self.body = b""
        self.content_type = None
        self.variant = None
        self.custom_attributes = None  # None: the response had none
        self.code = None  # error code as the client reports it
        self.message = None
        self.original_status = None  # ModelError OriginalStatusCode, None if absent
        self.http_status = None
        self.attempts = None  # HTTP requests the client made (1 = no retry)
        self.request_id = None
        self.raw = ""  # what to show when something is off
        self.__dict__.update(kw)

    def __repr__(self):
        if self.ok:
            return "ok body=%r ct=%r variant=%r attrs=%r" % (
                self.body[:120], self.content_type, self.variant, self.custom_attributes)
        return "error code=%r http=%r osc=%r msg=%r %s" % (
            self.code, self.http_status, self.original_status, self.message, self.raw[-300:])


class Boto:
    name = "boto3"

    def __init__(self, url):
        self.url = url
        self.local = threading.local()

    def client(self):
        c = getattr(self.local, "c", None)
        if c is None:
            c = self.local.c = boto3.client("sagemaker-runtime", endpoint_url=self.url)
        return c

    def invoke(self, endpoint, body, content_type=None, accept=None, attrs=None,
               host=None, variant=None, model=None, quiet=False):
        kw = {"EndpointName": endpoint, "Body": body}
        for key, v in (("ContentType", content_type), ("Accept", accept), ("CustomAttributes", attrs),
                       ("TargetContainerHostname", host), ("TargetVariant", variant), ("TargetModel", model)):
            if v is not None:
                kw[key] = v
        try:
            r = self.client().invoke_endpoint(**kw)
        except ClientError as e:
            resp = e.response
            md = resp.get("ResponseMetadata", {})
            return Result(code=resp.get("Error", {}).get("Code"), message=resp.get("Error", {}).get("Message"),
                          original_status=resp.get("OriginalStatusCode"), http_status=md.get("HTTPStatusCode"),
                          attempts=md.get("RetryAttempts", 0) + 1, request_id=md.get("RequestId"),
                          raw=repr({k: v for k, v in resp.items() if k != "ResponseMetadata"}))
        md = r["ResponseMetadata"]
        return Result(ok=True, body=r["Body"].read(), content_type=r.get("ContentType"),
                      variant=r.get("InvokedProductionVariant"), custom_attributes=r.get("CustomAttributes"),
                      http_status=md.get("HTTPStatusCode"), attempts=md.get("RetryAttempts", 0) + 1,
                      request_id=md.get("RequestId"))


ERROR_LINE = re.compile(r"An error occurred \(([^)]*)\) when calling the InvokeEndpoint operation: (.*)")
# urllib3's debug line for each request the CLI sends: "POST /endpoints/x/invocations HTTP/1.1" 424 404
WIRE_LINE = re.compile(r'"POST /endpoints/[^ ]+ HTTP/1\.1" (\d{3})')
BODY_LINE = re.compile(r"Response body:\n(b'.*'|b\".*\")\n")


class Cli:
    name = "aws-cli"

    def __init__(self, url, tmp):
        self.url = url
        self.tmp = tmp

    def invoke(self, endpoint, body, content_type=None, accept=None, attrs=None,
               host=None, variant=None, model=None, quiet=False):
        """quiet leaves out --debug (which would log a big body whole)."""
        fd, inp = tempfile.mkstemp(dir=self.tmp, suffix=".in")
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        out = inp[:-3] + ".out"
        args = [AWS_CLI]
        if not quiet:
            args.append("--debug")
        args += ["sagemaker-runtime", "invoke-endpoint", "--endpoint-url", self.url,
                 "--endpoint-name", endpoint, "--body", "fileb://" + inp]
        for opt, v in (("--content-type", content_type), ("--accept", accept), ("--custom-attributes", attrs),
                       ("--target-container-hostname", host), ("--target-variant", variant),
                       ("--target-model", model)):
            if v is not None:
                args += [opt, v]
        args.append(out)
        try:
            p = subprocess.run(args, capture_output=True, timeout=60)
        finally:
            os.unlink(inp)
        stderr = p.stderr.decode("utf-8", "replace")
        statuses = [int(s) for s in WIRE_LINE.findall(stderr)]
        common = dict(http_status=statuses[-1] if statuses else None,
                      attempts=len(statuses) if statuses else None, raw=stderr[-2000:])
        if p.returncode == 0:
            meta = json.loads(p.stdout)
            with open(out, "rb") as f:
                data = f.read()
            os.unlink(out)
            return Result(ok=True, body=data, content_type=meta.get("ContentType"),
                          variant=meta.get("InvokedProductionVariant"),
                          custom_attributes=meta.get("CustomAttributes"), **common)
        errs = ERROR_LINE.findall(stderr)
        code, msg = errs[-1] if errs else (None, None)
        osc = None
        bodies = BODY_LINE.findall(stderr)
        if bodies:
            try:
                osc = json.loads(ast.literal_eval(bodies[-1])).get("OriginalStatusCode")
            except (ValueError, SyntaxError):
                pass
        return Result(code=code, message=msg, original_status=osc, exit_status=p.returncode, **common)


class Checks(e2elib.Checks):
    """Collects PASS/FAIL lines for one case and one client."""

    def error(self, what, r, code, http=None, osc=None, has_osc=None, contains=None, message=None):
        """Asserts r is the error code (and status, OriginalStatusCode, message text)."""
        if r.ok:
            return self.ok(what, False, "succeeded, want %s: %r" % (code, r))
        good = [r.code == code]
        detail = ["code %s" % r.code]
        if http is not None and r.http_status is not None:
            good.append(r.http_status == http)
            detail.append("HTTP %s" % r.http_status)
        if has_osc is None:
            has_osc = osc is not None
        if has_osc:
            good.append(type(r.original_status) is int and r.original_status == osc)
            detail.append("OriginalStatusCode %r" % (r.original_status,))
        elif osc is None and code != "ModelError":
            good.append(r.original_status is None)
        if r.attempts is not None:
            good.append(r.attempts == 1)  # 4xx: no client retries
            detail.append("%d attempt(s)" % r.attempts)
        if contains is not None:
            good.append(r.message is not None and contains in r.message)
        if message is not None:
            good.append(r.message == message)
        if all(good):
            return self.ok(what, True, ", ".join(detail))
        return self.ok(what, False, "want code %s http %s osc %r%s; got %r" % (
            code, http, osc, (" message containing %r" % contains) if contains else
            ((" message %r" % message) if message else ""), r))


# ---------------------------------------------------------------- the cases

def case_direct_sentiment(cl, ck):
    texts = {
        "english": (["What a wonderful, helpful service. I love it!",
                     "This is terrible. The product is broken and the support was awful."], "en"),
        "german": (["Das Essen war wunderbar und der Service sehr freundlich.",
                    "Das Essen war leider kalt und der Service schlecht."], "de"),
    }
    for host, (docs, lang) in texts.items():
        what = "direct %s" % host
        r = cl.invoke(SENTIMENT, json.dumps({"instances": docs}).encode(), content_type="application/json",
                      host=host)
        if not ck.success(what, r):
            continue
        try:
            preds = json.loads(r.body).get("predictions", [])
            got = [(p.get("language"), p.get("label")) for p in preds]
        except (ValueError, AttributeError):
            got = r.body
        ck.eq(what + " language and labels (positive, negative)", got,
              [(lang, "POSITIVE"), (lang, "NEGATIVE")])
        ck.eq(what + " ContentType", r.content_type, "application/json")
        ck.eq(what + " InvokedProductionVariant", r.variant, "AllTraffic")
        ck.eq(what + " no CustomAttributes", r.custom_attributes, None)
    r = cl.invoke(SENTIMENT, json.dumps({"text": "This is not good at all"}).encode(),
                  content_type="application/json", accept="text/csv", host="english")
    if ck.success("direct english JSON in, CSV out (negation)", r):
        ck.ok("direct english CSV row", r.body.decode().startswith("en,NEGATIVE,"), repr(r.body))
        ck.eq("direct english CSV ContentType", r.content_type, "text/csv")


def case_serial_tickets(cl, ck):
    docs = ["I was billed twice for the annual plan", "The app crashes when I open it",
            "My package has not arrived"]
    want = ["billing", "technical", "shipping"]
    r = cl.invoke(TICKETS, "\n".join(docs).encode(), content_type="text/plain", accept="application/json")
    if ck.success("serial tickets JSON", r):
        try:
            labels = [p.get("label") for p in json.loads(r.body).get("predictions", [])]
        except (ValueError, AttributeError):
            labels = r.body
        ck.eq("serial tickets JSON labels", labels, want)
        ck.eq("serial tickets JSON ContentType", r.content_type, "application/json")
        ck.eq("serial tickets InvokedProductionVariant", r.variant, "AllTraffic")
    r = cl.invoke(TICKETS, "\n".join(docs).encode(), content_type="text/plain", accept="text/csv")
    if ck.success("serial tickets CSV", r):
        ck.eq("serial tickets CSV labels", r.body.decode().split(), want)
        ck.eq("serial tickets CSV ContentType", r.content_type, "text/csv")


def case_probe_chain(cl, ck):
    r = cl.invoke(CHAIN, b"x")
    if ck.success("chain x", r):
        ck.eq("chain order a, b, c", r.body, b"xabc")
        ck.eq("chain default ContentType", r.content_type, "application/octet-stream")
        ck.eq("chain no CustomAttributes unless a container sets them", r.custom_attributes, None)
    r = cl.invoke(CHAIN, b"x", content_type="text/plain")
    if ck.success("chain text/plain", r):
        ck.eq("chain client ContentType passed through", r.content_type, "text/plain")
    r = cl.invoke(CHAIN, b"x", content_type="text/plain", attrs="attrs=hello,ct=text/x-probe")
    if ck.success("chain attrs=hello,ct=text/x-probe", r):
        ck.eq("chain CustomAttributes returned from the container", r.custom_attributes, "hello")
        ck.eq("chain ct= response ContentType", r.content_type, "text/x-probe")
        ck.eq("chain ct= body", r.body, b"xabc")
    # info: probe-a and probe-b answer their info as application/json, so
    # probe-c must receive application/json (not the client's type), and the
    # client's Accept only at the end of the chain.
    r = cl.invoke(CHAIN, b"x", content_type="text/x-client", accept="text/x-accept", attrs="info")
    if ck.success("chain info", r):
        try:
            info = json.loads(r.body)
        except ValueError:
            info = {}
        ck.eq("chain info answered by the last container", info.get("hostname"), "probe-c")
        ck.eq("chain Content-Type chaining: probe-c received probe-b's type", info.get("content_type"),
              "application/json")
        ck.eq("chain last container received the client's Accept", info.get("accept"), "text/x-accept")
        ck.eq("chain custom attributes forwarded", info.get("custom_attributes"), "info")
    # Direct: the container receives the client's headers as sent.
    r = cl.invoke(PROBES, b"x", content_type="text/x-client; charset=utf-8", accept="text/x-accept",
                  attrs="info,note=e2e", host="two")
    if ck.success("direct probe info", r):
        try:
            info = json.loads(r.body)
        except ValueError:
            info = {}
        ck.eq("direct probe hostname", info.get("hostname"), "two")
        ck.eq("direct probe received Content-Type", info.get("content_type"), "text/x-client; charset=utf-8")
        ck.eq("direct probe received Accept", info.get("accept"), "text/x-accept")
        ck.eq("direct probe received CustomAttributes", info.get("custom_attributes"), "info,note=e2e")
        ck.eq("direct probe info ContentType", r.content_type, "application/json")
    # Without ContentType and Accept (boto3 and the CLI send neither): mce
    # passes application/octet-stream, as the Go SDK would send, and no Accept.
    r = cl.invoke(PROBES, b"y", attrs="info", host="one")
    if ck.success("direct probe info without ContentType", r):
        try:
            info = json.loads(r.body)
        except ValueError:
            info = {}
        ck.eq("direct probe (one) default Content-Type received", info.get("content_type"),
              "application/octet-stream")
        ck.eq("direct probe (one) no Accept received", info.get("accept"), "")


def case_validation_errors(cl, ck):
    r = cl.invoke("e2e-missing", b"x")
    ck.error("unknown endpoint -> ValidationError", r, "ValidationError", http=400,
             message="Endpoint e2e-missing of account %s not found." % ACCOUNT)
    r = cl.invoke(SENTIMENT, b"good", content_type="text/plain")
    ck.error("Direct endpoint without TargetContainerHostname -> ValidationError", r, "ValidationError",
             http=400, contains="TargetContainerHostname")
    r = cl.invoke(SENTIMENT, b"good", content_type="text/plain", host="french")
    ck.error("unknown TargetContainerHostname -> ValidationError", r, "ValidationError", http=400,
             contains="french")
    r = cl.invoke(TICKETS, b"late parcel", content_type="text/plain", host="featurizer")
    ck.error("TargetContainerHostname on a Serial endpoint -> ValidationError", r, "ValidationError",
             http=400, contains="Direct")
    r = cl.invoke(TICKETS, b"late parcel", content_type="text/plain", model="model-a.tar.gz")
    ck.error("TargetModel on a non-multi-model endpoint -> ValidationError", r, "ValidationError", http=400,
             message="Endpoint %s is not a multi-model endpoint and does not support target model header."
             % TICKETS)
    r = cl.invoke(VARIANTS, b"x", variant="Nope")
    ck.error("unknown TargetVariant -> ValidationError", r, "ValidationError", http=400, contains="Nope")


def case_model_errors(cl, ck):
    r = cl.invoke(CHAIN, b"x", attrs="status=500")
    ck.error("chain container 500 -> ModelError naming probe-a", r, "ModelError", http=424, osc=500,
             contains="(500) from probe-a")
    # The probe's switches reach every container of the chain, so a forced
    # status always stops the chain at its first container. A failure in the
    # middle of a chain: the classifier (container 2 of e2e-tickets) is the
    # only one that gets the client's Accept and cannot produce image/png.
    r = cl.invoke(TICKETS, b"My package has not arrived", content_type="text/plain", accept="image/png")
    ck.error("chain container 2 (classifier) 406 -> ModelError naming classifier", r, "ModelError",
             http=424, osc=406, contains="(406) from classifier")
    r = cl.invoke(PROBES, b"x", attrs="status=400", host="two")
    ck.error("direct container 400 -> ModelError", r, "ModelError", http=424, osc=400,
             contains="(400) from two")
    r = cl.invoke(PROBES, b"x", attrs="status=503", host="one")
    ck.error("direct container 503 -> ModelError (424, not retried)", r, "ModelError", http=424, osc=503,
             contains="(503) from one")
    r = cl.invoke(SENTIMENT, b"\x89PNG", content_type="image/png", host="english")
    ck.error("unsupported Content-Type to sentiment -> ModelError 415", r, "ModelError", http=424, osc=415,
             contains="(415) from english")


def case_timeout(cl, ck):
    t0 = time.monotonic()
    r = cl.invoke(PROBES, b"x", attrs="sleep=5s", host="one")
    took = time.monotonic() - t0
    ck.error("container timeout (sleep=5s, --container-timeout 2s) -> ModelError", r, "ModelError",
             http=424, osc=0, contains="timed out")
    if isinstance(cl, Boto):  # a CLI process's own start-up time would blur this
        ck.ok("timeout answered before the container's 5 s", took < 4.5, "%.1f s" % took)


def case_payload_limit(cl, ck):
    r = cl.invoke(PROBES, b"x" * MAX_PAYLOAD, host="one", attrs="size=2", quiet=True)
    if ck.success("body of exactly 6 MiB", r):
        ck.eq("body of exactly 6 MiB answer", r.body, b"xx")
    r = cl.invoke(PROBES, b"x" * (MAX_PAYLOAD + 1), host="one", quiet=True)
    ck.error("body of 6 MiB + 1 byte -> ValidationError", r, "ValidationError", contains="6291456")
    if r.http_status is not None:
        ck.lines.append("INFO [%s] 6 MiB + 1 answered with HTTP %s after %s attempt(s)"
                        % (ck.client, r.http_status, r.attempts))


def case_variants(cl, ck):
    n = 200 if isinstance(cl, Boto) else 2
    counts = collections.Counter()
    mismatched = []
    for _ in range(n):
        r = cl.invoke(VARIANTS, b"x")
        if not r.ok:
            mismatched.append(repr(r))
            continue
        counts[r.variant] += 1
        want = {"Heavy": b"xheavy", "Light": b"xlight"}.get(r.variant)
        if r.body != want:
            mismatched.append("%s answered %r" % (r.variant, r.body))
    ck.ok("variants: every call answered by the variant it names", not mismatched and
          sum(counts.values()) == n, "; ".join(mismatched[:3]) or dict(counts).__repr__())
    if n >= 100:
        heavy = counts["Heavy"] / n
        # Binomial(200, 0.75): sd 3.1 %; the range is about 4 sd each way.
        ck.ok("variants: weights 3:1 over %d calls" % n, 0.62 <= heavy <= 0.88 and counts["Light"] > 0,
              "Heavy %d, Light %d" % (counts["Heavy"], counts["Light"]))
    for target, tag in (("Light", b"xlight"), ("Heavy", b"xheavy")):
        m = 20 if isinstance(cl, Boto) else 1
        got = collections.Counter()
        for _ in range(m):
            r = cl.invoke(VARIANTS, b"x", variant=target)
            got[(r.variant, r.body) if r.ok else repr(r)] += 1
        ck.eq("TargetVariant=%s overrides the weights (%d calls)" % (target, m), dict(got), {(target, tag): m})


def case_boto_metadata(cl, ck):
    r = cl.invoke(CHAIN, b"x")
    ck.ok("x-amzn-RequestId in ResponseMetadata", bool(r.request_id), repr(r.request_id))
    ck.eq("no retries on success", r.attempts, 1)


def probe_parts(n, body_len, tag=""):
    """What the probe streams for stream=n with a body of body_len bytes."""
    return "".join("part %d of %d, %d bytes in%s\n" % (i, n, body_len, tag) for i in range(1, n + 1)).encode()


class RawStream:
    """InvokeEndpointWithResponseStream on the wire, its events parsed by botocore's own event-stream
    decoder (EventStreamBuffer: prelude, headers, CRCs). Debian's boto3 predates the operation, so this is
    how the e2e checks the framing with an AWS client library everywhere."""

    def __init__(self, url, endpoint, body, attrs=None, host=None):
        req = urllib.request.Request("%s/endpoints/%s/invocations-response-stream" % (url, endpoint),
                                     data=body, method="POST")
        if attrs:
            req.add_header("X-Amzn-SageMaker-Custom-Attributes", attrs)
        if host:
            req.add_header("X-Amzn-SageMaker-Target-Container-Hostname", host)
        self.status, self.headers, self.error = None, {}, None
        try:
            self.resp = urllib.request.urlopen(req, timeout=20)
            self.status, self.headers = self.resp.status, self.resp.headers
        except urllib.error.HTTPError as e:
            self.resp, self.status, self.headers = None, e.code, e.headers
            self.error = json.loads(e.read() or b"{}")
        self.buf = EventStreamBuffer()
        self.pending = []

    def next(self):
        """The next message (event or exception) as a dict, or None at the end."""
        while not self.pending:
            chunk = self.resp.read1(65536)
            if not chunk:
                return None
            self.buf.add_data(chunk)
            for m in self.buf:
                self.pending.append(m.to_response_dict())
        return self.pending.pop(0)


def case_stream(cl, ck):
    """InvokeEndpointWithResponseStream: the wire (botocore's event-stream decoder), and boto3's own
    operation when this boto3 has it."""
    gate = "e2e-" + uuid.uuid4().hex[:12]
    s = RawStream(cl.url, PROBES, b"hello", attrs="stream=3,gate=" + gate, host="two")
    if not ck.eq("stream HTTP status", s.status, 200):
        return
    ck.eq("stream X-Amzn-SageMaker-Content-Type", s.headers.get("X-Amzn-SageMaker-Content-Type"), "text/plain")
    ck.eq("stream x-Amzn-Invoked-Production-Variant", s.headers.get("x-Amzn-Invoked-Production-Variant"),
          "AllTraffic")
    first = s.next()
    ck.eq("stream first event is a PayloadPart, received while the probe waits on its gate",
          (first or {}).get("headers", {}).get(":event-type"), "PayloadPart")
    # The probe holds parts 2 and 3 until this second call opens its gate.
    ck.success("stream gate opened by InvokeEndpoint", cl.invoke(PROBES, b"", attrs="open=" + gate, host="two"))
    got, m = (first or {}).get("body", b""), s.next()
    while m is not None:
        got += m.get("body", b"")
        m = s.next()
    ck.eq("stream PayloadParts concatenated", got, probe_parts(3, 5, "2"))

    for attrs, code, what in (("stream=4,cut=1", "StreamBroken", "broken after one part"),
                              ("stream=4,stall=1", "ModelInvocationTimeExceeded",
                               "stalled past --container-timeout 2s")):
        s = RawStream(cl.url, PROBES, b"", attrs=attrs, host="one")
        msgs = []
        m = s.next() if s.status == 200 else None
        while m is not None:
            msgs.append(m)
            m = s.next()
        last = msgs[-1] if msgs else {}
        ck.eq("stream %s -> one part, then a ModelStreamError %s exception event" % (what, code),
              (len(msgs), last.get("headers", {}).get(":message-type"), last.get("headers", {}).get(":exception-type"),
               json.loads(last.get("body") or b"{}").get("ErrorCode")), (2, "exception", "ModelStreamError", code))
    s = RawStream(cl.url, PROBES, b"", attrs="status=500", host="one")
    ck.eq("stream container 500 before any part -> ModelError 424",
          (s.status, (s.error or {}).get("__type"), (s.error or {}).get("OriginalStatusCode")), (424, "ModelError", 500))
    s = RawStream(cl.url, "e2e-missing", b"x")
    ck.eq("stream unknown endpoint -> ValidationError 400", (s.status, (s.error or {}).get("__type")),
          (400, "ValidationError"))

    c = cl.client()
    if not hasattr(c, "invoke_endpoint_with_response_stream"):
        ck.info("boto3 %s predates invoke_endpoint_with_response_stream (botocore 1.31): the operation itself "
                "is checked by docs/streaming.md's snippet and the Go SDK's tests" % boto3.__version__)
        return
    r = c.invoke_endpoint_with_response_stream(EndpointName=CHAIN, Body=b"x", CustomAttributes="stream=2")
    body = b"".join(ev["PayloadPart"]["Bytes"] for ev in r["Body"] if "PayloadPart" in ev)
    a = probe_parts(2, 1, "a")
    b = probe_parts(2, len(a), "b")
    ck.eq("boto3 stream: Serial chain, the last container streams", body, probe_parts(2, len(b), "c"))
    try:
        r = c.invoke_endpoint_with_response_stream(EndpointName=PROBES, TargetContainerHostname="one",
                                                   Body=b"", CustomAttributes="stream=3,stall=1")
        for _ in r["Body"]:
            pass
        ck.ok("boto3 stream over the time limit -> ModelStreamError", False, "the stream ended without an error")
    except botocore.exceptions.EventStreamError as e:
        # botocore keeps the exception's Code and Message only (its ErrorCode is checked on the wire).
        err = e.response.get("Error", {})
        ck.ok("boto3 stream over the time limit -> ModelStreamError", err.get("Code") == "ModelStreamError" and
              "timed out" in err.get("Message", ""), repr(err))


CASES = [case_direct_sentiment, case_serial_tickets, case_probe_chain, case_validation_errors,
         case_model_errors, case_timeout, case_payload_limit, case_variants]


def run_case(case, cl):
    ck = Checks(cl.name)
    try:
        case(cl, ck)
    except Exception as e:  # a crash is a failed check, not an aborted run
        ck.ok(case.__name__, False, "raised %s: %s" % (type(e).__name__, e))
    return ck


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True, help="mce's SageMaker Runtime URL, http://127.0.0.1:PORT")
    ap.add_argument("--jobs", type=int, default=4, help="aws CLI processes at a time")
    args = ap.parse_args()
    if not re.match(r"^http://127\.0\.0\.1:\d+$", args.url):
        sys.exit("--url must be http://127.0.0.1:PORT")
    print("clients: boto3 %s (botocore %s, %s), %s" % (
        boto3.__version__, botocore.__version__, os.path.dirname(boto3.__file__),
        subprocess.run([AWS_CLI, "--version"], capture_output=True, text=True).stdout.strip()), flush=True)

    passed = failed = 0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mce-e2e-") as tmp:
        boto, cli = Boto(args.url), Cli(args.url, tmp)
        # The CLI cases run in a few processes at a time while boto3 goes through
        # its cases in this thread; the lines come out grouped by client.
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            cli_results = [pool.submit(run_case, c, cli) for c in CASES]
            for case in CASES + [case_boto_metadata, case_stream]:
                ck = run_case(case, boto)
                print("\n".join(ck.lines), flush=True)
                passed, failed = passed + ck.passed, failed + ck.failed
            print("boto3 done after %.1f s" % (time.monotonic() - t0), flush=True)
            for f in cli_results:
                ck = f.result()
                print("\n".join(ck.lines), flush=True)
                passed, failed = passed + ck.passed, failed + ck.failed
            print("aws CLI done after %.1f s" % (time.monotonic() - t0), flush=True)
    print("NOTE a 5xx in the middle of a probe chain cannot be forced: the probe's switches reach every "
          "container, so status=500 always fails at the first one (the middle-of-chain failure is "
          "the classifier's 406).")
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
