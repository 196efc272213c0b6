// Package awstest keeps tests that build aws-sdk-go-v2 clients off the
// network and away from the developer's own AWS configuration: no instance
// metadata service, no profiles or credential files, no AWS_* settings.
package awstest

import (
	"os"
	"path/filepath"
	"testing"
)

// Run runs m with an isolated AWS environment and returns its exit code;
// use it as os.Exit(awstest.Run(m)) in TestMain.
func Run(m *testing.M) int {
	empty, err := os.MkdirTemp("", "awstest-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(empty)
	for k, v := range map[string]string{
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_CONFIG_FILE":             filepath.Join(empty, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(empty, "credentials"),
	} {
		os.Setenv(k, v)
	}
	for _, k := range []string{"AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
		"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		os.Unsetenv(k)
	}
	return m.Run()
}
