package containers

import (
	"slices"
	"testing"
)

func TestRemoteSubmitDir(t *testing.T) {
	for _, tc := range []struct {
		val  string
		want bool
	}{
		{"s3://b/p/sourcedir.tar.gz", true},
		{"  s3://b/k.tar.gz ", true},
		{"/opt/ml/model/code", false},
		{"", false},
		{"file:///srv/code.tar.gz", false},
	} {
		env := map[string]string{SubmitDirEnv: tc.val}
		if _, got := RemoteSubmitDir(env); got != tc.want {
			t.Errorf("RemoteSubmitDir(%q) = %v, want %v", tc.val, got, tc.want)
		}
	}
	if _, ok := RemoteSubmitDir(nil); ok {
		t.Error("RemoteSubmitDir(nil) = true")
	}
}

func TestWithCodeDir(t *testing.T) {
	env := SageMakerEnv(map[string]string{SubmitDirEnv: "s3://b/sourcedir.tar.gz", "SAGEMAKER_PROGRAM": "inference.py"}, 0, false)
	got := WithCodeDir(env)
	if !slices.Contains(got, SubmitDirEnv+"="+CodeDir) || !slices.Contains(got, "SAGEMAKER_PROGRAM=inference.py") ||
		slices.Contains(got, SubmitDirEnv+"=s3://b/sourcedir.tar.gz") {
		t.Errorf("WithCodeDir = %v", got)
	}
}
