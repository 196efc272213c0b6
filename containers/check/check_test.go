package check_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/check"
	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/internal/testenv"
)

// row is one line of examples/containers/check.tsv.
type row struct {
	image, model, input, contentType, accept string
	extra                                    []string // EXTRA FLAGS, split on blanks
}

// apply sets the options the table's extra flags name, as mce check would.
func (r row) apply(t *testing.T, o *check.Options) {
	t.Helper()
	for i := 0; i < len(r.extra); i++ {
		flag, val, ok := strings.Cut(r.extra[i], "=")
		if !ok && i+1 < len(r.extra) {
			i++
			val = r.extra[i]
		}
		var err error
		switch flag {
		case "--multi-model":
			o.MultiModel = check.MultiModel(val)
		case "--env":
			k, v, _ := strings.Cut(val, "=")
			if o.Env == nil {
				o.Env = map[string]string{}
			}
			o.Env[k] = v
		case "--health-window":
			o.HealthWindow, err = time.ParseDuration(val)
		case "--timeout":
			o.Timeout, err = time.ParseDuration(val)
		default:
			t.Fatalf("check.tsv: this test does not know the flag %q; teach row.apply", flag)
		}
		if err != nil {
			t.Fatalf("check.tsv: %s %s: %v", flag, val, err)
		}
	}
}

func readTable(t *testing.T, root string) []row {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "examples/containers/check.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []row
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 5 {
			t.Fatalf("check.tsv: %q has %d fields, want at least 5", line, len(f))
		}
		dash := func(s string) string {
			if s == "-" {
				return ""
			}
			return s
		}
		var extra []string
		if len(f) > 5 {
			extra = strings.Fields(strings.Join(f[5:], " "))
		}
		rows = append(rows, row{f[0], dash(f[1]), dash(f[2]), dash(f[3]), dash(f[4]), extra})
	}
	return rows
}

// statuses maps check names to statuses.
func statuses(rep *check.Report) map[string]check.Status {
	m := map[string]check.Status{}
	for _, c := range rep.Checks {
		m[c.Name] = c.Status
	}
	return m
}

// leftovers counts what this process's checks left on the engine.
func leftovers(t *testing.T, cli *client.Client) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f := client.Filters{}.Add("label", check.LabelOwner+"="+check.Owner())
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return len(cs.Items) + len(ns.Items)
}

func runCheck(t *testing.T, cli *client.Client, o check.Options) *check.Report {
	t.Helper()
	c, err := check.New(cli, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := c.Run(ctx)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var b strings.Builder
	rep.WriteText(&b)
	t.Logf("\n%s", b.String())
	if n := leftovers(t, cli); n > 0 {
		t.Errorf("the check left %d containers and networks behind", n)
	}
	return rep
}

// TestExampleImages runs mce check on every image of
// examples/containers/check.tsv with its model data and sample. None may
// fail; what the Go example containers do is known, so their warnings and
// skips are checked exactly.
func TestExampleImages(t *testing.T) {
	cli := testenv.Docker(t)
	root := testenv.RepoRoot(t)
	rows := readTable(t, root)
	// What the example containers are known to do beyond passing: the probe
	// echoes any content type, and modelserver reads any type as JSON, as
	// Triton does; none but modelserver is labelled multi-models.
	warns := map[string][]string{
		"mce-example/probe:latest":       {"wrong content type: 4xx, keeps running"},
		"mce-example/modelserver:latest": {"wrong content type: 4xx, keeps running"},
	}
	for _, r := range rows {
		t.Run(strings.ReplaceAll(r.image+" "+filepath.Base(r.model), "/", "_"), func(t *testing.T) {
			if name, ok := strings.CutPrefix(r.image, "mce-example/"); ok {
				testenv.Image(t, strings.TrimSuffix(name, ":latest"))
			} else if strings.HasPrefix(r.image, "mce-framework/") {
				testenv.FrameworkImages(t)
			} else if _, err := docker.InspectImage(context.Background(), cli, r.image); err != nil {
				if os.Getenv("CI") != "" {
					t.Fatalf("%s is in check.tsv but not built: %v", r.image, err)
				}
				t.Skipf("SKIPPING %s: not built here (%v); CI never skips this", r.image, err)
			}
			switch {
			case strings.HasPrefix(r.model, "build/models/framework/"), strings.HasPrefix(r.model, "build/models/mme-torch/"):
				testenv.FrameworkModels(t)
			case strings.HasPrefix(r.model, "build/models/"):
				testenv.Models(t)
			case strings.HasPrefix(r.model, "build/mme-models/"):
				testenv.MMEModels(t)
			}
			o := check.Options{Image: r.image, ContentType: r.contentType, Accept: r.accept, HealthWindow: time.Minute}
			r.apply(t, &o)
			if r.model != "" {
				o.ModelData = filepath.Join(root, r.model)
			}
			if r.input != "" {
				b, err := os.ReadFile(filepath.Join(root, r.input))
				if err != nil {
					t.Fatal(err)
				}
				o.Input = b
			}
			rep := runCheck(t, cli, o)
			if !rep.Passed {
				t.Fatalf("failed: %v", rep.Failed())
			}
			st := statuses(rep)
			if o.Input != nil && st["/invocations answers the sample"] != check.Pass && st["mme: invoke answers the sample"] != check.Pass {
				t.Error("the sample was not answered")
			}
			if st["two copies (ports 8080, 8081) answer /ping"] != check.Pass || st["listens only on port 8080"] != check.Pass {
				t.Errorf("two copies or listeners not passed: %v", st)
			}
			// Every image's warnings are as expected: none, unless listed.
			want, known := warns[r.image]
			var got []string
			for _, c := range rep.Checks {
				if c.Status == check.Warn {
					got = append(got, c.Name)
				}
			}
			if known || len(got) > 0 {
				if !slices.Equal(got, want) {
					t.Errorf("warnings %v, want %v", got, want)
				}
			}
			if r.image == "mce-example/modelserver:latest" && o.MultiModel != check.MultiModelOff {
				if rep.Mode != "multi-model" {
					t.Errorf("mode %s, want multi-model", rep.Mode)
				}
				for _, n := range []string{"mme: load (200)", "mme: load again (409)", "mme: list has the model", "mme: get the model (200)",
					"mme: invoke answers the sample", "mme: unload (200)", "mme: invoke after unload (404)", "mme: get after unload (404)"} {
					if st[n] != check.Pass {
						t.Errorf("%s: %s, want pass", n, st[n])
					}
				}
			}
		})
	}
}

// badImage builds testdata/badserver once per test binary and imports it
// as a one-file image per mode; images are removed when the test ends.
type badImages struct {
	cli *client.Client
	bin []byte
	tag string
}

func newBadImages(t *testing.T, cli *client.Client) *badImages {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "badserver")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-trimpath", "-o", bin, "./testdata/badserver")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the badserver: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return &badImages{cli: cli, bin: b, tag: testenv.Instance(t)}
}

// image imports the badserver with MODE=mode, labelled unless nolabel.
func (bi *badImages) image(t *testing.T, mode string, labelled bool) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "badserver", Mode: 0o755, Size: int64(len(bi.bin)), Typeflag: tar.TypeReg})
	tw.Write(bi.bin)
	tw.Close()
	changes := []string{`ENTRYPOINT ["/badserver"]`, `CMD ["serve"]`, "ENV MODE=" + mode}
	if labelled {
		changes = append(changes, "LABEL "+docker.LabelBindToPort+"=true")
	}
	name := mode
	if name == "" {
		name = "good"
	}
	if !labelled {
		name += "-nolabel"
	}
	ref := "mce-test-badserver-" + name + ":" + bi.tag
	ctx := context.Background()
	res, err := bi.cli.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, ref, client.ImageImportOptions{Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res)
	res.Close()
	t.Cleanup(func() { bi.cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true}) })
	return ref
}

// TestBrokenImagesFail runs mce check on images that each break one rule
// and expects exactly that rule (and what follows from it) to fail.
func TestBrokenImagesFail(t *testing.T) {
	cli := testenv.Docker(t)
	bi := newBadImages(t, cli)
	sample := []byte("hello")
	for _, tc := range []struct {
		name     string
		mode     string
		labelled bool
		fail     []string          // exactly these fail
		detail   map[string]string // check name → text its detail holds
	}{
		{name: "keeps the contract", labelled: true},
		{name: "no label", labelled: false, fail: []string{"label accept-bind-to-port=true"}},
		{name: "extra port", mode: "extraport", labelled: true,
			fail:   []string{"listens only on port 8080", "two copies (ports 8080, 8081) answer /ping"},
			detail: map[string]string{"listens only on port 8080": "also listening on [::]:9000", "two copies (ports 8080, 8081) answer /ping": "address already in use"}},
		{name: "fixed port", mode: "fixedport", labelled: true,
			fail:   []string{"two copies (ports 8080, 8081) answer /ping"},
			detail: map[string]string{"two copies (ports 8080, 8081) answer /ping": "address already in use"}},
		{name: "never answers ping", mode: "noping", labelled: true,
			fail:   []string{"/ping 200 within 2s"},
			detail: map[string]string{"/ping 200 within 2s": "last answer 503"}},
		{name: "crashes on start", mode: "crash", labelled: true,
			fail:   []string{"starts with serve"},
			detail: map[string]string{"starts with serve": "exited with status 3"}},
		{name: "5xx on a wrong content type", mode: "servererr", labelled: true,
			fail:   []string{"wrong content type: 4xx, keeps running"},
			detail: map[string]string{"wrong content type: 4xx, keeps running": "got 500"}},
		{name: "dies on an oversize body", mode: "fragile", labelled: true,
			fail:   []string{"oversize body (7 MiB): 4xx, keeps running"},
			detail: map[string]string{"oversize body (7 MiB): 4xx, keeps running": "the container died"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := bi.image(t, tc.mode, tc.labelled)
			rep := runCheck(t, cli, check.Options{Image: img, Input: sample, ContentType: "text/plain", HealthWindow: 2 * time.Second})
			if got := rep.Failed(); !slices.Equal(got, tc.fail) {
				t.Errorf("failed %v, want %v", got, tc.fail)
			}
			if rep.Passed != (len(tc.fail) == 0) {
				t.Errorf("Passed %v with failures %v", rep.Passed, tc.fail)
			}
			for _, c := range rep.Checks {
				if want, ok := tc.detail[c.Name]; ok && !strings.Contains(c.Detail, want) {
					t.Errorf("%s: detail %q does not hold %q", c.Name, c.Detail, want)
				}
			}
			if tc.mode == "crash" {
				st := statuses(rep)
				if !strings.Contains(rep.Checks[slices.IndexFunc(rep.Checks, func(c check.Result) bool { return c.Name == "starts with serve" })].Detail, "weights.bin is missing") {
					t.Error("the crash's log line is not shown")
				}
				if st["/ping 200 within 2s"] != check.Skip {
					t.Errorf("ping after a crash: %s, want skip", st["/ping 200 within 2s"])
				}
			}
		})
	}
}

// TestMissingImage: an image that is not there fails, and nothing starts.
func TestMissingImage(t *testing.T) {
	cli := testenv.Docker(t)
	rep := runCheck(t, cli, check.Options{Image: "mce-test-no-such-image:" + testenv.Instance(t)})
	if got := rep.Failed(); !slices.Equal(got, []string{"image present"}) || len(rep.Checks) != 1 {
		t.Errorf("checks %+v", rep.Checks)
	}
}

// TestCancelLeavesNothing cancels a check while it waits for /ping (what
// Ctrl-C does) and expects everything it made removed.
func TestCancelLeavesNothing(t *testing.T) {
	cli := testenv.Docker(t)
	bi := newBadImages(t, cli)
	img := bi.image(t, "noping", true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The container is started before the wait for /ping begins; cancel
	// half a second into that wait.
	started := make(chan struct{}, 1)
	c, err := check.New(cli, check.Options{Image: img, HealthWindow: time.Minute, OnResult: func(r check.Result) {
		if r.Name == "image present" {
			started <- struct{}{}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		select {
		case <-started:
			time.Sleep(1500 * time.Millisecond)
		case <-time.After(30 * time.Second):
		}
		cancel()
	}()
	t0 := time.Now()
	rep, err := c.Run(ctx)
	if !errors.Is(err, context.Canceled) || rep != nil {
		t.Fatalf("Run after cancel: %v, %v; want context.Canceled", rep, err)
	}
	if time.Since(t0) > 20*time.Second {
		t.Errorf("the cancelled check took %s", time.Since(t0))
	}
	if n := leftovers(t, cli); n > 0 {
		t.Errorf("a cancelled check left %d containers and networks behind", n)
	}
}

// TestReapsWhatAKilledCheckLeft: a network labelled as made by a check
// whose process is gone is removed by the next check; one owned by a live
// process stays.
func TestReapsWhatAKilledCheckLeft(t *testing.T) {
	cli := testenv.Docker(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	pid := dead.Process.Pid
	if !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		t.Skip("the pid was reused at once")
	}
	ctx := context.Background()
	mk := func(owner string) string {
		name := "mce-check-reaptest-" + testenv.Instance(t)
		_, err := cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge",
			Labels: map[string]string{check.LabelCheck: "true", check.LabelOwner: owner}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.NetworkRemove(context.Background(), name, client.NetworkRemoveOptions{}) })
		return name
	}
	deadNet := mk(host + ":" + strconv.Itoa(pid) + ":")
	initStart, _ := containers.ProcessStart(1)
	liveNet := mk(host + ":1:" + initStart) // init never dies
	// A PID now held by a later process than the owner: the owner is gone.
	reusedNet := mk(host + ":1:" + initStart + "0")
	runCheck(t, cli, check.Options{Image: "mce-test-no-such-image:" + testenv.Instance(t)})
	// A missing image stops before anything is reaped; a real run reaps.
	bi := newBadImages(t, cli)
	runCheck(t, cli, check.Options{Image: bi.image(t, "crash", true)})
	exists := func(name string) bool {
		_, err := cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
		return err == nil
	}
	if exists(deadNet) {
		t.Error("the dead check's network is still there")
	}
	if !exists(liveNet) {
		t.Error("a live owner's network was removed")
	}
	if exists(reusedNet) {
		t.Error("the network of an owner whose PID was reused is still there")
	}
}
