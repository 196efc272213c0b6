#!/usr/bin/env bash
# GPU check for a machine without Docker: the toolkit's multi-model server
# (examples/containers/framework, mce_serving) as a plain python3 process,
# driven through mce's multi-model Manager and NVML with generated PyTorch
# models whose weights are one tensor each (internal/gpucheck).
#
#   scripts/gpu-check.sh                      40 models × 3 GiB, 400 calls, 4 clients
#   scripts/gpu-check.sh --models 20 --gib 1  smaller
#   scripts/gpu-check.sh --dry                tiny models on the CPU (no GPU needed)
#   scripts/gpu-check.sh build                only build build/gpucheck/mce-gpucheck
#
# What the GPU machine needs: python3 with CUDA PyTorch, numpy and werkzeug,
# the NVIDIA driver (NVML), and these files: build/gpucheck/mce-gpucheck (a
# cgo binary linked only against libc, built here by `scripts/gpu-check.sh
# build`), this script and examples/containers/framework. No Docker, no
# gunicorn, no network. Set PYTHON to pick the interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/gpucheck/mce-gpucheck

build() {
	mkdir -p build/gpucheck
	CGO_ENABLED=1 CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}" \
		go build -trimpath -o "$bin" ./cmd/mce-gpucheck
}

if [ "${1:-}" = build ]; then
	build
	exit 0
fi
if command -v go >/dev/null 2>&1; then
	build # cheap when nothing changed
elif [ ! -x "$bin" ]; then
	echo "gpu-check: no $bin and no Go toolchain to build it: run scripts/gpu-check.sh build where Go is, and copy $bin here" >&2
	exit 2
fi
exec "$bin" --toolkit examples/containers/framework --python "${PYTHON:-python3}" "$@"
