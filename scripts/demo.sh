#!/usr/bin/env bash
# make demo: serve the real-framework examples on the Docker engine — examples/preprocess-inference (a scikit-learn
# preprocessing step feeding a PyTorch network) and examples/ab-test (two versions of a scikit-learn model, split
# by variant weights and side by side in a Direct endpoint) — invoke them through the AWS SDK for Go (mce invoke),
# print what came back and how the versions compare in mce's metrics, shut down and check nothing is left.
# Needs the framework images (scripts/framework-images.sh) and the trained models (scripts/framework-models.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

port="${MCE_DEMO_PORT:-18080}"
metrics_port="${MCE_DEMO_METRICS_PORT:-19464}"
url="http://127.0.0.1:${port}"
metrics="http://127.0.0.1:${metrics_port}/metrics"
instance="demo"
state="$(mktemp -d)"
log="build/demo.log"
models=build/models/framework
mkdir -p build

bin/mce serve --listen "127.0.0.1:${port}" --metrics-listen "127.0.0.1:${metrics_port}" --instance "$instance" \
  --state-dir "$state" --log-format json \
  -f examples/preprocess-inference/endpoint.yaml -f examples/ab-test/endpoint.yaml >"$log" 2>&1 &
pid=$!
cleanup() {
  if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" || true; fi
  rm -rf "$state"
}
trap cleanup EXIT

printf 'Starting mce on %s with three endpoints on scikit-learn and PyTorch containers (log: %s) ...\n' "$url" "$log"
for _ in $(seq 1 360); do
  if ! kill -0 "$pid" 2>/dev/null; then echo "mce exited early:"; tail -30 "$log"; exit 1; fi
  status="$(curl -fsS "$url/mce/endpoints" 2>/dev/null || true)"
  if [ "$(grep -o '"InService"' <<<"$status" | wc -l)" -eq 3 ]; then break; fi
  sleep 0.5
done
[ "$(grep -o '"InService"' <<<"$status" | wc -l)" -eq 3 ] || { echo "endpoints not InService: $status"; tail -30 "$log"; exit 1; }
echo "Endpoints: $status"
echo

export MCE_ENDPOINT_URL="$url"
show() { # title, then the mce invoke arguments
  local title="$1"; shift
  printf '== %s\n$ mce invoke %s\n' "$title" "$*"
  bin/mce invoke -v "$@" 2>&1 | sed 's/^/  /'
  echo
}
digits="$models/digits-sample.csv"   # 5 test images, 64 pixel values a line (scripts/framework-models.sh)
cases="$models/cancer-sample.csv"    # 5 test cases, 30 features a line
head -1 "$digits" >build/demo-digit.csv
head -1 "$cases" >build/demo-case.csv
show "Chain: 5 digit images (CSV) -> scikit-learn StandardScaler+PCA -> CSV -> PyTorch MLP (expect 2 0 4 9 4)" \
  preprocess-inference --content-type text/csv --accept text/csv @"$digits"
show "Chain, JSON out (digits and probabilities)" \
  preprocess-inference --content-type text/csv --accept application/json @build/demo-digit.csv
show "Chain step 1 alone is not addressable (Serial endpoint): expect a ValidationError" \
  preprocess-inference --target-container preprocess --content-type text/csv @build/demo-digit.csv || true
show "A/B, direct: version 1 (logistic regression), 5 cases (truth: M M M B M)" \
  ab-test-direct --target-container v1 --content-type text/csv --accept text/csv @"$cases"
show "A/B, direct: version 2 (random forest), the same cases" \
  ab-test-direct --target-container v2 --content-type text/csv --accept text/csv @"$cases"
show "A/B, by variant: TargetVariant v2" ab-test --target-variant v2 --content-type text/csv @build/demo-case.csv

printf '== A/B, by weight: 40 calls to ab-test (70 %% v1, 30 %% v2)\n'
for _ in $(seq 1 40); do
  bin/mce invoke -v ab-test --content-type text/csv @build/demo-case.csv 2>&1 | grep -o 'InvokedProductionVariant: v[12]' || true
done | sort | uniq -c | sed 's/^/  /'
echo

echo "== Metrics ($metrics, docs/metrics.md): status, calls, and latency in seconds per variant and per container"
scrape="$(curl -fsS "$metrics")"
grep -E '^mce_endpoint_status\{.* 1$' <<<"$scrape" | sed 's/^/  /'
grep -E '^mce_(invocations_total|(model|overhead|container)_latency_seconds_(sum|count))\{' <<<"$scrape" |
  grep -E 'ab-test|preprocess-inference' | sed 's/^/  /'
echo

echo "Stopping mce (SIGTERM) ..."
kill -TERM "$pid"
wait "$pid" || { echo "mce exited with an error"; tail -30 "$log"; exit 1; }
left="$(docker ps -aq --filter "label=io.mce.instance=${instance}" | wc -l)"
nets="$(docker network ls -q --filter "label=io.mce.instance=${instance}" | wc -l)"
echo "Left behind: ${left} containers, ${nets} networks"
[ "$left" -eq 0 ] && [ "$nets" -eq 0 ]
echo "Demo done."
