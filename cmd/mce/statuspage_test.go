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

// TestStatusPageInBrowser serves the two Go examples, invokes them, and
// loads the status page in a real headless browser: the DOM shows both
// endpoints InService with their containers and charts that hold the
// invocations, and a screenshot is a real picture (saved to
// build/status-page.png).
func TestStatusPageInBrowser(t *testing.T) {
	testenv.Docker(t)
	bin := chromium(t)
	for _, img := range []string{"sentiment", "featurizer", "classifier"} {
		testenv.Image(t, img)
	}
	testenv.Models(t)
	root := testenv.RepoRoot(t)

	f := serveFlagsFor(t, freePort(t), "")
	f.files = []string{filepath.Join(root, "examples/go-ab-test/endpoint.yaml"), filepath.Join(root, "examples/go-preprocess-inference/endpoint.yaml")}
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
		if in == 2 {
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
	invoke := func(endpoint, target, ct, body string) {
		req, _ := http.NewRequest(http.MethodPost, api+"/endpoints/"+endpoint+"/invocations", strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		if target != "" {
			req.Header.Set("X-Amzn-SageMaker-Target-Container-Hostname", target)
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
	for range 5 {
		invoke("ab-test", "english", "text/plain", "what a lovely day")
		invoke("ab-test", "german", "text/plain", "Das Essen war leider kalt")
		invoke("preprocess-inference", "", "text/plain", "my parcel never arrived")
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
	if n := strings.Count(dom, `class="st st-InService"`); n != 2 {
		t.Errorf("%d endpoints InService in the DOM, want 2", n)
	}
	// Each endpoint's rate chart counts its invocations, and draws them.
	totals := regexp.MustCompile(`<svg class="chart"[^>]*aria-label="Invocations per second" data-total="(\d+)"`).FindAllStringSubmatch(dom, -1)
	if len(totals) != 2 {
		t.Fatalf("%d rate charts in the DOM, want 2", len(totals))
	}
	for i, want := range []int{10, 5} { // ab-test, preprocess-inference
		if got, _ := strconv.Atoi(totals[i][1]); got != want {
			t.Errorf("rate chart %d counts %d invocations, want %d", i, got, want)
		}
	}
	if !regexp.MustCompile(`<polyline class="series"[^>]*points="[0-9.]+,[0-9.]+ [0-9.]+,[0-9.]+`).MatchString(dom) {
		t.Error("no chart line with points in the DOM")
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
