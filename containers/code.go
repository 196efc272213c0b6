package containers

import (
	"strings"
)

// SageMaker's framework containers take their inference code from
// SAGEMAKER_SUBMIT_DIRECTORY: a folder in the container, or an
// s3://…/sourcedir.tar.gz that the SageMaker Python SDK uploads when a
// framework model has an entry_point and source_dir but is not repacked
// (https://sagemaker.readthedocs.io/en/stable/overview.html#use-your-own-inference-code,
// and the SageMaker framework containers' serving contract). Containers get no AWS credentials in
// mce, so mce fetches such an archive itself, with the model data's fetcher,
// limits and safe extraction, mounts it read-only at CodeDir and points
// SAGEMAKER_SUBMIT_DIRECTORY there.
const (
	// SubmitDirEnv names the code folder or archive of a framework container.
	SubmitDirEnv = "SAGEMAKER_SUBMIT_DIRECTORY"
	// CodeDir is where a fetched SAGEMAKER_SUBMIT_DIRECTORY archive appears
	// in the container (where SageMaker's framework containers unpack it).
	CodeDir = "/opt/ml/code"
)

// RemoteSubmitDir returns the s3:// URL of a container's
// SAGEMAKER_SUBMIT_DIRECTORY, when it names one.
func RemoteSubmitDir(env map[string]string) (string, bool) {
	v := strings.TrimSpace(env[SubmitDirEnv])
	return v, strings.HasPrefix(v, "s3://")
}

// WithCodeDir points SAGEMAKER_SUBMIT_DIRECTORY of env (sorted KEY=value
// pairs) at CodeDir.
func WithCodeDir(env []string) []string {
	for i, kv := range env {
		if strings.HasPrefix(kv, SubmitDirEnv+"=") {
			env[i] = SubmitDirEnv + "=" + CodeDir
		}
	}
	return env
}
