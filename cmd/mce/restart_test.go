package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/internal/testenv"
)

// A child process of this test binary runs serve; the parent kills it.
func TestMain(m *testing.M) {
	if args := os.Getenv("MCE_SERVE_ARGS"); args != "" {
		var argv []string
		if err := json.Unmarshal([]byte(args), &argv); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := run(ctx, argv); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func startChild(t *testing.T, f serveFlags, logf string) *exec.Cmd {
	t.Helper()
	argv := []string{"serve", "--listen", f.listen, "--instance", f.instance, "--state-dir", f.stateDir,
		"--stop-grace", f.stopGrace.String(), "--log-format", "json", "--metrics-listen", "off"}
	for _, file := range f.files {
		argv = append(argv, "-f", file)
	}
	b, _ := json.Marshal(argv)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MCE_SERVE_ARGS="+string(b))
	out, err := os.OpenFile(logf, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

func waitInService(t *testing.T, base string, n int) string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/mce/endpoints")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = string(b)
			if strings.Count(last, `"InService"`) == n {
				return last
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("endpoints not InService: %s", last)
	return ""
}

func containerIDs(t *testing.T, cli *client.Client, instance string) []string {
	t.Helper()
	f := client.Filters{}.Add("label", containers.LabelInstance+"="+instance)
	list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list.Items {
		ids = append(ids, c.ID)
	}
	sort.Strings(ids)
	return ids
}

// TestRestartAfterSIGKILL kills a serving mce with SIGKILL while traffic
// flows. The next start adopts the containers that still run (same IDs, no
// relaunch). Then the containers are killed too while mce is down: the next
// start relaunches them. Nothing is orphaned on either path.
func TestRestartAfterSIGKILL(t *testing.T) {
	cli := testenv.Docker(t)
	testenv.Image(t, "probe")
	listen := freePort(t)
	base := "http://" + listen
	dir := t.TempDir()
	f := serveFlagsFor(t, listen, endpointFile(t, ""))
	f.stateDir = filepath.Join(dir, "state")
	logf := filepath.Join(dir, "mce.log")
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(logf)
			t.Logf("mce log:\n%s", b)
		}
	}()

	child := startChild(t, f, logf)
	waitInService(t, base, 1)
	before := containerIDs(t, cli, f.instance)

	// Traffic while mce is killed: calls fail while it is down, never hang.
	var ok, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		hc := &http.Client{Timeout: 5 * time.Second}
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := hc.Post(base+"/endpoints/ep/invocations", "text/plain", strings.NewReader("x"))
			if err == nil && resp.StatusCode == 200 {
				ok.Add(1)
			} else {
				failed.Add(1)
				time.Sleep(10 * time.Millisecond)
			}
			if resp != nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	child.Process.Kill()
	child.Wait()
	okAtKill := ok.Load()

	child = startChild(t, f, logf)
	waitInService(t, base, 1)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if okAtKill == 0 || ok.Load() <= okAtKill {
		t.Errorf("traffic: %d ok before the kill, %d after restart", okAtKill, ok.Load())
	}
	after := containerIDs(t, cli, f.instance)
	if strings.Join(before, ",") != strings.Join(after, ",") {
		t.Errorf("containers were not adopted: before %v, after %v", before, after)
	}
	b, _ := os.ReadFile(logf)
	if !strings.Contains(string(b), "adopted") {
		t.Error("the log does not say the containers were adopted")
	}

	// Kill mce again, and its containers too: the next start relaunches.
	child.Process.Kill()
	child.Wait()
	for _, id := range after {
		cli.ContainerKill(context.Background(), id, client.ContainerKillOptions{})
	}
	child = startChild(t, f, logf)
	waitInService(t, base, 1)
	relaunched := containerIDs(t, cli, f.instance)
	if len(relaunched) != 1 || relaunched[0] == after[0] {
		t.Errorf("after the containers died: %v (was %v); want one new container", relaunched, after)
	}
	resp, err := http.Post(base+"/endpoints/ep/invocations", "text/plain", strings.NewReader("back"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after relaunch: %v %v", resp, err)
	}
	resp.Body.Close()

	// A clean stop removes the containers and keeps the endpoint.
	child.Process.Signal(os.Interrupt)
	if err := child.Wait(); err != nil {
		t.Errorf("clean stop: %v", err)
	}
	if c, n := testenv.Leftovers(t, cli, f.instance); c+n > 0 {
		t.Errorf("after a clean stop: %d containers, %d networks", c, n)
	}
	child = startChild(t, f, logf)
	waitInService(t, base, 1)
	child.Process.Signal(os.Interrupt)
	child.Wait()
	if c, n := testenv.Leftovers(t, cli, f.instance); c+n > 0 {
		t.Errorf("at the end: %d containers, %d networks", c, n)
	}
}
