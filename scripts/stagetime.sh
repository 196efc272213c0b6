#!/usr/bin/env bash
# Times the stages of `make test` so that a run ends with where its time went.
#
#   scripts/stagetime.sh NAME CMD [ARG...]   runs CMD, appends "NAME<TAB>seconds<TAB>exit status<TAB>CPU seconds"
#                                            to the log: the machine's CPU time while CMD ran (every process's and
#                                            every container's, from /proc/stat), so that the report says whether
#                                            a stage waited or computed
#   scripts/stagetime.sh report              prints the log as a table, slowest first, with the total
#   scripts/stagetime.sh reset               empties the log
#
# The log is $MCE_STAGE_LOG (default build/stage-times.tsv). The Makefile wraps the recipes of every
# stage of `make test` with it; .ci/run resets it first and reports at its end, failed or not.
set -uo pipefail
log=${MCE_STAGE_LOG:-build/stage-times.tsv}

# busy prints the machine's busy CPU time so far, in clock ticks: /proc/stat's first line less its idle and
# iowait (and less guest time, which the user and nice columns already count); 0 where there is no /proc/stat.
busy() {
	awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; found = 1; exit } END { if (!found) print 0 }' /proc/stat 2>/dev/null || echo 0
}
case "${1:-}" in
reset)
	mkdir -p "$(dirname "$log")" && : >"$log" && : >"$log.start"
	;;
report)
	[ -s "$log" ] || exit 0
	echo
	echo "time per stage, slowest first ($log; a stage run several times is summed, and one run inside"
	echo "another, as a README snippet's make images inside unit, is counted in both):"
	# The CPU column: the machine's CPU seconds while the stage ran, and their share of its cores over the stage's
	# wall time (near 100 %: the stage computed, and only less work makes it faster; far below: it waited).
	cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
	echo "(CPU: the machine's CPU time while the stage ran, all processes and containers, and its share of the"
	echo "$cores cores over the stage's time):"
	awk -F'\t' -v cores="$cores" '
		!($1 in t) { order[++n] = $1 }
		{ t[$1] += $2; c[$1]++; if ($3 != 0) bad[$1] = $3; if (NF >= 4) { cpu[$1] += $4; ct[$1] += $2 } }
		END {
			for (i = 1; i <= n; i++) {
				k = order[i]
				u = (k in cpu && ct[k] > 0) ? sprintf("CPU %7.1f s, %3.0f %%", cpu[k], 100 * cpu[k] / (ct[k] * cores)) : ""
				printf "%s\t%.1f\t%s\t%s\n", k, t[k], u, (k in bad ? "FAILED (exit " bad[k] ")" : "ok") (c[k] > 1 ? ", " c[k] " runs" : "")
			}
		}' "$log" | sort -t$'\t' -k2,2nr | awk -F'\t' '{ printf "  %-18s %7.1f s  %-20s  %s\n", $1, $2, $3, $4 }'
	# The unit stage's slowest packages and tests: go test's own times, from its JSON events (make unit keeps them
	# when gotestsum ran it, scripts/unit-test.sh) or else from its text output.
	units=$(dirname "$log")/unit-test.log
	events=$(dirname "$log")/unit-test.json
	if [ -s "$events" ] && [ "$events" -nt "$log.start" ] && command -v python3 >/dev/null 2>&1; then
		echo
		python3 - "$events" <<-'PY'
			import json, sys
			pkgs, tests = [], []
			with open(sys.argv[1], errors="replace") as f:
			    for line in f:
			        try:
			            e = json.loads(line)
			        except ValueError:
			            continue
			        if e.get("Action") not in ("pass", "fail") or "Elapsed" not in e:
			            continue
			        t = e.get("Test")
			        if not t:
			            pkgs.append((e["Elapsed"], e.get("Package", "?"), e["Action"]))
			        elif "/" not in t:  # top-level tests: a subtest's time is in its parent's
			            tests.append((e["Elapsed"], e.get("Package", "?") + " " + t, e["Action"]))
			print(f"the unit stage's slowest packages (go test runs several at a time, make unit's UNIT_P; {sys.argv[1]}):")
			for s, name, act in sorted(pkgs, reverse=True)[:10]:
			    print(f"  {s:7.1f} s  {name}" + ("  FAILED" if act == "fail" else ""))
			print()
			print("its slowest tests (a test's time includes its subtests and the waits of its parallel ones):")
			for s, name, act in sorted(tests, reverse=True)[:15]:
			    print(f"  {s:7.1f} s  {name}" + ("  FAILED" if act == "fail" else ""))
		PY
	elif [ -s "$units" ] && [ "$units" -nt "$log.start" ]; then
		echo
		echo "the unit stage's slowest packages (go test runs several at a time, make unit's UNIT_P; $units):"
		awk -F'\t' '($1 ~ /^ok/ || $1 ~ /^FAIL/) && $3 ~ /s$/ { sub(/s$/, "", $3); printf "%s\t%s\n", $3, $2 }' "$units" |
			sort -t$'\t' -k1,1nr | head -10 | awk -F'\t' '{ printf "  %7.1f s  %s\n", $1, $2 }'
	fi
	start=$(stat -c %Y "$log.start" 2>/dev/null || true)
	[ -n "$start" ] && printf '  %-18s %7.1f s  (%.1f min, from reset to this report)\n' "wall clock" "$(($(date +%s) - start))" "$(awk -v s="$(($(date +%s) - start))" 'BEGIN { print s / 60 }')"
	true
	;;
"")
	echo "usage: stagetime.sh NAME CMD... | report | reset" >&2
	exit 2
	;;
*)
	name=$1
	shift
	t0=$(date +%s.%N)
	b0=$(busy)
	"$@"
	rc=$?
	b1=$(busy)
	mkdir -p "$(dirname "$log")"
	printf '%s\t%s\t%d\t%s\n' "$name" "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" "$rc" \
		"$(awk -v a="$b0" -v b="$b1" -v hz="$(getconf CLK_TCK 2>/dev/null || echo 100)" 'BEGIN { printf "%.1f", (b - a) / hz }')" >>"$log"
	exit "$rc"
	;;
esac
