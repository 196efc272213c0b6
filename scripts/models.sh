#!/usr/bin/env bash
# Build the example model artifacts as deterministic .tar.gz files (what a ModelDataUrl points at).
#
# Usage: scripts/models.sh [OUTDIR]        (default: build/models)
#
# Trains the ticket classifier (examples/containers/classifier/train) and packs:
#   featurizer.tar.gz    vocab.txt
#   classifier.tar.gz    model.json
#   sentiment-en.tar.gz  lexicon.tsv meta.json   (from examples/models/sentiment-en)
#   sentiment-de.tar.gz  lexicon.tsv meta.json   (from examples/models/sentiment-de)
# Files sit at the archive root (they land in /opt/ml/model), sorted, with mtime 0, owner 0:0, mode 0644,
# and gzip without name or time, so the same inputs always give the same bytes. Prints one line per artifact.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

out=${1:-build/models}
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/mce-models.XXXXXX")
trap 'rm -rf "$work"' EXIT

go run ./examples/containers/classifier/train -data examples/models/tickets -out "$work/trained" >&2

# pack NAME DIR: DIR's regular files (no subdirectories) → $out/NAME.tar.gz
pack() {
	local name=$1 dir=$2 tmp="$out/.$1.tar.gz.tmp"
	(cd "$dir" && find . -maxdepth 1 -type f -printf '%P\n' | LC_ALL=C sort) >"$work/$name.list"
	[[ -s "$work/$name.list" ]] || { echo "models.sh: no files in $dir" >&2; exit 1; }
	tar -C "$dir" --format=ustar --no-recursion --mtime=@0 --owner=0 --group=0 --numeric-owner --mode=0644 \
		-cf - -T "$work/$name.list" | gzip -n -9 >"$tmp"
	mv -f "$tmp" "$out/$name.tar.gz"
	printf '%-40s %s  %s\n' "$out/$name.tar.gz" "$(sha256sum "$out/$name.tar.gz" | cut -c1-16)" "$(paste -sd' ' "$work/$name.list")"
}

pack featurizer "$work/trained/featurizer"
pack classifier "$work/trained/classifier"
pack sentiment-en examples/models/sentiment-en
pack sentiment-de examples/models/sentiment-de
