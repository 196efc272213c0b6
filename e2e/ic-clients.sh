# Sourced by e2e/run.sh and e2e/kube.sh: finds the clients of the inference-component checks.
# Debian's botocore 1.29 and aws CLI 2.9 predate inference components, so: the first python3 (PATH,
# then /usr/bin) whose boto3's botocore has CreateInferenceComponent, and the first aws (PATH, then
# /usr/bin) that has `sagemaker create-inference-component`, each tried as the scripts run (no
# environment but PATH=/usr/bin:/bin and HOME). Sets ic_python and ic_aws (empty when none) and
# ic_missing (what is missing, empty when both were found).
ic_probe_home="$(mktemp -d)"
ic_python=""
for p in $(type -ap python3) /usr/bin/python3; do
  if env -i PATH=/usr/bin:/bin HOME="$ic_probe_home" "$p" -B -I -c '
import sys, botocore.session, boto3
sys.exit("CreateInferenceComponent" not in botocore.session.get_session().get_service_model("sagemaker").operation_names)' \
    >/dev/null 2>&1; then
    ic_python="$p"
    break
  fi
done
ic_aws=""
for a in $(type -ap aws) /usr/bin/aws; do
  if env -i PATH=/usr/bin:/bin HOME="$ic_probe_home" AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
    "$a" sagemaker create-inference-component --generate-cli-skeleton input >/dev/null 2>&1; then
    ic_aws="$a"
    break
  fi
done
rm -rf "$ic_probe_home"
ic_missing=""
[ -n "$ic_python" ] || ic_missing="no python3 whose botocore has CreateInferenceComponent"
[ -n "$ic_aws" ] || ic_missing="${ic_missing:+${ic_missing}, }no aws CLI with sagemaker create-inference-component"
