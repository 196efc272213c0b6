package docker_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/internal/testenv"
)

// TestSecondMCESameInstanceRefused reproduces issue 9 item 8: a second mce
// with the same --instance but another --state-dir swept the first one's
// running containers as "left behind". Now it refuses to start, in this
// process and in another one, and the first one's containers are untouched.
func TestSecondMCESameInstanceRefused(t *testing.T) {
	if os.Getenv("MCE_TEST_CHILD") == "second" {
		_, err := docker.New(context.Background(), docker.Options{Client: mustConnect(), Instance: os.Getenv("MCE_TEST_INSTANCE"),
			StateDir: os.Getenv("MCE_TEST_STATE"), Logger: zerolog.Nop()})
		switch {
		case errors.Is(err, docker.ErrInstanceInUse):
			os.Stdout.WriteString("REFUSED " + err.Error() + "\n")
		case err != nil:
			os.Stdout.WriteString("ERR " + err.Error() + "\n")
		default:
			os.Stdout.WriteString("STARTED\n")
		}
		return
	}
	e := newEnv(t)
	d, err := e.deploy(t, probeSpec(e.probe, 2, nil))
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]bool{}
	for _, c := range d.Containers() {
		before[c.ID()] = true
	}

	// Another process, another state folder.
	cmd := execSelf(t, "TestSecondMCESameInstanceRefused", "MCE_TEST_CHILD=second",
		"MCE_TEST_INSTANCE="+e.instance, "MCE_TEST_STATE="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	if !strings.HasPrefix(string(out), "REFUSED ") || !strings.Contains(string(out), "docker rm "+docker.LeaseName(e.instance)) {
		t.Fatalf("second mce with the same instance: %q, want a refusal saying how to release the name", out)
	}
	// This process, another state folder.
	if _, err := docker.New(context.Background(), docker.Options{Client: e.cli, Instance: e.instance, StateDir: t.TempDir(), Logger: zerolog.Nop()}); !errors.Is(err, docker.ErrInstanceInUse) {
		t.Fatalf("second runtime in this process: %v, want ErrInstanceInUse", err)
	}

	for _, c := range d.Containers() {
		if !before[c.ID()] || !c.Ready() {
			t.Errorf("%s: id %s ready %v; want the original container, running", c.Hostname(), c.ID(), c.Ready())
		}
		if code, body := call(t, c, "", "still"); code != 200 || body != "still" {
			t.Errorf("%s after the second mce: %d %q", c.Hostname(), code, body)
		}
	}
	if n, _ := testenv.Leftovers(t, e.cli, e.instance); n != 2 {
		t.Errorf("%d containers of the instance, want the first mce's 2", n)
	}

	// Once the first has stopped, the name is free.
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.rt.Close()
	rt, err := docker.New(context.Background(), docker.Options{Client: e.cli, Instance: e.instance, StateDir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatalf("after the holder closed: %v", err)
	}
	rt.Close()
	if leaseLeft(t, e.cli, e.instance) {
		t.Error("Close left the instance lease")
	}
}

func mustConnect() *client.Client {
	cli, err := docker.Connect(context.Background())
	if err != nil {
		os.Stdout.WriteString("ERR " + err.Error() + "\n")
		os.Exit(1)
	}
	return cli
}

func leaseLeft(t *testing.T, cli *client.Client, instance string) bool {
	t.Helper()
	_, err := cli.ContainerInspect(context.Background(), docker.LeaseName(instance), client.ContainerInspectOptions{})
	return err == nil
}

// waitFor polls cond every 50 ms until it holds or the time is up.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRemovedContainerRecreated: a container removed with docker rm -f is
// recreated from its definition (same name, hostname, environment, network
// alias) and answers again within seconds; before, mce looped on "No such
// container" for ever.
func TestRemovedContainerRecreated(t *testing.T) {
	e := newEnv(t)
	d, err := e.deploy(t, probeSpec(e.probe, 2, map[string]string{"PROBE_TAG": "-t"}))
	if err != nil {
		t.Fatal(err)
	}
	c := d.Containers()[0]
	old, name := c.ID(), c.Name()
	start := time.Now()
	if _, err := e.cli.ContainerRemove(context.Background(), old, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the removed container is back and ready", func() bool { return c.ID() != old && c.Ready() })
	t.Logf("recreated and ready %s after docker rm -f", time.Since(start).Round(time.Millisecond))
	if code, body := call(t, c, "", "again"); code != 200 || body != "again-t" {
		t.Fatalf("recreated container: %d %q", code, body)
	}
	res, err := e.cli.ContainerInspect(context.Background(), c.ID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ic := res.Container
	if strings.TrimPrefix(ic.Name, "/") != name || ic.Config.Hostname != c.Hostname() {
		t.Errorf("recreated as %q with hostname %q; want %q, %q", ic.Name, ic.Config.Hostname, name, c.Hostname())
	}
	if !hasEnv(ic.Config.Env, "PROBE_TAG=-t") || !hasEnv(ic.Config.Env, "SAGEMAKER_BIND_TO_PORT=8080") {
		t.Errorf("recreated with environment %v", ic.Config.Env)
	}
	ep := ic.NetworkSettings.Networks[d.Network()]
	if ep == nil || !hasEnv(ep.Aliases, c.Hostname()) {
		t.Errorf("recreated container is not on %s with alias %s: %+v", d.Network(), c.Hostname(), ep)
	}
	// Its sibling was not disturbed.
	if code, _ := call(t, d.Containers()[1], "", "x"); code != 200 {
		t.Errorf("sibling: %d", code)
	}
}

func hasEnv(list []string, want string) bool {
	for _, s := range list {
		if s == want {
			return true
		}
	}
	return false
}

// TestUnrestartableContainerReported: a container that cannot be made again
// (its image is gone) is not ready and says why; once the image is back it
// is recreated and serves again.
func TestUnrestartableContainerReported(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	img := "mce-test-" + e.instance + "/probe:latest"
	if _, err := e.cli.ImageTag(ctx, client.ImageTagOptions{Source: e.probe, Target: img}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.cli.ImageRemove(context.Background(), img, client.ImageRemoveOptions{}) })
	d, err := e.deploy(t, probeSpec(img, 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	c := d.Containers()[0]
	old := c.ID()
	if _, err := e.cli.ContainerRemove(ctx, old, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cli.ImageRemove(ctx, img, client.ImageRemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the container reports that it cannot be restarted", func() bool {
		return strings.Contains(c.Unavailable(), "could not be restarted")
	})
	if c.Ready() {
		t.Fatal("a container that cannot run is ready")
	}
	t.Logf("Unavailable: %s", c.Unavailable())
	if !strings.Contains(c.Unavailable(), c.Hostname()) {
		t.Errorf("reason %q does not name the container", c.Unavailable())
	}

	if _, err := e.cli.ImageTag(ctx, client.ImageTagOptions{Source: e.probe, Target: img}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 45*time.Second, "the container is back once its image is", func() bool { return c.Ready() })
	if c.Unavailable() != "" {
		t.Errorf("ready, but Unavailable says %q", c.Unavailable())
	}
	if code, body := call(t, c, "", "back"); code != 200 || body != "back" {
		t.Errorf("after recovery: %d %q", code, body)
	}
}
