#!/usr/bin/env bash
# Latency of the real-framework examples through mce (issue 10's figures):
#   chain  examples/preprocess-inference: client round trip, ModelLatency vs OverheadLatency, each hop's
#          ContainerLatency, p50/p99, for one image per call (scikit-learn -> PyTorch)
#   mme    examples/mme: all 200 PyTorch models called once (cold: download, extract, load, evicting as the
#          budget requires), 200 calls of loaded models (warm), 50 evicted models again (reload); loads,
#          evictions, cache hits, p50/p99 of each
#
# Usage: scripts/framework-bench.sh [chain] [mme]   (default: both)   BENCH_CALLS: chain calls (default 500)
# Builds what is missing (bin/mce, framework images, models; all cached), starts `bin/mce serve` on loopback
# ports of its own, prints markdown tables, appends them to build/framework-bench.md, and removes everything it
# started on exit. One client, sequential calls: these are latencies, not throughput.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(chain mme)
port="${BENCH_PORT:-18380}"
mport="${BENCH_METRICS_PORT:-18381}"
url="http://127.0.0.1:$port"
out=build/framework-bench.md
mkdir -p build
[ -x bin/mce ] || go build -o bin/mce ./cmd/mce
scripts/framework-images.sh >/dev/null
pid=""
state=""
stop() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" || true; fi
	[ -z "$state" ] || rm -rf "$state"
	pid=""
}
trap stop EXIT

serve() { # endpoint file, number of endpoints
	state="$(mktemp -d)"
	bin/mce serve --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$mport" --instance "fwbench-$$" \
		--state-dir "$state" --log-format json -f "$1" >build/framework-bench.log 2>&1 &
	pid=$!
	for _ in $(seq 1 360); do
		kill -0 "$pid" 2>/dev/null || { tail -20 build/framework-bench.log; exit 1; }
		[ "$(curl -fsS "$url/mce/endpoints" 2>/dev/null | grep -o '"InService"' | wc -l)" -eq "$2" ] && return
		sleep 0.5
	done
	echo "framework-bench: endpoints not InService" >&2; tail -20 build/framework-bench.log; exit 1
}

{ echo; echo "## $(date -u +%FT%TZ) $(nproc) CPUs, $(git rev-parse --short HEAD)"; } >>"$out"
for k in "${kinds[@]}"; do
	case "$k" in
	chain)
		scripts/framework-models.sh preprocess-inference >/dev/null
		serve examples/preprocess-inference/endpoint.yaml 1
		python3 bench/framework_bench.py chain "$url" "http://127.0.0.1:$mport/metrics" \
			build/models/framework/digits-expected.json "${BENCH_CALLS:-500}" | tee -a "$out"
		stop ;;
	mme)
		scripts/framework-models.sh mme >/dev/null
		serve examples/mme/endpoint.yaml 1
		python3 bench/framework_bench.py mme "$url" "http://127.0.0.1:$mport/metrics" \
			build/models/mme-torch/manifest.json | tee -a "$out"
		stop ;;
	*) echo "framework-bench: unknown '$k' (chain, mme)" >&2; exit 2 ;;
	esac
done
