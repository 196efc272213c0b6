#!/usr/bin/env bash
# Print the Debian mirror this machine's apt is configured with, for debootstrap.
#
# Usage: scripts/debian-mirror.sh [FILE...]
#   FILEs default to apt's own: /etc/apt/sources.list, then /etc/apt/sources.list.d/*.list and *.sources in name
#   order (apt ignores other names). Both formats are read: one-line "deb [options] URI SUITE COMPONENT..." and
#   deb822 stanzas (Types/URIs/Suites/Components, Enabled: no skipped; '#' comments).
#
# The mirror is the URI of the first enabled "deb" source with component main whose suites include SUITE
# ($DEBIAN_SUITE, default bookworm) — else a bare release suite (no -security/-updates/-backports) — with an
# http://, https:// or file:// URI. Nothing found: a message on stderr and exit status 1. No host name is assumed.
set -euo pipefail

suite="${DEBIAN_SUITE:-bookworm}"
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
	shopt -s nullglob
	files=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources)
	shopt -u nullglob
fi
readable=()
for f in "${files[@]}"; do
	[ -r "$f" ] && readable+=("$f")
done

mirror=""
if [ ${#readable[@]} -gt 0 ]; then
	mirror="$(awk -v want="$suite" '
	# emit prints "RANK URI" for one source: 1 = has the wanted suite, 2 = another bare release suite.
	function emit(types, uris, suites, comps,   nt, t, nu, u, ns, s, nc, c, i, j, ok, rank) {
		nt = split(types, t, /[ \t]+/); ok = 0
		for (i = 1; i <= nt; i++) if (t[i] == "deb") ok = 1
		if (!ok) return
		nc = split(comps, c, /[ \t]+/); ok = 0
		for (i = 1; i <= nc; i++) if (c[i] == "main") ok = 1
		if (!ok) return
		ns = split(suites, s, /[ \t]+/); rank = 0
		for (i = 1; i <= ns; i++) {
			if (s[i] == want) rank = 1
			else if (rank == 0 && s[i] ~ /^[a-z]+$/) rank = 2
		}
		if (rank == 0) return
		nu = split(uris, u, /[ \t]+/)
		for (j = 1; j <= nu; j++) if (u[j] ~ /^(https?|file):\/\/[^ \t]+$/) { print rank, u[j]; n++ }
	}
	function flush() {
		if (inStanza && enabled) emit(f["types"], f["uris"], f["suites"], f["components"])
		delete f; inStanza = 0; enabled = 1; last = ""
	}
	FNR == 1 { flush(); deb822 = (FILENAME ~ /\.sources$/) }
	{ sub(/\r$/, "") }
	deb822 {
		if ($0 ~ /^[ \t]*#/) next
		if ($0 ~ /^[ \t]*$/) { flush(); next }
		if ($0 ~ /^[ \t]/ && last != "") { f[last] = f[last] " " $0; next }   # continuation line
		if (match($0, /^[A-Za-z0-9-]+:/)) {
			key = tolower(substr($0, 1, RLENGTH - 1)); val = substr($0, RLENGTH + 1)
			gsub(/^[ \t]+|[ \t]+$/, "", val)
			inStanza = 1; last = key; f[key] = val
			if (key == "enabled" && tolower(val) == "no") enabled = 0
		}
		next
	}
	{
		line = $0; sub(/#.*/, "", line)
		if (line ~ /^[ \t]*$/) next
		# drop "[ options ]" after the type
		if (match(line, /\[[^]]*\]/)) line = substr(line, 1, RSTART - 1) " " substr(line, RSTART + RLENGTH)
		nf = split(line, w, /[ \t]+/); k = 1
		if (w[k] == "") k++
		if (nf - k < 3) next
		comps = ""
		for (i = k + 3; i <= nf; i++) comps = comps " " w[i]
		emit(w[k], w[k + 1], w[k + 2], comps)
	}
	END { flush() }
	' "${readable[@]}" | sort -s -k1,1n | head -1 | cut -d' ' -f2)"
fi
if [ -z "$mirror" ]; then
	echo "debian-mirror: no Debian mirror in ${files[*]:-/etc/apt/sources.list*} (want an enabled 'deb' source with" \
		"component main and suite $suite or another release, over http, https or file); configure apt's sources" \
		"or set MCE_DEBIAN_MIRROR" >&2
	exit 1
fi
echo "${mirror%/}"
