#!/usr/bin/env bash
# Builds the Kubernetes control plane, the kubelet and etcd that the test
# cluster (scripts/kube/cluster.sh) runs, from the versions pinned in
# scripts/kube/tools/go.mod, into a per-machine cache:
#   ${MCE_CACHE:-/var/cache/mce}/kube/<kubernetes version>/bin
# (~/.cache/mce/kube/... when that is not writable). Skipped when every binary
# is there and reports the pinned version. Prints the bin folder on stdout.
# `build.sh check` builds nothing: exit status 1 when something is missing.
#
# The build needs no network beyond the Go module proxy. One cold build takes
# about 10-15 minutes on 2 cores and up to ~3 GB of memory; MCE_KUBE_BUILD_P
# (default 1) is the number of packages go builds at once.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tools="$here/tools"
GO=${GO:-go}
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"

# The versions come from the wrapper module, so go.mod is the one place to bump.
kube_version=$(cd "$tools" && "$GO" list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd_version=$(cd "$tools" && "$GO" list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)

cache="${MCE_CACHE:-/var/cache/mce}"
if ! mkdir -p "$cache/kube" 2>/dev/null || [ ! -w "$cache/kube" ]; then
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/mce"
  mkdir -p "$cache/kube"
fi
bin="$cache/kube/$kube_version/bin"

# present NAME MODULE VERSION: the binary exists and go version -m shows the
# pinned module version (stamped by go build from the wrapper's go.mod).
present() {
  "$GO" version -m "$bin/$1" 2>/dev/null | grep -Eq "^\s+dep\s+$2\s+$3(\s|$)|^\s+mod\s+$2\s+$3(\s|$)"
}

cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
missing=()
for c in "${cmds[@]}"; do
  present "$c" k8s.io/kubernetes "$kube_version" || missing+=("$c")
done
present etcd go.etcd.io/etcd/server/v3 "$etcd_version" || missing+=(etcd)

if [ ${#missing[@]} -eq 0 ]; then
  echo "$bin"
  exit 0
fi
# build.sh check: only say whether they are there.
if [ "${1:-}" = check ]; then
  echo "kube build: not built in $bin: ${missing[*]}" >&2
  exit 1
fi

# One build at a time per cache: .ci/run starts one in the background
# early, and make kube-bin's waits for it here, then finds the binaries.
mkdir -p "$bin"
exec 8>"$bin/.lock"
if ! flock -n 8; then
  echo "kube build: waiting for the build already running into $bin" >&2
  flock 8
  exec 8>&-
  exec bash "${BASH_SOURCE[0]}" "$@"
fi

echo "kube build: building ${missing[*]} (kubernetes $kube_version, etcd $etcd_version) into $bin" >&2
tmp=$(mktemp -d "$bin/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
for c in "${missing[@]}"; do
  if [ "$c" = etcd ]; then
    pkg=go.etcd.io/etcd/server/v3
    ld="-s -w"
  else
    pkg=k8s.io/kubernetes/cmd/$c
    # Without the version stamp the binaries report v0.0.0-master and the
    # kubelet and apiserver refuse each other's version.
    maj=${kube_version#v}; maj=${maj%%.*}
    min=${kube_version#v}; min=${min#*.}; min=${min%%.*}
    ld="-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=$maj -X k8s.io/component-base/version.gitMinor=$min"
  fi
  echo "kube build: $c" >&2
  (cd "$tools" && CGO_ENABLED=0 "$GO" build -p="${MCE_KUBE_BUILD_P:-1}" -trimpath -ldflags "$ld" -o "$tmp/$c" "$pkg")
  mv "$tmp/$c" "$bin/$c"
done
echo "kube build: done in $(( $(date +%s) - start ))s" >&2
echo "$bin"
