#!/usr/bin/env bash
# A real check of compose/docker-compose.yml: mce in a container, on the local engine, with the two example
# endpoints. Builds the images and models, brings the project up, waits for both endpoints to be InService,
# invokes the A/B endpoint's english container and the preprocessing chain with curl, checks the answers, brings
# the project down and checks that nothing mce made is left on the engine.
#
# Usage: compose/test.sh
#   MCE_PORT      port published on 127.0.0.1 (default 18480, so as not to meet an mce on 8080)
#   MCE_INSTANCE  instance name and compose project (default mcetest)
#   WAIT          seconds to wait for InService (default 120)
# Only 127.0.0.1 and the containers this project starts receive traffic.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The compose file mounts ${PWD}/examples and ${PWD}/build at the same paths (cd has set PWD).
export MCE_PORT=${MCE_PORT:-18480} MCE_INSTANCE=${MCE_INSTANCE:-mcetest}
wait_s=${WAIT:-120}
base=http://127.0.0.1:$MCE_PORT
dc=(docker-compose -f compose/docker-compose.yml -p "$MCE_INSTANCE")
start=$SECONDS

say() { printf 'compose/test.sh: %s\n' "$*" >&2; }
fail() {
	say "FAIL: $*"
	"${dc[@]}" logs --no-color --tail=40 mce >&2 || true
	exit 1
}
down() {
	# stop (mce tears its endpoints down on SIGTERM), keep mce's last log lines, then remove the project.
	timeout 150 "${dc[@]}" stop -t 90 >/dev/null 2>&1 || say "docker-compose stop failed or timed out"
	"${dc[@]}" logs --no-color --tail=3 mce 2>/dev/null | grep -v "^Attaching" | sed 's/^/  /' >&2 || true
	timeout 150 "${dc[@]}" down -t 90 --remove-orphans >/dev/null 2>&1 || say "docker-compose down failed or timed out"
}
leftovers() {
	local f=(--filter label=io.mce.managed=true --filter "label=io.mce.instance=$MCE_INSTANCE")
	echo "$(docker ps -aq "${f[@]}" | wc -l) containers, $(docker network ls -q "${f[@]}" | wc -l) networks"
}

if curl -s -m 2 -o /dev/null "$base/"; then
	fail "something already answers on 127.0.0.1:$MCE_PORT; set MCE_PORT"
fi
# quiet CMD...: runs CMD, showing its output only if it fails.
quiet() {
	local log
	log=$(mktemp)
	"$@" >"$log" 2>&1 || { cat "$log" >&2; rm -f "$log"; fail "$*"; }
	rm -f "$log"
}
quiet scripts/images.sh featurizer classifier sentiment mce
quiet scripts/models.sh build/models
say "images and models ready ($((SECONDS - start)) s)"

trap down EXIT
"${dc[@]}" down -t 90 --remove-orphans >/dev/null 2>&1 || true # a previous run's project
t0=$SECONDS
"${dc[@]}" up -d >/dev/null 2>&1 || fail "docker-compose up"

# Both endpoints InService, within $wait_s seconds.
deadline=$((SECONDS + wait_s))
until body=$(curl -s -m 5 "$base/mce/endpoints") &&
	[[ $(grep -o '"EndpointStatus":"InService"' <<<"$body" | wc -l) -eq 2 ]]; do
	if ((SECONDS >= deadline)); then
		fail "endpoints not InService within ${wait_s}s: ${body:-no answer}"
	fi
	if [[ $(docker inspect -f '{{.State.Running}}' "$("${dc[@]}" ps -q mce)" 2>/dev/null) != true ]]; then
		fail "the mce container is not running"
	fi
	sleep 0.5
done
say "both endpoints InService $((SECONDS - t0)) s after up"
# Read the whole log first: with pipefail, grep -q quitting early would fail the pipeline by SIGPIPE.
mce_log="$("${dc[@]}" logs --no-color mce)"
grep -q '"network_mode":"join"' <<<"$mce_log" || fail "mce did not pick network mode join"

# invoke ENDPOINT BODY [header...]: the response body; fails unless 200.
invoke() {
	local ep=$1 data=$2 out code
	shift 2
	out=$(mktemp)
	code=$(curl -s -m 30 -o "$out" -w '%{http_code}' -X POST "$base/endpoints/$ep/invocations" \
		-H 'Content-Type: text/plain' "$@" --data-binary "$data") || true
	local body
	body=$(cat "$out")
	rm -f "$out"
	[[ $code == 200 ]] || fail "invoke $ep: HTTP $code: $body"
	printf '%s' "$body"
}

en=$(invoke ab-test 'what a lovely day, I love it' -H 'X-Amzn-SageMaker-Target-Container-Hostname: english')
say "ab-test english: $en"
grep -q '"language":"en"' <<<"$en" || fail "english answered from another model: $en"
grep -q '"label":"POSITIVE"' <<<"$en" || fail "english did not find a lovely day POSITIVE: $en"

chain=$(invoke preprocess-inference 'I was charged twice for my subscription, please refund the invoice' -H 'Accept: text/csv')
say "preprocess-inference: $chain"
grep -qi 'billing' <<<"$chain" || fail "the chain did not route a refund ticket to billing: $chain"

t1=$SECONDS
trap - EXIT
down
say "down in $((SECONDS - t1)) s"
left=$(leftovers)
[[ $left == "0 containers, 0 networks" ]] || fail "left on the engine after down: $left"
say "PASS in $((SECONDS - start)) s (nothing labelled io.mce.instance=$MCE_INSTANCE left)"
