#!/usr/bin/env bash
# Build mce's framework images from examples/containers/framework:
#   mce-framework/sklearn:latest   FROM mce-framework-base/sklearn:bookworm + the mce_serving toolkit
#   mce-framework/pytorch:latest   FROM mce-framework-base/pytorch:bookworm + the mce_serving toolkit
#
# Usage: scripts/framework-images.sh [sklearn|pytorch ...]   (default: both)
#
# MCE_FRAMEWORK_PYTORCH_BASE / MCE_FRAMEWORK_SKLEARN_BASE name another base image (one already on this Docker
# engine, pulled or built by you: a CUDA PyTorch, say) instead of the Debian one, which is then not built; what
# such a base must contain is in examples/containers/framework/README.md.
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

debian=()
for n in "${names[@]}"; do
	v="MCE_FRAMEWORK_${n^^}_BASE"
	if [[ -n "${!v:-}" ]]; then
		docker image inspect "${!v}" >/dev/null 2>&1 || {
			echo "framework-images: $v=${!v}: no such image on this Docker engine (pull or build it first)" >&2
			exit 2
		}
	else
		debian+=("$n")
	fi
done
[[ ${#debian[@]} -eq 0 ]] || scripts/framework-base.sh "${debian[@]}"

errlog=$(mktemp "${TMPDIR:-/tmp}/mce-framework-images.XXXXXX")
trap 'rm -f "$errlog"' EXIT
for n in "${names[@]}"; do
	t0=$SECONDS
	# The classic builder prints a deprecation banner on stderr with newer CLIs; show it only on failure.
	v="MCE_FRAMEWORK_${n^^}_BASE"
	base=()
	[[ -z "${!v:-}" ]] || base=(--build-arg "BASE=${!v}")
	if ! id=$(DOCKER_BUILDKIT=0 docker build -q "${base[@]}" -f "examples/containers/framework/$n/Dockerfile" \
		-t "mce-framework/$n:latest" examples/containers/framework 2>"$errlog"); then
		cat "$errlog" >&2
		exit 1
	fi
	printf '%-40s %s  %s, %d s\n' "mce-framework/$n:latest" "${id#sha256:}" \
		"$(docker image inspect -f '{{.Size}}' "mce-framework/$n:latest" | awk '{ printf "%.0f MB", $1 / 1e6 }')" \
		$((SECONDS - t0))
done
