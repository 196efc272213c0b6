package containers

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ProcessStart is the start time of process pid on this machine (clock
// ticks after boot, from /proc), which tells it from a later process given
// the same PID; ok is false when it cannot be read.
func ProcessStart(pid int) (start string, ok bool) { return procStart(strconv.Itoa(pid)) }

// ProcessGone reports whether the process pid, which started at start (from
// ProcessStart; "" when unknown), no longer runs on this machine: no process
// has the PID, or a later one has taken it. Without /proc only the PID's
// existence is checked.
func ProcessGone(pid int, start string) bool {
	if pid <= 0 {
		return false
	}
	if now, ok := ProcessStart(pid); ok {
		return start != "" && now != start
	}
	return !ProcessRuns(pid)
}

// procStart reads field 22 of /proc/<pid>/stat: the process's start time in
// clock ticks after boot, which tells a process from a later one given the
// same PID.
func procStart(pid string) (string, bool) {
	if _, err := strconv.Atoi(pid); err != nil {
		return "", false
	}
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "", false
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(s[i+1:]) // from field 3 on
	if len(f) < 20 {
		return "", false
	}
	return f[19], true
}

// ProcessRuns reports whether a process with the PID exists on this
// machine (signal 0). It needs no /proc, and tells nothing of which process
// holds the PID.
func ProcessRuns(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
