// Command pause is the sandbox ("pause") image of the test cluster that
// scripts/kube/cluster.sh starts: the first process of every pod, holding the
// pod's namespaces. It sleeps until SIGINT or SIGTERM, reaping any orphans
// handed to it meanwhile. Built FROM scratch, so the cluster needs no registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
