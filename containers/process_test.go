package containers

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// TestProcStart reads this process's own start time, and knows no process
// by a PID that cannot exist.
func TestProcStart(t *testing.T) {
	if s, ok := procStart(strconv.Itoa(os.Getpid())); !ok || s == "" {
		t.Fatalf("procStart(self) = %q, %v", s, ok)
	}
	for _, pid := range []string{"0", "-1", "../self", "99999999"} {
		if _, ok := procStart(pid); ok {
			t.Errorf("procStart(%q) found a process", pid)
		}
	}
}

func TestProcessRuns(t *testing.T) {
	if !ProcessRuns(os.Getpid()) {
		t.Error("ProcessRuns(self) = false")
	}
	for _, pid := range []int{0, -1, 99999999} {
		if ProcessRuns(pid) {
			t.Errorf("ProcessRuns(%d) = true", pid)
		}
	}
}

// TestProcessGone: a process is gone when its PID is free or held by a later
// process than the one recorded.
func TestProcessGone(t *testing.T) {
	me := os.Getpid()
	start, ok := ProcessStart(me)
	if !ok {
		t.Skip("no /proc here")
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		pid   int
		start string
		want  bool
	}{
		{"this process", me, start, false},
		{"this process, start unknown", me, "", false},
		{"its PID held by a later process", me, start + "0", true},
		{"an exited process", dead.Process.Pid, "", true},
		{"no PID", 0, "", false},
	} {
		if got := ProcessGone(c.pid, c.start); got != c.want {
			t.Errorf("%s: ProcessGone(%d, %q) = %v, want %v", c.name, c.pid, c.start, got, c.want)
		}
	}
}
