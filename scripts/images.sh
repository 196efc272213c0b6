#!/usr/bin/env bash
# Build the example container images mce-example/<name>:latest from examples/containers/<name>.
#
# Usage: scripts/images.sh [name...]      (default: featurizer classifier sentiment probe modelserver)
#
# MCE_IMAGES_TAG (default latest) is the tag built: MCE_IMAGES_TAG=mine scripts/images.sh mce builds
# mce-example/mce:mine, leaving :latest as it is.
#
# `scripts/images.sh mce` builds mce-example/mce:latest, mce itself for docker-compose (compose/README.md):
# ./cmd/mce built with CGO_ENABLED=0 (no NVML, so no GPU endpoints) in a FROM scratch image (compose/Dockerfile),
# with the build machine's Debian CA bundle for https (S3 from a pod's init container on the kubernetes engine).
#
# `scripts/images.sh versitygw` builds mce-example/versitygw:latest, a real S3 server for docker-compose
# (compose/docker-compose.s3.yml): the static versitygw binary scripts/deps.sh installs (go install, CGO_ENABLED=0),
# FROM scratch (compose/versitygw/Dockerfile).
#
# Each program is built on the host as a static binary (CGO_ENABLED=0, -trimpath, no build ID), copied into
# build/images/<name>/ with its Dockerfile, and built FROM scratch with the classic builder. The binary is
# byte-identical between runs and only copied when it changed, so a second run reuses Go's build cache and
# Docker's layer cache and takes seconds. Prints one line per image.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

all=(featurizer classifier sentiment probe modelserver)
names=("$@")
tag=${MCE_IMAGES_TAG:-latest}
[[ ${#names[@]} -gt 0 ]] || names=("${all[@]}")
# src NAME: the package and the folder of the Dockerfile of image NAME.
src() {
	if [[ $1 == mce ]]; then
		echo "./cmd/mce compose"
	elif [[ $1 == versitygw ]]; then
		echo "- compose/versitygw" # not a package of this module: scripts/deps.sh installs it
	else
		echo "./examples/containers/$1 examples/containers/$1"
	fi
}
pkgs=()
for n in "${names[@]}"; do
	read -r pkg dir <<<"$(src "$n")"
	if [[ ! -f "$dir/Dockerfile" ]]; then
		echo "images.sh: unknown image '$n' (known: ${all[*]} mce versitygw)" >&2
		exit 2
	fi
	[[ $pkg == - ]] || pkgs+=("$pkg")
done

bin=build/images/.bin
mkdir -p "$bin"
errlog=$(mktemp "${TMPDIR:-/tmp}/mce-images.XXXXXX")
trap 'rm -f "$errlog"' EXIT
# One go build for all: the links run in parallel and hit the cache when nothing changed.
[[ ${#pkgs[@]} -eq 0 ]] || CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags='-s -w -buildid=' -o "$bin/" "${pkgs[@]}"
for n in "${names[@]}"; do
	[[ $n == versitygw ]] || continue
	vgw=$(scripts/versitygw.sh --path) || exit 1
	# A FROM scratch image needs a static binary: go version -m shows how it was built.
	if ! go version -m "$vgw" | grep -Eq '^\s+build\s+CGO_ENABLED=0$'; then
		echo "images.sh: $vgw was built with cgo; reinstall it with: CGO_ENABLED=0 go install github.com/versity/versitygw/cmd/versitygw@v1.8.0" >&2
		exit 1
	fi
	cp "$vgw" "$bin/versitygw"
done

for n in "${names[@]}"; do
	ctx="build/images/$n"
	mkdir -p "$ctx"
	cmp -s "$bin/$n" "$ctx/$n" || cp "$bin/$n" "$ctx/$n"
	read -r _ dir <<<"$(src "$n")"
	cmp -s "$dir/Dockerfile" "$ctx/Dockerfile" || cp "$dir/Dockerfile" "$ctx/Dockerfile"
	if [[ $n == mce ]]; then
		# mce's image carries Debian's CA bundle (ca-certificates; scripts/deps.sh installs it) for https S3.
		ca=/etc/ssl/certs/ca-certificates.crt
		[[ -s $ca ]] || { echo "images.sh: $ca is missing: install Debian's ca-certificates (scripts/deps.sh)" >&2; exit 1; }
		cmp -s "$ca" "$ctx/ca-certificates.crt" || cp "$ca" "$ctx/ca-certificates.crt"
	fi
	# The classic builder (all that a FROM scratch + COPY image needs) prints a deprecation banner on
	# stderr with newer CLIs; show stderr only when the build fails.
	if ! id=$(DOCKER_BUILDKIT=0 docker build -q -t "mce-example/$n:$tag" "$ctx" 2>"$errlog"); then
		cat "$errlog" >&2
		exit 1
	fi
	printf '%-28s %s  %s bytes\n' "mce-example/$n:$tag" "${id#sha256:}" "$(stat -c %s "$ctx/$n")"
done
