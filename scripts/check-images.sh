#!/usr/bin/env bash
# Run `mce check` on every image of a table (default examples/containers/check.tsv) with its model data and
# sample input, and fail if any check of any image fails.
#
# Usage: scripts/check-images.sh [TABLE] [-- extra mce check flags...]     (e.g. -- --json)
#
# The table: one image per line, tab-separated IMAGE MODEL_DATA INPUT CONTENT_TYPE ACCEPT [EXTRA FLAGS...],
# "-" for none, paths relative to the repository root, "#" comments. Expects bin/mce, the images and the model
# artifacts to exist (`make check-images` builds them first). Prints each image's report and a summary line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

table=examples/containers/check.tsv
if [[ $# -gt 0 && $1 != -- ]]; then table=$1; shift; fi
[[ ${1:-} == -- ]] && shift
mce=${MCE:-bin/mce}
[[ -x $mce ]] || { echo "check-images.sh: $mce is missing (make build)" >&2; exit 2; }

failed=() n=0
while IFS=$'\t' read -r image model input ctype accept extra || [[ -n ${image:-} ]]; do
	[[ -z ${image// } || $image == \#* ]] && continue
	args=(check "$image")
	[[ $model != - ]] && args+=(--model-data "$model")
	[[ $input != - ]] && args+=(--input "$input")
	[[ $ctype != - ]] && args+=(--content-type "$ctype")
	[[ ${accept:--} != - ]] && args+=(--accept "$accept")
	# EXTRA FLAGS are split on blanks, as written in the table.
	[[ -n ${extra:-} ]] && read -r -a more <<<"$extra" && args+=("${more[@]}")
	n=$((n + 1))
	echo "== mce ${args[*]}"
	if ! "$mce" "${args[@]}" "$@"; then
		failed+=("$image ${model}")
	fi
	echo
done <"$table"

if [[ ${#failed[@]} -gt 0 ]]; then
	echo "check-images: ${#failed[@]} of $n failed:" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "check-images: all $n passed"
