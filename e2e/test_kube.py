#!/usr/bin/python3
"""End-to-end check of mce's kubernetes engine with boto3 and the aws CLI.

e2e/kube.sh starts a real single-node cluster (scripts/kube/cluster.sh) and
runs this script, which starts `mce serve --engine kubernetes` inside the
cluster's network namespace (where pod IPs route) and drives it through the
SageMaker API with boto3 and the aws CLI (endpoint URL changed, nothing
else), checking what runs against the API server itself (stdlib HTTPS with
the cluster's token; no kubectl):

  - a 2-instance Direct endpoint answers from both pods (the hostnames the
    containers report are the pods the API server lists);
  - a Serial chain (aws CLI): the output of one container is the input of the
    next;
  - file:// model data from a --model-volume (a hostPath) reaches
    /opt/ml/model; file:// URLs outside the volume are refused;
  - the node's fake nvidia.com/gpu capacity of 2: a GPU endpoint is scheduled
    with its limit; a second that asks for more than is left is Failed with a
    clear FailureReason, leaving no object;
  - UpdateEndpointWeightsAndCapacities scales up (boto3) and down (aws CLI),
    pod counts checked through the API server and the answers;
  - UpdateEndpoint (aws CLI) to a new configuration under continuous boto3
    traffic: zero failed calls (the counts are printed);
  - operating endpoints (e2e/test_operations.py; mce runs with
    --time-compression 60): a variant's pods scaled 1 -> 3 -> 1 by a
    target-tracking policy under load, a canary of a failing model rolled
    back by its alarm and a linear rollout completed, no failed call to the
    old pods;
  - mce killed (SIGKILL) and stopped (SIGTERM, --on-exit keep) and started
    again adopts the running pods: the same pod UIDs before and after; with
    --on-exit remove, SIGTERM deletes them and the next start launches anew;
  - pod logs through the API server (the kubelet at the node's InternalIP);
  - a MultiModel endpoint (mce-example/modelserver and the mce agent
    sidecar, models file:// under the --model-volume): TargetModel through
    boto3 and the aws CLI answering what the generated models compute, a
    third model evicting the least recently used (the container's 507),
    the loaded models in /status.json and /metrics, SageMaker's
    ValidationError for a missing and an escaping TargetModel, DeleteEndpoint
    leaving no object;
  - inference components (e2e/test_kube_components.py, run with the first
    python3 and aws CLI that know them, --ic-python and --ic-aws): copies
    as pods with their GPUs, cores and memory, a copy that does not fit
    reported, scale to 0 giving a GPU back to another component;
  - DeleteEndpoint leaves no pod, Deployment, ReplicaSet or ConfigMap.

Output: PASS/FAIL/INFO lines, then "N passed, M failed". Exit status 1 if
any check failed. mce is stopped whatever happens; e2e/kube.sh removes the
cluster (and anything in it) after this script, even when it fails.
"""

import argparse
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request

import boto3
import botocore
import botocore.auth
import botocore.awsrequest
import botocore.credentials
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python3 -I leaves the script's folder out
import e2elib  # noqa: E402

AWS_CLI = "/usr/bin/aws"
PROBE = "mce-example/probe:latest"
MODELSERVER = "mce-example/modelserver:latest"
ROLE = "arn:aws:iam::123456789012:role/mce-e2e"
INSTANCE = "kube-e2e"

passed = 0
failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"PASS {what}" + (f": {detail}" if detail != "" else ""), flush=True)
    else:
        failed += 1
        print(f"FAIL {what}: {detail}", flush=True)
    return ok


def info(text):
    print(f"INFO {text}", flush=True)


def wait_for(what, cond, within=120.0, every=0.2):
    """cond()'s first truthy value within the time, or raises naming what."""
    deadline = time.monotonic() + within
    last = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(every)
    raise TimeoutError(f"{what}: not within {within:.0f} s (last: {last!r})")


def ready(pod):
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", []))


class MCE:
    """mce serve --engine kubernetes, run inside the cluster's network."""

    def __init__(self, a, url):
        self.url = url
        self.log = a.log
        self.argv = ["/usr/bin/nsenter", "--net=" + a.netns, "--", a.mce, "serve", "--engine", "kubernetes",
                     "--kubeconfig", a.kubeconfig, "--namespace", "default", "--fetch-image", a.fetch_image,
                     "--listen", url[len("http://"):], "--insecure", "--metrics-listen", a.operator[len("http://"):],
                     "--state-dir", a.state, "--instance", INSTANCE, "--stop-grace", "2s", "--log-format", "json",
                     "--model-volume", "weights=hostPath:" + a.models,
                     # AWS's minutes in a second: the autoscaling and rollout step's alarms and cooldowns
                     "--time-compression", "60"]
        self.p = None

    def start(self, sm):
        with open(self.log, "ab") as out:
            self.p = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

        def answers():
            if self.p.poll() is not None:
                raise RuntimeError(f"mce exited with status {self.p.returncode} (log {self.log})")
            try:
                sm.list_endpoints()
                return True
            except Exception:
                return False
        t0 = time.monotonic()
        wait_for("mce answers ListEndpoints", answers, within=60)
        return time.monotonic() - t0

    def stop(self, sig=signal.SIGTERM, within=120):
        if self.p is None or self.p.poll() is not None:
            return self.p.returncode if self.p else None
        self.p.send_signal(sig)
        try:
            return self.p.wait(within)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return "killed after %d s" % within


class Cli:
    """The aws CLI against mce (fake credentials from the environment)."""

    def __init__(self, url, tmp):
        self.url = url
        self.tmp = tmp

    def run(self, *args):
        p = subprocess.run([AWS_CLI] + list(args) + ["--endpoint-url", self.url, "--output", "json"],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise RuntimeError(f"aws {' '.join(args[:2])}: status {p.returncode}: {p.stderr.strip()}")
        return json.loads(p.stdout) if p.stdout.strip() else {}

    def invoke(self, endpoint, body, target=None, target_model=None, content_type="text/plain"):
        out = os.path.join(self.tmp, "cli-out")
        args = ["sagemaker-runtime", "invoke-endpoint", "--endpoint-name", endpoint, "--body", body,
                "--content-type", content_type, "--cli-binary-format", "raw-in-base64-out"]
        if target:
            args += ["--target-container-hostname", target]
        if target_model:
            args += ["--target-model", target_model]
        self.run(*(args + [out]))
        with open(out, "rb") as f:
            return f.read()


def probe(host, tag):
    return {"ContainerHostname": host, "Image": PROBE, "Environment": {"PROBE_TAG": tag}}


def create(sm, name, containers, mode="Direct", count=1, itype="ml.m5.large", config=None):
    """Model NAME-model, configuration CONFIG (default NAME-config) and, when
    CONFIG is not given, endpoint NAME, with boto3."""
    model = (config or name) + "-model"
    kw = {"Containers": containers, "InferenceExecutionConfig": {"Mode": mode}} if len(containers) > 1 \
        else {"PrimaryContainer": containers[0]}
    sm.create_model(ModelName=model, ExecutionRoleArn=ROLE, **kw)
    sm.create_endpoint_config(EndpointConfigName=config or name + "-config", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": model, "InitialInstanceCount": count, "InstanceType": itype}])
    if config is None:
        sm.create_endpoint(EndpointName=name, EndpointConfigName=name + "-config")


def wait_status(sm, name, want="InService", within=180):
    """Waits until the endpoint's status is WANT (or a final one); returns
    DescribeEndpoint's answer."""
    def final():
        d = sm.describe_endpoint(EndpointName=name)
        return d if d["EndpointStatus"] in (want, "Failed", "InService") else None
    d = wait_for(f"{name} {want}", final, within=within)
    if d["EndpointStatus"] != want:
        raise RuntimeError(f"{name} is {d['EndpointStatus']}, want {want}: {d.get('FailureReason')}")
    return d


def hostnames(rt, name, n, target="first"):
    """The distinct hostnames (pod names) that answer n calls of the probe's info."""
    seen = set()
    for _ in range(n):
        r = rt.invoke_endpoint(EndpointName=name, TargetContainerHostname=target, CustomAttributes="info", Body=b"x")
        seen.add(json.loads(r["Body"].read())["hostname"])
    return seen


def metric_sum(text, name, endpoint):
    """The sum of the Prometheus samples NAME{endpoint="ENDPOINT",...} in text."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and f'endpoint="{endpoint}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def mme_step(sm, rt, cli, kube, a):
    """A MultiModel endpoint: mce-example/modelserver with the mce agent
    sidecar, its models file:// under the --model-volume (a hostPath), memory
    for two of the 10 MiB models so that a third evicts the least recently
    used on the container's 507."""
    name = "mme-ep"
    start = time.monotonic()
    mf = json.load(open(os.path.join(a.mme_models, "manifest.json")))["models"]
    t0 = time.monotonic()
    create(sm, name, [{"Image": MODELSERVER, "Mode": "MultiModel", "ModelDataUrl": "file:///models/weights/mme/",
                       "Environment": {"MODELSERVER_MEMORY_BYTES": "25Mi"}}])
    wait_status(sm, name)
    info("boto3: CreateEndpoint → InService, a multi-model pod with its agent: %.1f s" % (time.monotonic() - t0))
    pods = kube.pods(name)
    names = sorted(c["name"] for p in pods for c in p["spec"]["containers"])
    check(len(pods) == 1 and names == ["mce-agent", "primary"],
          "the multi-model pod runs the container and the mce agent sidecar", names)

    def boto3_call(m):
        t0 = time.monotonic()
        r = rt.invoke_endpoint(EndpointName=name, TargetModel=m["target_model"], ContentType="application/json",
                               Body=json.dumps(m["request"]).encode())
        return json.loads(r["Body"].read()), time.monotonic() - t0

    def cli_call(m):
        t0 = time.monotonic()
        out = cli.invoke(name, json.dumps(m["request"]), target_model=m["target_model"],
                         content_type="application/json")
        return json.loads(out), time.monotonic() - t0

    # Models 0 and 1 with boto3 (loaded through the agent), 1 again with the
    # aws CLI (loaded already), 2 with the aws CLI: no memory left, the
    # container's 507 unloads model 0, the least recently used.
    for how, call, m in (("boto3", boto3_call, mf[0]), ("boto3", boto3_call, mf[1]),
                         ("aws CLI", cli_call, mf[1]), ("aws CLI", cli_call, mf[2])):
        got, took = call(m)
        check(got == m["response"], f"{how}: TargetModel {m['target_model']} answers what the model computes",
              f"{took:.2f} s" if got == m["response"] else f"{got}, want {m['response']}")
    status = json.loads(urllib.request.urlopen(a.operator + "/status.json", timeout=10).read())
    mm = [c.get("MultiModel") for e in status["Endpoints"] if e["EndpointName"] == name
          for v in e["Variants"] for cp in v["Copies"] for c in cp["Containers"]]
    loaded = sorted(mm[0]["LoadedModels"]) if mm and mm[0] else None
    check(loaded == sorted([mf[1]["target_model"], mf[2]["target_model"]]) and mm[0]["CacheModels"] == 3,
          "status.json: the two most recently used models are loaded, the first was evicted; 3 in the cache",
          f"{mm}")
    metrics = urllib.request.urlopen(a.operator + "/metrics", timeout=10).read().decode()
    ev, nl = metric_sum(metrics, "mce_model_evictions_total", name), metric_sum(metrics, "mce_loaded_models", name)
    check(ev == 1 and nl == 2, "metrics: mce_model_evictions_total 1, mce_loaded_models 2",
          f"evictions {ev}, loaded {nl}")
    # The evicted model loads again (its files are still in the agent's cache).
    got, took = boto3_call(mf[0])
    check(got == mf[0]["response"], f"boto3: the evicted {mf[0]['target_model']} loads again and answers",
          f"{took:.2f} s")

    # A model that is not under the prefix: SageMaker's ValidationError (400),
    # naming the model and no path of the node.
    try:
        rt.invoke_endpoint(EndpointName=name, TargetModel="no-such-model.tar.gz", ContentType="application/json",
                           Body=b"{}")
        check(False, "boto3: a missing TargetModel is a ValidationError", "it answered")
    except ClientError as e:
        err, st = e.response["Error"], e.response["ResponseMetadata"]["HTTPStatusCode"]
        check(err["Code"] == "ValidationError" and st == 400 and
              "Failed to download model data for TargetModel no-such-model.tar.gz" in err["Message"] and
              a.models not in err["Message"], "boto3: a missing TargetModel is a ValidationError (400)",
              f"{st} {err['Code']}: {err['Message']}")
    try:
        cli.invoke(name, "{}", target_model="no-such-model.tar.gz", content_type="application/json")
        check(False, "aws CLI: a missing TargetModel is a ValidationError", "it answered")
    except RuntimeError as e:
        check("(ValidationError)" in str(e) and "no-such-model.tar.gz" in str(e),
              "aws CLI: a missing TargetModel is a ValidationError", str(e)[-300:])
    try:
        rt.invoke_endpoint(EndpointName=name, TargetModel="../" + mf[0]["target_model"],
                           ContentType="application/json", Body=b"{}")
        check(False, "boto3: a TargetModel outside the prefix is refused", "it answered")
    except ClientError as e:
        err = e.response["Error"]
        check(err["Code"] == "ValidationError" and "must be a relative path below the ModelDataUrl prefix"
              in err["Message"], "boto3: a TargetModel outside the prefix is a ValidationError",
              f"{err['Code']}: {err['Message']}")

    sm.delete_endpoint(EndpointName=name)
    t0 = time.monotonic()
    wait_for(f"{name}'s objects gone", lambda: kube.left(name) == [], within=60)
    info("DeleteEndpoint of the multi-model endpoint: every object gone in %.1f s" % (time.monotonic() - t0))
    names = [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]]
    check(name not in names and kube.left(name) == [],
          "DeleteEndpoint of the multi-model endpoint leaves no pod, Deployment, ReplicaSet or ConfigMap",
          f"endpoints {names}")
    info("the multi-model step: %.1f s" % (time.monotonic() - start))


def uids(kube):
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.pods(live=True)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mce", required=True, help="the mce binary")
    ap.add_argument("--netns", required=True, help="the cluster's network namespace (/run/netns/NAME)")
    ap.add_argument("--addr", required=True, help="the node's address in the namespace, where mce listens")
    ap.add_argument("--server", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--fetch-image", required=True, help="mce's own image, loaded into the node")
    ap.add_argument("--models", required=True, help="host folder holding model.tar.gz (the hostPath model volume)")
    ap.add_argument("--mme-models", required=True,
                    help="the multi-model artifacts and their manifest.json, the volume's mme/ folder")
    ap.add_argument("--state", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--ic-python", default="",
                    help="a python3 whose botocore knows inference components (e2e/ic-clients.sh); empty: skipped")
    ap.add_argument("--ic-aws", default="", help="an aws CLI that knows inference components")
    a = ap.parse_args()
    # e2e/kube.sh's trap stops this script with SIGTERM: the finally below still stops mce.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    url = f"http://{a.addr}:18080"
    a.operator = f"http://{a.addr}:18081"  # --metrics-listen: /metrics and /status.json
    unsigned = botocore.config.Config(signature_version=botocore.UNSIGNED,
                                      retries={"mode": "standard", "total_max_attempts": 1})
    sm = boto3.client("sagemaker", endpoint_url=url, region_name="us-east-1", config=unsigned)
    rt = boto3.client("sagemaker-runtime", endpoint_url=url, region_name="us-east-1", config=unsigned)
    kube = e2elib.Kube(a.server, a.token_file, a.ca, INSTANCE)
    mce = MCE(a, url)
    tmp = tempfile.mkdtemp(prefix="mce-kube-e2e-")
    cli = Cli(url, tmp)
    info("boto3 %s, %s" % (boto3.__version__, subprocess.run([AWS_CLI, "--version"], capture_output=True,
                                                            text=True).stdout.strip()))

    def step(name, fn):
        try:
            fn()
        except Exception as e:  # one broken step must not hide the others' results
            check(False, name, f"{type(e).__name__}: {e}")
            traceback.print_exc(file=sys.stdout)

    try:
        info("mce up after %.1f s" % mce.start(sm))

        def direct():
            t0 = time.monotonic()
            create(sm, "direct-ep", [probe("first", "-a"), probe("second", "-b")], count=2)
            wait_status(sm, "direct-ep")
            info("boto3: CreateEndpoint → InService, 2 instances of 2 containers: %.1f s" % (time.monotonic() - t0))
            pods = {p["metadata"]["name"] for p in kube.pods("direct-ep") if ready(p)}
            got = hostnames(rt, "direct-ep", 40)
            check(len(pods) == 2 and got == pods, "boto3: a 2-instance Direct endpoint answers from both pods",
                  f"answers from {sorted(got)}, Ready pods {sorted(pods)}")
            r = rt.invoke_endpoint(EndpointName="direct-ep", TargetContainerHostname="second", Body=b"x",
                                   ContentType="text/plain")
            check(r["Body"].read() == b"x-b", "boto3: TargetContainerHostname second answers alone")
        step("direct endpoint", direct)

        def serial():
            cli.run("sagemaker", "create-model", "--model-name", "serial-model", "--execution-role-arn", ROLE,
                    "--containers", json.dumps([probe("first", "-a"), probe("second", "-b")]),
                    "--inference-execution-config", "Mode=Serial")
            cli.run("sagemaker", "create-endpoint-config", "--endpoint-config-name", "serial-config",
                    "--production-variants", json.dumps([{"VariantName": "AllTraffic", "ModelName": "serial-model",
                                                          "InitialInstanceCount": 1, "InstanceType": "ml.m5.large"}]))
            cli.run("sagemaker", "create-endpoint", "--endpoint-name", "serial-ep", "--endpoint-config-name",
                    "serial-config")
            wait_status(sm, "serial-ep")
            out = cli.invoke("serial-ep", "x")
            check(out == b"x-a-b", "aws CLI: a Serial chain passes the first container's output to the second", out)
        step("serial endpoint", serial)

        def model_volume():
            c = probe("model", "")
            c["ModelDataUrl"] = "file:///models/weights/model.tar.gz"
            create(sm, "file-ep", [c])
            wait_status(sm, "file-ep")
            r = rt.invoke_endpoint(EndpointName="file-ep", CustomAttributes="info", Body=b"x")
            files = [f["path"] for f in json.loads(r["Body"].read()).get("model_files", [])]
            check("weights.txt" in files, "boto3: file:// model data from the --model-volume is in /opt/ml/model", files)
            for bad in ("file:///etc/passwd", "file:///models/weights/../../etc/passwd", "file://model.tar.gz"):
                try:
                    sm.create_model(ModelName="bad-model", ExecutionRoleArn=ROLE,
                                    PrimaryContainer={"Image": PROBE, "ModelDataUrl": bad})
                    check(False, f"boto3: CreateModel with {bad} is refused", "it was accepted")
                except ClientError as e:
                    err = e.response["Error"]
                    check(err["Code"] == "ValidationException" and e.response["ResponseMetadata"]["HTTPStatusCode"] == 400,
                          f"boto3: CreateModel with {bad} is refused", f"{err['Code']}: {err['Message']}")
        step("model volume", model_volume)

        def additional_model_data():
            # AdditionalModelDataSources: Debian's botocore predates the member, so it is
            # added to the request body as newer SDKs serialize it.
            def with_channel(request, **_):
                body = json.loads(request.body)
                body["PrimaryContainer"]["AdditionalModelDataSources"] = [{"ChannelName": "draft_model", "S3DataSource": {
                    "S3Uri": "file:///models/weights/model.tar.gz", "S3DataType": "S3Object", "CompressionType": "Gzip"}}]
                request.data = json.dumps(body).encode()
                request.headers["Content-Length"] = str(len(request.data))
            sm.meta.events.register("before-sign.sagemaker.CreateModel", with_channel)
            try:
                create(sm, "extra-ep", [probe("model", "")])
            finally:
                sm.meta.events.unregister("before-sign.sagemaker.CreateModel", with_channel)
            wait_status(sm, "extra-ep")
            pod = kube.pods("extra-ep")[0]
            mounts = {m["mountPath"]: m.get("readOnly", False) for m in pod["spec"]["containers"][0].get("volumeMounts", [])}
            inits = {c["name"]: c["state"].get("terminated", {}).get("exitCode")
                     for c in pod["status"].get("initContainerStatuses", [])}
            check(mounts.get("/opt/ml/additional-model-data-sources/draft_model") is True and inits.get("fetch-extra-0-0") == 0,
                  "boto3: an AdditionalModelDataSources channel is fetched by its init container and mounted read-only",
                  f"mounts {mounts}, init containers {inits}")
            sm.delete_endpoint(EndpointName="extra-ep")
            wait_for("extra-ep's pods gone", lambda: not kube.pods("extra-ep"), within=120)
        step("additional model data", additional_model_data)

        def gpus():
            node = kube.get("/api/v1/nodes")["items"][0]
            info("node allocatable nvidia.com/gpu: %s" % node["status"]["allocatable"].get("nvidia.com/gpu"))
            create(sm, "gpu-a", [probe("g", "-g")], itype="ml.g5.xlarge")
            wait_status(sm, "gpu-a")
            lim = [c["resources"].get("limits", {}).get("nvidia.com/gpu") for p in kube.pods("gpu-a")
                   for c in p["spec"]["containers"]]
            check(lim == ["1"], "boto3: a GPU endpoint (ml.g5.xlarge) is scheduled with nvidia.com/gpu 1", lim)
            # Two more instances of one GPU each: one fits, the other finds none free.
            cli.run("sagemaker", "create-model", "--model-name", "gpu-b-model", "--execution-role-arn", ROLE,
                    "--primary-container", json.dumps({"Image": PROBE}))
            cli.run("sagemaker", "create-endpoint-config", "--endpoint-config-name", "gpu-b-config",
                    "--production-variants", json.dumps([{"VariantName": "AllTraffic", "ModelName": "gpu-b-model",
                                                          "InitialInstanceCount": 2, "InstanceType": "ml.g5.xlarge"}]))
            t0 = time.monotonic()
            cli.run("sagemaker", "create-endpoint", "--endpoint-name", "gpu-b", "--endpoint-config-name", "gpu-b-config")
            d = wait_for("gpu-b Failed", lambda: (lambda d: d if d["EndpointStatus"] != "Creating" else None)(
                cli.run("sagemaker", "describe-endpoint", "--endpoint-name", "gpu-b")), within=120, every=1)
            reason = d.get("FailureReason", "")
            check(d["EndpointStatus"] == "Failed" and "asks for nvidia.com/gpu: 1; no node has that many free" in reason
                  and "Insufficient nvidia.com/gpu" in reason,
                  "aws CLI: an endpoint asking for more GPUs than are left is Failed with a clear FailureReason",
                  f"{d['EndpointStatus']} after {time.monotonic() - t0:.1f} s: {reason}")
            wait_for("gpu-b's objects gone", lambda: not kube.pods("gpu-b"), within=60)
            check(True, "the refused GPU endpoint left no pod")
            cli.run("sagemaker", "delete-endpoint", "--endpoint-name", "gpu-b")
            sm.delete_endpoint(EndpointName="gpu-a")
        step("GPUs", gpus)

        def components():
            # Run with the newer clients; its checks count in this script's summary.
            global passed, failed
            if not a.ic_python or not a.ic_aws:
                info("SKIPPED e2e/test_kube_components.py: no python3 and aws CLI that know inference components")
                return
            p = subprocess.run([a.ic_python, "-B", "-I", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                       "test_kube_components.py"),
                                "--url", url, "--aws", a.ic_aws, "--server", a.server, "--token-file", a.token_file,
                                "--ca", a.ca, "--instance", INSTANCE], capture_output=True, text=True, timeout=600)
            lines = p.stdout.strip().splitlines()
            for line in lines[:-1]:
                print(line, flush=True)
            summary = lines[-1].split() if lines else []
            if len(summary) == 4 and summary[1] == "passed," and summary[3] == "failed":
                passed += int(summary[0])
                failed += int(summary[2])
            else:
                check(False, "e2e/test_kube_components.py ends with its summary", (p.stdout + p.stderr)[-2000:])
            if p.returncode != 0 and p.stderr.strip():
                info("test_kube_components.py stderr: " + p.stderr.strip()[-2000:])
        step("inference components", components)

        def scale():
            t0 = time.monotonic()
            sm.update_endpoint_weights_and_capacities(EndpointName="direct-ep", DesiredWeightsAndCapacities=[
                {"VariantName": "AllTraffic", "DesiredInstanceCount": 3}])
            wait_for("direct-ep scaled to 3", lambda: sm.describe_endpoint(EndpointName="direct-ep")[
                "ProductionVariants"][0].get("CurrentInstanceCount") == 3 and
                sm.describe_endpoint(EndpointName="direct-ep")["EndpointStatus"] == "InService")
            info("boto3: scale 2 → 3 InService in %.1f s" % (time.monotonic() - t0))
            pods = {p["metadata"]["name"] for p in kube.pods("direct-ep", live=True) if ready(p)}
            got = hostnames(rt, "direct-ep", 60)
            check(len(pods) == 3 and got == pods, "boto3: scaled up to 3 pods, all answering",
                  f"answers {sorted(got)}, Ready pods {sorted(pods)}")
            t0 = time.monotonic()
            cli.run("sagemaker", "update-endpoint-weights-and-capacities", "--endpoint-name", "direct-ep",
                    "--desired-weights-and-capacities", "VariantName=AllTraffic,DesiredInstanceCount=1")
            wait_for("direct-ep scaled to 1", lambda: len(kube.pods("direct-ep")) == 1 and
                     sm.describe_endpoint(EndpointName="direct-ep")["EndpointStatus"] == "InService", within=90)
            info("aws CLI: scale 3 → 1, pods gone in %.1f s" % (time.monotonic() - t0))
            pods = {p["metadata"]["name"] for p in kube.pods("direct-ep")}
            got = hostnames(rt, "direct-ep", 20)
            check(len(pods) == 1 and got == pods, "aws CLI: scaled down to 1 pod, the one answering",
                  f"answers {sorted(got)}, pods {sorted(pods)}")
        step("scale", scale)

        def update_under_traffic():
            create(sm, "direct-v2", [probe("first", "-c"), probe("second", "-d")], count=2, config="direct-v2-config")
            counts = {"ok": 0, "new": 0, "failed": 0}
            errors = []
            lock = threading.Lock()
            stop = threading.Event()

            def traffic():
                c = boto3.client("sagemaker-runtime", endpoint_url=url, region_name="us-east-1", config=unsigned)
                while not stop.is_set():
                    try:
                        body = c.invoke_endpoint(EndpointName="direct-ep", TargetContainerHostname="second",
                                                 ContentType="text/plain", Body=b"x")["Body"].read()
                        with lock:
                            counts["ok"] += 1
                            counts["new"] += body == b"x-d"
                    except Exception as e:
                        with lock:
                            counts["failed"] += 1
                            errors.append(repr(e))
            threads = [threading.Thread(target=traffic) for _ in range(4)]
            for t in threads:
                t.start()
            try:
                time.sleep(0.5)
                t0 = time.monotonic()
                cli.run("sagemaker", "update-endpoint", "--endpoint-name", "direct-ep", "--endpoint-config-name",
                        "direct-v2-config")
                wait_for("direct-ep updated", lambda: (lambda d: d["EndpointStatus"] == "InService" and
                                                       d["EndpointConfigName"] == "direct-v2-config")(
                    sm.describe_endpoint(EndpointName="direct-ep")), within=180)
                took = time.monotonic() - t0
                time.sleep(1)
            finally:
                stop.set()
                for t in threads:
                    t.join()
            info("UpdateEndpoint under traffic (4 boto3 clients): InService again after %.1f s; %d calls answered "
                 "(%d by the new configuration), %d failed" % (took, counts["ok"], counts["new"], counts["failed"]))
            check(counts["failed"] == 0 and counts["new"] > 0 and counts["ok"] > counts["new"],
                  "aws CLI UpdateEndpoint under boto3 traffic: zero failed calls, answers from both configurations",
                  f"{counts} {errors[:3]}")
            wait_for("the old generation's pods gone", lambda: len(kube.pods("direct-ep")) == 2, within=90)
            gens = {p["metadata"]["labels"]["mce.run/generation"] for p in kube.pods("direct-ep")}
            outs = {rt.invoke_endpoint(EndpointName="direct-ep", TargetContainerHostname="second", Body=b"x",
                                       ContentType="text/plain")["Body"].read() for _ in range(10)}
            check(len(gens) == 1 and outs == {b"x-d"}, "after the update only the new generation runs and answers",
                  f"generations {gens}, answers {outs}")
        step("update under traffic", update_under_traffic)

        def operations():
            # e2e/test_operations.py against this mce: a variant that scales 1 → 3 → 1 on a target-tracking
            # policy (pods, here) and rollouts with deployment guardrails, with Debian's boto3 and aws CLI; its
            # checks count in this script's summary.
            global passed, failed
            env = dict(os.environ, AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="kube-e2e",
                       AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
                       AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null", AWS_PAGER="")
            p = subprocess.run(["/usr/bin/python3", "-B", "-I", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                            "test_operations.py"),
                                "--url", url, "--aws", AWS_CLI, "--prefix", "kops", "--parts", "scaling,rollouts",
                                "--timeout", "120"], capture_output=True, text=True, timeout=900, env=env)
            lines = p.stdout.strip().splitlines()
            for line in lines[:-1]:
                print(line, flush=True)
            summary = lines[-1].split() if lines else []
            if len(summary) == 4 and summary[1] == "passed," and summary[3] == "failed":
                passed += int(summary[0])
                failed += int(summary[2])
            else:
                check(False, "e2e/test_operations.py ends with its summary", (p.stdout + p.stderr)[-2000:])
            if p.returncode != 0 and p.stderr.strip():
                info("test_operations.py stderr: " + p.stderr.strip()[-2000:])
            wait_for("the operations' pods gone", lambda: not kube.pods("kops-scale") and not kube.pods("kops-roll"), within=120)
        step("operations: autoscaling and rollouts", operations)

        def sessions_and_prefixes():
            # Stateful sessions on a 3-instance variant of pods: boto3 sends
            # the session header (added to the request, so Debian's older
            # boto3 can send it too) and every call lands on its session's pod.
            create(sm, "sessions-ep", [probe("model", "")], count=3)
            wait_status(sm, "sessions-ep", within=240)
            sid_in = {}

            def with_session(params, **_):
                if "sid" in sid_in:
                    params["headers"]["X-Amzn-SageMaker-Session-Id"] = sid_in["sid"]
            rt.meta.events.register("before-call.sagemaker-runtime.InvokeEndpoint", with_session)
            try:
                opened = {}
                for i in range(6):
                    sid_in["sid"] = "NEW_SESSION"
                    r = rt.invoke_endpoint(EndpointName="sessions-ep", Body=b"x", ContentType="text/plain")
                    new = r["ResponseMetadata"]["HTTPHeaders"].get("x-amzn-sagemaker-new-session-id", "")
                    sid = new.split(";")[0]
                    opened[sid] = json.loads(r["Body"].read())["instance"]
                stuck = True
                for _ in range(5):
                    for sid, inst in opened.items():
                        sid_in["sid"] = sid
                        r = rt.invoke_endpoint(EndpointName="sessions-ep", Body=b"x", ContentType="text/plain")
                        stuck = stuck and json.loads(r["Body"].read())["instance"] == inst
                check(len(opened) == 6 and stuck, "boto3: 30 calls of 6 sessions on a 3-pod variant each reach their session's pod",
                      f"sessions on {len(set(opened.values()))} pods")
                sid, _ = next(iter(opened.items()))
                sid_in["sid"] = sid
                r = rt.invoke_endpoint(EndpointName="sessions-ep", Body=b"x", ContentType="text/plain",
                                       CustomAttributes="close-session")
                closed = r["ResponseMetadata"]["HTTPHeaders"].get("x-amzn-sagemaker-closed-session-id", "")
                try:
                    rt.invoke_endpoint(EndpointName="sessions-ep", Body=b"x", ContentType="text/plain")
                    after = "accepted"
                except ClientError as e:
                    after = e.response["Error"]["Code"]
                check(closed == sid and after == "ValidationError", "boto3: a closed session's id is refused with ValidationError",
                      f"closed {closed!r}, then {after}")
            finally:
                rt.meta.events.unregister("before-call.sagemaker-runtime.InvokeEndpoint", with_session)
                sm.delete_endpoint(EndpointName="sessions-ep")  # its pods make room for the next

            # PREFIX_AWARE: calls sharing a prefix reach one pod, others spread.
            # Debian's botocore predates RoutingConfig: it is added to the
            # request body as newer SDKs serialize it.
            def prefix_config(request, **_):
                body = json.loads(request.body)
                body["ProductionVariants"][0]["RoutingConfig"] = {"RoutingStrategy": "PREFIX_AWARE",
                    "PrefixAwareRoutingConfig": {"PrefixLength": 1024, "ConcurrencyThreshold": 8}}
                request.data = json.dumps(body).encode()
                request.headers["Content-Length"] = str(len(request.data))
            sm.create_model(ModelName="prefix-model", ExecutionRoleArn=ROLE, PrimaryContainer=probe("model", ""))
            sm.meta.events.register("before-sign.sagemaker.CreateEndpointConfig", prefix_config)
            try:
                sm.create_endpoint_config(EndpointConfigName="prefix-config", ProductionVariants=[{
                    "VariantName": "AllTraffic", "ModelName": "prefix-model", "InitialInstanceCount": 3,
                    "InstanceType": "ml.m5.large"}])
            finally:
                sm.meta.events.unregister("before-sign.sagemaker.CreateEndpointConfig", prefix_config)
            sm.create_endpoint(EndpointName="prefix-ep", EndpointConfigName="prefix-config")
            wait_status(sm, "prefix-ep", within=240)
            raw = {}  # DescribeEndpoint's body as sent: Debian's botocore drops RoutingConfig when it parses

            def grab(http_response, **_):
                raw["d"] = json.loads(http_response.content)
            sm.meta.events.register("after-call.sagemaker.DescribeEndpoint", grab)
            sm.describe_endpoint(EndpointName="prefix-ep")
            sm.meta.events.unregister("after-call.sagemaker.DescribeEndpoint", grab)
            echoed = raw["d"]["ProductionVariants"][0].get("RoutingConfig", {})
            echoed = (echoed.get("RoutingStrategy"), echoed.get("PrefixAwareRoutingConfig", {}).get("PrefixLength"))

            def instance(body):
                r = rt.invoke_endpoint(EndpointName="prefix-ep", Body=body, ContentType="text/plain", CustomAttributes="info")
                return json.loads(r["Body"].read())["instance"]
            same = {instance(b"system: you are helpful. " * 50 + b"question %d" % i) for i in range(20)}
            spread = {instance(b"prefix %d " % i * 200) for i in range(30)}
            check(echoed == ("PREFIX_AWARE", 1024) and len(same) == 1 and len(spread) > 1,
                  "boto3: PREFIX_AWARE sends calls that share a prefix to one pod and spreads the others",
                  f"echoed {echoed}, shared prefix on {len(same)} pods, distinct prefixes on {len(spread)}")
            # The OpenAI-compatible route on the same pods: urllib with a token made as the
            # SageMaker SDK makes one (this mce has no credentials file: it checks none).
            req = botocore.awsrequest.AWSRequest(method="POST", url="https://sagemaker.amazonaws.com/",
                                                 headers={"host": "sagemaker.amazonaws.com"},
                                                 params={"Action": "CallWithBearerToken"})
            botocore.auth.SigV4QueryAuth(botocore.credentials.Credentials("AKIAKUBEE2E0EXAMPLE", "kube-e2e-secret"),
                                         "sagemaker", "us-east-1", expires=900).add_auth(req)
            token = "sagemaker-api-key-" + base64.b64encode((req.url[len("https://"):] + "&Version=1").encode()).decode()

            def completion(stream):
                body = json.dumps({"model": "probe", "stream": stream,
                                   "messages": [{"role": "user", "content": "from the cluster"}]}).encode()
                r = urllib.request.Request(url + "/endpoints/prefix-ep/openai/v1/chat/completions", data=body, method="POST",
                                           headers={"Content-Type": "application/json", "Authorization": "Bearer " + token})
                with urllib.request.urlopen(r, timeout=30) as resp:
                    return resp.headers.get("Content-Type"), resp.read().decode()
            ct, whole = completion(False)
            sct, events = completion(True)
            streamed = "".join(json.loads(e[6:])["choices"][0]["delta"]["content"]
                               for e in events.strip().split("\n\n")[:-1])
            check(json.loads(whole)["choices"][0]["message"]["content"] == "cluster the from" and sct == "text/event-stream"
                  and streamed == "cluster the from" and events.strip().endswith("data: [DONE]"),
                  "urllib: the OpenAI-compatible route answers a chat completion from a pod, whole and streamed",
                  f"{ct} {whole[:120]!r}; {sct} {events[-80:]!r}")
            sm.delete_endpoint(EndpointName="prefix-ep")
            # The steps after count the pods that run: these must be gone.
            wait_for("the pods of sessions-ep and prefix-ep gone",
                     lambda: not kube.pods("sessions-ep") and not kube.pods("prefix-ep"), within=120)
        step("stateful sessions and prefix-aware routing", sessions_and_prefixes)

        def logs():
            p = kube.pods("direct-ep")[0]["metadata"]["name"]
            status, body = kube.request(f"/api/v1/namespaces/default/pods/{p}/log?container=first&tailLines=5")
            check(status == 200, "pod logs through the API server (kubelet reached at the node's InternalIP)",
                  f"{status}, {len(body)} bytes")
        step("pod logs", logs)

        def restart():
            before = uids(kube)
            rc = mce.stop(signal.SIGKILL)
            info("mce killed (%s); %d pods run" % (rc, len(before)))
            t0 = time.monotonic()
            mce.start(sm)
            for ep in ("direct-ep", "serial-ep", "file-ep"):
                wait_status(sm, ep, within=120)
            info("restarted mce: every endpoint InService after %.1f s" % (time.monotonic() - t0))
            after = uids(kube)
            check(after == before and len(before) >= 4, "after SIGKILL, a restarted mce adopts the running pods",
                  f"{len(before)} pods before, {len(after)} after, same UIDs: {after == before}")
            got = hostnames(rt, "direct-ep", 20)
            pods = {p["metadata"]["name"] for p in kube.pods("direct-ep")}
            check(got == pods, "the adopted endpoint answers from its pods", f"answers {sorted(got)}, pods {sorted(pods)}")
            check(cli.invoke("serial-ep", "y") == b"y-a-b", "aws CLI: the adopted Serial chain answers")

            rc = mce.stop(signal.SIGTERM)
            kept = uids(kube)
            check(rc == 0 and kept == before, "SIGTERM (--on-exit keep): mce exits 0 and the pods keep running",
                  f"status {rc}, {len(kept)} pods, same UIDs: {kept == before}")
            mce.start(sm)
            for ep in ("direct-ep", "serial-ep", "file-ep"):
                wait_status(sm, ep, within=120)
            check(uids(kube) == before and rt.invoke_endpoint(
                EndpointName="direct-ep", TargetContainerHostname="second", ContentType="text/plain",
                Body=b"x")["Body"].read() == b"x-d", "after SIGTERM, the next mce adopts the same pods")
        step("restart and adopt", restart)

        def multi_model():
            mme_step(sm, rt, cli, kube, a)
        step("multi-model endpoint", multi_model)

        def delete():
            sm.delete_endpoint(EndpointName="direct-ep")
            cli.run("sagemaker", "delete-endpoint", "--endpoint-name", "serial-ep")
            sm.delete_endpoint(EndpointName="file-ep")
            t0 = time.monotonic()
            wait_for("no object of the instance left", lambda: kube.left() == [], within=120)
            info("DeleteEndpoint ×3: every object gone in %.1f s" % (time.monotonic() - t0))
            names = [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]]
            check(names == [], "DeleteEndpoint leaves no endpoint, pod, Deployment, ReplicaSet or ConfigMap",
                  f"endpoints {names}")
            rc = mce.stop(signal.SIGTERM)
            check(rc == 0 and kube.left() == [], "mce stops with status 0 and nothing of it is left on the cluster",
                  f"status {rc}, left {kube.left()}")
        step("delete", delete)

        def on_exit_remove():
            mce.argv.append("--on-exit=remove")
            mce.start(sm)
            create(sm, "remove-ep", [probe("first", "-a")])
            wait_status(sm, "remove-ep")
            n = len(kube.pods("remove-ep"))
            rc = mce.stop(signal.SIGTERM)
            left = kube.left()
            check(rc == 0 and n == 1 and left == [], "SIGTERM with --on-exit remove deletes every object of the endpoint",
                  f"status {rc}, {n} pod before, left {left}")
            mce.start(sm)
            wait_status(sm, "remove-ep")
            check(len(kube.pods("remove-ep", live=True)) == 1,
                  "the endpoint kept in mce's state is launched again on the next start")
            sm.delete_endpoint(EndpointName="remove-ep")
            wait_for("remove-ep's objects gone", lambda: kube.left() == [], within=60)
        step("on-exit remove", on_exit_remove)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        rc = mce.stop(signal.SIGTERM, within=60)
        if rc not in (None, 0):
            info(f"mce stopped with {rc}")
        if failed:
            info(f"mce's log: {a.log}")

    print(f"{passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
