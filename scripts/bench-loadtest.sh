#!/usr/bin/env bash
# make bench-loadtest: how honest `mce loadtest`'s numbers are, in one run on this machine (bench/README.md):
#
#   1. the generator's own ceiling: `mce loadtest` against a trivial endpoint (nginx answering 200 from one
#      worker, bench/trivial.nginx.conf.template), with wrk (C, one thread) against the same server for scale;
#   2. a side-by-side with Locust (Debian's python3-locust, users calling boto3 as in bench/locustfile.py) on
#      the same endpoints with the same users and duration: the trivial one, mce serving one probe container
#      (an echo server), and the same with every call taking LT_SLEEP (default 20ms) in the container, like
#      a small model (CustomAttributes sleep=..., which the probe honours);
#   3. reproducibility: the whole sequence runs LT_RUNS times (default 2) and the spread between runs is reported.
#
# Every cell: LT_USERS concurrent users (default 8) that send, wait for the answer and send again (no think
# time), all started within the first second, for LT_DURATION seconds (default 15), a 64-byte POST. The
# generators' CPU (user+system) comes from GNU time. The cells run one after the other, interleaved, so the ones
# compared were measured close together; the load average is printed with each. Not part of `make test`.
# Output: build/bench-loadtest.md (the table and ratios) and build/bench-loadtest/ (every report and CSV).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

USERS="${LT_USERS:-8}"
DUR="${LT_DURATION:-15}"
RUNS="${LT_RUNS:-2}"
IMAGE="mce-example/probe:latest"
INST="bench-lt-$$"
OUT="build/bench-loadtest"
OUTMD="build/bench-loadtest.md"

die() { echo "bench-loadtest: $*" >&2; exit 1; }
for c in wrk nginx docker curl ss locust python3 /usr/bin/time; do
	command -v "$c" >/dev/null 2>&1 || die "$c not found (make deps installs wrk, nginx-light, curl, python3-locust, time)"
done
python3 -c 'import boto3' 2>/dev/null || die "python3 has no boto3 (make deps installs python3-boto3)"
if [ ! -x bin/mce ]; then
	echo "bench-loadtest: building bin/mce"
	CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}" go build -o bin/mce ./cmd/mce
fi
docker image inspect "$IMAGE" >/dev/null 2>&1 || scripts/images.sh probe
rm -rf "$OUT"
mkdir -p "$OUT"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/mce-bench-lt.XXXXXX")"
mce_pid=""
nginx_pid=""
cleanup() {
	local rc=$?
	set +e
	if [ -n "$nginx_pid" ] && kill -0 "$nginx_pid" 2>/dev/null; then
		kill -TERM "$nginx_pid"; wait "$nginx_pid" 2>/dev/null
	fi
	if [ -n "$mce_pid" ] && kill -0 "$mce_pid" 2>/dev/null; then
		kill -TERM "$mce_pid"; wait "$mce_pid" 2>/dev/null
	fi
	# Whatever mce left behind (it should leave nothing; say so if it did).
	remove_instance_leftovers bench-loadtest "$INST"
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck source=scripts/bench-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"

# ---------------------------------------------------------------- mce with one probe endpoint
MCE_PORT="$(free_port 18900)"
cat >"$TMP/endpoints.yaml" <<EOF
Models:
  - ModelName: lt-probe
    Containers:
      - {ContainerHostname: probe, Image: $IMAGE}
EndpointConfigs:
  - EndpointConfigName: lt-probe-config
    ProductionVariants:
      - {VariantName: AllTraffic, ModelName: lt-probe, InitialInstanceCount: 1, InstanceType: ml.c5.large}
Endpoints:
  - {EndpointName: lt-probe, EndpointConfigName: lt-probe-config}
EOF
echo "bench-loadtest: load average at start: $(loadavg) ($(nproc) cores)"
mkdir -p "$TMP/state"
bin/mce serve --listen "127.0.0.1:$MCE_PORT" --instance "$INST" --state-dir "$TMP/state" --log-level warn \
	-f "$TMP/endpoints.yaml" >"$OUT/mce.log" 2>&1 &
mce_pid=$!
status=""
for _ in $(seq 1 240); do
	kill -0 "$mce_pid" 2>/dev/null || { cat "$OUT/mce.log" >&2; die "mce exited early"; }
	status="$(curl -fsS "http://127.0.0.1:$MCE_PORT/mce/endpoints" 2>/dev/null || true)"
	grep -q '"InService"' <<<"$status" && break
	sleep 0.25
done
grep -q '"InService"' <<<"$status" || { cat "$OUT/mce.log" >&2; die "endpoint not InService after 60 s: $status"; }
echo "bench-loadtest: mce on 127.0.0.1:$MCE_PORT serves lt-probe (instance $INST)"

# ---------------------------------------------------------------- the trivial endpoint
NGINX_PORT="$(free_port $((MCE_PORT + 1)))"
mkdir -p "$TMP/nginx"
sed -e "s|@DIR@|$TMP/nginx|g" -e "s|@LISTEN@|127.0.0.1:$NGINX_PORT|g" bench/trivial.nginx.conf.template >"$TMP/nginx/nginx.conf"
nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -e "$TMP/nginx/error.log" -g 'daemon off;' &
nginx_pid=$!
for _ in $(seq 1 100); do
	[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$NGINX_PORT/endpoints/lt-probe/invocations" || true)" = 200 ] && break
	kill -0 "$nginx_pid" 2>/dev/null || { cat "$TMP/nginx/error.log" >&2; die "nginx exited"; }
	sleep 0.1
done
echo "bench-loadtest: trivial endpoint (nginx, 1 worker, answers 200) on 127.0.0.1:$NGINX_PORT"

SLEEP="${LT_SLEEP:-20ms}"
declare -A URL=([trivial]="http://127.0.0.1:$NGINX_PORT" [mce]="http://127.0.0.1:$MCE_PORT" [slow]="http://127.0.0.1:$MCE_PORT")
declare -A ATTR=([trivial]="" [mce]="" [slow]="sleep=$SLEEP")
printf '0123456789abcdef%.0s' 1 2 3 4 >"$OUT/payload.bin"
# Both clients check the answer through the SDK; an echo that is wrong would still be a 200, so check it once here.
got="$(bin/mce invoke lt-probe --endpoint-url "${URL[mce]}" --content-type application/octet-stream @"$OUT/payload.bin")"
[ "$got" = "$(cat "$OUT/payload.bin")" ] || die "mce's probe endpoint answered '$got'"
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1 # mce without --credentials takes any signature

# cell RUN TOOL TARGET: one measurement; its files go to $OUT/RUN-TOOL-TARGET*
cell() {
	local run="$1" tool="$2" target="$3" name="$OUT/$1-$2-$3" load
	load="$(loadavg)"
	case "$tool" in
	mce)
		/usr/bin/time -f '%U %S %e' -o "$name.time" bin/mce loadtest lt-probe --endpoint-url "${URL[$target]}" \
			--payload "$OUT/payload.bin" --content-type application/octet-stream --users "$USERS" --spawn-rate "$USERS" \
			--duration "${DUR}s" --custom-attributes "${ATTR[$target]}" --metrics-url off --out "$name" -q >"$name.log" 2>&1 || { cat "$name.log" >&2; die "mce loadtest failed"; }
		;;
	locust)
		LOCUST_ENDPOINT_NAME=lt-probe LOCUST_PAYLOAD="$OUT/payload.bin" LOCUST_CONTENT_TYPE=application/octet-stream \
			LOCUST_CUSTOM_ATTRIBUTES="${ATTR[$target]}" \
			/usr/bin/time -f '%U %S %e' -o "$name.time" locust -f bench/locustfile.py --headless --only-summary \
			-u "$USERS" -r "$USERS" -t "${DUR}s" --host "${URL[$target]}" --csv "$name" --stop-timeout 10 \
			--loglevel WARNING --exit-code-on-error 0 >"$name.log" 2>&1 || { cat "$name.log" >&2; die "locust failed"; }
		;;
	wrk)
		/usr/bin/time -f '%U %S %e' -o "$name.time" wrk -t1 -c"$USERS" -d"${DUR}s" --latency -s bench/wrk.lua \
			"${URL[$target]}/endpoints/lt-probe/invocations" >"$name.log" 2>&1 || { cat "$name.log" >&2; die "wrk failed"; }
		;;
	esac
	echo "$load" >"$name.load"
	echo "bench-loadtest: run $run, $tool → $target done (load average before it: $load)"
}

echo "bench-loadtest: $RUNS runs of: wrk, mce loadtest, Locust → trivial; mce loadtest, Locust → mce; the same with $SLEEP a call; $USERS users, ${DUR} s each"
LOAD_START="$(loadavg)"
for run in $(seq 1 "$RUNS"); do
	cell "$run" wrk trivial
	cell "$run" mce trivial
	cell "$run" locust trivial
	cell "$run" mce mce
	cell "$run" locust mce
	cell "$run" mce slow
	cell "$run" locust slow
done
LOAD_END="$(loadavg)"
python3 bench/loadtest_summary.py "$OUT" "$RUNS" "$USERS" "$DUR" "$LOAD_START" "$LOAD_END" "$(nproc)" "$SLEEP" | tee "$OUTMD"
echo "bench-loadtest: table in $OUTMD, every report under $OUT"
