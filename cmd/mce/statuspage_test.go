package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mce-run/mce/internal/testenv"
)

// chromium finds Debian's chromium, or skips (fails under CI) without it.
func chromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but chromium is not installed (scripts/deps.sh installs it)")
		}
		t.Skip("SKIPPING the status page's browser test: chromium is not installed (apt-get install chromium); CI never skips this")
	}
	return path
}

// runChromium runs headless chromium with a throw-away profile and HOME and
// returns its standard output.
func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--disable-extensions", "--hide-scrollbars", "--user-data-dir=" + filepath.Join(home, "profile")}, args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// twoVariants is an A/B test of two production variants of the probe;
// calls pick theirs with TargetVariant, and VariantB's are made slow.
const twoVariants = `
Models:
  - ModelName: probe-a
    PrimaryContainer: {Image: mce-example/probe:latest}
  - ModelName: probe-b
    PrimaryContainer: {Image: mce-example/probe:latest}
EndpointConfigs:
  - EndpointConfigName: two-variants-config
    ProductionVariants:
      - {VariantName: VariantA, ModelName: probe-a, InitialInstanceCount: 1, InstanceType: ml.c5.large, InitialVariantWeight: 1}
      - {VariantName: VariantB, ModelName: probe-b, InitialInstanceCount: 1, InstanceType: ml.c5.large, InitialVariantWeight: 1}
Endpoints:
  - {EndpointName: two-variants, EndpointConfigName: two-variants-config}
`

// TestStatusPageInBrowser serves the two Go examples and an A/B test of
// two variants, invokes them, and loads the status page in a real
// headless browser: the DOM shows the endpoints InService with their
// containers, charts that hold the invocations, each variant's latency
// lines in its colour and a per-variant table whose figures are those of
// the calls made; a screenshot is a real picture (saved to
// build/status-page.png).
func TestStatusPageInBrowser(t *testing.T) {
	testenv.Docker(t)
	bin := chromium(t)
	for _, img := range []string{"sentiment", "featurizer", "classifier", "probe"} {
		testenv.Image(t, img)
	}
	testenv.Models(t)
	root := testenv.RepoRoot(t)
	abFile := filepath.Join(t.TempDir(), "two-variants.yaml")
	if err := os.WriteFile(abFile, []byte(twoVariants), 0o644); err != nil {
		t.Fatal(err)
	}

	f := serveFlagsFor(t, freePort(t), "")
	f.files = []string{filepath.Join(root, "examples/go-ab-test/endpoint.yaml"), filepath.Join(root, "examples/go-preprocess-inference/endpoint.yaml"), abFile}
	f.metricsListen = freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, f) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()

	api := "http://" + f.listen
	deadline := time.Now().Add(90 * time.Second)
	for {
		var eps []struct{ EndpointName, EndpointStatus string }
		if resp, err := http.Get(api + "/mce/endpoints"); err == nil {
			json.NewDecoder(resp.Body).Decode(&eps)
			resp.Body.Close()
		}
		in := 0
		for _, e := range eps {
			if e.EndpointStatus == "InService" {
				in++
			}
		}
		if in == 3 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve ended: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the endpoints are not InService: %+v", eps)
		}
		time.Sleep(200 * time.Millisecond)
	}
	invoke := func(endpoint, ct, body string, header ...string) {
		req, _ := http.NewRequest(http.MethodPost, api+"/endpoints/"+endpoint+"/invocations", strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("invoking %s: %d %s", endpoint, resp.StatusCode, b)
		}
	}
	const target, variant, attrs = "X-Amzn-SageMaker-Target-Container-Hostname", "X-Amzn-SageMaker-Target-Variant", "X-Amzn-SageMaker-Custom-Attributes"
	for range 5 {
		invoke("ab-test", "text/plain", "what a lovely day", target, "english")
		invoke("ab-test", "text/plain", "Das Essen war leider kalt", target, "german")
		invoke("preprocess-inference", "text/plain", "my parcel never arrived")
		// Two fast calls to VariantA for each slow one (60 ms) to VariantB.
		invoke("two-variants", "text/plain", "a", variant, "VariantA")
		invoke("two-variants", "text/plain", "a", variant, "VariantA")
		invoke("two-variants", "text/plain", "b", variant, "VariantB", attrs, "sleep=60ms")
	}

	page := "http://" + f.metricsListen + "/status"
	dom := string(runChromium(t, bin, "--dump-dom", page))
	for _, want := range []string{`<span class="name">ab-test</span>`, `<span class="name">preprocess-inference</span>`,
		`<span class="st st-InService">InService</span>`, `<span class="hostname">english</span>`, `<span class="hostname">german</span>`,
		`<span class="hostname">featurizer</span>`, `<span class="hostname">classifier</span>`, "mce-example/sentiment:latest"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the DOM lacks %s", want)
		}
	}
	if n := strings.Count(dom, `class="st st-InService"`); n != 3 {
		t.Errorf("%d endpoints InService in the DOM, want 3", n)
	}
	// section is an endpoint's part of the DOM.
	section := func(name string) string {
		i := strings.Index(dom, `<section class="endpoint" id="endpoint-`+name+`">`)
		if i < 0 {
			t.Fatalf("the DOM has no section of %s", name)
		}
		n := strings.Index(dom[i:], "</section>")
		if n < 0 {
			t.Fatalf("the section of %s does not end", name)
		}
		return dom[i : i+n]
	}
	// Each endpoint's rate chart counts its invocations, and draws them.
	for name, want := range map[string]int{"ab-test": 10, "preprocess-inference": 5, "two-variants": 15} {
		m := regexp.MustCompile(`<svg class="chart"[^>]*aria-label="Invocations per second" data-total="(\d+)"`).FindStringSubmatch(section(name))
		if m == nil {
			t.Errorf("%s has no rate chart", name)
		} else if got, _ := strconv.Atoi(m[1]); got != want {
			t.Errorf("%s's rate chart counts %d invocations, want %d", name, got, want)
		}
	}
	if !regexp.MustCompile(`<polyline class="series"[^>]*points="[0-9.]+,[0-9.]+ [0-9.]+,[0-9.]+`).MatchString(dom) {
		t.Error("no chart line with points in the DOM")
	}
	// The A/B test: its table has a row per variant, with a swatch of the
	// variant's colour, the calls each got, its share of them and its
	// latency; the latency chart draws each variant's p50 (solid) and p99
	// (dashed) in that colour.
	ab := section("two-variants")
	type row struct {
		colour, calls, errs, p50, p99, share string
	}
	rows := map[string]row{}
	for _, m := range regexp.MustCompile(`<tr class="variant-window"><td><i class="swatch" style="background:(#[0-9a-f]{6})"></i><span class="variant">(\w+)</span></td><td class="num">(\d+)</td><td class="num">(\d+)</td><td class="num">[0-9.]+ %</td><td class="num">([0-9.]+) ms</td><td class="num">([0-9.]+) ms</td><td class="num">([0-9.]+ %)</td></tr>`).FindAllStringSubmatch(ab, -1) {
		rows[m[2]] = row{m[1], m[3], m[4], m[5], m[6], m[7]}
	}
	va, vb := rows["VariantA"], rows["VariantB"]
	if len(rows) != 2 || va.calls != "10" || va.share != "66.7 %" || vb.calls != "5" || vb.share != "33.3 %" || va.errs != "0" || vb.errs != "0" || va.colour == vb.colour {
		t.Errorf("the per-variant table: %+v", rows)
	}
	ms := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	// VariantB's calls take 60 ms and more: its p50 is within a bin (√2) of that.
	if ms(vb.p50) < 60/1.4143 || ms(vb.p99) < ms(vb.p50) || ms(va.p50) >= ms(vb.p50) {
		t.Errorf("latency: VariantA p50 %s ms, VariantB p50 %s ms, p99 %s ms", va.p50, vb.p50, vb.p99)
	}
	for v, r := range map[string]row{"VariantA": va, "VariantB": vb} {
		solid := regexp.MustCompile(`<polyline class="series" fill="none" stroke="` + r.colour + `" stroke-width="1.5" points="[^"]+"><title>` + v + ` p50</title></polyline>`)
		dashed := regexp.MustCompile(`<polyline class="series" fill="none" stroke="` + r.colour + `" stroke-width="1.5" stroke-dasharray="4 3" points="[^"]+"><title>` + v + ` p99</title></polyline>`)
		if !solid.MatchString(ab) || !dashed.MatchString(ab) {
			t.Errorf("the latency chart lacks %s's solid p50 or dashed p99 line in %s", v, r.colour)
		}
	}
	// A single variant's endpoint has its table too: all its traffic.
	if !regexp.MustCompile(`<span class="variant">AllTraffic</span></td><td class="num">10</td>.*<td class="num">100.0 %</td></tr>`).MatchString(section("ab-test")) {
		t.Error("ab-test's per-variant table lacks AllTraffic with all 10 calls")
	}

	shot := filepath.Join(t.TempDir(), "status.png")
	runChromium(t, bin, "--screenshot="+shot, "--window-size=1280,1600", page)
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	if r := img.Bounds(); r.Dx() != 1280 || r.Dy() != 1600 {
		t.Errorf("screenshot of %v, want 1280x1600", r)
	}
	colours := map[uint32]bool{}
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y += 4 {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x += 4 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[r>>8<<16|g>>8<<8|bl>>8] = true
		}
	}
	if len(colours) < 16 {
		t.Errorf("the screenshot has %d colours: the page did not render", len(colours))
	}
	out := filepath.Join(root, "build", "status-page.png")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err == nil {
		if err := os.WriteFile(out, b, 0o644); err == nil {
			t.Logf("screenshot: %s (%d bytes, %d colours)", out, len(b), len(colours))
		}
	}
}
