//go:build unix

package loadtest

import (
	"syscall"
	"time"
)

// cpuUse is the process's CPU time so far.
type cpuUse struct {
	user, sys time.Duration
	ok        bool
}

func cpuTime() cpuUse {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuUse{}
	}
	return cpuUse{user: time.Duration(ru.Utime.Nano()), sys: time.Duration(ru.Stime.Nano()), ok: true}
}

func (c cpuUse) total() time.Duration { return c.user + c.sys }
