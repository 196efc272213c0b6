#!/usr/bin/env bash
# Train and pack the model artifacts of the real-framework examples (scikit-learn and PyTorch), at build time,
# inside the framework base images (nothing is downloaded: the data sets ship inside Debian's python3-sklearn, the
# streaming example's text is /usr/share/common-licenses from base-files):
#
#   build/models/framework/digits-preprocess.tar.gz   examples/preprocess-inference: StandardScaler + PCA (sklearn)
#   build/models/framework/digits-network.tar.gz      examples/preprocess-inference: TorchScript MLP (PyTorch)
#   build/models/framework/digits-expected.json       its test rows, labels and in-process predictions
#   build/models/framework/digits-sample.csv          5 test images, one per line (README, make demo)
#   build/models/framework/cancer-v1.tar.gz, -v2      examples/ab-test: logistic regression vs random forest
#   build/models/framework/cancer-expected.json       their test rows, labels and in-process predictions
#   build/models/framework/cancer-sample.csv          5 test cases, one per line (README, make demo)
#   build/models/mme-torch/model-000.tar.gz … 199      examples/mme: 200 TorchScript MLPs, each with its own code/
#   build/models/mme-torch/manifest.json               a request and the expected answer per model
#   build/models/framework/textgen.tar.gz             examples/streaming: a character 7-gram language model
#   build/models/framework/textgen-expected.json      its held-out perplexities and in-process sample generations
#   build/models/framework/textgen-adapter.tar.gz     an adapter of it (the first half of the held-out license)
#
# Usage: scripts/framework-models.sh [preprocess-inference|ab-test|mme|streaming ...]   (default: all four)
#   MME_COUNT (default 200) and MME_HIDDEN (default 768) size the multi-model set.
#
# Cached: each example is rebuilt only when its inputs change (its training script and code/, the packing helper,
# this script, the base image's id, the knobs); the hash of the inputs is kept beside the outputs (.inputs-<name>).
# The test accuracy is printed when a model is trained, and again from the cache.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(preprocess-inference ab-test mme streaming)
MME_COUNT="${MME_COUNT:-200}"
MME_HIDDEN="${MME_HIDDEN:-768}"

# base NAME: the framework base image (built by scripts/framework-base.sh when missing)
base() {
	local img="mce-framework-base/$1:bookworm"
	docker image inspect "$img" >/dev/null 2>&1 || scripts/framework-base.sh "$1" >&2
	echo "$img"
}

# build NAME IMAGE OUTDIR KNOBS "OUTPUTS" COMMAND...: run COMMAND in IMAGE with the repository read-only at /src
# and OUTDIR at /out, unless the inputs' hash matches the one recorded in OUTDIR and the OUTPUTS are all there.
build() {
	local name=$1 img=$2 out=$3 knobs=$4 outputs=$5
	shift 5
	mkdir -p "$out"
	local hash
	hash="$({
		echo "$knobs"
		docker image inspect -f '{{.Id}}' "$img"
		cat "${BASH_SOURCE[0]}" scripts/framework-models/artifact.py
		find "examples/$name" -type f \( -name '*.py' -o -name '*.txt' \) -not -path '*/__pycache__/*' | LC_ALL=C sort |
			while read -r f; do echo "$f"; cat "$f"; done
	} | sha256sum | cut -c1-16)"
	local stamp="$out/.inputs-$name"
	local present=1 f
	for f in $outputs; do [ -f "$out/$f" ] || present=0; done
	if [ "$present" = 1 ] && [ -f "$stamp" ] && [ "$(head -1 "$stamp")" = "$hash" ]; then
		printf '%-24s cached (%s): %s\n' "$name" "$hash" "$(tail -n +2 "$stamp" | paste -sd' ')"
		return
	fi
	rm -f "$stamp"
	local log
	log="$(docker run --rm --network none -u "$(id -u):$(id -g)" -e HOME=/tmp -e PYTHONDONTWRITEBYTECODE=1 \
		-v "$PWD:/src:ro" -v "$(realpath "$out"):/out" -w /src "$img" "$@")"
	echo "$log"
	{ echo "$hash"; echo "$log"; } >"$stamp"
}

for n in "${names[@]}"; do
	case "$n" in
	preprocess-inference)
		build "$n" "$(base pytorch)" build/models/framework "" \
			"digits-preprocess.tar.gz digits-network.tar.gz digits-expected.json digits-sample.csv" python3 "examples/$n/train.py" /out ;;
	ab-test)
		build "$n" "$(base sklearn)" build/models/framework "" \
			"cancer-v1.tar.gz cancer-v2.tar.gz cancer-expected.json cancer-sample.csv" python3 "examples/$n/train.py" /out ;;
	mme)
		build "$n" "$(base pytorch)" build/models/mme-torch "$MME_COUNT $MME_HIDDEN" \
			"manifest.json model-000.tar.gz model-$(printf %03d $((MME_COUNT - 1))).tar.gz" \
			python3 "examples/$n/generate.py" /out "$MME_COUNT" "$MME_HIDDEN" ;;
	streaming)
		build "$n" "$(base pytorch)" build/models/framework "" \
			"textgen.tar.gz textgen-expected.json textgen-adapter.tar.gz" python3 "examples/$n/train.py" /out ;;
	*) echo "framework-models: unknown example '$n' (known: preprocess-inference ab-test mme streaming)" >&2; exit 2 ;;
	esac
done
