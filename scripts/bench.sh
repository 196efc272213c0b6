#!/usr/bin/env bash
# make bench: mce vs straight-to-container vs Docker's published port vs nginx, at 1/50/200 clients,
# in one run on this machine (see bench/README.md for the performance targets).
#
# Starts `bin/mce serve` with three endpoints of probe containers (Direct of 1, Serial of 2, Serial of 5),
# one extra probe container on the Direct endpoint's network with a port published on 127.0.0.1, and
# nginx (1 worker) proxying to the Direct endpoint's container address. Then runs wrk (1 thread, POST of
# 64 bytes) against each path, prints a markdown table, derived overheads and PASS/FAIL per target, and
# writes the table to build/bench.md (raw wrk output: build/bench-wrk.log). Everything started here is
# removed on exit.
#
# Environment: BENCH_DURATION (seconds per cell, default 5), BENCH_WARMUP (seconds, default 1),
# BENCH_CLIENTS (default "1 50 200"; the verdicts need 1, 50 and 200), BENCH_STRICT=1 (exit 1 when a
# target fails; by default the exit status only says whether the benchmark ran).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DUR="${BENCH_DURATION:-5}"
WARM="${BENCH_WARMUP:-1}"
read -r -a CLIENTS <<<"${BENCH_CLIENTS:-1 50 200}"
PIN=() # BENCH_PIN=CPUS runs wrk under taskset -c CPUS: the load generator kept to those cores
[ -z "${BENCH_PIN:-}" ] || PIN=(taskset -c "$BENCH_PIN")
IMAGE="mce-example/probe:latest"
INST="bench-$$"
LUA="bench/wrk.lua"
OUTMD="build/bench.md"
RAW="build/bench-wrk.log"

die() { echo "bench: $*" >&2; exit 1; }
for c in wrk nginx docker curl awk ss go ${BENCH_PIN:+taskset} ${BENCH_PERF:+perf}; do
	command -v "$c" >/dev/null 2>&1 || die "$c not found (make deps installs wrk, nginx-light and curl)"
done
if [ ! -x bin/mce ]; then
	echo "bench: building bin/mce"
	CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}" go build -o bin/mce ./cmd/mce
fi
docker image inspect "$IMAGE" >/dev/null 2>&1 || scripts/images.sh probe
mkdir -p build

TMP="$(mktemp -d "${TMPDIR:-/tmp}/mce-bench.XXXXXX")"
mce_pid=""
nginx_pid=""
floor_pids=()
cleanup() {
	local rc=$?
	set +e
	# Our own container first: it is attached to mce's network, which mce removes on shutdown.
	docker ps -aq --filter "label=bench=$$" | xargs -r docker rm -f >/dev/null 2>&1
	if [ -n "$nginx_pid" ] && kill -0 "$nginx_pid" 2>/dev/null; then
		kill -TERM "$nginx_pid"; wait "$nginx_pid" 2>/dev/null
	fi
	for pid in "${floor_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
	if [ -n "$mce_pid" ] && kill -0 "$mce_pid" 2>/dev/null; then
		kill -TERM "$mce_pid"; wait "$mce_pid" 2>/dev/null
	fi
	# Whatever mce left behind (it should leave nothing; say so if it did).
	remove_instance_leftovers bench "$INST"
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck source=scripts/bench-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
calc() { awk "BEGIN { printf \"%.${2:-3}f\", $1 }"; }

# ---------------------------------------------------------------- mce with three endpoints
MCE_PORT="$(free_port 18700)"
TAGS=(a b c d e) # PROBE_TAG of the serial steps: "x" through 5 steps comes back as "xabcde"
probe_yaml() { # hostname [tag]
	printf '      - ContainerHostname: %s\n        Image: %s\n' "$1" "$IMAGE"
	[ -z "${2:-}" ] || printf '        Environment: {PROBE_TAG: "%s"}\n' "$2"
}
{
	echo "Models:"
	echo "  - ModelName: bench-direct"
	echo "    Containers:"
	probe_yaml p1
	echo "    InferenceExecutionConfig: {Mode: Direct}"
	for n in 2 5; do
		echo "  - ModelName: bench-serial$n"
		echo "    Containers:"
		for i in $(seq 1 "$n"); do probe_yaml "s$i" "${TAGS[i - 1]}"; done
		echo "    InferenceExecutionConfig: {Mode: Serial}"
	done
	echo "EndpointConfigs:"
	for m in direct serial2 serial5; do
		echo "  - EndpointConfigName: bench-$m-config"
		echo "    ProductionVariants:"
		echo "      - {VariantName: AllTraffic, ModelName: bench-$m, InitialInstanceCount: 1, InstanceType: ml.c5.large, InitialVariantWeight: 1}"
	done
	echo "Endpoints:"
	for m in direct serial2 serial5; do
		echo "  - {EndpointName: bench-$m, EndpointConfigName: bench-$m-config}"
	done
} >"$TMP/endpoints.yaml"

echo "bench: load average at start: $(loadavg) ($(nproc) cores)"
echo "bench: starting mce on 127.0.0.1:$MCE_PORT (instance $INST, 8 probe containers)"
mkdir -p "$TMP/state"
t0=$(date +%s.%N)
PPROF_ARGS=()
if [ -n "${BENCH_PPROF:-}" ]; then # BENCH_PPROF=N: a CPU profile of mce during the mce Direct cell at N clients
	PPROF_PORT="$(free_port 18790)"
	PPROF_ARGS=(--debug-listen "127.0.0.1:$PPROF_PORT")
fi
read -r -a MCE_ARGS <<<"${BENCH_MCE_ARGS:-}" # more flags of mce serve, e.g. --invoke-loop=false
bin/mce serve --listen "127.0.0.1:$MCE_PORT" --instance "$INST" --state-dir "$TMP/state" --log-level warn "${PPROF_ARGS[@]}" "${MCE_ARGS[@]}" \
	-f "$TMP/endpoints.yaml" >"$TMP/mce.log" 2>&1 &
mce_pid=$!
status=""
for _ in $(seq 1 240); do
	kill -0 "$mce_pid" 2>/dev/null || { cat "$TMP/mce.log" >&2; die "mce exited early"; }
	status="$(curl -fsS "http://127.0.0.1:$MCE_PORT/mce/endpoints" 2>/dev/null || true)"
	[ "$(grep -o '"InService"' <<<"$status" | wc -l)" -eq 3 ] && break
	sleep 0.25
done
[ "$(grep -o '"InService"' <<<"$status" | wc -l)" -eq 3 ] || { cat "$TMP/mce.log" >&2; die "endpoints not InService after 60 s: $status"; }
echo "bench: 3 endpoints InService after $(calc "$(date +%s.%N) - $t0" 1) s"

# The Direct endpoint's container: its address on mce's bridge network and its port.
cid="$(docker ps -q --filter "label=io.mce.instance=$INST" --filter "label=io.mce.endpoint=bench-direct")"
[ "$(wc -w <<<"$cid")" -eq 1 ] || die "expected one container for bench-direct, got: $cid"
net="$(docker inspect -f '{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{"\n"}}{{end}}' "$cid" | head -1)"
ip="$(docker inspect -f "{{(index .NetworkSettings.Networks \"$net\").IPAddress}}" "$cid")"
cport="$(docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$cid" | sed -n 's/^SAGEMAKER_BIND_TO_PORT=//p')"
cport="${cport:-8080}"
ADDR="$ip:$cport"
echo "bench: Direct endpoint's probe at $ADDR on network $net"

# ---------------------------------------------------------------- a twin probe with a published port
pcid="$(docker run -d --network "$net" -p 127.0.0.1::8080 --label "bench=$$" --name "mce-bench-$$-published" "$IMAGE")"
PUB="$(docker port "$pcid" 8080/tcp | grep '^127\.0\.0\.1:' | head -1)"
[ -n "$PUB" ] || die "no published port for the twin probe"
for _ in $(seq 1 100); do
	[ "$(curl -s -o /dev/null -w '%{http_code}' "http://$PUB/ping" || true)" = 200 ] && break
	sleep 0.1
done
echo "bench: twin probe (same image, same network) published on $PUB"

# ---------------------------------------------------------------- nginx
NGINX_PORT="$(free_port $((MCE_PORT + 1)))"
mkdir -p "$TMP/nginx"
sed -e "s|@DIR@|$TMP/nginx|g" -e "s|@LISTEN@|127.0.0.1:$NGINX_PORT|g" -e "s|@UPSTREAM@|$ADDR|g" \
	bench/nginx.conf.template >"$TMP/nginx/nginx.conf"
nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -e "$TMP/nginx/error.log" -g 'daemon off;' &
nginx_pid=$!
for _ in $(seq 1 100); do
	[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$NGINX_PORT/ping" || true)" = 200 ] && break
	kill -0 "$nginx_pid" 2>/dev/null || { cat "$TMP/nginx/error.log" >&2; die "nginx exited"; }
	sleep 0.1
done
echo "bench: nginx (1 worker, keepalive upstream) on 127.0.0.1:$NGINX_PORT -> $ADDR"

# ---------------------------------------------------------------- the Go floors (bench/floor)
# The least a Go relay does per call, with mce's own container client: net/http's server, and a loop per
# connection on net/http's parser. They split mce's cost into server, runtime and mce's own work.
CGO_ENABLED=0 go build -o build/floor ./bench/floor
declare -A FLOOR_ADDR
for kind in nethttp loop; do
	build/floor -server "$kind" -upstream "http://$ADDR" -listen 127.0.0.1:0 >"$TMP/floor-$kind.addr" 2>"$TMP/floor-$kind.log" &
	floor_pids+=($!)
	for _ in $(seq 1 100); do [ -s "$TMP/floor-$kind.addr" ] && break; sleep 0.05; done
	FLOOR_ADDR[$kind]="$(head -1 "$TMP/floor-$kind.addr")"
	[ -n "${FLOOR_ADDR[$kind]}" ] || { cat "$TMP/floor-$kind.log" >&2; die "floor -server $kind did not start"; }
done
echo "bench: Go floors: net/http on ${FLOOR_ADDR[nethttp]}, connection loop on ${FLOOR_ADDR[loop]} -> $ADDR"

# ---------------------------------------------------------------- the paths, and a correctness check
MCE="http://127.0.0.1:$MCE_PORT/endpoints"
PATHS=(straight published nginx floorloop floorhttp direct serial2 serial5)
declare -A URL=(
	[straight]="http://$ADDR/invocations"
	[published]="http://$PUB/invocations"
	[nginx]="http://127.0.0.1:$NGINX_PORT/invocations"
	[floorloop]="http://${FLOOR_ADDR[loop]}/invocations"
	[floorhttp]="http://${FLOOR_ADDR[nethttp]}/invocations"
	[direct]="$MCE/bench-direct/invocations"
	[serial2]="$MCE/bench-serial2/invocations"
	[serial5]="$MCE/bench-serial5/invocations"
)
declare -A TARGET=([direct]=p1)
declare -A SUFFIX=([serial2]=ab [serial5]=abcde)
declare -A LABEL=(
	[straight]="straight to the container (bridge address)"
	[published]="Docker published port 127.0.0.1 (twin container)"
	[nginx]="nginx → container address"
	[floorloop]="Go floor: connection loop + mce's client"
	[floorhttp]="Go floor: net/http server + mce's client"
	[direct]="mce Direct (target hostname p1)"
	[serial2]="mce Serial, 2 containers"
	[serial5]="mce Serial, 5 containers"
)
body="$(printf '0123456789abcdef%.0s' 1 2 3 4)"
for p in "${PATHS[@]}"; do
	hdr=()
	[ -z "${TARGET[$p]:-}" ] || hdr=(-H "X-Amzn-SageMaker-Target-Container-Hostname: ${TARGET[$p]}")
	got="$(curl -fsS -X POST -H 'Content-Type: application/octet-stream' "${hdr[@]}" --data-binary "$body" "${URL[$p]}")" ||
		die "$p: POST ${URL[$p]} failed"
	[ "$got" = "$body${SUFFIX[$p]:-}" ] || die "$p: POST ${URL[$p]} answered '$got', want '$body${SUFFIX[$p]:-}'"
done
echo "bench: every path echoes the 64-byte body correctly (serial chains append their tags)"

# ---------------------------------------------------------------- wrk
declare -A RPS P50 P99 FAIL CPU SYS USR
# BENCH_PERF=N: during the cells at N clients, perf stat counts the system calls (by kind) and the context
# switches of nginx's worker, the Go floor loop and mce, for a table per call. The counters are the kernel's
# own (tracepoints and software events), so they barely slow the process down.
PERF_EVENTS=(raw_syscalls:sys_enter context-switches cpu-migrations)
PERF_CALLS=(read write writev readv recvfrom sendto epoll_wait epoll_pwait epoll_ctl futex nanosleep sched_yield)
for k in "${PERF_CALLS[@]}"; do PERF_EVENTS+=("syscalls:sys_enter_$k"); done
declare -A PERF
ctx_switches() { # "VOLUNTARY NONVOLUNTARY": context switches of a process's threads (those alive now)
	cat /proc/"$1"/task/*/status 2>/dev/null |
		awk '/^voluntary_ctxt_switches/ { v += $2 } /^nonvoluntary_ctxt_switches/ { n += $2 } END { print v + 0, n + 0 }'
}
: >"$RAW"
HZ="$(getconf CLK_TCK)"
nginx_worker="$(pgrep -P "$nginx_pid" | head -1)"
cpu_ticks() { # "USER SYSTEM": clock ticks of the processes given (all their threads)
	# /proc/PID/stat after the ") " that ends the command name starts at field 3; utime, stime are 14, 15.
	local pid
	for pid in "$@"; do sed 's/^.*) //' "/proc/$pid/stat"; done | awk '{ u += $12; s += $13 } END { print u + 0, s + 0 }'
}
run_cell() { # path clients
	local p="$1" c="$2" out line pids=() t0 t1 cs0 cs1
	case "$p" in
	nginx) pids=("$nginx_worker") ;;
	floorhttp) pids=("${floor_pids[0]}") ;;
	floorloop) pids=("${floor_pids[1]}") ;;
	direct | serial*) pids=("$mce_pid") ;;
	esac
	BENCH_TARGET_CONTAINER="${TARGET[$p]:-}" "${PIN[@]}" wrk -t1 -c"$c" -d"${WARM}s" -s "$LUA" "${URL[$p]}" >/dev/null 2>&1 || true
	[ ${#pids[@]} -eq 0 ] || t0="$(cpu_ticks "${pids[@]}")"
	local prof=""
	if [ -n "${BENCH_PPROF:-}" ] && [ "$p" = direct ] && [ "$c" = "$BENCH_PPROF" ]; then
		curl -fsS -o build/bench-mce-cpu.pprof "http://127.0.0.1:$PPROF_PORT/debug/pprof/profile?seconds=$((DUR > 1 ? DUR - 1 : 1))" &
		prof=$!
	fi
	local perfpid=""
	if [ -n "${BENCH_PERF:-}" ] && [ "$c" = "$BENCH_PERF" ] && [ ${#pids[@]} -gt 0 ] && [[ " nginx floorloop direct " == *" $p "* ]]; then
		perf stat -x, -o "$TMP/perf-$p.csv" -e "$(IFS=,; echo "${PERF_EVENTS[*]}")" -p "${pids[0]}" -- sleep "$DUR" 2>/dev/null &
		perfpid=$!
		read -r -a cs0 <<<"$(ctx_switches "${pids[0]}")"
	fi
	out="$(BENCH_TARGET_CONTAINER="${TARGET[$p]:-}" "${PIN[@]}" wrk -t1 -c"$c" -d"${DUR}s" --latency -s "$LUA" "${URL[$p]}" 2>&1)" || true
	if [ ${#pids[@]} -gt 0 ]; then
		read -r -a t1 <<<"$(cpu_ticks "${pids[@]}")"
		read -r -a t0 <<<"$t0"
		CPU[$p,$c]=$((t1[0] + t1[1] - t0[0] - t0[1]))
		SYS[$p,$c]=$((t1[1] - t0[1]))
	fi
	if [ -n "$perfpid" ]; then
		read -r -a cs1 <<<"$(ctx_switches "${pids[0]}")"
		wait "$perfpid" || echo "bench: perf stat failed for $p (BENCH_PERF needs perf and its syscall tracepoints)" >&2
	fi
	if [ -n "$prof" ]; then
		wait "$prof" && echo "bench: mce's CPU profile of this cell in build/bench-mce-cpu.pprof (go tool pprof -top bin/mce build/bench-mce-cpu.pprof)"
	fi
	printf '=== %s, %s clients (load %s)\n%s\n\n' "$p" "$c" "$(loadavg)" "$out" >>"$RAW"
	line="$(grep '^BENCH ' <<<"$out" || true)"
	[ -n "$line" ] || { echo "$out" >&2; die "$p at $c clients: no result from wrk"; }
	local -A v=()
	local kv
	for kv in ${line#BENCH }; do v[${kv%%=*}]=${kv#*=}; done
	RPS[$p,$c]="$(calc "${v[requests]} / (${v[duration_us]} / 1e6)" 0)"
	P50[$p,$c]="$(calc "${v[p50_us]} / 1000" 3)"
	P99[$p,$c]="$(calc "${v[p99_us]} / 1000" 3)"
	FAIL[$p,$c]=$((${v[status]} + ${v[connect]} + ${v[read]} + ${v[write]} + ${v[timeout]}))
	if [ -n "${CPU[$p,$c]:-}" ]; then
		CPU[$p,$c]="$(calc "${CPU[$p,$c]} * 1e6 / $HZ / ${v[requests]}" 1)"
		SYS[$p,$c]="$(calc "${SYS[$p,$c]} * 1e6 / $HZ / ${v[requests]}" 1)"
		USR[$p,$c]="$(calc "${CPU[$p,$c]} - ${SYS[$p,$c]}" 1)"
	fi
	if [ -n "$perfpid" ] && [ -s "$TMP/perf-$p.csv" ]; then
		# perf stat -x, lines: count,unit,event,...; counts over the wrk run, per call of it.
		local ev n
		while IFS=, read -r n _ ev _; do
			[[ "$n" =~ ^[0-9]+$ ]] || continue
			ev=${ev#syscalls:sys_enter_}
			PERF[$p,$ev]="$(calc "$n / ${v[requests]}" 2)"
		done <"$TMP/perf-$p.csv"
		PERF[$p,voluntary]="$(calc "(${cs1[0]} - ${cs0[0]}) / ${v[requests]}" 2)"
		PERF[$p,involuntary]="$(calc "(${cs1[1]} - ${cs0[1]}) / ${v[requests]}" 2)"
	fi
	printf 'bench: %-10s %3s clients  %7s rps  p50 %7s ms  p99 %7s ms  failed %s\n' \
		"$p" "$c" "${RPS[$p,$c]}" "${P50[$p,$c]}" "${P99[$p,$c]}" "${FAIL[$p,$c]}"
}
echo "bench: wrk -t1, ${WARM} s warm-up + ${DUR} s per cell, paths interleaved per client count"
LOAD_START="$(loadavg)"
t0=$(date +%s)
for c in "${CLIENTS[@]}"; do
	echo "bench: -- $c clients (load $(loadavg))"
	for p in "${PATHS[@]}"; do run_cell "$p" "$c"; done
done
LOAD_END="$(loadavg)"

# ---------------------------------------------------------------- report
has() { [ -n "${RPS[$1,$2]:-}" ]; }
le() { awk "BEGIN { exit !($1 <= $2) }"; }
ge() { awk "BEGIN { exit !($1 >= $2) }"; }
npass=0
nfail=0
verdict() { # text command...: PASS when the command succeeds
	local text="$1"
	shift
	if "$@"; then npass=$((npass + 1)); echo "- PASS: $text"; else nfail=$((nfail + 1)); echo "- FAIL: $text"; fi
}
report() {
	echo "## mce benchmark ($(date -u '+%Y-%m-%d %H:%M UTC'))"
	echo
	echo "$(nproc) cores; load average $LOAD_START at the start of the measurements, $LOAD_END at the end; wrk -t1," \
		"${WARM} s warm-up + ${DUR} s per cell, POST of 64 bytes (application/octet-stream), keep-alive${BENCH_PIN:+, wrk pinned to CPU $BENCH_PIN (taskset)}${BENCH_MCE_ARGS:+, mce serve $BENCH_MCE_ARGS}." \
		"straight, nginx and mce Direct hit the same probe container ($ADDR); the published-port row uses a twin" \
		"probe (same image, same network). failed = non-2xx + socket errors (connect/read/write/timeout)."
	echo
	echo "| path | clients | rps | p50 ms | p99 ms | failed |"
	echo "|---|---:|---:|---:|---:|---:|"
	for p in "${PATHS[@]}"; do
		for c in "${CLIENTS[@]}"; do
			has "$p" "$c" && echo "| ${LABEL[$p]} | $c | ${RPS[$p,$c]} | ${P50[$p,$c]} | ${P99[$p,$c]} | ${FAIL[$p,$c]} |"
		done
	done
	echo
	if ! { has straight 1 && has straight 50 && has straight 200; }; then
		echo "(derived numbers and verdicts need 1, 50 and 200 clients)"
		return
	fi
	local ma na
	ma="$(calc "${P50[direct,1]} - ${P50[straight,1]}")"
	na="$(calc "${P50[nginx,1]} - ${P50[straight,1]}")"
	echo "### Derived"
	echo
	echo "- added p50 at 1 client (path p50 − straight p50): mce Direct $ma ms, nginx $na ms," \
		"published port $(calc "${P50[published,1]} - ${P50[straight,1]}") ms"
	for c in 50 200; do
		echo "- throughput at $c clients: mce/nginx $(calc "${RPS[direct,$c]} / ${RPS[nginx,$c]}" 2)," \
			"mce/straight $(calc "${RPS[direct,$c]} / ${RPS[straight,$c]}" 2)," \
			"nginx/straight $(calc "${RPS[nginx,$c]} / ${RPS[straight,$c]}" 2)"
	done
	local cells
	for p in nginx floorloop floorhttp direct serial2 serial5; do
		cells=""
		for c in "${CLIENTS[@]}"; do cells="$cells${cells:+, }${CPU[$p,$c]:-?} at $c"; done
		echo "- proxy CPU per request (µs of user+system time of the nginx worker / the mce process), ${LABEL[$p]}: $cells"
	done
	# The kernel's part (the socket calls, and on loopback and the bridge the delivery to the reader) against
	# the program's own: which side of the gap is the program's.
	for p in nginx floorloop floorhttp direct; do
		cells=""
		for c in "${CLIENTS[@]}"; do cells="$cells${cells:+, }${SYS[$p,$c]:-?} system + ${USR[$p,$c]:-?} user at $c"; done
		echo "- of that, µs in the kernel (system) and in the program (user), ${LABEL[$p]}: $cells"
	done
	for c in 50 200; do
		echo "- CPU seconds per 1,000 calls at $c clients: nginx $(calc "${CPU[nginx,$c]} / 1000" 4)," \
			"Go floor loop $(calc "${CPU[floorloop,$c]} / 1000" 4), Go floor net/http $(calc "${CPU[floorhttp,$c]} / 1000" 4)," \
			"mce Direct $(calc "${CPU[direct,$c]} / 1000" 4); mce/nginx $(calc "${CPU[direct,$c]} / ${CPU[nginx,$c]}" 2)," \
			"floor net/http/nginx $(calc "${CPU[floorhttp,$c]} / ${CPU[nginx,$c]}" 2), floor loop/nginx $(calc "${CPU[floorloop,$c]} / ${CPU[nginx,$c]}" 2)"
		echo "- throughput at $c clients against the Go floors: mce/floor net/http $(calc "${RPS[direct,$c]} / ${RPS[floorhttp,$c]}" 2)," \
			"mce/floor loop $(calc "${RPS[direct,$c]} / ${RPS[floorloop,$c]}" 2), floor loop/nginx $(calc "${RPS[floorloop,$c]} / ${RPS[nginx,$c]}" 2)"
		echo "- where the CPU gap is at $c clients, µs per call: mce's kernel time − nginx's" \
			"$(calc "${SYS[direct,$c]} - ${SYS[nginx,$c]}" 1), mce's user time − nginx's $(calc "${USR[direct,$c]} - ${USR[nginx,$c]}" 1)," \
			"of which the Go floor loop's user time − nginx's $(calc "${USR[floorloop,$c]} - ${USR[nginx,$c]}" 1)" \
			"(what any Go relay with mce's client pays) and mce's user time − the floor loop's" \
			"$(calc "${USR[direct,$c]} - ${USR[floorloop,$c]}" 1) (mce's own work)"
	done
	if [ -n "${BENCH_PERF:-}" ]; then
		echo
		echo "System calls and context switches per call at $BENCH_PERF clients (perf stat on the proxy's process during the cell):"
		echo
		local row k
		row="| | all calls | context switches (voluntary + involuntary) | CPU migrations |"
		for k in "${PERF_CALLS[@]}"; do row="$row $k |"; done
		echo "$row"
		echo "|---|$(printf -- '---:|%.0s' $(seq 1 $((${#PERF_CALLS[@]} + 3))))"
		for p in nginx floorloop direct; do
			row="| ${LABEL[$p]} | ${PERF[$p,raw_syscalls:sys_enter]:-?} | ${PERF[$p,context-switches]:-?} (${PERF[$p,voluntary]:-?} + ${PERF[$p,involuntary]:-?}) | ${PERF[$p,cpu-migrations]:-?} |"
			for k in "${PERF_CALLS[@]}"; do row="$row ${PERF[$p,$k]:-?} |"; done
			echo "$row"
		done
		echo
	fi
	echo "- serial hop, latency at 1 client: hop(N) = (p50 serial N − p50 mce Direct) / (N − 1), what each extra" \
		"container adds; mce's share of a hop = hop(N) − straight p50 (the container's own round trip), compared with nginx's added p50."
	local n hop share
	for n in 2 5; do
		hop="$(calc "(${P50[serial$n,1]} - ${P50[direct,1]}) / ($n - 1)")"
		share="$(calc "$hop - ${P50[straight,1]}")"
		echo "  - N=$n: hop $hop ms, mce's share $share ms (nginx added $na ms)"
	done
	echo "- serial hop, throughput: container calls/s = N × rps of serial N, compared with nginx's rps;" \
		"serial p99 per hop = p99 of serial N / N, compared with nginx's p99."
	for n in 2 5; do
		for c in 50 200; do
			echo "  - N=$n, $c clients: $(calc "$n * ${RPS[serial$n,$c]}" 0) calls/s vs nginx ${RPS[nginx,$c]} rps" \
				"(ratio $(calc "$n * ${RPS[serial$n,$c]} / ${RPS[nginx,$c]}" 2))"
		done
	done
	echo
	echo "### Performance targets (bench/README.md)"
	echo
	verdict "mce Direct throughput at 1 client ≥ nginx's: ${RPS[direct,1]} vs ${RPS[nginx,1]} rps ($(calc "${RPS[direct,1]} / ${RPS[nginx,1]}" 2)×)" ge "${RPS[direct,1]}" "${RPS[nginx,1]}"
	for c in 50 200; do
		verdict "mce Direct throughput at $c clients ≥ 0.9 × nginx's: ${RPS[direct,$c]} vs ${RPS[nginx,$c]} rps ($(calc "${RPS[direct,$c]} / ${RPS[nginx,$c]}" 2)×)" ge "${RPS[direct,$c]}" "0.9 * ${RPS[nginx,$c]}"
	done
	for c in 50 200; do
		verdict "mce Direct CPU per call at $c clients ≤ 1.2 × nginx's: ${CPU[direct,$c]} vs ${CPU[nginx,$c]} µs ($(calc "${CPU[direct,$c]} / ${CPU[nginx,$c]}" 2)×)" le "${CPU[direct,$c]}" "1.2 * ${CPU[nginx,$c]}"
	done
	verdict "mce Direct added p50 at 1 client ≤ nginx's: $ma vs $na ms" le "$ma" "$na"
	for c in "${CLIENTS[@]}"; do
		verdict "mce Direct p99 at $c clients ≤ nginx's: ${P99[direct,$c]} vs ${P99[nginx,$c]} ms" le "${P99[direct,$c]}" "${P99[nginx,$c]}"
	done
	for n in 2 5; do
		share="$(calc "(${P50[serial$n,1]} - ${P50[direct,1]}) / ($n - 1) - ${P50[straight,1]}")"
		verdict "serial $n: mce's added p50 per hop at 1 client ≤ nginx's: $share vs $na ms" le "$share" "$na"
		for c in 50 200; do
			verdict "serial $n: container calls/s at $c clients ≥ nginx's rps: $(calc "$n * ${RPS[serial$n,$c]}" 0) vs ${RPS[nginx,$c]}" ge "$n * ${RPS[serial$n,$c]}" "${RPS[nginx,$c]}"
		done
		for c in "${CLIENTS[@]}"; do
			verdict "serial $n: p99 per hop at $c clients ≤ nginx's p99: $(calc "${P99[serial$n,$c]} / $n") vs ${P99[nginx,$c]} ms" le "${P99[serial$n,$c]} / $n" "${P99[nginx,$c]}"
		done
	done
	local mf=0 of=0 p c
	for p in "${PATHS[@]}"; do
		for c in "${CLIENTS[@]}"; do
			case "$p" in direct | serial*) mf=$((mf + ${FAIL[$p,$c]})) ;; *) of=$((of + ${FAIL[$p,$c]})) ;; esac
		done
	done
	verdict "zero failed requests through mce: $mf failed (other paths: $of)" [ "$mf" -eq 0 ]
	echo
	echo "$npass PASS, $nfail FAIL. Numbers vary between runs on a loaded 2-core machine; compare rows of one run only."
}
report | tee "$OUTMD"
echo "bench: measured in $(($(date +%s) - t0)) s; table in $OUTMD, raw wrk output in $RAW"
if [ "${BENCH_STRICT:-0}" = 1 ] && grep -q '^- FAIL' "$OUTMD"; then exit 1; fi
exit 0
