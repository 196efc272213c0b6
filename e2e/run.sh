#!/usr/bin/env bash
# End-to-end test with the real AWS clients (make e2e, the last step of make test):
# starts bin/mce with e2e/endpoints.yaml on a free 127.0.0.1 port, runs
# e2e/test_runtime.py (the runtime API) and then e2e/test_control.py (the
# control plane: models, endpoint configs, endpoints) in the same mce session,
# both with boto3 and the aws CLI from Debian (endpoint URL changed, nothing
# else), stops mce with SIGTERM and checks it left no container or network
# behind; its last line is the one summary "N passed, M failed" over both
# scripts and those two checks. Builds nothing: it checks the prerequisites
# and names the make target that makes each.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "e2e: $*" >&2; exit 1; }

# --- prerequisites
[ -x bin/mce ] || fail "bin/mce is missing: run 'make build'"
for m in featurizer classifier sentiment-en sentiment-de; do
  [ -f "build/models/$m.tar.gz" ] || fail "build/models/$m.tar.gz is missing: run 'make models'"
done
command -v docker >/dev/null 2>&1 || fail "docker is not installed"
for i in featurizer classifier sentiment probe; do
  docker image inspect "mce-example/$i:latest" >/dev/null 2>&1 || fail "image mce-example/$i:latest is missing: run 'make images'"
done
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import boto3' 2>/dev/null || fail "/usr/bin/python3 with boto3 (python3-boto3) is missing: run 'make deps'"
[ -x /usr/bin/aws ] || fail "/usr/bin/aws (awscli) is missing: run 'make deps'"
command -v curl >/dev/null 2>&1 || fail "curl is missing: run 'make deps'"

# --- start mce
instance="e2e-$$"
port="$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
url="http://127.0.0.1:${port}"
state="$(mktemp -d)"
home="$(mktemp -d)"
mkdir -p build
log="build/e2e.log"
mapfile -t endpoints < <(awk '/^Endpoints:/ { on = 1; next } /^[^ #]/ { on = 0 } on && /EndpointName:/ { print $NF }' e2e/endpoints.yaml)
[ "${#endpoints[@]}" -gt 0 ] || fail "no endpoints found in e2e/endpoints.yaml"

started=$(date +%s)
bin/mce serve --listen "127.0.0.1:${port}" --instance "$instance" --state-dir "$state" \
  --container-timeout 2s --log-format json -f e2e/endpoints.yaml >"$log" 2>&1 &
pid=$!

cleanup() {
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  # Only after a failure is anything of this instance left; remove it.
  local c n
  c="$(docker ps -aq --filter "label=io.mce.instance=${instance}")"
  [ -z "$c" ] || docker rm -f $c >/dev/null 2>&1 || true
  n="$(docker network ls -q --filter "label=io.mce.instance=${instance}")"
  [ -z "$n" ] || docker network rm $n >/dev/null 2>&1 || true
  rm -rf "$state" "$home"
}
trap cleanup EXIT

echo "e2e: mce on ${url}, instance ${instance}, log ${log}; waiting for ${#endpoints[@]} endpoints"
ready=""
for _ in $(seq 1 240); do # 60 s
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "e2e: mce exited before the endpoints were InService; its log:" >&2
    cat "$log" >&2
    exit 1
  fi
  status="$(curl -fsS --max-time 2 "${url}/mce/endpoints" 2>/dev/null || true)"
  ready=yes
  for e in "${endpoints[@]}"; do
    grep -q "\"EndpointName\":\"${e}\",\"EndpointStatus\":\"InService\"" <<<"$status" || { ready=""; break; }
  done
  [ -n "$ready" ] && break
  sleep 0.25
done
if [ -z "$ready" ]; then
  echo "e2e: endpoints not InService after 60 s: ${status:-no answer}; mce log:" >&2
  tail -50 "$log" >&2
  exit 1
fi
echo "e2e: all endpoints InService after $(($(date +%s) - started)) s"

# --- the clients: Debian's python3/boto3 and aws CLI, fake credentials, nothing
# from this machine's AWS configuration or Python environment.
rc=0
passed=0
failed=0
summary_re='^([0-9]+) passed, ([0-9]+) failed$'
for t in test_runtime test_control; do
  echo "e2e: e2e/${t}.py"
  out="$(mktemp)"
  t_started=$(date +%s)
  # Each script ends with its own "N passed, M failed"; it is held back here
  # and added into the one summary line at the end.
  set +e
  env -i PATH=/usr/bin:/bin HOME="$home" LANG=C.UTF-8 \
    AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY \
    AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true \
    AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_PAGER= \
    /usr/bin/python3 -B -I "e2e/${t}.py" --url "$url" 2>&1 | tee "$out" | grep -Ev "$summary_re"
  t_rc="${PIPESTATUS[0]}"
  set -e
  last="$(grep -E "$summary_re" "$out" | tail -1 || true)"
  rm -f "$out"
  if [[ "$last" =~ $summary_re ]]; then
    passed=$((passed + BASH_REMATCH[1]))
    failed=$((failed + BASH_REMATCH[2]))
    echo "e2e: e2e/${t}.py: ${BASH_REMATCH[1]} passed, ${BASH_REMATCH[2]} failed in $(($(date +%s) - t_started)) s"
  else
    echo "e2e: e2e/${t}.py ended (status ${t_rc}) without its summary line" >&2
    failed=$((failed + 1))
  fi
  [ "$t_rc" -eq 0 ] || rc=1
done

# --- stop mce and look for leftovers
echo "e2e: stopping mce (SIGTERM)"
kill -TERM "$pid"
mce_rc=0
wait "$pid" || mce_rc=$?
# Two more checks, counted in the summary: mce stops cleanly, and leaves nothing.
if [ "$mce_rc" -ne 0 ]; then
  echo "FAIL [e2e] mce exited with status ${mce_rc} on SIGTERM; end of its log:"
  tail -30 "$log" >&2
  failed=$((failed + 1))
  rc=1
else
  echo "PASS [e2e] mce stopped with status 0 on SIGTERM"
  passed=$((passed + 1))
fi
left="$(docker ps -aq --filter "label=io.mce.instance=${instance}")"
nets="$(docker network ls -q --filter "label=io.mce.instance=${instance}")"
if [ -n "$left" ] || [ -n "$nets" ]; then
  echo "FAIL [e2e] mce left behind containers [${left//$'\n'/ }] networks [${nets//$'\n'/ }]"
  failed=$((failed + 1))
  rc=1
else
  echo "PASS [e2e] no containers or networks left"
  passed=$((passed + 1))
fi
[ "$failed" -eq 0 ] || rc=1
if [ "$rc" -ne 0 ]; then
  echo "e2e: FAILED in $(($(date +%s) - started)) s (mce log: ${log})" >&2
else
  echo "e2e: OK in $(($(date +%s) - started)) s"
fi
# The one summary line, last: both scripts' checks and the two above.
echo "${passed} passed, ${failed} failed"
exit "$rc"
