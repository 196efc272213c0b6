#!/usr/bin/env bash
# Build mce's framework images from examples/containers/framework:
#   mce-framework/sklearn:latest   FROM mce-framework-base/sklearn:bookworm + the mce_serving toolkit
#   mce-framework/pytorch:latest   FROM mce-framework-base/pytorch:bookworm + the mce_serving toolkit
#
# Usage: scripts/framework-images.sh [sklearn|pytorch ...]   (default: both)
#
# The Debian base images come from scripts/framework-base.sh (cached by a content hash); the layer on
# top is a COPY of the toolkit, built with the classic builder as scripts/images.sh does, so a rerun
# with nothing changed takes a second or two (Docker's layer cache). Prints one line per image.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(sklearn pytorch)
for n in "${names[@]}"; do
	[[ -f "examples/containers/framework/$n/Dockerfile" ]] || {
		echo "framework-images: unknown image '$n' (known: sklearn pytorch)" >&2
		exit 2
	}
done

scripts/framework-base.sh "${names[@]}"

errlog=$(mktemp "${TMPDIR:-/tmp}/mce-framework-images.XXXXXX")
trap 'rm -f "$errlog"' EXIT
for n in "${names[@]}"; do
	t0=$SECONDS
	# The classic builder prints a deprecation banner on stderr with newer CLIs; show it only on failure.
	if ! id=$(DOCKER_BUILDKIT=0 docker build -q -f "examples/containers/framework/$n/Dockerfile" \
		-t "mce-framework/$n:latest" examples/containers/framework 2>"$errlog"); then
		cat "$errlog" >&2
		exit 1
	fi
	printf '%-40s %s  %s, %d s\n' "mce-framework/$n:latest" "${id#sha256:}" \
		"$(docker image inspect -f '{{.Size}}' "mce-framework/$n:latest" | awk '{ printf "%.0f MB", $1 / 1e6 }')" \
		$((SECONDS - t0))
done
