#!/usr/bin/env bash
# make soak: 200 concurrent clients for 10 minutes through mce, on a Direct and a Serial endpoint, with SigV4
# and IAM policies enforced; zero failed calls, mce's resident memory sampled every 10 s and reported (start,
# max, end). Not part of `make test` (it takes as long as it says). See bench/README.md ("make soak").
#
# Starts `bin/mce serve` with two endpoints of probe containers (Direct of 2, Serial of 3) and a credentials
# file of one access key allowed sagemaker:InvokeEndpoint, then runs bench/soak (aws-sdk-go-v2's
# sagemakerruntime client, retries off, every answer's body checked). Everything started here is removed on
# exit. Output: stdout, build/soak.json and build/soak-mce.log (mce's warnings and errors).
#
# Environment: SOAK_DURATION (default 10m), SOAK_CLIENTS (default 200), SOAK_SAMPLE (default 10s).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DUR="${SOAK_DURATION:-10m}"
CLIENTS="${SOAK_CLIENTS:-200}"
SAMPLE="${SOAK_SAMPLE:-10s}"
IMAGE="mce-example/probe:latest"
INST="soak-$$"

die() { echo "soak: $*" >&2; exit 1; }
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
mkdir -p build bin
[ -x bin/mce ] || go build -o bin/mce ./cmd/mce
go build -o bin/soak ./bench/soak
docker image inspect "$IMAGE" >/dev/null 2>&1 || scripts/images.sh probe

TMP="$(mktemp -d "${TMPDIR:-/tmp}/mce-soak.XXXXXX")"
mce_pid=""
cleanup() {
	local rc=$?
	set +e
	if [ -n "$mce_pid" ] && kill -0 "$mce_pid" 2>/dev/null; then
		kill -TERM "$mce_pid"; wait "$mce_pid" 2>/dev/null
	fi
	local left
	left="$(docker ps -aq --filter "label=io.mce.instance=$INST")"
	if [ -n "$left" ]; then
		echo "soak: mce left containers of instance $INST behind; removing them" >&2
		docker rm -f $left >/dev/null 2>&1
	fi
	docker network ls -q --filter "label=io.mce.instance=$INST" | xargs -r docker network rm >/dev/null 2>&1
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port=18800
while [ -n "$(ss -Htln "sport = :$port")" ]; do port=$((port + 1)); done

cat >"$TMP/endpoints.yaml" <<YAML
Models:
  - ModelName: soak-direct
    Containers:
      - {ContainerHostname: p1, Image: $IMAGE}
      - {ContainerHostname: p2, Image: $IMAGE}
    InferenceExecutionConfig: {Mode: Direct}
  - ModelName: soak-serial
    Containers:
      - {ContainerHostname: s1, Image: $IMAGE, Environment: {PROBE_TAG: a}}
      - {ContainerHostname: s2, Image: $IMAGE, Environment: {PROBE_TAG: b}}
      - {ContainerHostname: s3, Image: $IMAGE, Environment: {PROBE_TAG: c}}
    InferenceExecutionConfig: {Mode: Serial}
EndpointConfigs:
  - EndpointConfigName: soak-direct-config
    ProductionVariants: [{VariantName: AllTraffic, ModelName: soak-direct, InitialInstanceCount: 1, InstanceType: ml.c5.large}]
  - EndpointConfigName: soak-serial-config
    ProductionVariants: [{VariantName: AllTraffic, ModelName: soak-serial, InitialInstanceCount: 1, InstanceType: ml.c5.large}]
Endpoints:
  - {EndpointName: soak-direct, EndpointConfigName: soak-direct-config}
  - {EndpointName: soak-serial, EndpointConfigName: soak-serial-config}
YAML
cat >"$TMP/credentials.yaml" <<'YAML'
Credentials:
  - AccessKeyId: AKIASOAK0000EXAMPLE
    SecretAccessKey: soak-example-secret-key-0000000000000
    Arn: arn:aws:iam::123456789012:user/soak
    Policies:
      - Name: invoke-only
        Document:
          Version: "2012-10-17"
          Statement:
            - {Effect: Allow, Action: ["sagemaker:InvokeEndpoint", "sagemaker:ListEndpoints"], Resource: "*"}
YAML
chmod 600 "$TMP/credentials.yaml"

echo "soak: starting mce on 127.0.0.1:$port (instance $INST; 5 probe containers; SigV4 enforced)"
bin/mce serve --listen "127.0.0.1:$port" --instance "$INST" --state-dir "$TMP/state" --log-level warn \
	--credentials "$TMP/credentials.yaml" -f "$TMP/endpoints.yaml" >build/soak-mce.log 2>&1 &
mce_pid=$!
export AWS_ACCESS_KEY_ID=AKIASOAK0000EXAMPLE AWS_SECRET_ACCESS_KEY=soak-example-secret-key-0000000000000
export AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
ready=""
for _ in $(seq 1 240); do
	kill -0 "$mce_pid" 2>/dev/null || { cat build/soak-mce.log >&2; die "mce exited early"; }
	if bin/mce endpoints --endpoint-url "http://127.0.0.1:$port" 2>/dev/null | grep -c InService | grep -qx 2; then
		ready=1; break
	fi
	sleep 0.25
done
[ -n "$ready" ] || { cat build/soak-mce.log >&2; die "endpoints not InService after 60 s"; }

echo "soak: $CLIENTS clients for $DUR, alternating Direct (p1/p2) and Serial (s1→s2→s3) calls"
bin/soak -endpoint-url "http://127.0.0.1:$port" -pid "$mce_pid" -clients "$CLIENTS" -duration "$DUR" \
	-sample "$SAMPLE" -json build/soak.json \
	-target "direct-p1=soak-direct,host=p1" -target "direct-p2=soak-direct,host=p2" \
	-target "serial=soak-serial,suffix=abc"
