package docker

import (
	"fmt"
	"os"
	"syscall"
)

func (rt *Runtime) unlock() {
	if rt.lock != nil {
		syscall.Flock(int(rt.lock.Fd()), syscall.LOCK_UN)
		rt.lock.Close()
		rt.lock = nil
	}
}

// lockFile takes an exclusive, non-blocking flock. The kernel drops it when the
// process dies, so a SIGKILLed mce never leaves a stale lock.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	f.Truncate(0)
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return f, nil
}
