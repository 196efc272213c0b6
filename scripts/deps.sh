#!/usr/bin/env bash
# Installs the Debian packages mce's tests, demo and benchmark use, when missing:
# boto3 and the aws CLI (real AWS clients for the end-to-end script), wrk and
# nginx (benchmark), Locust and GNU time (scripts/bench-loadtest.sh's side-by-side
# with mce loadtest), curl, docker-compose (the compose check), docker-registry
# (a real registry on 127.0.0.1 for the pull tests), python3-torch, numpy and
# werkzeug (the GPU check's dry run on the CPU, internal/gpucheck), chromium (the status page's
# headless-browser test), prometheus (its promtool lints mce's metrics and checks
# docs/prometheus.yml and the Grafana dashboard's queries; the Prometheus server
# it also installs is not left running); and versitygw, a real S3-compatible
# server the S3 tests start on loopback (built from Go modules once per machine,
# see below); containerd, CNI plugins, iproute2, util-linux and openssl for the
# Kubernetes test cluster (scripts/kube/, whose binaries scripts/kube/build.sh builds).
set -euo pipefail

# versitygw (github.com/versity/versitygw, Apache-2.0): installed with go install
# into ${MCE_CACHE:-/var/cache/mce}/bin (~/.cache/mce/bin when that is not
# writable), where internal/s3test looks for it; skipped when that version is there.
VERSITYGW_VERSION=v1.8.0
tools_dir="$("$(dirname "$0")/cache-bin.sh" --dir)"
# go version -m reads the module version go install stamped into the binary.
if ! "${GO:-go}" version -m "$tools_dir/versitygw" 2>/dev/null | grep -Eq "^\s+mod\s+github.com/versity/versitygw\s+$VERSITYGW_VERSION\s"; then
  echo "deps: installing versitygw $VERSITYGW_VERSION into $tools_dir"
  GOBIN="$tools_dir" CGO_ENABLED=0 "${GO:-go}" install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
fi
# gotestsum (gotest.tools/gotestsum, Apache-2.0) runs make unit's go test (scripts/unit-test.sh) and keeps its
# JSON events, from which the stage report names the slowest packages and tests: installed the same way.
GOTESTSUM_VERSION=v1.13.0
if ! "${GO:-go}" version -m "$tools_dir/gotestsum" 2>/dev/null | grep -Eq "^\s+mod\s+gotest.tools/gotestsum\s+$GOTESTSUM_VERSION\s"; then
  echo "deps: installing gotestsum $GOTESTSUM_VERSION into $tools_dir"
  GOBIN="$tools_dir" CGO_ENABLED=0 "${GO:-go}" install "gotest.tools/gotestsum@$GOTESTSUM_VERSION" ||
    echo "deps: gotestsum could not be installed; make unit runs plain go test" >&2
fi
# scripts/deps.sh versitygw: only these two (make unit needs them, and no root).
[ "${1:-}" != versitygw ] || exit 0

need=()
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import boto3' 2>/dev/null || need+=(python3-boto3)
[ -x /usr/bin/aws ] || need+=(awscli)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
[ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v locust >/dev/null 2>&1 || need+=(python3-locust)
[ -x /usr/bin/time ] || need+=(time)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
[ -x /usr/bin/docker-registry ] || need+=(docker-registry)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
# The GPU check's dry run on the CPU (internal/gpucheck): Debian's python3 with
# PyTorch (CPU), numpy and werkzeug runs the framework toolkit as a plain process.
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null || need+=(python3-torch)
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import numpy' 2>/dev/null || need+=(python3-numpy)
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import werkzeug' 2>/dev/null || need+=(python3-werkzeug)
# The Kubernetes test cluster (scripts/kube/cluster.sh): Debian's containerd
# and CNI plugins, ip and nsenter/unshare for its namespaces, openssl for its
# service-account keys.
command -v containerd >/dev/null 2>&1 || need+=(containerd)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v nsenter >/dev/null 2>&1 && command -v unshare >/dev/null 2>&1 || need+=(util-linux)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# mce's image (scripts/images.sh mce) carries Debian's CA bundle.
[ -s /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "deps: missing Debian packages: ${need[*]}; install them with: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "deps: installing ${need[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian starts the Prometheus server on install where systemd runs; only
# promtool is wanted.
if [[ " ${need[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
