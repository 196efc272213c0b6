package s3test

import (
	"os/exec"
	"syscall"
)

// setPdeathsig has the kernel kill versitygw if the test binary dies without
// running its cleanups (a panic, a timeout's SIGQUIT).
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
