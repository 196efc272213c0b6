#!/usr/bin/python3
"""End-to-end checks of mce's authorization with the real AWS clients.

e2e/run.sh starts a second mce with --credentials and --policies pointing at
copies of examples/authz/credentials.yaml and policies.yaml (in --authz-dir)
and e2e/authz-endpoints.yaml: my-mce (Direct: probes customIps-1, common-2,
special-3, other-4) and my-mme (MultiModel). Every check runs through boto3
(explicit aws_access_key_id / aws_secret_access_key, or
Config(signature_version=UNSIGNED)) and through the aws CLI (the keys in
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY of each process, or
--no-sign-request), both unmodified Debian packages:

- the SageMaker guide's policies: alice may call the containers customIps*
  and common* of my-mce; bob every container but special* (explicit deny);
  carol the TargetModels company_a/* and common/* of my-mme, and Describe*/
  List* on the control plane; ops sagemaker:*; unsigned callers ListEndpoints;
- allowed calls succeed, denied ones fail with AccessDeniedException and
  SageMaker's message; a wrong secret gives InvalidSignatureException, an
  unknown key UnrecognizedClientException;
- the control plane: who may and who may not create and delete;
- tag conditions: a model tagged protected=true cannot be deleted
  (aws:ResourceTag/protected) until the tag is removed;
- the OpenAI-compatible route: bearer tokens made exactly as the SageMaker
  Python SDK's generate_token makes them (botocore's SigV4QueryAuth of
  CallWithBearerToken), sent with urllib; a caller needs
  sagemaker:CallWithBearerToken beside InvokeEndpoint; expired, forged and
  unknown-key tokens and SigV4 headers get 401;
- SIGHUP: a broken credentials or policy file leaves the previous policies in
  force; the fixed file is in force after the next SIGHUP (--pid, --log).

The TargetModel checks assert only the authorization: denied models get
AccessDeniedException, allowed ones anything else (multi-model invocation
may not be wired into the runtime yet; what they got is printed as INFO).

Output: one line per check (PASS/FAIL [client] what: detail), INFO lines, then
the summary line "N passed, M failed". Exit status 1 if any check failed.
Standard library and boto3 only.
"""

import argparse
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import boto3
import botocore
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python3 -I leaves the script's folder out
import e2elib  # noqa: E402

ACCOUNT = "123456789012"
REGION = "us-east-1"
AWS_CLI = "/usr/bin/aws"
ROLE = "arn:aws:iam::%s:role/mce-e2e" % ACCOUNT  # required by the botocore models; mce ignores it
DENIED = "AccessDeniedException"
VALIDATION = "ValidationException"

# The principals of examples/authz/credentials.yaml (None: unsigned).
KEYS = {
    "alice": ("AKIAALICE0000EXAMPLE", "alice-example-secret-key-000000000000"),
    "bob": ("AKIABOB00000EXAMPLE", "bob-example-secret-key-00000000000000"),
    "carol": ("AKIACAROL000EXAMPLE", "carol-example-secret-key-000000000000"),
    "ops": ("AKIAOPS00000EXAMPLE", "ops-example-secret-key-00000000000000"),
    "wrong-secret": ("AKIAALICE0000EXAMPLE", "not-alice-secret-key-0000000000000000"),
    "unknown-key": ("AKIAUNKNOWN0EXAMPLE", "unknown-example-secret-key-0000000000"),
    "anonymous": None,
}

MCE = "my-mce"  # Direct: customIps-1, common-2, special-3, other-4 (each probe appends its hostname)
MME = "my-mme"  # MultiModel


def user(who):
    return "anonymous" if who == "anonymous" else "arn:aws:iam::%s:user/%s" % (ACCOUNT, who)


def arn(kind, name):
    return "arn:aws:sagemaker:%s:%s:%s/%s" % (REGION, ACCOUNT, kind, name.lower())


def denied_message(who, action, resource, explicit):
    msg = "User: %s is not authorized to perform: %s on resource: %s" % (user(who), action, resource)
    if explicit:
        return msg + " with an explicit deny in an identity-based policy"
    return msg + " because no identity-based policy allows the %s action" % action


class Res:
    """One call's outcome, the same shape for both clients."""

    def __init__(self, ok, body=b"", out=None, code=None, message=None, http=None, attempts=None, raw=""):
        self.ok, self.body, self.out = ok, body, out or {}
        self.code, self.message, self.http, self.attempts, self.raw = code, message, http, attempts, raw

    def __repr__(self):
        if self.ok:
            return "ok %r" % (self.body[:80] if self.body else json.dumps(self.out, default=str)[:200])
        return "error %s (HTTP %s): %s %s" % (self.code, self.http, (self.message or "")[:400], self.raw[-300:])


# ---------------------------------------------------------------- clients

class Boto:
    name = "boto3"
    prefix = "authz-b"

    def __init__(self, url):
        self.url = url
        self.local = threading.local()

    def client(self, service, who):
        cache = self.local.__dict__.setdefault("clients", {})
        c = cache.get((service, who))
        if c is None:
            # One session per thread: boto3's default session is not thread-safe.
            session = self.local.__dict__.setdefault("session", boto3.session.Session())
            if KEYS[who] is None:
                c = session.client(service, endpoint_url=self.url, region_name=REGION,
                                 config=Config(signature_version=UNSIGNED))
            else:
                key, secret = KEYS[who]
                c = session.client(service, endpoint_url=self.url, region_name=REGION,
                                 aws_access_key_id=key, aws_secret_access_key=secret)
            cache[(service, who)] = c
        return c

    @staticmethod
    def _error(e):
        resp = e.response
        md = resp.get("ResponseMetadata", {})
        return Res(False, code=resp.get("Error", {}).get("Code"), message=resp.get("Error", {}).get("Message"),
                   http=md.get("HTTPStatusCode"), attempts=md.get("RetryAttempts", 0) + 1)

    def invoke(self, who, endpoint, host=None, model=None, body=b"x"):
        kw = {"EndpointName": endpoint, "Body": body}
        if host is not None:
            kw["TargetContainerHostname"] = host
        if model is not None:
            kw["TargetModel"] = model
        try:
            r = self.client("sagemaker-runtime", who).invoke_endpoint(**kw)
        except ClientError as e:
            return self._error(e)
        md = r["ResponseMetadata"]
        return Res(True, body=r["Body"].read(), http=md.get("HTTPStatusCode"), attempts=md.get("RetryAttempts", 0) + 1)

    def call(self, who, op, **params):
        try:
            out = getattr(self.client("sagemaker", who), botocore.xform_name(op))(**params)
        except ClientError as e:
            return self._error(e)
        md = out.pop("ResponseMetadata", {})
        return Res(True, out=out, http=md.get("HTTPStatusCode"), attempts=md.get("RetryAttempts", 0) + 1)


CLI_ERROR = re.compile(r"An error occurred \(([^)]*)\) when calling the (\w+) operation(?: \(reached max retries: (\d+)\))?: (.*)",
                       re.S)


kebab = e2elib.kebab


class Cli:
    name = "aws-cli"
    prefix = "authz-c"

    def __init__(self, url, tmp):
        self.url = url
        self.tmp = tmp

    def run(self, who, args):
        env = dict(os.environ)
        env.pop("AWS_ACCESS_KEY_ID", None)
        env.pop("AWS_SECRET_ACCESS_KEY", None)
        pre = [AWS_CLI]
        if KEYS[who] is None:
            pre.append("--no-sign-request")
        else:
            env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = KEYS[who]
        p = subprocess.run(pre + args + ["--endpoint-url", self.url, "--region", REGION, "--output", "json"],
                           capture_output=True, timeout=120, env=env)
        return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")

    @staticmethod
    def _error(err):
        m = CLI_ERROR.findall(err)
        if not m:
            return Res(False, raw=err)
        code, _, retries, msg = m[-1]
        return Res(False, code=code, message=msg.strip(), attempts=int(retries) + 1 if retries else None, raw=err)

    def invoke(self, who, endpoint, host=None, model=None, body=b"x"):
        fd, inp = tempfile.mkstemp(dir=self.tmp, suffix=".in")
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        out = inp[:-3] + ".out"
        args = ["sagemaker-runtime", "invoke-endpoint", "--endpoint-name", endpoint, "--body", "fileb://" + inp]
        if host is not None:
            args += ["--target-container-hostname", host]
        if model is not None:
            args += ["--target-model", model]
        try:
            rc, _, err = self.run(who, args + [out])
        finally:
            os.unlink(inp)
        if rc != 0:
            return self._error(err)
        with open(out, "rb") as f:
            data = f.read()
        os.unlink(out)
        return Res(True, body=data)

    def call(self, who, op, **params):
        rc, out, err = self.run(who, ["sagemaker", kebab(op), "--no-paginate", "--cli-input-json", json.dumps(params)])
        if rc != 0:
            return self._error(err)
        return Res(True, out=json.loads(out) if out.strip() else {})


# ---------------------------------------------------------------- checks

class Checks(e2elib.Checks):
    """Collects PASS/FAIL/INFO lines for one client."""

    def allowed(self, what, r, body=None):
        if not r.ok:
            return self.ok(what + " -> allowed", False, repr(r))
        if body is not None and r.body != body:
            return self.ok(what + " -> allowed", False, "answer %r, want %r" % (r.body, body))
        return self.ok(what + " -> allowed", True, ("answer %r" % r.body) if body is not None else "")

    def _once(self, r, detail):
        """A 4xx is not retried by the clients."""
        if r.attempts is None:
            return True
        detail.append("%d attempt(s)" % r.attempts)
        return r.attempts == 1

    def denied(self, what, r, who, action, resource, explicit, http=None):
        want = denied_message(who, action, resource, explicit)
        label = "%s -> %s deny" % (what, "explicit" if explicit else "implicit")
        if r.ok:
            return self.ok(label, False, "allowed: %r" % r)
        detail = ["%s" % r.code]
        good = [r.code == DENIED, r.message == want, self._once(r, detail)]
        if http is not None and r.http is not None:
            good.append(r.http == http)
            detail.append("HTTP %s" % r.http)
        if all(good):
            return self.ok(label, True, ", ".join(detail))
        return self.ok(label, False, "want %s %r; got %r" % (DENIED, want, r))

    def auth_error(self, what, r, code, message=None, prefix=None, http=None):
        label = "%s -> %s" % (what, code)
        if r.ok:
            return self.ok(label, False, "allowed: %r" % r)
        detail = [r.code or "?"]
        good = [r.code == code, self._once(r, detail)]
        if message is not None:
            good.append(r.message == message)
        if prefix is not None:
            good.append((r.message or "").startswith(prefix))
        if http is not None and r.http is not None:
            good.append(r.http == http)
            detail.append("HTTP %s" % r.http)
        return self.ok(label, all(good), ", ".join(detail) if all(good) else "got %r" % r)

    def not_denied(self, what, r):
        """Authorization let it through; whatever happened next is shown, not judged."""
        if self.ok(what + " -> not AccessDenied", r.code != DENIED, "" if r.code != DENIED else repr(r)):
            self.info("%s got %s" % (what, "success %r" % r.body[:80] if r.ok else "%s: %s" % (r.code, (r.message or "")[:160])))


# ---------------------------------------------------------------- the matrix

EP = arn("endpoint", MCE)
EP_MME = arn("endpoint", MME)
INVOKE = "sagemaker:InvokeEndpoint"


def runtime_checks():
    """(name, fn(cl, ck)) for every runtime check; each makes one call."""
    out = []

    def allow(who, host):
        out.append(("%s invokes %s/%s" % (who, MCE, host),
                    lambda cl, ck: ck.allowed("%s invokes %s/%s" % (who, MCE, host), cl.invoke(who, MCE, host=host),
                                              body=b"x" + host.encode())))

    def deny(who, host, explicit, endpoint=MCE, model=None):
        target = ("/" + host if host else " without TargetContainerHostname") if model is None else \
            " TargetModel=" + model
        what = "%s invokes %s%s" % (who, endpoint, target)
        out.append((what, lambda cl, ck: ck.denied(what, cl.invoke(who, endpoint, host=host, model=model), who, INVOKE,
                                                   arn("endpoint", endpoint), explicit, http=403)))

    def mme(who, model):
        what = "%s invokes %s TargetModel=%s" % (who, MME, model)
        out.append((what, lambda cl, ck: ck.not_denied(what, cl.invoke(who, MME, model=model, body=b"{}"))))

    # alice: customIps* and common* (SageMaker guide, example 1).
    allow("alice", "customIps-1")
    allow("alice", "common-2")
    deny("alice", "special-3", False)
    deny("alice", "other-4", False)
    deny("alice", "CustomIps-1", False)  # StringLike is case-sensitive (mce answers before it looks up the host)
    # bob: "*" but not special* (example 2).
    allow("bob", "customIps-1")
    allow("bob", "common-2")
    allow("bob", "other-4")
    deny("bob", "special-3", True)
    deny("bob", None, False)  # no TargetContainerHostname: the key is missing, StringLike is false
    # carol: TargetModel company_a/* and common/* of my-mme (example 3).
    mme("carol", "company_a/model.tar.gz")
    mme("carol", "common/model.tar.gz")
    deny("carol", None, False, endpoint=MME, model="company_b/model.tar.gz")
    deny("carol", None, False, endpoint=MME, model="model.tar.gz")
    deny("carol", None, False, endpoint=MME, model="Company_A/model.tar.gz")
    deny("carol", "customIps-1", False)
    deny("alice", None, False, endpoint=MME, model="company_a/model.tar.gz")
    # ops: sagemaker:*.
    allow("ops", "special-3")
    # unsigned: ListEndpoints only.
    deny("anonymous", "customIps-1", False)

    def bad_secret(cl, ck):
        ck.auth_error("alice's key with a wrong secret invokes %s/customIps-1" % MCE,
                      cl.invoke("wrong-secret", MCE, host="customIps-1"), "InvalidSignatureException", http=403,
                      prefix="The request signature we calculated does not match the signature you provided.")

    def unknown_key(cl, ck):
        ck.auth_error("an unknown access key invokes %s/customIps-1" % MCE,
                      cl.invoke("unknown-key", MCE, host="customIps-1"), "UnrecognizedClientException", http=403,
                      message="The security token included in the request is invalid.")
    out += [("bad secret", bad_secret), ("unknown key", unknown_key)]
    return out


def control_checks():
    out = []

    def lists(cl, ck, who):
        r = cl.call(who, "ListEndpoints")
        names = sorted(e.get("EndpointName") for e in r.out.get("Endpoints", [])) if r.ok else None
        ck.ok("%s ListEndpoints -> allowed, lists %s and %s" % (who, MCE, MME), r.ok and MCE in names and MME in names,
              repr(names) if r.ok else repr(r))

    out.append(("carol lists", lambda cl, ck: lists(cl, ck, "carol")))
    out.append(("anonymous lists", lambda cl, ck: lists(cl, ck, "anonymous")))

    def describe(cl, ck):
        r = cl.call("carol", "DescribeEndpoint", EndpointName=MCE)
        ck.ok("carol DescribeEndpoint %s -> allowed, InService" % MCE,
              r.ok and r.out.get("EndpointStatus") == "InService", repr(r))
    out.append(("carol describes", describe))

    def list_denied(cl, ck):
        r = cl.call("alice", "ListEndpoints")
        head = "User: %s is not authorized to perform: sagemaker:ListEndpoints" % user("alice")
        tail = "because no identity-based policy allows the sagemaker:ListEndpoints action"
        ck.ok("alice ListEndpoints -> implicit deny", r.code == DENIED and (r.message or "").startswith(head)
              and (r.message or "").endswith(tail), "%s" % r.code if r.code == DENIED else repr(r))
        if r.code == DENIED:
            ck.info("alice ListEndpoints denied with: %s" % r.message)
    out.append(("alice lists", list_denied))

    def deny(who, op, resource, **params):
        what = "%s %s" % (who, op)
        out.append((what, lambda cl, ck: ck.denied(what, cl.call(who, op, **params), who, "sagemaker:" + op, resource,
                                                   False)))

    def status(cl, ck):
        # Not a check: SageMaker's status for AccessDeniedException is
        # not documented for SageMaker (AWS's common errors list it as 403); shown because mce's
        # other control-plane errors, InvalidSignatureException included, are 400.
        if not isinstance(cl, Boto):  # the CLI shows the status only with --debug
            return
        r = cl.call("bob", "DescribeEndpoint", EndpointName=MCE)
        ck.info("control-plane %s answered with HTTP %s (InvalidSignatureException and ValidationException: 400)"
                % (r.code, r.http))
    out.append(("control status", status))

    deny("anonymous", "DescribeEndpoint", EP, EndpointName=MCE)
    deny("bob", "DescribeEndpoint", EP, EndpointName=MCE)
    deny("carol", "DeleteEndpoint", EP, EndpointName=MCE)
    deny("alice", "DeleteEndpoint", EP, EndpointName=MCE)

    def bad_secret(cl, ck):
        ck.auth_error("alice's key with a wrong secret ListEndpoints", cl.call("wrong-secret", "ListEndpoints"),
                      "InvalidSignatureException", http=400,
                      prefix="The request signature we calculated does not match the signature you provided.")

    def unknown_key(cl, ck):
        ck.auth_error("an unknown access key ListEndpoints", cl.call("unknown-key", "ListEndpoints"),
                      "UnrecognizedClientException", http=400,
                      message="The security token included in the request is invalid.")
    out += [("control bad secret", bad_secret), ("control unknown key", unknown_key)]
    return out


def lifecycle(cl, ck):
    """ops creates, serves and deletes an endpoint; carol (read-only) and bob may not."""
    name = cl.prefix
    model, config = name + "-model", name + "-config"
    probe = {"Image": "mce-example/probe:latest", "Environment": {"PROBE_TAG": "ops"}}
    create_model = dict(ModelName=model, ExecutionRoleArn=ROLE, PrimaryContainer=probe)
    create_config = dict(EndpointConfigName=config, ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": model, "InitialInstanceCount": 1, "InstanceType": "ml.c5.large"}])
    create_ep = dict(EndpointName=name, EndpointConfigName=config)

    ck.denied("carol CreateModel", cl.call("carol", "CreateModel", **create_model), "carol", "sagemaker:CreateModel",
              arn("model", model), False)
    if not ck.ok("ops CreateModel -> allowed", cl.call("ops", "CreateModel", **create_model).ok):
        return
    ck.denied("carol CreateEndpointConfig", cl.call("carol", "CreateEndpointConfig", **create_config), "carol",
              "sagemaker:CreateEndpointConfig", arn("endpoint-config", config), False)
    r = cl.call("ops", "CreateEndpointConfig", **create_config)
    ck.ok("ops CreateEndpointConfig -> allowed", r.ok, "" if r.ok else repr(r))
    ck.denied("carol CreateEndpoint", cl.call("carol", "CreateEndpoint", **create_ep), "carol",
              "sagemaker:CreateEndpoint", arn("endpoint", name), False)
    ck.denied("bob CreateEndpoint", cl.call("bob", "CreateEndpoint", **create_ep), "bob",
              "sagemaker:CreateEndpoint", arn("endpoint", name), False)
    r = cl.call("ops", "CreateEndpoint", **create_ep)
    if ck.ok("ops CreateEndpoint -> allowed", r.ok, "" if r.ok else repr(r)):
        t0 = time.monotonic()
        status = None
        while time.monotonic() - t0 < 60:
            r = cl.call("carol", "DescribeEndpoint", EndpointName=name)  # carol may watch it
            status = r.out.get("EndpointStatus") if r.ok else repr(r)
            if status not in ("Creating",):
                break
            time.sleep(0.25 if isinstance(cl, Boto) else 0.5)
        if ck.ok("carol DescribeEndpoint %s until InService" % name, status == "InService",
                 "%.1f s" % (time.monotonic() - t0) if status == "InService" else repr(status)):
            ck.allowed("ops invokes %s" % name, cl.invoke("ops", name), body=b"xops")
            ck.denied("alice invokes %s" % name, cl.invoke("alice", name, host="customIps-1"), "alice", INVOKE,
                      arn("endpoint", name), False, http=403)
        ck.denied("carol DeleteEndpoint %s" % name, cl.call("carol", "DeleteEndpoint", EndpointName=name), "carol",
                  "sagemaker:DeleteEndpoint", arn("endpoint", name), False)
        r = cl.call("ops", "DeleteEndpoint", EndpointName=name)
        ck.ok("ops DeleteEndpoint %s (from 127.0.0.1: no-deletes does not apply) -> allowed" % name, r.ok,
              "" if r.ok else repr(r))
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            r = cl.call("ops", "DescribeEndpoint", EndpointName=name)
            if not r.ok:
                break
            time.sleep(0.25 if isinstance(cl, Boto) else 0.5)
        ck.ok("%s gone after DeleteEndpoint" % name, r.code == VALIDATION, "%.1f s" % (time.monotonic() - t0)
              if r.code == VALIDATION else repr(r))
    ck.denied("carol DeleteModel", cl.call("carol", "DeleteModel", ModelName=model), "carol", "sagemaker:DeleteModel",
              arn("model", model), False)
    r = cl.call("ops", "DeleteEndpointConfig", EndpointConfigName=config)
    ck.ok("ops DeleteEndpointConfig -> allowed", r.ok, "" if r.ok else repr(r))
    r = cl.call("ops", "DeleteModel", ModelName=model)
    ck.ok("ops DeleteModel -> allowed", r.ok, "" if r.ok else repr(r))


def protected_tag(cl, ck):
    """Tag conditions: keep-protected denies deleting what is tagged protected=true
    (aws:ResourceTag/protected), so ops must remove the tag before deleting."""
    model = cl.prefix + "-protected"
    r = cl.call("ops", "CreateModel", ModelName=model, ExecutionRoleArn=ROLE,
                PrimaryContainer={"Image": "mce-example/probe:latest"}, Tags=[{"Key": "protected", "Value": "true"}])
    if not ck.ok("ops CreateModel %s tagged protected=true -> allowed" % model, r.ok, "" if r.ok else repr(r)):
        return
    ck.denied("ops DeleteModel %s (tagged protected=true)" % model, cl.call("ops", "DeleteModel", ModelName=model),
              "ops", "sagemaker:DeleteModel", arn("model", model), True)
    r = cl.call("ops", "DescribeModel", ModelName=model.upper())
    ck.ok("ops DescribeModel %s -> allowed (the Deny names deletes only)" % model.upper(), r.ok, "" if r.ok else repr(r))
    r = cl.call("ops", "DeleteTags", ResourceArn=arn("model", model), TagKeys=["protected"])
    ck.ok("ops DeleteTags protected -> allowed", r.ok, "" if r.ok else repr(r))
    r = cl.call("ops", "DeleteModel", ModelName=model)
    ck.ok("ops DeleteModel %s once untagged -> allowed" % model, r.ok, "" if r.ok else repr(r))


# ---------------------------------------------------------------- SIGHUP

class Reloads:
    """Rewrites the authz files mce reads and sends it SIGHUP.

    Every rewrite keeps the file's size and modification time (the content is
    padded with blanks), so mce's once-a-second file watch sees no change and
    only the SIGHUP reloads it."""

    def __init__(self, pid, log, authz_dir):
        self.pid, self.log, self.dir = pid, log, authz_dir
        self.orig = {}

    def _stat(self, rel):
        p = os.path.join(self.dir, rel)
        if rel not in self.orig:
            with open(p, "rb") as f:
                self.orig[rel] = (f.read(), os.stat(p))
        return p, self.orig[rel]

    def write(self, rel, content):
        p, (data, st) = self._stat(rel)
        if content is None:  # back to the original
            content = data
        else:
            content = content.rstrip(b"\n")
            if len(content) >= len(data):
                raise ValueError("%s: new content not shorter than the original (%d >= %d)"
                                 % (rel, len(content), len(data)))
            content += b" " * (len(data) - len(content) - 1) + b"\n"
        tmp = p + ".new"
        with open(tmp, "wb") as f:
            f.write(content)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp, p)

    def log_lines(self):
        with open(self.log, "rb") as f:
            return f.read().decode("utf-8", "replace").splitlines()

    def hup(self):
        """SIGHUP, then the new log lines once the reload has logged its outcome."""
        n = len(self.log_lines())
        os.kill(self.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            new = self.log_lines()[n:]
            if any("reload failed" in l or "authz policies reloaded" in l for l in new):
                return new
            time.sleep(0.05)
        return self.log_lines()[n:]


def failed_reload(ck, what, lines, name):
    errs = []
    for l in lines:
        try:
            j = json.loads(l)
        except ValueError:
            continue
        if "reload failed" in j.get("message", ""):
            errs.append(j.get("error", ""))
    ck.ok("SIGHUP with %s -> reload refused, logged naming the file" % what,
          len(errs) == 1 and name in errs[0] and not any("authz policies reloaded" in l for l in lines),
          repr(errs[0][:200]) if errs else "log: %r" % lines[-5:])


def sighup(boto, cli, ck, cli_ck, reloads):
    def still_old(when):
        ck.allowed("%s: alice invokes %s/customIps-1" % (when, MCE), boto.invoke("alice", MCE, host="customIps-1"),
                   body=b"xcustomIps-1")
        ck.denied("%s: alice invokes %s/other-4" % (when, MCE), boto.invoke("alice", MCE, host="other-4"), "alice",
                  INVOKE, EP, False)
        ck.denied("%s: bob invokes %s/special-3" % (when, MCE), boto.invoke("bob", MCE, host="special-3"), "bob",
                  INVOKE, EP, True)
        r = boto.call("carol", "ListEndpoints")
        ck.ok("%s: carol ListEndpoints -> allowed" % when, r.ok, "" if r.ok else repr(r))

    # 1. credentials.yaml that is not YAML.
    _, (creds, _) = reloads._stat("credentials.yaml")
    reloads.write("credentials.yaml", b"Credentials: [\n")
    failed_reload(ck, "a broken credentials.yaml", reloads.hup(), "credentials.yaml")
    time.sleep(1.2)  # a file-watch poll in between changes nothing either
    still_old("broken credentials.yaml")
    reloads.write("credentials.yaml", None)

    # 2. The policy alice has, widened to other*, with a misspelt condition operator.
    wide = {"Version": "2012-10-17", "Statement": [{
        "Sid": "AllowCustomIpsCommonAndOther", "Effect": "Allow", "Action": ["sagemaker:InvokeEndpoint"],
        "Resource": [EP], "Condition": {"StringLike": {
            "sagemaker:TargetContainerHostname": ["customIps*", "common*", "other*"]}}}]}
    good = json.dumps(wide, indent=1).encode()
    bad = good.replace(b'"StringLike"', b'"StringLikx"')
    reloads.write("policies/hostname-allow.json", bad)
    lines = reloads.hup()
    failed_reload(ck, "a policy with an unknown condition operator", lines, "hostname-allow.json")
    errs = [l for l in lines if "reload failed" in l]
    ck.ok("the load error names hostname-allow.json:LINE and the operator",
          bool(errs) and re.search(r"hostname-allow\.json:\d+", errs[0]) is not None and "StringLikx" in errs[0],
          errs[0][:300] if errs else "no error line")
    still_old("broken hostname-allow.json")

    # 3. The same policy without the typo: in force after SIGHUP.
    reloads.write("policies/hostname-allow.json", good)
    time.sleep(1.2)
    ck.denied("fixed hostname-allow.json, same size and mtime (the file watch sees no change), before SIGHUP: "
              "alice invokes %s/other-4" % MCE, boto.invoke("alice", MCE, host="other-4"), "alice", INVOKE, EP, False)
    lines = reloads.hup()
    ck.ok("SIGHUP with the fixed policy -> reloaded", any("authz policies reloaded" in l for l in lines) and
          not any("reload failed" in l for l in lines), repr(lines[-3:]))
    ck.allowed("after the fix: alice invokes %s/other-4" % MCE, boto.invoke("alice", MCE, host="other-4"),
               body=b"xother-4")
    ck.allowed("after the fix: alice invokes %s/common-2" % MCE, boto.invoke("alice", MCE, host="common-2"),
               body=b"xcommon-2")
    ck.denied("after the fix: alice invokes %s/special-3" % MCE, boto.invoke("alice", MCE, host="special-3"), "alice",
              INVOKE, EP, False)
    ck.denied("after the fix: bob invokes %s/special-3" % MCE, boto.invoke("bob", MCE, host="special-3"), "bob",
              INVOKE, EP, True)
    cli_ck.allowed("after the fix: alice invokes %s/other-4" % MCE, cli.invoke("alice", MCE, host="other-4"),
                   body=b"xother-4")
    reloads.write("policies/hostname-allow.json", None)


# ---------------------------------------------------------------- the OpenAI-compatible route

def sdk_token(who, expires=3600, signed_at=None):
    """The bearer token the SageMaker Python SDK's generate_token makes: botocore's SigV4QueryAuth of
    POST https://sagemaker.amazonaws.com/?Action=CallWithBearerToken, "&Version=1" appended, base64."""
    import base64
    import datetime
    from unittest import mock
    from botocore.auth import SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    key, secret = KEYS[who]
    req = AWSRequest(method="POST", url="https://sagemaker.amazonaws.com/", headers={"host": "sagemaker.amazonaws.com"},
                     params={"Action": "CallWithBearerToken"})
    auth = SigV4QueryAuth(Credentials(key, secret), "sagemaker", REGION, expires=expires)
    if signed_at is None:
        auth.add_auth(req)
    else:  # a token made earlier: botocore's clock set back
        class Then(datetime.datetime):
            @classmethod
            def utcnow(cls):
                return signed_at.replace(tzinfo=None)

            @classmethod
            def now(cls, tz=None):
                return signed_at if tz else signed_at.replace(tzinfo=None)
        with mock.patch("botocore.auth.datetime.datetime", Then):
            auth.add_auth(req)
    return "sagemaker-api-key-" + base64.b64encode((req.url.replace("https://", "") + "&Version=1").encode()).decode()


def chat(url, authorization, host, stream=False, sign=None):
    """POSTs a chat completion to my-mce's OpenAI-compatible route; returns (status, headers, body)."""
    import urllib.error
    import urllib.request
    body = json.dumps({"model": "probe", "stream": stream,
                       "messages": [{"role": "user", "content": "hello bearer world"}]}).encode()
    target = url + "/endpoints/%s/openai/v1/chat/completions" % MCE
    headers = {"Content-Type": "application/json", "X-Amzn-SageMaker-Target-Container-Hostname": host}
    if authorization:
        headers["Authorization"] = authorization
    if sign:  # a SigV4 signature instead of a token
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        areq = AWSRequest(method="POST", url=target, data=body, headers=headers)
        SigV4Auth(Credentials(*KEYS[sign]), "sagemaker", REGION).add_auth(areq)
        headers = dict(areq.headers.items())
    req = urllib.request.Request(target, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def openai_checks(url, ck):
    import datetime
    want = "customIps-1 world bearer hello"  # the probe: its tag, then the words reversed
    status, headers, body = chat(url, "Bearer " + sdk_token("ops"), "customIps-1")
    content = json.loads(body)["choices"][0]["message"]["content"] if status == 200 else body
    ck.ok("ops's SDK token: a chat completion from %s/customIps-1" % MCE, status == 200 and content == want,
          "%s %r" % (status, content))
    status, headers, body = chat(url, "Bearer " + sdk_token("ops"), "customIps-1", stream=True)
    events = body.decode().strip().split("\n\n") if status == 200 else []
    text = "".join(json.loads(e[6:])["choices"][0]["delta"].get("content", "") for e in events[:-1]) if events else ""
    ck.ok("ops's SDK token: a streamed chat completion, server-sent events then [DONE]",
          status == 200 and headers.get("Content-Type") == "text/event-stream" and events[-1:] == ["data: [DONE]"]
          and text == want, "%s %r" % (status, body[:300]))

    def refused(what, status_want, code, says, got):
        status, headers, body = got
        try:
            err = json.loads(body)["error"]
        except (ValueError, KeyError, TypeError):
            err = {}
        ck.ok(what + " -> %d %s" % (status_want, code), status == status_want and err.get("code") == code
              and says in err.get("message", "") and headers.get("X-Amzn-ErrorType") == code,
              "%s %r" % (status, body[:300]))

    refused("alice's SDK token (no sagemaker:CallWithBearerToken)", 403, DENIED,
            denied_message("alice", "sagemaker:CallWithBearerToken", EP, False),
            chat(url, "Bearer " + sdk_token("alice"), "customIps-1"))
    then = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=2)
    refused("ops's token that expired an hour ago", 401, "InvalidSignatureException", "expired",
            chat(url, "Bearer " + sdk_token("ops", 3600, then), "customIps-1"))
    refused("a token made with a wrong secret", 401, "InvalidSignatureException", "signature does not match",
            chat(url, "Bearer " + sdk_token("wrong-secret"), "customIps-1"))
    refused("a token of an unknown key", 401, "UnrecognizedClientException", "does not know",
            chat(url, "Bearer " + sdk_token("unknown-key"), "customIps-1"))
    refused("ops's SigV4 signature instead of a token", 401, "IncompleteSignatureException", "not a SigV4 signature",
            chat(url, None, "customIps-1", sign="ops"))
    refused("no token", 403, DENIED, "User: anonymous is not authorized", chat(url, None, "customIps-1"))


# ---------------------------------------------------------------- main

def run_one(fn, cl, name):
    ck = Checks(cl.name)
    try:
        fn(cl, ck)
    except Exception as e:  # a crash is a failed check, not an aborted run
        ck.ok(name, False, "raised %s: %s" % (type(e).__name__, e))
    return ck


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True, help="the authorizing mce, http://127.0.0.1:PORT")
    ap.add_argument("--pid", type=int, required=True, help="its process id (for SIGHUP)")
    ap.add_argument("--log", required=True, help="its log file (JSON lines)")
    ap.add_argument("--authz-dir", required=True, help="the folder of its credentials.yaml and policies.yaml")
    ap.add_argument("--jobs", type=int, default=4, help="aws CLI processes at a time")
    args = ap.parse_args()
    if not re.match(r"^http://127\.0\.0\.1:\d+$", args.url):
        sys.exit("--url must be http://127.0.0.1:PORT")
    print("clients: boto3 %s (botocore %s), %s" % (
        boto3.__version__, botocore.__version__,
        subprocess.run([AWS_CLI, "--version"], capture_output=True, text=True).stdout.strip()), flush=True)

    passed = failed = 0
    t0 = time.monotonic()

    def emit(ck):
        nonlocal passed, failed
        if ck.lines:
            print("\n".join(ck.lines), flush=True)
        passed, failed = passed + ck.passed, failed + ck.failed

    checks = runtime_checks() + control_checks() + [("protected tag", protected_tag), ("lifecycle", lifecycle)]
    with tempfile.TemporaryDirectory(prefix="mce-e2e-authz-") as tmp:
        boto, cli = Boto(args.url), Cli(args.url, tmp)
        # The lifecycle (the longest) first, then the single calls; boto3 in
        # two threads of its own, the CLI in --jobs processes at a time.
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as cpool, \
                concurrent.futures.ThreadPoolExecutor(max_workers=2) as bpool:
            order = checks[-1:] + checks[:-1]
            cli_f = {n: cpool.submit(run_one, fn, cli, n) for n, fn in order}
            boto_f = {n: bpool.submit(run_one, fn, boto, n) for n, fn in order}
            for n, _ in checks:
                emit(boto_f[n].result())
            print("boto3 done after %.1f s" % (time.monotonic() - t0), flush=True)
            for n, _ in checks:
                emit(cli_f[n].result())
            print("aws CLI done after %.1f s" % (time.monotonic() - t0), flush=True)

        bearer = Checks("bearer")
        try:
            openai_checks(args.url, bearer)
        except Exception as e:
            bearer.ok("the OpenAI-compatible route", False, "raised %s: %s" % (type(e).__name__, e))
        emit(bearer)

        # SIGHUP last: it changes the policies under everything else.
        ck, cli_ck = Checks("boto3"), Checks("aws-cli")
        try:
            sighup(boto, cli, ck, cli_ck, Reloads(args.pid, args.log, args.authz_dir))
        except Exception as e:
            ck.ok("SIGHUP reloads", False, "raised %s: %s" % (type(e).__name__, e))
        emit(ck)
        emit(cli_ck)
        print("SIGHUP checks done after %.1f s" % (time.monotonic() - t0), flush=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
