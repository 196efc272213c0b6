package main

import (
	"context"
	"errors"
	"github.com/moby/moby/client"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/internal/testenv"
)

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func endpointFile(t *testing.T, env string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "ep.yaml")
	os.WriteFile(file, []byte(`
Models:
  - ModelName: m
    PrimaryContainer: {Image: mce-example/probe:latest, Environment: {`+env+`}}
EndpointConfigs:
  - EndpointConfigName: c
    ProductionVariants: [{VariantName: AllTraffic, ModelName: m, InitialInstanceCount: 1, InstanceType: ml.c5.large, ContainerStartupHealthCheckTimeoutInSeconds: 60}]
Endpoints:
  - {EndpointName: ep, EndpointConfigName: c}
`), 0o644)
	return file
}

func serveFlagsFor(t *testing.T, listen, file string) serveFlags {
	return serveFlags{
		files: []string{file}, listen: listen, region: "us-east-1", account: "123456789012",
		instance: testenv.Instance(t), stateDir: t.TempDir(), networkMode: "auto",
		containerTimeout: 10 * time.Second, stopGrace: 2 * time.Second, drain: 10 * time.Second,
		log: logFlags{format: "json", level: "warn"},
	}
}

// TestServeDrainsInFlightRequests stops serve while a request is inside a
// container: the request completes, then everything is removed.
func TestServeDrainsInFlightRequests(t *testing.T) {
	cli := testenv.Docker(t)
	testenv.Image(t, "probe")
	listen := freePort(t)
	f := serveFlagsFor(t, listen, endpointFile(t, ""))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, f) }()

	base := "http://" + listen
	waitInService(t, base, 1)

	type result struct {
		code int
		body string
		err  error
	}
	inflight := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, base+"/endpoints/ep/invocations", strings.NewReader("still here"))
		req.Header.Set("X-Amzn-SageMaker-Custom-Attributes", "sleep=1500ms")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			inflight <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		inflight <- result{code: resp.StatusCode, body: string(b)}
	}()
	time.Sleep(400 * time.Millisecond)
	cancel() // what SIGTERM does

	r := <-inflight
	if r.err != nil || r.code != 200 || r.body != "still here" {
		t.Errorf("in-flight request: %d %q %v; want it answered", r.code, r.body, r.err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop")
	}
	if _, err := http.Get(base + "/ping"); err == nil {
		t.Error("still taking requests after shutdown")
	}
	if c, n := testenv.Leftovers(t, cli, f.instance); c+n > 0 {
		t.Errorf("left behind %d containers, %d networks", c, n)
	}
}

func TestServeRefusesBadFiles(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(file, []byte("Models:\n  - ModelName: m\n    PrimaryContainer: {Imagee: x}\n"), 0o644)
	err := serve(context.Background(), serveFlagsFor(t, freePort(t), file))
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(ee.msg, "Imagee") {
		t.Fatalf("err = %v, want exit 2 naming the field", err)
	}
}

// TestServeRefusesBadTimeCompression: --time-compression outside 1 to 120
// (or not a number; 0 is the flag not given) stops serve before anything
// starts, with exit 2.
func TestServeRefusesBadTimeCompression(t *testing.T) {
	for _, f := range []float64{0.5, -60, 121, 3600, math.NaN(), math.Inf(1)} {
		flags := serveFlagsFor(t, freePort(t), endpointFile(t, ""))
		flags.timeCompression = f
		err := serve(context.Background(), flags)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(ee.msg, "--time-compression") || !strings.Contains(ee.msg, "from 1 to 120") {
			t.Errorf("--time-compression %v: err = %v, want exit 2 naming the range", f, err)
		}
	}
}

func TestServeExitsWhenAnEndpointFails(t *testing.T) {
	cli := testenv.Docker(t)
	testenv.Image(t, "probe")
	f := serveFlagsFor(t, freePort(t), endpointFile(t, "PROBE_EXIT_AFTER: 200ms, PROBE_READY_AFTER: 1m, PROBE_EXIT_CODE: '5'"))
	err := serve(context.Background(), f)
	if err == nil || !strings.Contains(err.Error(), "exited with code 5") || !strings.Contains(err.Error(), `"primary"`) {
		t.Fatalf("err = %v, want the failing container named with its exit code", err)
	}
	if c, n := testenv.Leftovers(t, cli, f.instance); c+n > 0 {
		t.Errorf("left behind %d containers, %d networks", c, n)
	}
}

// TestServeRefusesSystemModelRoots: / and system folders are never model
// roots; serve stops before touching Docker, naming the folder.
func TestServeRefusesSystemModelRoots(t *testing.T) {
	for _, root := range []string{"/", "/etc", "/var/run", "/var", "/usr/lib", "/proc/1"} {
		f := serveFlagsFor(t, freePort(t), endpointFile(t, ""))
		f.modelRoots = []string{root}
		err := serve(context.Background(), f)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(ee.msg, "system folders") || !strings.Contains(ee.msg, root) {
			t.Errorf("--model-root %s: err = %v, want exit 2 refusing the system folder", root, err)
		}
	}
}

// TestNewFetcherRoots: the -f files' folders and --model-root folders are
// the model roots; a file kept in a system folder gives none.
func TestNewFetcherRoots(t *testing.T) {
	file := endpointFile(t, "")
	extra := t.TempDir()
	f := serveFlagsFor(t, freePort(t), file)
	f.files = append(f.files, "/etc/hostname")
	f.modelRoots = []string{extra}
	fetcher, err := newFetcher(f, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for url, ok := range map[string]bool{
		"file://" + filepath.Dir(file) + "/m.tar.gz": true,
		"file://" + extra + "/m":                     true,
		"file:///etc/hostname":                       false,
		"file://" + t.TempDir():                      false,
	} {
		if err := fetcher.CheckModelDataURL(url, ""); (err == nil) != ok {
			t.Errorf("CheckModelDataURL(%q) = %v, want ok=%v", url, err, ok)
		}
	}
}

// TestNamedDataRoots: file:// data named by the endpoint files is trusted
// (the operator wrote it): its folder becomes a root, so examples naming
// file://../../build/models/x.tar.gz keep working; a system folder is refused.
func TestNamedDataRoots(t *testing.T) {
	top := t.TempDir()
	for _, d := range []string{"ep", "models/mme"} {
		if err := os.MkdirAll(filepath.Join(top, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(top, "models/m.tar.gz"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(name, url string) string {
		p := filepath.Join(top, "ep", name)
		if err := os.WriteFile(p, []byte("Models:\n  - ModelName: m\n    PrimaryContainer: {Image: i, ModelDataUrl: '"+url+"'}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	load := func(file string) *spec.Bundle {
		b, err := spec.LoadFiles(file)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for url, want := range map[string]string{
		"file://../models/m.tar.gz": filepath.Join(top, "models"),
		"file://../models/mme/":     filepath.Join(top, "models/mme"),
		"file://../models/missing":  "",
	} {
		got, missing, err := namedDataRoots(load(write("ok.yaml", url)))
		if err != nil || (want == "" && len(got) != 0) || (want != "" && (len(got) != 1 || got[0] != want)) {
			t.Errorf("namedDataRoots(%q) = %v, %v; want %q", url, got, err, want)
		}
		if (want == "") != (len(missing) == 1 && missing[0] == filepath.Join(top, "models/missing")) {
			t.Errorf("namedDataRoots(%q) lists %v as missing", url, missing)
		}
	}
	if _, _, err := namedDataRoots(load(write("bad.yaml", "file:///var/run/"))); err == nil || !strings.Contains(err.Error(), "system folders") {
		t.Errorf("a file naming /var/run: err = %v, want the system-folder refusal", err)
	}
}

// serveInService runs serve with f until the test ends and returns once its
// endpoint is InService, with serve's context and URL. The cleanup stops
// serve and fails the test if the instance left containers or networks.
func serveInService(t *testing.T, cli *client.Client, f serveFlags) (context.Context, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, f) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if c, n := testenv.Leftovers(t, cli, f.instance); c+n > 0 {
			t.Errorf("left behind %d containers, %d networks", c, n)
		}
	})
	url := "http://" + f.listen
	waitInService(t, url, 1)
	return ctx, url
}
