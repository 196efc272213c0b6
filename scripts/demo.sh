#!/usr/bin/env bash
# make demo: serve the ab-test and preprocess-inference examples on a real
# Docker engine, invoke each container and the chain through the AWS SDK for
# Go (mce invoke), print what came back, shut down and check nothing is left.
set -euo pipefail
cd "$(dirname "$0")/.."

port="${MCE_DEMO_PORT:-18080}"
url="http://127.0.0.1:${port}"
instance="demo"
state="$(mktemp -d)"
log="build/demo.log"
mkdir -p build

bin/mce serve --listen "127.0.0.1:${port}" --instance "$instance" --state-dir "$state" --log-format json \
  -f examples/ab-test/endpoint.yaml -f examples/preprocess-inference/endpoint.yaml >"$log" 2>&1 &
pid=$!
cleanup() {
  if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" || true; fi
  rm -rf "$state"
}
trap cleanup EXIT

printf 'Starting mce on %s with two endpoints (log: %s) ...\n' "$url" "$log"
for _ in $(seq 1 120); do
  if ! kill -0 "$pid" 2>/dev/null; then echo "mce exited early:"; tail -30 "$log"; exit 1; fi
  status="$(curl -fsS "$url/mce/endpoints" 2>/dev/null || true)"
  if [ "$(grep -o '"InService"' <<<"$status" | wc -l)" -eq 2 ]; then break; fi
  sleep 0.5
done
grep -q '"InService".*"InService"' <<<"$status" || { echo "endpoints not InService: $status"; tail -30 "$log"; exit 1; }
echo "Endpoints: $status"
echo

export MCE_ENDPOINT_URL="$url"
show() { # title, then the mce invoke arguments
  local title="$1"; shift
  printf '== %s\n$ mce invoke %s\n' "$title" "$*"
  bin/mce invoke -v "$@" 2>&1 | sed 's/^/  /'
  echo
}
show "A/B test, model A (English)" ab-test --target-container english --content-type text/plain "What a wonderful, helpful service. I love it!"
show "A/B test, model B (German)"  ab-test --target-container german  --content-type text/plain "Das Essen war leider kalt und der Service schlecht."
show "A/B test, negation"          ab-test --target-container english --content-type application/json '{"text": "This is not good at all"}'
show "Chain step 1 alone is not addressable (Serial endpoint): expect a ValidationError" preprocess-inference --target-container featurizer --content-type text/plain "x" || true
show "Preprocess -> inference chain (JSON out)" preprocess-inference --content-type text/plain --accept application/json \
  "I was charged twice for my subscription this month"
show "Preprocess -> inference chain (CSV out)"  preprocess-inference --content-type text/plain --accept text/csv \
  "$(printf 'The app crashes when I open settings\nMy parcel has not arrived yet')"

echo "== Metrics (excerpt)"
curl -fsS "$url/metrics" | grep -E '^(Invocations|ContainerLatency_count)\{' | sed 's/^/  /'
echo

echo "Stopping mce (SIGTERM) ..."
kill -TERM "$pid"
wait "$pid" || { echo "mce exited with an error"; tail -30 "$log"; exit 1; }
left="$(docker ps -aq --filter "label=io.mce.instance=${instance}" | wc -l)"
nets="$(docker network ls -q --filter "label=io.mce.instance=${instance}" | wc -l)"
echo "Left behind: ${left} containers, ${nets} networks"
[ "$left" -eq 0 ] && [ "$nets" -eq 0 ]
echo "Demo done."
