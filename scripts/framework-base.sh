#!/usr/bin/env bash
# Build the Debian base images of mce's framework containers, without a registry:
#   mce-framework-base/sklearn:bookworm   python3 + scikit-learn 1.2 (numpy, scipy, pandas), gunicorn, Flask, pip
#   mce-framework-base/pytorch:bookworm   the same + PyTorch 1.13 (CPU)
# Each is a debootstrap'd Debian bookworm (--variant=minbase) imported with `docker import`.
#
# Usage: scripts/framework-base.sh [sklearn|pytorch ...]   (default: both)
#        scripts/framework-base.sh --print-mirror            (print the Debian mirror it would use, build nothing)
#
# Cached per machine, never in the repository: an image is rebuilt only when its package list or this script
# changes (the content hash is its second tag, mce-framework-base/NAME:h-HASH). Downloaded .debs are kept in
# ${MCE_CACHE:-/var/cache/mce}/debootstrap, so a rebuild fetches nothing it already has. Needs root (debootstrap)
# and a Debian mirror: MCE_DEBIAN_MIRROR, or the one apt is configured with (scripts/debian-mirror.sh reads
# /etc/apt/sources.list and sources.list.d); without either it stops with a message.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

MIRROR="${MCE_DEBIAN_MIRROR:-}"
# find_mirror fills MIRROR from apt's configuration when it is unset; only a build needs it.
find_mirror() {
	[ -n "$MIRROR" ] && return
	MIRROR="$(scripts/debian-mirror.sh)" || {
		echo "framework-base: no Debian mirror to debootstrap from; set MCE_DEBIAN_MIRROR" >&2
		exit 1
	}
}
if [ "${1:-}" = --print-mirror ]; then
	find_mirror
	echo "$MIRROR"
	exit 0
fi
CACHE="${MCE_CACHE:-/var/cache/mce}/debootstrap"
common=python3,python3-numpy,python3-scipy,python3-pandas,python3-sklearn,python3-flask,python3-gunicorn,python3-pip,python3-wheel,python3-wsproto,procps
declare -A PKGS=(
	[sklearn]="$common"
	[pytorch]="$common,python3-torch"
)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(sklearn pytorch)

need_debootstrap() {
	command -v debootstrap >/dev/null 2>&1 && return
	[ "$(id -u)" = 0 ] || { echo "framework-base: debootstrap is missing; install it: sudo apt-get install -y debootstrap" >&2; exit 1; }
	echo "framework-base: installing debootstrap"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
}

for n in "${names[@]}"; do
	[ -n "${PKGS[$n]:-}" ] || { echo "framework-base: unknown image '$n' (known: sklearn pytorch)" >&2; exit 2; }
	hash="$( (echo "${PKGS[$n]}"; cat "${BASH_SOURCE[0]}") | sha256sum | cut -c1-12)"
	img="mce-framework-base/$n"
	if docker image inspect "$img:h-$hash" >/dev/null 2>&1; then
		docker tag "$img:h-$hash" "$img:bookworm"
		printf '%-40s cached (h-%s)\n' "$img:bookworm" "$hash"
		continue
	fi
	need_debootstrap
	find_mirror
	mkdir -p "$CACHE"
	root="$(mktemp -d "${TMPDIR:-/var/tmp}/mce-rootfs-$n.XXXXXX")"
	trap 'rm -rf "$root"' EXIT
	t0=$SECONDS
	echo "framework-base: debootstrap bookworm + ${PKGS[$n]} from $MIRROR (a few minutes the first time)"
	if ! debootstrap --variant=minbase --cache-dir="$CACHE" --include="${PKGS[$n]}" bookworm "$root" "$MIRROR" \
		>"$root.log" 2>&1; then
		tail -30 "$root.log" >&2
		echo "framework-base: debootstrap failed (full log: $root.log)" >&2
		exit 1
	fi
	rm -f "$root.log"
	# Nothing a serving container needs: package indexes, docs, man pages, bytecode caches.
	rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/usr/share/doc/* "$root"/usr/share/man/* \
		"$root"/usr/share/locale/*
	tar -C "$root" -c . | docker import \
		-c 'ENV LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1' \
		-m "mce framework base: debootstrap bookworm minbase + ${PKGS[$n]}" - "$img:h-$hash" >/dev/null
	docker tag "$img:h-$hash" "$img:bookworm"
	rm -rf "$root"
	trap - EXIT
	printf '%-40s built in %d s, %s\n' "$img:bookworm" $((SECONDS - t0)) \
		"$(docker image inspect -f '{{.Size}}' "$img:bookworm" | awk '{ printf "%.0f MB", $1 / 1e6 }')"
done
