package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers/docker"
)

// dialerImage builds testdata/dialer as a static binary and imports it as a
// one-file image; it is removed when the test ends.
func dialerImage(t *testing.T, cli *client.Client, tag string) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "dialer")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "./testdata/dialer")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the dialer: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "dialer", Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg})
	tw.Write(b)
	tw.Close()
	ref := "mce-test-dialer:" + tag
	res, err := cli.ImageImport(context.Background(), client.ImageImportSource{Source: &buf, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: []string{`ENTRYPOINT ["/dialer"]`}})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res)
	res.Close()
	t.Cleanup(func() { cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true}) })
	return ref
}

// dial runs the dialer on a network and returns its report: address → "ok"
// or the failure.
func dial(t *testing.T, cli *client.Client, image, instance, net string, addrs ...string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Cmd: addrs, Labels: map[string]string{docker.LabelInstance: instance}},
		HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(net)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.ContainerRemove(context.Background(), res.ID, client.ContainerRemoveOptions{Force: true})
	wait := cli.ContainerWait(ctx, res.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wait.Result:
	case err := <-wait.Error:
		t.Fatal(err)
	}
	logs, err := cli.ContainerLogs(ctx, res.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var out bytes.Buffer
	stdcopy.StdCopy(&out, &out, logs)
	report := map[string]string{}
	for line := range strings.Lines(out.String()) {
		addr, result, _ := strings.Cut(strings.TrimSpace(line), " ")
		report[addr] = result
	}
	return report
}

// TestNetworkIsolation: a variant with NetworkIsolation runs on an internal
// network. mce reaches it (the deploy passes /ping, calls answer), it reaches
// its siblings on that network, but nothing beyond the machine's bridges:
// a listener published on the open network's gateway address (traffic the
// host must forward, as it would to the internet) answers a container on
// the open network and not one on the isolated network. Every container
// runs with no-new-privileges and the PIDs limit.
func TestNetworkIsolation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	spec := docker.EndpointSpec{Name: "ep", Variants: []docker.VariantSpec{
		{Name: "Open", Copies: 1, HealthTimeout: 30 * time.Second,
			Containers: []docker.ContainerSpec{{Hostname: "open-1", Image: e.probe}}},
		{Name: "Closed", Copies: 1, HealthTimeout: 30 * time.Second, NetworkIsolation: true,
			Containers: []docker.ContainerSpec{{Hostname: "closed-1", Image: e.probe}, {Hostname: "closed-2", Image: e.probe}}},
	}}
	d, err := e.deploy(t, spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Containers() {
		if code, body := call(t, c, "", "hi"); code != 200 || body != "hi" {
			t.Errorf("mce → %s: %d %q", c.Hostname(), code, body)
		}
		res, err := e.cli.ContainerInspect(ctx, c.ID(), client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hc := res.Container.HostConfig
		if !slices.Contains(hc.SecurityOpt, "no-new-privileges") {
			t.Errorf("%s: SecurityOpt %v lacks no-new-privileges", c.Hostname(), hc.SecurityOpt)
		}
		if hc.PidsLimit == nil || *hc.PidsLimit != docker.DefaultPidsLimit() {
			t.Errorf("%s: PidsLimit %v, want %d", c.Hostname(), hc.PidsLimit, docker.DefaultPidsLimit())
		}
	}

	openNet, closedNet := d.Network(), d.Network()+"_isolated"
	ni, err := e.cli.NetworkInspect(ctx, closedNet, client.NetworkInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !ni.Network.Internal {
		t.Fatalf("network %s is not internal", closedNet)
	}
	no, err := e.cli.NetworkInspect(ctx, openNet, client.NetworkInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(no.Network.IPAM.Config) == 0 || !no.Network.IPAM.Config[0].Gateway.IsValid() {
		t.Fatalf("network %s has no gateway: %+v", openNet, no.Network.IPAM)
	}
	gw := no.Network.IPAM.Config[0].Gateway

	// A listener on the default bridge, published only on the open
	// network's gateway address.
	port, _ := network.ParsePort("8080/tcp")
	lis, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: e.probe, Cmd: []string{"serve"}, Env: []string{"SAGEMAKER_BIND_TO_PORT=8080"},
			ExposedPorts: network.PortSet{port: {}}, Labels: map[string]string{docker.LabelInstance: e.instance}},
		HostConfig: &container.HostConfig{NetworkMode: "bridge", PortBindings: network.PortMap{port: {{HostIP: gw}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.cli.ContainerRemove(context.Background(), lis.ID, client.ContainerRemoveOptions{Force: true})
	if _, err := e.cli.ContainerStart(ctx, lis.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	li, err := e.cli.ContainerInspect(ctx, lis.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var hostPort string
	for _, b := range li.Container.NetworkSettings.Ports[port] {
		hostPort = b.HostPort
	}
	if _, err := strconv.Atoi(hostPort); err != nil {
		t.Fatalf("listener published no port: %+v", li.Container.NetworkSettings.Ports)
	}
	outside := gw.String() + ":" + hostPort

	img := dialerImage(t, e.cli, e.instance)
	open := dial(t, e.cli, img, e.instance, openNet, outside)
	if open[outside] != "ok" {
		t.Fatalf("control: from the open network, %s: %s; the test cannot tell isolation apart", outside, open[outside])
	}
	closed := dial(t, e.cli, img, e.instance, closedNet, outside, "closed-1:8080", "closed-2:8081")
	if closed[outside] == "ok" {
		t.Errorf("from the isolated network, %s answered: there is a route out", outside)
	}
	for _, sib := range []string{"closed-1:8080", "closed-2:8081"} {
		if closed[sib] != "ok" {
			t.Errorf("from the isolated network, sibling %s: %s", sib, closed[sib])
		}
	}
	t.Logf("open: %v; isolated: %v", open, closed)
}
