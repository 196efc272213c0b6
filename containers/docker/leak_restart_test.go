package docker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mce-run/mce/containers/docker"
)

// TestRestartForLeak (issue 19 item 2): the Restart a multi-model manager
// gets with --mme-restart-on-leak stops the container; its supervisor
// starts it again, says why while it is down, and logs a warning rather
// than a crash.
func TestRestartForLeak(t *testing.T) {
	e := newEnv(t)
	d, err := e.deploy(t, probeSpec(e.probe, 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	c := d.Containers()[0]
	docker.RestartForLeak(c, "it holds 40.0 GiB of GPU memory that unloads did not free")
	sawWhy := false
	waitFor(t, 10*time.Second, "the container to stop", func() bool {
		sawWhy = sawWhy || strings.Contains(c.Unavailable(), "40.0 GiB of GPU memory")
		return !c.Ready()
	})
	waitFor(t, 30*time.Second, "the container to be restarted", func() bool {
		sawWhy = sawWhy || strings.Contains(c.Unavailable(), "40.0 GiB of GPU memory")
		return c.Ready()
	})
	if c.Restarts() != 1 {
		t.Errorf("restarts %d, want 1", c.Restarts())
	}
	if !sawWhy {
		t.Error("while it was down, Unavailable never said why")
	}
	if code, body := call(t, c, "", "again"); code != 200 || body != "again" {
		t.Errorf("after the restart: %d %q", code, body)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "stopped to give back GPU memory") || strings.Contains(logs, "container exited; restarting") {
		t.Errorf("the restart was not logged as one for GPU memory:\n%s", logs)
	}
}
