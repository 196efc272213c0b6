#!/usr/bin/python3
"""Inference components on the Kubernetes engine, with boto3 and the aws CLI.

e2e/test_kube.py runs this script while its `mce serve --engine kubernetes`
is up on the test cluster (one node with a fake nvidia.com/gpu capacity of
2), with the first python3 and aws CLI that know inference components
(e2e/ic-clients.sh: Debian's botocore 1.29 predates them). Unmodified clients
but for the endpoint URL; what runs is read from the API server itself:

  - an endpoint configuration without models (ExecutionRoleArn) and its
    endpoint, with the aws CLI;
  - component "alpha" (boto3) and "beta" (aws CLI), 1 GPU, 0.25 cores and
    128–256 MiB a copy: each copy is a pod whose container asks for exactly
    that (nvidia.com/gpu limit 1, cpu 250m, memory request 128Mi and limit
    256Mi), and answers by InferenceComponentName through both clients;
  - a component of 3 GPUs is refused at once (ResourceLimitExceeded naming
    the GPUs) by the pre-flight, which reads the node;
  - beta scaled to 2 copies while alpha holds one of the 2 GPUs: Failed, 1 of
    2 copies, a FailureReason with the scheduler's "Insufficient
    nvidia.com/gpu", no pod left Pending, the running copy still answering;
  - alpha scaled to 0 (aws CLI): SageMaker's no-capacity error through boto3,
    its pod gone; beta scaled to 2 again: now InService on the GPU alpha gave
    back;
  - deleting the components and the endpoint leaves no pod of it.

Output: PASS/FAIL/INFO lines, then "N passed, M failed". Exit status 1 if any
check failed.
"""

import argparse
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

PROBE = "mce-example/probe:latest"
ROLE = "arn:aws:iam::123456789012:role/mce-e2e"
ENDPOINT = "kube-ic"
NO_CAPACITY = ("Inference Component has no capacity to process this request. ApplicationAutoScaling may be "
               "in-progress (if configured) or try to increase the capacity by invoking "
               "UpdateInferenceComponentRuntimeConfig API.")


def spec(tag, gpus=1):
    return {"Container": {"Image": PROBE, "Environment": {"PROBE_TAG": tag}},
            "ComputeResourceRequirements": {"NumberOfAcceleratorDevicesRequired": gpus, "NumberOfCpuCoresRequired": 0.25,
                                            "MinMemoryRequiredInMb": 128, "MaxMemoryRequiredInMb": 256}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--aws", required=True, help="an aws CLI that has sagemaker create-inference-component")
    ap.add_argument("--server", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--instance", required=True, help="mce's --instance (the pods' mce.run/instance label)")
    a = ap.parse_args()
    ck = e2elib.Checks("kube")
    kube = e2elib.Kube(a.server, a.token_file, a.ca, a.instance)
    cfg = botocore.config.Config(retries={"mode": "standard", "total_max_attempts": 1})
    sm = boto3.client("sagemaker", endpoint_url=a.url, config=cfg)
    rt = boto3.client("sagemaker-runtime", endpoint_url=a.url, config=cfg)

    def cli(*args):
        p = subprocess.run([a.aws] + list(args) + ["--endpoint-url", a.url, "--output", "json"],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise RuntimeError("aws %s: status %d: %s" % (" ".join(args[:2]), p.returncode, p.stderr.strip()))
        return json.loads(p.stdout) if p.stdout.strip() else {}

    def settled(name, within=120):
        deadline = time.monotonic() + within
        while True:
            d = sm.describe_inference_component(InferenceComponentName=name)
            if d["InferenceComponentStatus"] not in ("Creating", "Updating", "Deleting") or time.monotonic() > deadline:
                return d
            time.sleep(0.5)

    def invoke(name):
        r = rt.invoke_endpoint(EndpointName=ENDPOINT, InferenceComponentName=name, Body=b"x", ContentType="text/plain")
        return r["Body"].read()

    def pods(live=True):
        return [p for p in kube.pods(ENDPOINT, live=live)]

    def copy_pods(tag):
        """The running pods of the copies whose probe carries tag."""
        out = []
        for p in pods():
            env = {e["name"]: e.get("value") for c in p["spec"]["containers"] for e in c.get("env", [])}
            if env.get("PROBE_TAG") == tag:
                out.append(p)
        return out

    def count(d):
        rc = d.get("RuntimeConfig", {})
        return rc.get("CurrentCopyCount"), rc.get("DesiredCopyCount")

    ck.info("boto3 %s, %s" % (boto3.__version__,
                              subprocess.run([a.aws, "--version"], capture_output=True, text=True).stdout.strip()))
    try:
        # Wait for the GPUs of test_kube.py's earlier GPU endpoints to be free.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and any(
                c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
                for p in kube.pods(live=False) for c in p["spec"]["containers"]):
            time.sleep(0.5)

        cli("sagemaker", "create-endpoint-config", "--endpoint-config-name", ENDPOINT + "-config",
            "--execution-role-arn", ROLE, "--production-variants",
            json.dumps([{"VariantName": "AllTraffic", "InstanceType": "ml.g5.12xlarge", "InitialInstanceCount": 1}]))
        cli("sagemaker", "create-endpoint", "--endpoint-name", ENDPOINT, "--endpoint-config-name", ENDPOINT + "-config")
        d = sm.describe_endpoint(EndpointName=ENDPOINT)
        ck.eq("aws CLI: an endpoint without models is InService at once", d["EndpointStatus"], "InService")

        t0 = time.monotonic()
        sm.create_inference_component(InferenceComponentName="alpha", EndpointName=ENDPOINT, VariantName="AllTraffic",
                                      Specification=spec("-alpha"), RuntimeConfig={"CopyCount": 1})
        cli("sagemaker", "create-inference-component", "--inference-component-name", "beta", "--endpoint-name", ENDPOINT,
            "--variant-name", "AllTraffic", "--specification", json.dumps(spec("-beta")),
            "--runtime-config", "CopyCount=1")
        for name in ("alpha", "beta"):
            d = settled(name)
            ck.ok("%s: 1 copy of 1 GPU InService" % name, d["InferenceComponentStatus"] == "InService" and count(d) == (1, 1),
                  "%s %s %s" % (d["InferenceComponentStatus"], count(d), d.get("FailureReason", "")))
        ck.info("two components of one copy each placed and InService in %.1f s" % (time.monotonic() - t0))
        for tag in ("-alpha", "-beta"):
            ps = copy_pods(tag)
            res = [p["spec"]["containers"][0].get("resources", {}) for p in ps]
            want = {"limits": {"cpu": "250m", "memory": "256Mi", "nvidia.com/gpu": "1"},
                    "requests": {"cpu": "250m", "memory": "128Mi", "nvidia.com/gpu": "1"}}
            ck.ok("the copy of component %s is one pod asking for exactly its resources" % tag[1:],
                  len(ps) == 1 and res[0] == want, json.dumps(res))
        ck.eq("boto3: alpha answers by InferenceComponentName", invoke("alpha"), b"x-alpha")
        out = os.path.join(os.environ.get("TMPDIR", "/tmp"), "kube-ic-out")
        cli("sagemaker-runtime", "invoke-endpoint", "--endpoint-name", ENDPOINT, "--inference-component-name", "beta",
            "--body", "x", "--content-type", "text/plain", out)
        with open(out, "rb") as f:
            ck.eq("aws CLI: beta answers by --inference-component-name", f.read(), b"x-beta")

        try:
            sm.create_inference_component(InferenceComponentName="huge", EndpointName=ENDPOINT, VariantName="AllTraffic",
                                          Specification=spec("-huge", gpus=3), RuntimeConfig={"CopyCount": 1})
            ck.ok("boto3: a component of 3 GPUs on a node of 2 is refused", False, "it was accepted")
        except ClientError as e:
            err = e.response["Error"]
            ck.ok("boto3: a component of 3 GPUs on a node of 2 is refused at once, naming the GPUs",
                  err["Code"] == "ResourceLimitExceeded" and "nvidia.com/gpu: 3, a node has at most 2 allocatable" in err["Message"],
                  "%s: %s" % (err["Code"], err["Message"]))

        sm.update_inference_component_runtime_config(InferenceComponentName="beta", DesiredRuntimeConfig={"CopyCount": 2})
        d = settled("beta")
        reason = d.get("FailureReason", "")
        ck.ok("boto3: beta at 2 copies while alpha holds a GPU is Failed, 1 of 2, with the scheduler's words",
              d["InferenceComponentStatus"] == "Failed" and count(d) == (1, 2)
              and reason.startswith("1 of 2 copies of the inference component are running.")
              and "Insufficient nvidia.com/gpu" in reason, "%s %s %r" % (d["InferenceComponentStatus"], count(d), reason))
        ck.eq("the copy that did not fit left no pod behind", len(copy_pods("-beta")), 1)
        ck.eq("boto3: beta's running copy still answers", invoke("beta"), b"x-beta")

        cli("sagemaker", "update-inference-component-runtime-config", "--inference-component-name", "alpha",
            "--desired-runtime-config", "CopyCount=0")
        d = settled("alpha")
        ck.ok("aws CLI: alpha scaled to 0 copies", d["InferenceComponentStatus"] == "InService" and count(d) == (0, 0),
              "%s %s" % (d["InferenceComponentStatus"], count(d)))
        try:
            invoke("alpha")
            ck.ok("boto3: alpha without copies gets SageMaker's no-capacity error", False, "it answered")
        except ClientError as e:
            err = e.response["Error"]
            ck.ok("boto3: alpha without copies gets SageMaker's no-capacity error",
                  err["Code"] == "ValidationError" and err["Message"] == NO_CAPACITY, "%s: %s" % (err["Code"], err["Message"]))
        deadline = time.monotonic() + 60
        while copy_pods("-alpha") and time.monotonic() < deadline:
            time.sleep(0.5)
        ck.eq("alpha's pod is gone", len(copy_pods("-alpha")), 0)
        t0 = time.monotonic()
        sm.update_inference_component_runtime_config(InferenceComponentName="beta", DesiredRuntimeConfig={"CopyCount": 2})
        d = settled("beta")
        ck.ok("boto3: beta at 2 copies again takes the GPU alpha gave back", d["InferenceComponentStatus"] == "InService"
              and count(d) == (2, 2), "%s %s %s" % (d["InferenceComponentStatus"], count(d), d.get("FailureReason", "")))
        ck.info("beta 1 → 2 copies in %.1f s" % (time.monotonic() - t0))
        ck.eq("beta runs 2 pods", len(copy_pods("-beta")), 2)
        ck.eq("boto3: beta answers from its copies", {invoke("beta") for _ in range(6)}, {b"x-beta"})
        listed = sm.list_inference_components(EndpointNameEquals=ENDPOINT, SortBy="Name", SortOrder="Ascending")
        ck.eq("boto3: ListInferenceComponents lists both, by name",
              [c["InferenceComponentName"] for c in listed["InferenceComponents"]], ["alpha", "beta"])
    except Exception as e:  # the clean-up below still runs and the summary still prints
        ck.ok("the scenario ran to its end", False, "%s: %s" % (type(e).__name__, e))
    finally:
        for name in ("alpha", "beta"):
            try:
                sm.delete_inference_component(InferenceComponentName=name)
            except ClientError:
                pass
        try:
            cli("sagemaker", "delete-endpoint", "--endpoint-name", ENDPOINT)
            deadline = time.monotonic() + 90
            while kube.left(ENDPOINT) and time.monotonic() < deadline:
                time.sleep(0.5)
            ck.eq("deleting the components and the endpoint leaves nothing of it on the cluster", kube.left(ENDPOINT), [])
        except Exception as e:
            ck.ok("deleting the endpoint", False, "%s: %s" % (type(e).__name__, e))
    for line in ck.lines:
        print(line, flush=True)
    print("%d passed, %d failed" % (ck.passed, ck.failed), flush=True)
    return 1 if ck.failed else 0


if __name__ == "__main__":
    sys.exit(main())
