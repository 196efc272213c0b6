#!/usr/bin/env bash
# Generate the multi-model endpoint artifacts for examples/go-mme (what a MultiModel ModelDataUrl prefix holds).
#
# Usage: scripts/mme-models.sh [OUTDIR] [N]      (defaults: build/mme-models 200)
#
# Writes OUTDIR/model-000.tar.gz … model-<N-1>.tar.gz: each a different seeded dense network for
# mce-example/modelserver (config.pbtxt + model.json at the archive root, so it extracts to
# /opt/ml/models/<hash>/model/), declaring memory_bytes 10 MiB (MEMORY_BYTES=… to change, 0 = weights only);
# and OUTDIR/manifest.json with, per model, a KServe v2 test request and the exact expected response.
# Deterministic (same bytes every run; unchanged files are not rewritten) and takes about a second.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

out=${1:-build/mme-models}
n=${2:-200}
go run ./examples/containers/modelserver/gen -out "$out" -n "$n" -memory-bytes "${MEMORY_BYTES:-10485760}"
