//go:build !unix

package loadtest

import "time"

// cpuUse is the process's CPU time so far; not measured on this system.
type cpuUse struct {
	user, sys time.Duration
	ok        bool
}

func cpuTime() cpuUse { return cpuUse{} }

func (c cpuUse) total() time.Duration { return c.user + c.sys }
