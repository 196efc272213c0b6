package docker_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/containers/gpu"
	"github.com/mce-run/mce/internal/testenv"
)

type env struct {
	cli      *client.Client
	rt       *docker.Runtime
	instance string
	state    string
	logs     *testenv.SyncBuffer
	probe    string
	fetch    artifact.Options // the runtime's fetcher
}

// newEnv starts a runtime with a fresh instance name (testenv.Runtime, which
// checks, when the test ends, that nothing labelled with it is left on the
// engine).
func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, artifact.Options{})
}

// newEnvWith is newEnv with a fetcher of these options; test artifacts live
// in t.TempDir() folders, so the temporary folder is always a model root.
func newEnvWith(t *testing.T, fetch artifact.Options) *env {
	t.Helper()
	fetch.ModelRoots = append(fetch.ModelRoots, os.TempDir())
	e := &env{cli: testenv.Docker(t), logs: &testenv.SyncBuffer{}, fetch: fetch}
	e.probe = testenv.Image(t, "probe")
	f, err := artifact.NewFetcher(e.fetch)
	if err != nil {
		t.Fatal(err)
	}
	var o docker.Options
	e.rt, o = testenv.Runtime(t, docker.Options{
		Client: e.cli, Fetcher: f,
		Logger:         zerolog.New(e.logs),
		StopGrace:      2 * time.Second,
		HealthInterval: 300 * time.Millisecond,
		RestartBackoff: 100 * time.Millisecond,
	})
	e.instance, e.state = o.Instance, o.StateDir
	return e
}

func (e *env) deploy(t *testing.T, spec docker.EndpointSpec) (*docker.Deployment, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := e.rt.Deploy(ctx, spec)
	if d != nil {
		t.Cleanup(func() {
			if err := d.Close(context.Background()); err != nil {
				t.Errorf("teardown: %v", err)
			}
		})
	}
	return d, err
}

func probeSpec(image string, n int, env map[string]string) docker.EndpointSpec {
	v := docker.VariantSpec{Name: "AllTraffic", Copies: 1, HealthTimeout: 30 * time.Second}
	for i := range n {
		v.Containers = append(v.Containers, docker.ContainerSpec{
			Hostname: fmt.Sprintf("probe-%d", i+1), Image: image, Environment: env,
		})
	}
	return docker.EndpointSpec{Name: "ep", Variants: []docker.VariantSpec{v}}
}

type probeInfo struct {
	Hostname   string            `json:"hostname"`
	Env        map[string]string `json:"env"`
	ModelFiles []struct {
		Path string `json:"path"`
	} `json:"model_files"`
	ModelTag *string `json:"model_tag"`
}

// call POSTs to a container at its own address, as mce's router does.
func call(t *testing.T, c *docker.Container, attrs, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.BaseURL()+"/invocations", strings.NewReader(body))
	req.Header.Set("Content-Type", "text/plain")
	if attrs != "" {
		req.Header.Set("X-Amzn-SageMaker-Custom-Attributes", attrs)
	}
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

func info(t *testing.T, c *docker.Container) probeInfo {
	t.Helper()
	code, body := call(t, c, "info", "")
	if code != http.StatusOK {
		t.Fatalf("info from %s: %d %s", c.Hostname(), code, body)
	}
	var pi probeInfo
	if err := json.Unmarshal([]byte(body), &pi); err != nil {
		t.Fatalf("info from %s: %v: %s", c.Hostname(), err, body)
	}
	return pi
}

// TestFifteenContainers launches SageMaker's maximum, reaches each one at its
// address, and checks the environment each was given.
func TestFifteenContainers(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	d, err := e.deploy(t, probeSpec(e.probe, docker.MaxContainers, map[string]string{"MCE_TEST": "yes"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("15 containers answering /ping after %v", time.Since(start))
	ports := map[string]bool{}
	ranges := map[string]bool{}
	cs := d.Containers()
	if len(cs) != docker.MaxContainers {
		t.Fatalf("%d containers, want %d", len(cs), docker.MaxContainers)
	}
	for i, c := range cs {
		if !c.Ready() {
			t.Errorf("%s not ready", c.Hostname())
		}
		if e.rt.NetworkMode() == docker.NetworkAddress && strings.Contains(c.BaseURL(), "127.0.0.1") {
			t.Errorf("%s reached through loopback %s in address mode", c.Hostname(), c.BaseURL())
		}
		pi := info(t, c)
		if want := fmt.Sprintf("probe-%d", i+1); pi.Hostname != want || c.Hostname() != want {
			t.Errorf("container %d: hostname %q/%q, want %q", i, pi.Hostname, c.Hostname(), want)
		}
		if pi.Env["MCE_TEST"] != "yes" {
			t.Errorf("%s: definition environment missing: %v", pi.Hostname, pi.Env)
		}
		port, safe := pi.Env["SAGEMAKER_BIND_TO_PORT"], pi.Env["SAGEMAKER_SAFE_PORT_RANGE"]
		if port == "" || safe == "" || ports[port] || ranges[safe] {
			t.Errorf("%s: port %q range %q missing or repeated", pi.Hostname, port, safe)
		}
		ports[port], ranges[safe] = true, true
		if !strings.HasSuffix(c.BaseURL(), ":"+port) && e.rt.NetworkMode() == docker.NetworkAddress {
			t.Errorf("%s: reached at %s, not its bind port %s", pi.Hostname, c.BaseURL(), port)
		}
	}
	// The hostname is each container's DNS name on the endpoint network.
	ctx := context.Background()
	res, err := e.cli.ContainerInspect(ctx, cs[3].ID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ep := res.Container.NetworkSettings.Networks[d.Network()]
	if ep == nil || !contains(ep.Aliases, "probe-4") {
		t.Errorf("probe-4 is not aliased on %s: %+v", d.Network(), ep)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if c, n := testenv.Leftovers(t, e.cli, e.instance); c+n > 0 {
		t.Errorf("after Close: %d containers, %d networks left", c, n)
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestSixteenRefusedBeforeAnythingStarts(t *testing.T) {
	e := newEnv(t)
	_, err := e.deploy(t, probeSpec(e.probe, 16, nil))
	if !errors.Is(err, docker.ErrInvalidSpec) || !strings.Contains(err.Error(), "16 containers") {
		t.Fatalf("err = %v, want the 16-container refusal", err)
	}
	if c, n := testenv.Leftovers(t, e.cli, e.instance); c+n > 0 {
		t.Errorf("refused spec still created %d containers, %d networks", c, n)
	}
}

func TestMissingImageRefused(t *testing.T) {
	e := newEnv(t)
	_, err := e.deploy(t, probeSpec("mce-example/does-not-exist:latest", 2, nil))
	if !errors.Is(err, docker.ErrNotFound) || !strings.Contains(err.Error(), "does-not-exist") {
		t.Fatalf("err = %v, want image not present", err)
	}
}

func TestGPURequestWithoutGPURefused(t *testing.T) {
	e := newEnv(t)
	s := probeSpec(e.probe, 1, nil)
	s.Variants[0].Containers[0].GPUs = gpu.Request{All: true}
	_, err := e.deploy(t, s)
	if err == nil || !(errors.Is(err, gpu.ErrNoDriver) || errors.Is(err, gpu.ErrNoGPU) || errors.Is(err, gpu.ErrNoRuntime)) {
		t.Fatalf("err = %v, want a GPU pre-flight refusal", err)
	}
	t.Logf("refusal: %v", err)
	if c, n := testenv.Leftovers(t, e.cli, e.instance); c+n > 0 {
		t.Errorf("refused spec still created %d containers, %d networks", c, n)
	}
}

func TestNeverHealthyFailsWithReasonAndTearsDown(t *testing.T) {
	e := newEnv(t)
	s := probeSpec(e.probe, 3, nil)
	s.Variants[0].HealthTimeout = 3 * time.Second
	s.Variants[0].Containers[1].Environment = map[string]string{"PROBE_PING": "fail"}
	_, err := e.deploy(t, s)
	var le *docker.LaunchError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v, want *LaunchError", err)
	}
	if le.Container != "probe-2" || !strings.Contains(le.Reason, "did not pass the ping health check") {
		t.Errorf("LaunchError = %+v", le)
	}
	if len(le.LogTail) == 0 {
		t.Errorf("no log lines quoted: %v", err)
	}
	if c, n := testenv.Leftovers(t, e.cli, e.instance); c+n > 0 {
		t.Errorf("after the failed launch: %d containers, %d networks left", c, n)
	}
}

func TestExitBeforeHealthyFailsFast(t *testing.T) {
	e := newEnv(t)
	s := probeSpec(e.probe, 1, map[string]string{"PROBE_READY_AFTER": "1m", "PROBE_EXIT_AFTER": "300ms", "PROBE_EXIT_CODE": "7"})
	s.Variants[0].HealthTimeout = time.Minute
	start := time.Now()
	_, err := e.deploy(t, s)
	var le *docker.LaunchError
	if !errors.As(err, &le) || !strings.Contains(le.Reason, "exited with code 7") {
		t.Fatalf("err = %v, want exit code 7", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("took %v; an exit must not wait out the health window", took)
	}
}

func TestCrashedContainerIsRestarted(t *testing.T) {
	e := newEnv(t)
	d, err := e.deploy(t, probeSpec(e.probe, 2, nil))
	if err != nil {
		t.Fatal(err)
	}
	c := d.Containers()[0]
	call(t, c, "crash=3", "")
	crashed := time.Now()
	for c.Ready() && time.Since(crashed) < 5*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	if noticed := time.Since(crashed); c.Ready() || noticed > time.Second {
		t.Fatalf("the crash was noticed after %v (ready %v); the promise is within a second", noticed, c.Ready())
	}
	deadline := time.Now().Add(30 * time.Second)
	for !c.Ready() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !c.Ready() {
		t.Fatal("the container was not restarted")
	}
	if c.Restarts() != 1 || c.LastExitCode() != 3 {
		t.Errorf("restarts %d, last exit %d; want 1 and 3", c.Restarts(), c.LastExitCode())
	}
	if code, body := call(t, c, "", "again"); code != 200 || body != "again" {
		t.Errorf("after restart: %d %q", code, body)
	}
	if !strings.Contains(e.logs.String(), `"exit_code":3`) {
		t.Error("the exit code was not logged")
	}
}

func TestLogsStreamWithFields(t *testing.T) {
	e := newEnv(t)
	if _, err := e.deploy(t, probeSpec(e.probe, 1, nil)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var seen map[string]bool
	for time.Now().Before(deadline) {
		seen = map[string]bool{}
		for _, line := range strings.Split(e.logs.String(), "\n") {
			var ev map[string]any
			if json.Unmarshal([]byte(line), &ev) != nil {
				continue
			}
			if ev["endpoint"] == "ep" && ev["variant"] == "AllTraffic" && ev["container"] == "probe-1" {
				seen[fmt.Sprint(ev["stream"])] = true
			}
		}
		if seen["stdout"] && seen["stderr"] {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("streams seen with endpoint/variant/container fields: %v; want stdout and stderr", seen)
}

func writeTarGz(t *testing.T, path string, entries []tar.Header, data map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range entries {
		body := data[h.Name]
		h.Size = int64(len(body))
		if h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeDir {
			h.Size = 0
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
	}
	tw.Close()
	gz.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestModelArtifactMountedReadOnly(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	writeTarGz(t, filepath.Join(dir, "model.tar.gz"), []tar.Header{
		{Name: "tag", Mode: 0o644, Typeflag: tar.TypeReg},
		{Name: "weights/w.bin", Mode: 0o600, Typeflag: tar.TypeReg},
	}, map[string]string{"tag": "model-v2", "weights/w.bin": "0123456789"})
	s := probeSpec(e.probe, 2, nil)
	s.Variants[0].Containers[0].ModelDataURL = "file://model.tar.gz" // relative to BaseDir
	s.Variants[0].Containers[0].BaseDir = dir
	s.Variants[0].Copies = 2
	d, err := e.deploy(t, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range d.Variants()[0].Copies {
		pi := info(t, cp[0])
		if pi.ModelTag == nil || *pi.ModelTag != "model-v2" {
			t.Errorf("copy: model tag %v, want model-v2; files %v", pi.ModelTag, pi.ModelFiles)
		}
		if pi := info(t, cp[1]); len(pi.ModelFiles) != 0 {
			t.Errorf("container without model data sees files %v", pi.ModelFiles)
		}
	}
	res, err := e.cli.ContainerInspect(context.Background(), d.Containers()[0].ID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res.Container.Mounts {
		if m.Destination == "/opt/ml/model" && m.RW {
			t.Error("/opt/ml/model is mounted read-write")
		}
	}
}

// TestFolderArtifactStaged: a model folder reaches the container as mce's
// checked copy (issue 9, class 3): its files are there, the mount is not the
// operator's folder, and a folder holding a socket (as /var/run holds the
// engine's) is refused with nothing left behind.
func TestFolderArtifactStaged(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "good", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"good/tag": "folder-v1", "good/sub/w.bin": "0123"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := probeSpec(e.probe, 1, nil)
	s.Variants[0].Containers[0].ModelDataURL = "file://good"
	s.Variants[0].Containers[0].BaseDir = dir
	d, err := e.deploy(t, s)
	if err != nil {
		t.Fatal(err)
	}
	c := d.Containers()[0]
	if pi := info(t, c); pi.ModelTag == nil || *pi.ModelTag != "folder-v1" || len(pi.ModelFiles) != 2 {
		t.Errorf("model tag %v, files %v; want folder-v1 and 2 files", pi.ModelTag, pi.ModelFiles)
	}
	res, err := e.cli.ContainerInspect(context.Background(), c.ID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res.Container.Mounts {
		if m.Destination == "/opt/ml/model" && strings.HasPrefix(m.Source, dir) {
			t.Errorf("/opt/ml/model mounts the operator's folder %s, not a staged copy", m.Source)
		}
	}

	if err := os.MkdirAll(filepath.Join(dir, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "run", "docker.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s = probeSpec(e.probe, 1, nil)
	s.Name = "ep-sock"
	s.Variants[0].Containers[0].ModelDataURL = "file://run"
	s.Variants[0].Containers[0].BaseDir = dir
	if _, err := e.deploy(t, s); !errors.Is(err, artifact.ErrUnsafeArchive) || !strings.Contains(err.Error(), "sockets are not allowed") {
		t.Fatalf("deploying a folder with a socket: err = %v, want the socket refused", err)
	}
}

func TestUnsafeArtifactsRefused(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	writeTarGz(t, filepath.Join(dir, "slip.tar.gz"), []tar.Header{{Name: "../../evil", Mode: 0o644, Typeflag: tar.TypeReg}},
		map[string]string{"../../evil": "x"})
	writeTarGz(t, filepath.Join(dir, "link.tar.gz"), []tar.Header{{Name: "l", Linkname: "/etc/passwd", Typeflag: tar.TypeSymlink}}, nil)
	for _, name := range []string{"slip.tar.gz", "link.tar.gz"} {
		t.Run(name, func(t *testing.T) {
			s := probeSpec(e.probe, 2, nil)
			s.Variants[0].Containers[1].ModelDataURL = "file://" + filepath.Join(dir, name)
			_, err := e.deploy(t, s)
			if !errors.Is(err, artifact.ErrUnsafeArchive) {
				t.Fatalf("err = %v, want ErrUnsafeArchive", err)
			}
			if c, n := testenv.Leftovers(t, e.cli, e.instance); c+n > 0 {
				t.Errorf("%d containers, %d networks left", c, n)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "evil")); err == nil {
				t.Error("the archive wrote outside its folder")
			}
		})
	}
}

// TestArtifactDiskBudget: a launch whose artifacts would pass the disk
// budget fails naming the flag, and its files are gone.
func TestArtifactDiskBudget(t *testing.T) {
	f, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{os.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	rt, o := testenv.Runtime(t, docker.Options{Fetcher: f, ArtifactDiskBudget: 1 << 10})
	cli, instance, state := o.Client, o.Instance, o.StateDir
	dir := t.TempDir()
	writeTarGz(t, filepath.Join(dir, "m.tar.gz"), []tar.Header{{Name: "w", Mode: 0o644, Typeflag: tar.TypeReg}},
		map[string]string{"w": strings.Repeat("x", 4<<10)})
	s := probeSpec(testenv.Image(t, "probe"), 1, nil)
	s.Variants[0].Containers[0].ModelDataURL = "file://" + filepath.Join(dir, "m.tar.gz")
	_, err = rt.Deploy(context.Background(), s)
	if !errors.Is(err, artifact.ErrTooLarge) || !strings.Contains(err.Error(), artifact.DiskBudgetFlag) {
		t.Fatalf("err = %v, want ErrTooLarge naming %s", err, artifact.DiskBudgetFlag)
	}
	if c, n := testenv.Leftovers(t, cli, instance); c+n > 0 {
		t.Errorf("%d containers, %d networks left", c, n)
	}
	var files []string
	filepath.WalkDir(state, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && strings.Contains(p, "artifacts") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 0 {
		t.Errorf("refused artifacts left %v", files)
	}
}

func TestOversizeArtifactRefused(t *testing.T) {
	f, err := artifact.NewFetcher(artifact.Options{MaxExtractedBytes: 1 << 10, ModelRoots: []string{os.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	rt, o := testenv.Runtime(t, docker.Options{Fetcher: f})
	cli, instance := o.Client, o.Instance
	dir := t.TempDir()
	writeTarGz(t, filepath.Join(dir, "big.tar.gz"), []tar.Header{{Name: "big", Mode: 0o644, Typeflag: tar.TypeReg}},
		map[string]string{"big": strings.Repeat("x", 4<<10)})
	s := probeSpec(testenv.Image(t, "probe"), 1, nil)
	s.Variants[0].Containers[0].ModelDataURL = "file://" + filepath.Join(dir, "big.tar.gz")
	_, err = rt.Deploy(context.Background(), s)
	if !errors.Is(err, artifact.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if c, n := testenv.Leftovers(t, cli, instance); c+n > 0 {
		t.Errorf("%d containers, %d networks left", c, n)
	}
}

func TestInstanceLockAndReconcile(t *testing.T) {
	e := newEnv(t)
	if _, err := docker.New(context.Background(), docker.Options{Client: e.cli, Instance: e.instance, StateDir: e.state}); err == nil {
		t.Fatal("a second runtime took the same instance's lock")
	}
}

// TestSIGKILLedHostCleanedUpOnRestart runs a host in a child process (this
// test binary), kills it with SIGKILL once its containers are up, and checks
// that the next runtime of the same instance removes everything it left.
func TestSIGKILLedHostCleanedUpOnRestart(t *testing.T) {
	if os.Getenv("MCE_TEST_CHILD") == "1" {
		childHost()
		return
	}
	cli := testenv.Docker(t)
	probe := testenv.Image(t, "probe")
	instance, state := testenv.Instance(t), t.TempDir()
	cmd := execSelf(t, "TestSIGKILLedHostCleanedUpOnRestart", "MCE_TEST_CHILD=1", "MCE_TEST_INSTANCE="+instance,
		"MCE_TEST_STATE="+state, "MCE_TEST_IMAGE="+probe)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan error, 1)
	go func() {
		b := make([]byte, 64)
		n, err := io.ReadAtLeast(out, b, len("READY"))
		if err == nil && !strings.Contains(string(b[:n]), "READY") {
			err = fmt.Errorf("child said %q", b[:n])
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			cmd.Process.Kill()
			t.Fatal(err)
		}
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		t.Fatal("child host did not come up")
	}
	cmd.Process.Kill() // SIGKILL: no teardown runs
	cmd.Wait()
	if c, n := testenv.Leftovers(t, cli, instance); c != 3 || n != 1 {
		t.Fatalf("after SIGKILL: %d containers and %d networks; want the child's 3 and 1", c, n)
	}
	rt, err := docker.New(context.Background(), docker.Options{Client: cli, Instance: instance, StateDir: state, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	rt.Close()
	if c, n := testenv.Leftovers(t, cli, instance); c+n > 0 {
		t.Errorf("after restart: %d containers, %d networks left", c, n)
	}
	if entries, _ := os.ReadDir(filepath.Join(state, "instances", instance, "artifacts")); len(entries) > 0 {
		t.Errorf("artifacts left: %v", entries)
	}
}

func childHost() {
	ctx := context.Background()
	cli, err := docker.Connect(ctx)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	rt, err := docker.New(ctx, docker.Options{Client: cli, Instance: os.Getenv("MCE_TEST_INSTANCE"),
		StateDir: os.Getenv("MCE_TEST_STATE"), Logger: zerolog.Nop()})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	if _, err := rt.Deploy(ctx, probeSpec(os.Getenv("MCE_TEST_IMAGE"), 3, nil)); err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Println("READY")
	time.Sleep(10 * time.Minute)
}

// TestPublishedFallback reaches containers through ports published on
// 127.0.0.1, the fallback for engines whose container addresses mce cannot
// route to, and checks nothing is published on another interface.
func TestPublishedFallback(t *testing.T) {
	cli := testenv.Docker(t)
	rt, _ := testenv.Runtime(t, docker.Options{Client: cli, Network: docker.NetworkPublished, StopGrace: time.Second})
	d, err := rt.Deploy(context.Background(), probeSpec(testenv.Image(t, "probe"), 2, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	for _, c := range d.Containers() {
		if !strings.HasPrefix(c.BaseURL(), "http://127.0.0.1:") {
			t.Errorf("%s reached at %s, want a port on 127.0.0.1", c.Hostname(), c.BaseURL())
		}
		if code, body := call(t, c, "", "hello"); code != 200 || body != "hello" {
			t.Errorf("%s: %d %q", c.Hostname(), code, body)
		}
		res, err := cli.ContainerInspect(context.Background(), c.ID(), client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for port, bindings := range res.Container.HostConfig.PortBindings {
			for _, b := range bindings {
				if b.HostIP.String() != "127.0.0.1" {
					t.Errorf("%s publishes %v on %v", c.Hostname(), port, b.HostIP)
				}
			}
		}
	}
}

// TestAdditionalModelDataMounted: each AdditionalModelDataSources channel
// is fetched as model data is (an archive extracted, a folder staged) and
// mounted read-only at /opt/ml/additional-model-data-sources/<channel>; an
// unsafe archive in a channel is refused as model data is, with nothing
// left behind.
func TestAdditionalModelDataMounted(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	writeTarGz(t, filepath.Join(dir, "draft.tar.gz"), []tar.Header{{Name: "draft/config.json", Mode: 0o644, Typeflag: tar.TypeReg}},
		map[string]string{"draft/config.json": `{"draft":true}`})
	if err := os.MkdirAll(filepath.Join(dir, "lora"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "lora", "adapter.bin"), []byte("0123"), 0o600)
	s := probeSpec(e.probe, 1, nil)
	c := &s.Variants[0].Containers[0]
	c.BaseDir = dir
	c.AdditionalModelData = []containers.ModelDataChannel{{Channel: "draft_model", URL: "file://draft.tar.gz"}, {Channel: "lora.v1", URL: "file://lora/"}}
	d, err := e.deploy(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Containers()[0].BidirectionalStreaming() {
		t.Error("the probe's image carries the bidirectional-streaming label; its container says it does not")
	}
	res, err := e.cli.ContainerInspect(context.Background(), d.Containers()[0].ID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"draft_model": "draft/config.json", "lora.v1": "adapter.bin"}
	for _, m := range res.Container.Mounts {
		ch, ok := strings.CutPrefix(m.Destination, containers.AdditionalModelDataDir+"/")
		if !ok {
			continue
		}
		if m.RW || strings.HasPrefix(m.Source, dir) {
			t.Errorf("%s: read-write %v, source %s (want read-only, mce's staged copy)", m.Destination, m.RW, m.Source)
		}
		if _, err := os.Stat(filepath.Join(m.Source, want[ch])); err != nil {
			t.Errorf("%s lacks %s: %v", m.Destination, want[ch], err)
		}
		delete(want, ch)
	}
	if len(want) != 0 {
		t.Errorf("channels not mounted: %v", want)
	}

	writeTarGz(t, filepath.Join(dir, "slip.tar.gz"), []tar.Header{{Name: "../../evil", Mode: 0o644, Typeflag: tar.TypeReg}},
		map[string]string{"../../evil": "x"})
	s = probeSpec(e.probe, 1, nil)
	s.Name = "ep-slip"
	s.Variants[0].Containers[0].BaseDir = dir
	s.Variants[0].Containers[0].AdditionalModelData = []containers.ModelDataChannel{{Channel: "draft", URL: "file://slip.tar.gz"}}
	if _, err := e.deploy(t, s); !errors.Is(err, artifact.ErrUnsafeArchive) || !strings.Contains(err.Error(), `channel "draft"`) {
		t.Fatalf("an unsafe channel archive: err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "evil")); err == nil {
		t.Error("the archive wrote outside its folder")
	}
	s.Name = "ep-bad-channel"
	s.Variants[0].Containers[0].AdditionalModelData = []containers.ModelDataChannel{{Channel: "..", URL: "file://lora/"}}
	if _, err := e.deploy(t, s); !errors.Is(err, docker.ErrInvalidSpec) {
		t.Fatalf("channel ..: err = %v", err)
	}
}
