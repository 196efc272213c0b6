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

	"github.com/mce-run/mce/containers/docker"
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
	f := client.Filters{}.Add("label", docker.LabelInstance+"="+instance)
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

// TestRestartKeepsWhatTheAPIScaled: serve -f, scale the variant through
// UpdateEndpointWeightsAndCapacities, stop, start again with the same file:
// the endpoint keeps its two copies. With the file changed, the file wins.
func TestRestartKeepsWhatTheAPIScaled(t *testing.T) {
	testenv.Docker(t)
	testenv.Image(t, "probe")
	listen := freePort(t)
	base := "http://" + listen
	file := endpointFile(t, "")
	f := serveFlagsFor(t, listen, file)

	try := func(op, body string) (map[string]any, int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "SageMaker."+op)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		b, _ := io.ReadAll(resp.Body)
		if json.Unmarshal(b, &out) != nil {
			t.Fatalf("%s: %d %s", op, resp.StatusCode, b)
		}
		return out, resp.StatusCode, b
	}
	call := func(op, body string) map[string]any {
		t.Helper()
		out, code, b := try(op, body)
		if code != 200 {
			t.Fatalf("%s: %d %s", op, code, b)
		}
		return out
	}
	// copies waits until ep is InService and returns its instance count.
	// copies waits until ep is InService with want instances and returns
	// the count it settled on (the last InService count at the deadline).
	// mce serves before it applies the file: a first start may not have the
	// endpoint yet, and a restart shows the recovered endpoint InService
	// before the file's update of it begins, so the first InService seen is
	// not the answer.
	copies := func(want float64) float64 {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		last := -1.0
		for {
			var d map[string]any
			code := 0
			if resp, err := http.Get(base + "/mce/endpoints"); err == nil { // serving yet
				resp.Body.Close()
				d, code, _ = try("DescribeEndpoint", `{"EndpointName":"ep"}`)
			}
			if code == 200 && d["EndpointStatus"] == "InService" {
				v := d["ProductionVariants"].([]any)[0].(map[string]any)
				if v["CurrentInstanceCount"] == v["DesiredInstanceCount"] {
					last = v["CurrentInstanceCount"].(float64)
					if last == want {
						return last
					}
				}
			}
			if time.Now().After(deadline) {
				if last < 0 {
					t.Fatal("ep never settled InService")
				}
				return last
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	start := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- serve(ctx, f) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("serve: %v", err)
			}
		}
	}

	stop := start()
	if n := copies(1); n != 1 {
		t.Fatalf("first start: %v copies, want the file's 1", n)
	}
	call("UpdateEndpointWeightsAndCapacities", `{"EndpointName":"ep","DesiredWeightsAndCapacities":[{"VariantName":"AllTraffic","DesiredInstanceCount":2}]}`)
	if n := copies(2); n != 2 {
		t.Fatalf("after scaling: %v copies, want 2", n)
	}
	stop()

	stop = start()
	if n := copies(2); n != 2 {
		t.Errorf("restart with the same file: %v copies, want the 2 the API set", n)
	}
	stop()

	// The file changes (an environment variable): it wins, with its 1 copy.
	changed := endpointFile(t, "PROBE_TAG: v2")
	b, _ := os.ReadFile(changed)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	stop = start()
	if n := copies(1); n != 1 {
		t.Errorf("restart with a changed file: %v copies, want the file's 1", n)
	}
	stop()
}
