#!/usr/bin/env bash
# End-to-end test with the real AWS clients (make e2e, the last step of make test):
# starts bin/mce with e2e/endpoints.yaml on a free 127.0.0.1 port, runs
# e2e/test_runtime.py (the runtime API), e2e/test_control.py (the
# control plane: models, endpoint configs, endpoints) and e2e/test_shadow.py
# (shadow variants, their copies seen in /metrics) in the same mce session,
# both with boto3 and the aws CLI from Debian (endpoint URL changed, nothing
# else), then e2e/test_s3.py: s3:// model data (single archives, a multi-model
# prefix, an S3Prefix folder, the SDK's repacked model.tar.gz and its s3://
# SAGEMAKER_SUBMIT_DIRECTORY in mce-framework/sklearn) uploaded with both clients to a real S3 server,
# versitygw, which this script starts on loopback and points mce at with
# --s3-endpoint, --s3-path-style and the standard AWS_* variables, and e2e/test_async.py:
# InvokeEndpointAsync with inputs and answers in that store, e2e/test_capture.py: data capture into that
# store (--capture-interval 1s) as the SageMaker Python SDK sets it up and changes it, read back with boto3 and
# the aws CLI, e2e/test_cloudwatch.py: the A/B loop (two variants, traffic, each variant's figures read from
# mce's CloudWatch API, a weight shift, the captured records) with Debian's clients (query protocol) and the
# newer pair (JSON), and e2e/test_components.py: inference
# components (an endpoint without models, create/describe/list/update/scale/delete, invocations by
# component name, the documented errors, tags) with a boto3 and an aws CLI new enough to know them
# (Debian's predate them: the first python3 on PATH, then /usr/bin/python3, whose botocore has
# CreateInferenceComponent, and the first such aws; without one the script is SKIPPED, counted in the
# summary, and with CI=true that fails the run); stops mce with SIGTERM and checks it left no container
# or network behind. Then it starts a second mce with authorization on (--credentials and
# --policies: copies of examples/authz's files in a temporary folder) and
# e2e/authz-endpoints.yaml, runs e2e/test_authz.py (SigV4 identities, the IAM
# policies, SIGHUP reloads) and e2e/test_identity.py (STS's and IAM's answers to
# the calls SDKs make before they deploy, and the SageMaker Python SDK v3's
# requests replayed; it also runs against the first mce, whose identity is the
# local one) against it and stops it the same way. A third mce, with AWS's timings
# compressed 60 times (--time-compression 60) and e2e/ops-endpoints.yaml, runs
# e2e/test_operations.py (rollouts with deployment guardrails and an automatic
# rollback, a variant and an inference component that scale on their own) with
# Debian's pair and the newer one. Its last
# line is the one summary "N passed, M failed" (", K skipped" when a script
# was skipped) over the scripts and the stop checks. Builds nothing: it checks the prerequisites and names the make
# target that makes each.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "e2e: $*" >&2; exit 1; }

# --- prerequisites
[ -x bin/mce ] || fail "bin/mce is missing: run 'make build'"
for m in featurizer classifier sentiment-en sentiment-de; do
  [ -f "build/models/$m.tar.gz" ] || fail "build/models/$m.tar.gz is missing: run 'make models'"
done
command -v docker >/dev/null 2>&1 || fail "docker is not installed"
for i in featurizer classifier sentiment probe modelserver; do
  docker image inspect "mce-example/$i:latest" >/dev/null 2>&1 || fail "image mce-example/$i:latest is missing: run 'make images'"
done
# test_s3.py runs the SageMaker Python SDK's inference code in the scikit-learn framework image.
docker image inspect mce-framework/sklearn:latest >/dev/null 2>&1 ||
  fail "image mce-framework/sklearn:latest is missing: run 'make framework-images'"
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import boto3' 2>/dev/null || fail "/usr/bin/python3 with boto3 (python3-boto3) is missing: run 'make deps'"
[ -x /usr/bin/aws ] || fail "/usr/bin/aws (awscli) is missing: run 'make deps'"
command -v curl >/dev/null 2>&1 || fail "curl is missing: run 'make deps'"
# versitygw: where scripts/deps.sh installs it (internal/s3test looks in the same places).
vgw="$(scripts/versitygw.sh --path 2>/dev/null || true)"
[ -n "$vgw" ] || fail "versitygw (a real S3 server for the s3:// checks) is missing: run 'make deps'"

# The clients of inference components (test_components.py): ic_python, ic_aws, ic_missing.
# shellcheck source=e2e/ic-clients.sh
. e2e/ic-clients.sh
if [ -n "$ic_missing" ] && [ "${CI:-}" = true ]; then
  fail "CI=true, but e2e/test_components.py cannot run: ${ic_missing} (looked on PATH, then in /usr/bin)"
fi

# --- start mce
# start_mce PIDVAR INSTANCE PORT STATE LOG ENDPOINTS_FILE [mce serve flags...]:
# starts mce (its process id in the variable PIDVAR) and waits until every
# endpoint of ENDPOINTS_FILE is InService. It waits on that condition, by the
# clock, within a guard against a hang (E2E_READY_GUARD seconds, 300 by
# default: a loaded machine is slow, not stuck), and when it gives up says
# which endpoints were still pending and in which status.
start_mce() {
  local pidvar="$1" inst="$2" p="$3" st="$4" lg="$5" file="$6" pid
  shift 6
  local u="http://127.0.0.1:${p}" eps status ready="" t0 pending=() e st_e guard="${E2E_READY_GUARD:-300}"
  mapfile -t eps < <(awk '/^Endpoints:/ { on = 1; next } /^[^ #]/ { on = 0 } on && /EndpointName:/ { print $NF }' "$file")
  [ "${#eps[@]}" -gt 0 ] || fail "no endpoints found in ${file}"
  t0=$(date +%s)
  bin/mce serve --listen "127.0.0.1:${p}" --instance "$inst" --state-dir "$st" \
    --container-timeout 2s --log-format json -f "$file" "$@" >"$lg" 2>&1 &
  pid=$!
  printf -v "$pidvar" '%s' "$pid"
  echo "e2e: mce on ${u}, instance ${inst}, log ${lg}; waiting for ${#eps[@]} endpoints"
  while [ $(($(date +%s) - t0)) -lt "$guard" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "e2e: mce exited before the endpoints were InService; its log:" >&2
      cat "$lg" >&2
      exit 1
    fi
    status="$(curl -fsS --max-time 2 "${u}/mce/endpoints" 2>/dev/null || true)"
    pending=()
    for e in "${eps[@]}"; do
      grep -q "\"EndpointName\":\"${e}\",\"EndpointStatus\":\"InService\"" <<<"$status" || pending+=("$e")
    done
    [ "${#pending[@]}" -eq 0 ] && ready=yes && break
    sleep 0.25
  done
  if [ -z "$ready" ]; then
    echo "e2e: ${#pending[@]} of ${#eps[@]} endpoints not InService after ${guard} s:" >&2
    for e in "${pending[@]}"; do
      st_e="$(grep -o "\"EndpointName\":\"${e}\",\"EndpointStatus\":\"[A-Za-z]*\"" <<<"$status" | sed 's/.*"EndpointStatus":"//; s/"$//')"
      echo "e2e:   ${e}: ${st_e:-not listed}" >&2
    done
    [ -n "$status" ] || echo "e2e:   (mce did not answer GET /mce/endpoints)" >&2
    echo "e2e: mce log:" >&2
    tail -50 "$lg" >&2
    exit 1
  fi
  echo "e2e: all endpoints InService after $(($(date +%s) - t0)) s"
}

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# remove_instance PID INSTANCE: stops mce if it still runs and removes what
# is left of the instance (only after a failure is anything left).
remove_instance() {
  local p="$1" inst="$2" c n
  [ -n "$p" ] || return 0
  if kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  fi
  c="$(docker ps -aq --filter "label=io.mce.instance=${inst}")"
  [ -z "$c" ] || docker rm -f $c >/dev/null 2>&1 || true
  n="$(docker network ls -q --filter "label=io.mce.instance=${inst}")"
  [ -z "$n" ] || docker network rm $n >/dev/null 2>&1 || true
}

instance="e2e-$$"
port="$(free_port)"
url="http://127.0.0.1:${port}"
state="$(mktemp -d)"
home="$(mktemp -d)"
mkdir -p build
log="build/e2e.log"
# The authorizing second mce (set when it starts).
instance2="e2e-authz-$$"
pid2=""
state2=""
authz=""
# The third mce, with compressed time (set when it starts).
instance3="e2e-ops-$$"
pid3=""
state3=""

started=$(date +%s)
pid1=""
s3pid=""
s3dir="$(mktemp -d)"
cleanup() {
  remove_instance "$pid1" "$instance"
  remove_instance "$pid2" "$instance2"
  remove_instance "$pid3" "$instance3"
  if [ -n "$s3pid" ]; then kill -TERM "$s3pid" 2>/dev/null || true; wait "$s3pid" 2>/dev/null || true; fi
  rm -rf "$state" "$home" "$s3dir" ${state2:+"$state2"} ${authz:+"$authz"} ${state3:+"$state3"}
}
trap cleanup EXIT

# --- a real S3 server: versitygw on loopback, its POSIX backend in a temporary
# folder, random root keys (what mce and the clients sign S3 requests with).
s3port="$(free_port)"
s3url="http://127.0.0.1:${s3port}"
s3key="E2E$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
s3secret="$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')"
mkdir -p "$s3dir/data" "$s3dir/mme"
ROOT_ACCESS_KEY="$s3key" ROOT_SECRET_KEY="$s3secret" "$vgw" --port "127.0.0.1:${s3port}" posix "$s3dir/data" \
  >build/e2e-versitygw.log 2>&1 &
s3pid=$!
for _ in $(seq 1 120); do # 30 s
  curl -s -o /dev/null --max-time 1 "$s3url/" && break
  kill -0 "$s3pid" 2>/dev/null || { cat build/e2e-versitygw.log >&2; fail "versitygw exited"; }
  sleep 0.25
done
curl -s -o /dev/null --max-time 1 "$s3url/" || fail "versitygw did not answer on ${s3url} within 30 s"
echo "e2e: versitygw (S3) on ${s3url}, data in ${s3dir}/data"
# Three multi-model artifacts and their expected answers (about a second).
scripts/mme-models.sh "$s3dir/mme" 3 >/dev/null

# mce reads S3 through --s3-endpoint, with credentials from the standard chain.
AWS_ACCESS_KEY_ID="$s3key" AWS_SECRET_ACCESS_KEY="$s3secret" AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true \
  start_mce pid1 "$instance" "$port" "$state" "$log" e2e/endpoints.yaml --s3-endpoint "$s3url" --s3-path-style \
  --capture-interval 1s

# --- the clients: Debian's python3/boto3 and aws CLI, fake credentials, nothing
# from this machine's AWS configuration or Python environment.
rc=0
passed=0
failed=0
summary_re='^([0-9]+) passed, ([0-9]+) failed$'
skipped=0
# run_script NAME ARGS...: runs e2e/NAME.py with Debian's python3 and adds its
# summary to the totals.
run_script() {
  run_script_with /usr/bin/python3 "$@"
}
# run_script_with PYTHON NAME ARGS...: the same with another interpreter.
run_script_with() {
  local py="$1" t="$2" out t_started t_rc last
  shift 2
  echo "e2e: e2e/${t}.py (${py})"
  out="$(mktemp)"
  t_started=$(date +%s)
  # Each script ends with its own "N passed, M failed"; it is held back here
  # and added into the one summary line at the end.
  set +e
  env -i PATH=/usr/bin:/bin HOME="$home" LANG=C.UTF-8 \
    AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY \
    AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true \
    AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_PAGER= \
    "$py" -B -I "e2e/${t}.py" "$@" 2>&1 | tee "$out" | grep -Ev "$summary_re"
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
}
for t in test_runtime test_control test_shadow; do
  run_script "$t" --url "$url"
done
run_script test_s3 --url "$url" --s3-url "$s3url" --s3-key "$s3key" --s3-secret "$s3secret" \
  --models "$PWD/build/models" --mme-dir "$s3dir/mme"
run_script test_async --url "$url" --s3-endpoint "$s3url" --s3-key "$s3key" --s3-secret "$s3secret" \
  --bucket e2e-async --endpoint e2e-async --create mce-example/probe:latest \
  --csv-model "$PWD/build/models/classifier.tar.gz" --csv-image mce-example/classifier:latest
run_script test_capture --url "$url" --s3-url "$s3url" --s3-key "$s3key" --s3-secret "$s3secret" \
  --model "$PWD/build/models/classifier.tar.gz" --image mce-example/classifier:latest
# The A/B loop with CloudWatch: Debian's boto3 and aws CLI (CloudWatch's query protocol), then, where they are,
# the newer pair (AWS JSON 1.0); aws-sdk-go-v2's RPC v2 CBOR is host's TestCloudWatchInvocationsPerVariant.
run_script test_cloudwatch --url "$url" --aws /usr/bin/aws --prefix cwq --protocol query --s3-url "$s3url" \
  --s3-key "$s3key" --s3-secret "$s3secret"
# STS and IAM as SDKs ask them before they deploy, and the replay of the SageMaker Python SDK v3's requests,
# with the local identity (this mce checks nothing); the newer pair runs it below.
run_script test_identity --url "$url" --aws /usr/bin/aws --mode local --prefix idld
if [ -z "$ic_missing" ]; then
  run_script_with "$ic_python" test_cloudwatch --url "$url" --aws "$ic_aws" --prefix cwj --protocol "AWS JSON 1.0" \
    --s3-url "$s3url" --s3-key "$s3key" --s3-secret "$s3secret"
  run_script_with "$ic_python" test_components --url "$url" --aws "$ic_aws" --models "$PWD/build/models"
  run_script_with "$ic_python" test_identity --url "$url" --aws "$ic_aws" --mode local --prefix idln
else
  echo "SKIPPED [e2e] e2e/test_components.py (inference components with boto3 and the aws CLI): ${ic_missing}" \
    "(looked on PATH, then in /usr/bin; Debian's botocore 1.29 and aws CLI 2.9 predate inference components)"
  skipped=$((skipped + 1))
fi

# --- stop mce and look for leftovers
# stop_mce PID INSTANCE LOG STATE: SIGTERM, then two checks, counted in the
# summary: mce stops cleanly, and leaves nothing (containers, networks, files
# under its artifacts folder; its state.db keeps the endpoints on purpose).
stop_mce() {
  local p="$1" inst="$2" lg="$3" st="$4" mce_rc=0 left nets files
  echo "e2e: stopping mce ${inst} (SIGTERM)"
  kill -TERM "$p"
  wait "$p" || mce_rc=$?
  if [ "$mce_rc" -ne 0 ]; then
    echo "FAIL [e2e] mce ${inst} exited with status ${mce_rc} on SIGTERM; end of its log:"
    tail -30 "$lg" >&2
    failed=$((failed + 1))
    rc=1
  else
    echo "PASS [e2e] mce ${inst} stopped with status 0 on SIGTERM"
    passed=$((passed + 1))
  fi
  left="$(docker ps -aq --filter "label=io.mce.instance=${inst}")"
  nets="$(docker network ls -q --filter "label=io.mce.instance=${inst}")"
  files="$(find "${st}/instances/${inst}/artifacts" -mindepth 1 ! -type d 2>/dev/null | head -5 || true)" # none: no folder
  if [ -n "$left" ] || [ -n "$nets" ] || [ -n "$files" ]; then
    echo "FAIL [e2e] mce ${inst} left behind containers [${left//$'\n'/ }] networks [${nets//$'\n'/ }] artifact files [${files//$'\n'/ }]"
    failed=$((failed + 1))
    rc=1
  else
    echo "PASS [e2e] mce ${inst}: no containers, networks or artifact files left"
    passed=$((passed + 1))
  fi
}
stop_mce "$pid1" "$instance" "$log" "$state"

# --- authorization: a second mce with the example credentials and policies
# (copies, which test_authz.py breaks and fixes to check SIGHUP reloads).
authz="$(mktemp -d)"
cp -r examples/authz/credentials.yaml examples/authz/policies.yaml examples/authz/policies "$authz/"
state2="$(mktemp -d)"
port2="$(free_port)"
log2="build/e2e-authz.log"
authz_started=$(date +%s)
# my-mme's prefix holds no artifacts, but it must exist: file:// data outside the
# model roots (here, the folders the endpoint file names) is refused at start.
mkdir -p build/e2e-authz-no-models
start_mce pid2 "$instance2" "$port2" "$state2" "$log2" e2e/authz-endpoints.yaml \
  --credentials "$authz/credentials.yaml" --policies "$authz/policies.yaml"
run_script test_authz --url "http://127.0.0.1:${port2}" --pid "$pid2" --log "$log2" --authz-dir "$authz"
# The identities of examples/authz (a notebook's session of a role, an IAM user) and the v3 replay as that session.
run_script test_identity --url "http://127.0.0.1:${port2}" --aws /usr/bin/aws --mode authz --prefix idad
[ -n "$ic_missing" ] || run_script_with "$ic_python" test_identity --url "http://127.0.0.1:${port2}" --aws "$ic_aws" --mode authz --prefix idan
stop_mce "$pid2" "$instance2" "$log2" "$state2"
echo "e2e: authorization part took $(($(date +%s) - authz_started)) s"

# --- operating endpoints: a third mce whose AWS minutes pass in a second (--time-compression 60), so that
# rollouts bake, alarms fire and scaling policies act within the run.
state3="$(mktemp -d)"
port3="$(free_port)"
log3="build/e2e-ops.log"
ops_started=$(date +%s)
start_mce pid3 "$instance3" "$port3" "$state3" "$log3" e2e/ops-endpoints.yaml --time-compression 60
run_script test_operations --url "http://127.0.0.1:${port3}" --aws /usr/bin/aws --prefix opsd --parts rollouts,scaling
[ -n "$ic_missing" ] || run_script_with "$ic_python" test_operations --url "http://127.0.0.1:${port3}" --aws "$ic_aws" \
  --prefix opsn --parts rollouts,scaling,components
stop_mce "$pid3" "$instance3" "$log3" "$state3"
echo "e2e: operations part took $(($(date +%s) - ops_started)) s"

[ "$failed" -eq 0 ] || rc=1
if [ "$rc" -ne 0 ]; then
  echo "e2e: FAILED in $(($(date +%s) - started)) s (mce logs: ${log}, build/e2e-authz.log, build/e2e-ops.log)" >&2
else
  echo "e2e: OK in $(($(date +%s) - started)) s"
fi
# The one summary line, last: the scripts' checks and the stop checks (and
# the scripts skipped, if any).
if [ "$skipped" -gt 0 ]; then
  echo "${passed} passed, ${failed} failed, ${skipped} skipped"
else
  echo "${passed} passed, ${failed} failed"
fi
exit "$rc"
