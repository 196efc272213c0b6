#!/usr/bin/python3
"""End-to-end checks of the identity calls SDKs make before they deploy (STS, IAM), and a replay of the
requests the SageMaker Python SDK v3 sends, with the real AWS clients.

e2e/run.sh runs it twice per pair of clients (Debian's boto3 and aws CLI; the newer boto3 and aws CLI when
present):

- --mode local against the first mce (no --credentials: mce checks nothing). STS answers the fixed local
  identity, arn:aws:sts::123456789012:assumed-role/mce-local/mce; IAM's GetRole answers its role, trusted by
  SageMaker; SimulatePrincipalPolicy allows everything, as mce then decides.
- --mode authz against the second mce (examples/authz's credentials and policies). Each access key's
  GetCallerIdentity is its principal; the notebook's session finds its role (with its /service-role/ path);
  alice, an IAM user, has no role; SimulatePrincipalPolicy on the role agrees with what real calls signed by
  the session get; what the caller may not do is AccessDenied; other IAM and STS operations say mce does not
  serve them.

In both modes the v3 replay is what sagemaker-core's role resolution (resolve_and_validate_role, role_type
"serving") and its resources flow send, in order, read from the SDK's sources (3.20) and seen on the wire:
STS GetCallerIdentity; IAM GetRole of the caller's role; IAM SimulatePrincipalPolicy of that role with
ActionNames [ecr:GetAuthorizationToken], paginated; IAM GetRole again for the trust policy (URL-encoded JSON,
which must let sagemaker.amazonaws.com assume the role); then CreateModel + DescribeModel,
CreateEndpointConfig + DescribeEndpointConfig, CreateEndpoint + DescribeEndpoint until InService,
InvokeEndpoint, DeleteEndpoint, DeleteEndpointConfig, DeleteModel. The model is mce-example/probe, which
echoes its input with a tag.

The SDK itself is not installed (no package index here); the replay sends its requests with boto3 and the
aws CLI. Output: PASS/FAIL lines, then "N passed, M failed". Standard library and boto3 only.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.parse

import boto3
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python3 -I leaves the script's folder out
import e2elib  # noqa: E402

ACCOUNT = "123456789012"
LOCAL_ARN = "arn:aws:sts::%s:assumed-role/mce-local/mce" % ACCOUNT
NOTEBOOK = ("ASIANOTEBOOK0EXAMPLE", "notebook-example-secret-key-0000000000", "notebook-example-session-token")
NOTEBOOK_ARN = "arn:aws:sts::%s:assumed-role/SageMakerExecution/notebook" % ACCOUNT
ROLE_ARN = "arn:aws:iam::%s:role/service-role/SageMakerExecution" % ACCOUNT
ALICE = ("AKIAALICE0000EXAMPLE", "alice-example-secret-key-000000000000", None)
# v3's smoke-test actions of a serving role: the actions of its policy template whose Resource is "*".
SERVING_ACTIONS = ["ecr:GetAuthorizationToken"]


class Client:
    """One client kind (boto3 or the aws CLI) with one set of keys: call(service, op, **params) -> e2elib.Res."""

    def __init__(self, kind, url, keys, aws):
        self.kind, self.url, self.keys, self.aws = kind, url, keys, aws

    def call(self, service, op, **params):
        if self.kind == "boto3":
            return self._boto3(service, op, params)
        return self._cli(service, op, params)

    def _boto3(self, service, op, params):
        kw = {}
        if self.keys:
            kw = dict(aws_access_key_id=self.keys[0], aws_secret_access_key=self.keys[1], aws_session_token=self.keys[2])
        c = boto3.client(service, endpoint_url=self.url, region_name="us-east-1",
                         config=Config(retries={"max_attempts": 1}), **kw)
        name = "".join("_" + ch.lower() if ch.isupper() else ch for ch in op).lstrip("_")
        try:
            out = getattr(c, name)(**params)
            out.pop("ResponseMetadata", None)
            if "Body" in out and hasattr(out["Body"], "read"):
                out["Body"] = out["Body"].read().decode()
            return e2elib.Res(True, out)
        except ClientError as e:
            return e2elib.Res(False, code=e.response["Error"]["Code"], message=e.response["Error"].get("Message"))

    def _cli(self, service, op, params):
        env = dict(os.environ)
        if self.keys:
            env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = self.keys[0], self.keys[1]
            env.pop("AWS_SESSION_TOKEN", None)
            if self.keys[2]:
                env["AWS_SESSION_TOKEN"] = self.keys[2]
        args = [self.aws, "--endpoint-url", self.url, "--region", "us-east-1", "--output", "json", service, e2elib.kebab(op)]
        outfile = None
        for k, v in params.items():
            if k == "Body":  # the runtime's blob: from a file, as both CLI majors read it (fileb://)
                inp = "/tmp/mce-e2e-identity-%d.in" % os.getpid()
                with open(inp, "w") as f:
                    f.write(v)
                args += ["--body", "fileb://" + inp]
                continue
            args.append("--" + e2elib.kebab(k))
            if isinstance(v, list) and all(isinstance(x, str) for x in v):
                args += v
            elif isinstance(v, (list, dict)):
                args.append(json.dumps(v))
            else:
                args.append(str(v))
        if service == "sagemaker-runtime":
            outfile = "/tmp/mce-e2e-identity-%d.out" % os.getpid()
            args.append(outfile)
        p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
        if p.returncode != 0:
            return e2elib.cli_error(p.stderr)
        out = json.loads(p.stdout) if p.stdout.strip() else {}
        if outfile:
            with open(outfile) as f:
                out["Body"] = f.read()
            os.remove(outfile)
        return e2elib.Res(True, out)


class IdentityChecks(e2elib.Checks):
    pass


def role_of_caller(chk, c):
    """What the SDKs' get_execution_role() does: the caller's ARN; for an assumed-role session the role's name,
    then GetRole for its path-qualified ARN. None for a caller that is no role."""
    r = c.call("sts", "GetCallerIdentity")
    if not chk.success("GetCallerIdentity", r):
        return None, None
    arn = r.out.get("Arn", "")
    if ":assumed-role/" not in arn:
        return arn, None
    name = arn.split(":assumed-role/")[1].split("/")[0]
    g = c.call("iam", "GetRole", RoleName=name)
    if not chk.success("GetRole of the caller's role " + name, g):
        return arn, None
    return arn, g.out["Role"]["Arn"]


def replay_v3(chk, c, prefix, want_role):
    """sagemaker-core's resolve_and_validate_role(None, "serving") then its Model/EndpointConfig/Endpoint flow."""
    caller, role = role_of_caller(chk, c)
    chk.eq("v3: the role resolved from the caller identity", role, want_role)
    if not role:
        return
    # SimulatePrincipalPolicy through boto3's paginator (the CLI pages itself).
    decisions = []
    if c.kind == "boto3":
        kw = dict(aws_access_key_id=c.keys[0], aws_secret_access_key=c.keys[1], aws_session_token=c.keys[2]) if c.keys else {}
        iam = boto3.client("iam", endpoint_url=c.url, region_name="us-east-1", **kw)
        for page in iam.get_paginator("simulate_principal_policy").paginate(PolicySourceArn=role, ActionNames=SERVING_ACTIONS):
            decisions += [(e["EvalActionName"], e["EvalDecision"]) for e in page["EvaluationResults"]]
    else:
        r = c.call("iam", "SimulatePrincipalPolicy", PolicySourceArn=role, ActionNames=SERVING_ACTIONS)
        if chk.success("v3: SimulatePrincipalPolicy", r):
            decisions = [(e["EvalActionName"], e["EvalDecision"]) for e in r.out["EvaluationResults"]]
    chk.eq("v3: the serving role's smoke-test actions are allowed", decisions, [(a, "allowed") for a in SERVING_ACTIONS])
    g = c.call("iam", "GetRole", RoleName=role.split(":role/")[1].split("/")[-1])
    if chk.success("v3: GetRole for the trust policy", g):
        doc = g.out["Role"]["AssumeRolePolicyDocument"]
        if isinstance(doc, str):  # boto3 decodes it; the CLI prints what IAM sent
            doc = json.loads(urllib.parse.unquote(doc))
        services = [s.get("Principal", {}).get("Service") for s in doc.get("Statement", []) if s.get("Effect") == "Allow"]
        chk.ok("v3: the trust policy lets sagemaker.amazonaws.com assume the role", "sagemaker.amazonaws.com" in services, repr(services))

    model, config, endpoint = prefix + "-model", prefix + "-config", prefix + "-endpoint"
    r = c.call("sagemaker", "CreateModel", ModelName=model, ExecutionRoleArn=role,
               PrimaryContainer={"Image": "mce-example/probe:latest", "Environment": {"PROBE_TAG": " v3"}})
    chk.success("v3: CreateModel", r)
    r = c.call("sagemaker", "DescribeModel", ModelName=model)
    chk.ok("v3: DescribeModel shows the role", r.ok and r.out.get("ExecutionRoleArn") == role, repr(r))
    r = c.call("sagemaker", "CreateEndpointConfig", EndpointConfigName=config, ProductionVariants=[
        {"VariantName": "AllTraffic", "ModelName": model, "InitialInstanceCount": 1, "InstanceType": "ml.m5.large"}])
    chk.success("v3: CreateEndpointConfig", r)
    chk.success("v3: DescribeEndpointConfig", c.call("sagemaker", "DescribeEndpointConfig", EndpointConfigName=config))
    chk.success("v3: CreateEndpoint", c.call("sagemaker", "CreateEndpoint", EndpointName=endpoint, EndpointConfigName=config))
    status, deadline = None, time.time() + 60
    while time.time() < deadline:
        r = c.call("sagemaker", "DescribeEndpoint", EndpointName=endpoint)
        status = r.out.get("EndpointStatus") if r.ok else r.code
        if status in ("InService", "Failed") or not r.ok:
            break
        time.sleep(0.5)
    chk.eq("v3: the endpoint comes InService", status, "InService")
    r = c.call("sagemaker-runtime", "InvokeEndpoint", EndpointName=endpoint, Body="hello", ContentType="text/plain")
    chk.ok("v3: InvokeEndpoint answers the probe's echo", r.ok and r.out.get("Body") == "hello v3", repr(r))
    for op, kw in (("DeleteEndpoint", {"EndpointName": endpoint}), ("DeleteEndpointConfig", {"EndpointConfigName": config}),
                   ("DeleteModel", {"ModelName": model})):
        chk.success("v3: " + op, c.call("sagemaker", op, **kw))


def local(chk, c, prefix):
    r = c.call("sts", "GetCallerIdentity")
    chk.ok("GetCallerIdentity is the local identity", r.ok and r.out.get("Arn") == LOCAL_ARN and r.out.get("Account") == ACCOUNT, repr(r))
    r = c.call("iam", "GetRole", RoleName="mce-local")
    chk.ok("GetRole mce-local", r.ok and r.out["Role"]["Arn"] == "arn:aws:iam::%s:role/mce-local" % ACCOUNT, repr(r))
    r = c.call("iam", "SimulatePrincipalPolicy", PolicySourceArn="arn:aws:iam::%s:role/mce-local" % ACCOUNT,
               ActionNames=["sagemaker:DeleteEndpoint", "s3:GetObject"])
    chk.ok("SimulatePrincipalPolicy allows everything (nothing is checked)",
           r.ok and [e["EvalDecision"] for e in r.out["EvaluationResults"]] == ["allowed", "allowed"], repr(r))
    replay_v3(chk, c, prefix, "arn:aws:iam::%s:role/mce-local" % ACCOUNT)


def authz(chk, url, kind, aws, prefix):
    notebook, alice = Client(kind, url, NOTEBOOK, aws), Client(kind, url, ALICE, aws)
    r = notebook.call("sts", "GetCallerIdentity")
    chk.ok("the notebook's GetCallerIdentity is its session", r.ok and r.out.get("Arn") == NOTEBOOK_ARN
           and r.out.get("UserId", "").startswith("AROA") and r.out["UserId"].endswith(":notebook"), repr(r))
    arn, role = role_of_caller(chk, alice)
    chk.ok("alice is an IAM user: no role (get_execution_role refuses)", arn == "arn:aws:iam::%s:user/alice" % ACCOUNT and role is None,
           "%r %r" % (arn, role))
    r = alice.call("iam", "GetRole", RoleName="SageMakerExecution")
    chk.eq("alice may not read the role", r.code, "AccessDenied")
    # IAM authorizes before it says whether a role exists: the notebook may read its own role only.
    r = notebook.call("iam", "GetRole", RoleName="NoSuchRole")
    chk.eq("a role no file names, asked by a caller who may not read it", r.code, "AccessDenied")
    r = notebook.call("iam", "CreateRole", RoleName="x", AssumeRolePolicyDocument="{}")
    chk.ok("CreateRole is not served", r.code == "InvalidAction" and "mce does not serve" in (r.message or ""), repr(r))
    r = notebook.call("sts", "AssumeRole", RoleArn=ROLE_ARN, RoleSessionName="session")
    chk.ok("AssumeRole is not served", r.code == "InvalidAction" and "mce does not serve" in (r.message or ""), repr(r))
    if kind == "boto3":
        c = boto3.client("sts", endpoint_url=url, region_name="us-east-1", config=Config(signature_version=UNSIGNED))
        try:
            c.get_caller_identity()
            chk.ok("an unsigned GetCallerIdentity is refused", False)
        except ClientError as e:
            chk.eq("an unsigned GetCallerIdentity is refused", e.response["Error"]["Code"], "MissingAuthenticationToken")
    # SimulatePrincipalPolicy agrees with real calls signed by the session: DescribeEndpoint is allowed (not
    # found), DeleteModel of a model tagged protected=true is denied by keep-protected, from loopback.
    r = notebook.call("iam", "SimulatePrincipalPolicy", PolicySourceArn=ROLE_ARN,
                      ActionNames=["sagemaker:DescribeEndpoint", "s3:GetObject"],
                      ContextEntries=[{"ContextKeyName": "aws:SourceIp", "ContextKeyValues": ["127.0.0.1"], "ContextKeyType": "ip"}])
    got = [e["EvalDecision"] for e in r.out.get("EvaluationResults", [])] if r.ok else r
    chk.eq("simulated on the role: DescribeEndpoint allowed, s3:GetObject not", got, ["allowed", "implicitDeny"])
    d = notebook.call("sagemaker", "DescribeEndpoint", EndpointName=prefix + "-nothere")
    chk.ok("the session's real DescribeEndpoint is allowed (not found)", d.code not in (None, "AccessDeniedException"), repr(d))
    r = notebook.call("iam", "SimulatePrincipalPolicy", PolicySourceArn=ROLE_ARN, ActionNames=["sagemaker:DeleteModel"],
                      ResourceArns=["arn:aws:sagemaker:us-east-1:%s:model/%s-protected" % (ACCOUNT, prefix)],
                      ContextEntries=[{"ContextKeyName": "aws:ResourceTag/protected", "ContextKeyValues": ["true"], "ContextKeyType": "string"},
                                      {"ContextKeyName": "aws:SourceIp", "ContextKeyValues": ["127.0.0.1"], "ContextKeyType": "ip"}])
    res = r.out.get("EvaluationResults", [{}])[0] if r.ok else {}
    matched = [m["SourcePolicyId"] for m in res.get("MatchedStatements", [])]
    chk.ok("simulated DeleteModel of a protected model from loopback: explicitDeny by keep-protected (not no-deletes)",
           res.get("EvalDecision") == "explicitDeny" and "keep-protected:NoDeletingProtected" in matched
           and "no-deletes:NoDeletesFromClients" not in matched, repr(r))
    m = prefix + "-protected"
    notebook.call("sagemaker", "CreateModel", ModelName=m, ExecutionRoleArn=ROLE_ARN,
                  PrimaryContainer={"Image": "mce-example/probe:latest"}, Tags=[{"Key": "protected", "Value": "true"}])
    r = notebook.call("sagemaker", "DeleteModel", ModelName=m)
    chk.eq("the session's real DeleteModel of it is denied", r.code, "AccessDeniedException")
    notebook.call("sagemaker", "DeleteTags", ResourceArn="arn:aws:sagemaker:us-east-1:%s:model/%s" % (ACCOUNT, m), TagKeys=["protected"])
    notebook.call("sagemaker", "DeleteModel", ModelName=m)
    replay_v3(chk, notebook, prefix, ROLE_ARN)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--mode", choices=["local", "authz"], required=True)
    ap.add_argument("--aws", default="/usr/bin/aws")
    ap.add_argument("--prefix", default="idv3")
    a = ap.parse_args()
    all_checks = []
    for kind in ("boto3", "cli"):
        chk = IdentityChecks(kind)
        prefix = "%s-%s" % (a.prefix, kind)
        if a.mode == "local":
            local(chk, Client(kind, a.url, None, a.aws), prefix)
        else:
            authz(chk, a.url, kind, a.aws, prefix)
        all_checks.append(chk)
    passed = failed = 0
    for chk in all_checks:
        for line in chk.lines:
            print(line)
        passed += chk.passed
        failed += chk.failed
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
