#!/usr/bin/env bash
# Kubernetes end-to-end test with the real AWS clients (make kube, part of
# make test): starts one real single-node cluster (scripts/kube/cluster.sh,
# its fake nvidia.com/gpu capacity 2), loads the probe, modelserver and mce's
# own images into its containerd, and runs e2e/test_kube.py, which starts
# `mce serve --engine kubernetes` inside the cluster's network namespace and
# drives it with boto3 and the aws CLI (Debian's, fake credentials, nothing
# from this machine's AWS configuration). Whatever happens, the trap takes the
# cluster down (every process, mount, namespace and veth; mce with it, as it
# runs in the cluster's namespace) and removes its folder.
#
# Inference components on the cluster (e2e/test_kube_components.py) run with
# the first python3 and aws CLI that know them (e2e/ic-clients.sh); without
# them that part is skipped, and with CI=true the run fails.
#
# Environment: MCE_KUBE_MCE_IMAGE (mce's image for the fetch init containers,
# default mce-example/mce:latest, built by scripts/images.sh mce). Builds
# nothing: it checks the prerequisites and names the make target or script
# that makes each (it only generates its test data, among them three small
# multi-model artifacts with scripts/mme-models.sh, about a second). Its last
# line is "N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "kube e2e: $*" >&2; exit 1; }

mce_image=${MCE_KUBE_MCE_IMAGE:-mce-example/mce:latest}
[ "$(id -u)" = 0 ] || fail "the test cluster needs root (network and mount namespaces)"
[ -x bin/mce ] || fail "bin/mce is missing: run 'make build'"
bin=$(scripts/kube/build.sh check) || fail "the Kubernetes binaries are not built: run scripts/kube/build.sh (once per machine)"
images=(mce-example/probe:latest mce-example/modelserver:latest "$mce_image")
for i in "${images[@]}"; do
  docker image inspect "$i" >/dev/null 2>&1 || fail "image $i is missing: run 'make images' and 'scripts/images.sh mce'"
done
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import boto3' 2>/dev/null || fail "/usr/bin/python3 with boto3 is missing: run 'make deps'"
[ -x /usr/bin/aws ] || fail "/usr/bin/aws (awscli) is missing: run 'make deps'"
command -v go >/dev/null || fail "go is missing (scripts/mme-models.sh generates the multi-model artifacts with it)"
# The clients of e2e/test_kube_components.py (inference components): ic_python, ic_aws, ic_missing.
# shellcheck source=e2e/ic-clients.sh
. e2e/ic-clients.sh
if [ -n "$ic_missing" ] && [ "${CI:-}" = true ]; then
  fail "CI=true, but e2e/test_kube_components.py cannot run: ${ic_missing} (looked on PATH, then in /usr/bin)"
fi

mkdir -p build
log=build/e2e-kube.log
: >"$log"
# Short: containerd's socket paths under it must fit in 108 bytes.
dir=$(mktemp -d /tmp/mce-kube-XXXXXX)
work=$(mktemp -d)
started=$(date +%s)
py=""
cleanup() {
  local rc=$?
  # The test script first (it stops mce); mce and the pods go with the cluster in any case.
  if [ -n "$py" ] && kill -0 "$py" 2>/dev/null; then
    kill -TERM "$py" 2>/dev/null || true
    wait "$py" 2>/dev/null || true
  fi
  if scripts/kube/cluster.sh down "$dir"; then
    rm -rf "$dir"
  else
    echo "kube e2e: cluster.sh down failed; run: scripts/kube/cluster.sh down $dir" >&2
    rc=1
  fi
  rm -rf "$work"
  echo "kube e2e: cluster removed; $(($(date +%s) - started)) s in all"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The model data of the --model-volume check: a hostPath on the node.
mkdir -p "$work/models" "$work/state"
echo weights >"$work/weights.txt"
tar -czf "$work/models/model.tar.gz" -C "$work" weights.txt
# The multi-model endpoint's prefix: three of the generator's 10 MiB models
# and manifest.json (each model's request and exact expected answer).
scripts/mme-models.sh "$work/models/mme" 3 >/dev/null

t0=$(date +%s.%N)
MCE_KUBE_BIN="$bin" scripts/kube/cluster.sh up "$dir"
t1=$(date +%s.%N)
# KUBECONFIG, MCE_KUBE_SERVER, MCE_KUBE_TOKEN_FILE, MCE_KUBE_CA, MCE_KUBE_ADDR, MCE_KUBE_NETNS_PATH, ...
eval "$(scripts/kube/cluster.sh env "$dir" | sed 's/^/export /')"
for i in "${images[@]}"; do
  docker save "$i" | nsenter --target "$MCE_KUBE_HOLDER_PID" --mount --net -- \
    ctr -a "$MCE_KUBE_CONTAINERD_SOCK" -n k8s.io images import - >/dev/null
done
t2=$(date +%s.%N)
python3 -c 'import sys; a, b, c = map(float, sys.argv[1:]); print("kube e2e: cluster up in %.1f s, images loaded in %.1f s" % (b - a, c - b))' "$t0" "$t1" "$t2"

set +e
env -i PATH=/usr/bin:/bin HOME="$work" TMPDIR="$work" LANG=C.UTF-8 \
  AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY \
  AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true \
  AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_PAGER= \
  /usr/bin/python3 -B -I e2e/test_kube.py --mce "$PWD/bin/mce" --netns "$MCE_KUBE_NETNS_PATH" \
  --addr "$MCE_KUBE_ADDR" --server "$MCE_KUBE_SERVER" --token-file "$MCE_KUBE_TOKEN_FILE" --ca "$MCE_KUBE_CA" \
  --kubeconfig "$KUBECONFIG" --fetch-image "$mce_image" --models "$work/models" --mme-models "$work/models/mme" --state "$work/state" \
  --log "$PWD/$log" --ic-python "$ic_python" --ic-aws "$ic_aws" &
# In the background, so that a signal to this script runs the trap at once.
py=$!
wait "$py"
rc=$?
py=""
set -e
if [ "$rc" -ne 0 ]; then
  echo "kube e2e: FAILED; the end of mce's log ($log):" >&2
  tail -40 "$log" >&2
fi
exit "$rc"
