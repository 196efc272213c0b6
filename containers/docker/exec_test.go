package docker_test

import (
	"os"
	"os/exec"
	"testing"
)

// execSelf re-runs this test binary for one test, with extra environment.
func execSelf(t *testing.T, test string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v=false")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	return cmd
}
