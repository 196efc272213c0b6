package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/internal/testenv"
)

func TestServeMetrics(t *testing.T) {
	h := http.NewServeMux()
	h.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metric 1\n") })
	for _, off := range []string{"", "off"} {
		stop, err := serveMetrics(off, h, zerolog.Nop())
		if err != nil {
			t.Fatalf("serveMetrics(%q): %v", off, err)
		}
		stop()
	}
	if _, err := serveMetrics("nonsense", h, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "--metrics-listen") {
		t.Errorf("a bad address: %v, want an error naming --metrics-listen", err)
	}
	addr := freePort(t)
	stop, err := serveMetrics(addr, h, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, err := serveMetrics(addr, h, zerolog.Nop()); err == nil {
		t.Errorf("a busy port gave no error")
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "metric 1\n" {
		t.Errorf("GET /metrics: %d %q", resp.StatusCode, b)
	}
	resp, err = http.Get("http://" + addr + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("the metrics listener serves other paths: %d", resp.StatusCode)
	}
}

func TestByteSizeFlag(t *testing.T) {
	for in, want := range map[string]int64{"256MiB": 256 << 20, "1GiB": 1 << 30, "512m": 512 << 20, "1048576": 1 << 20} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "lots", "-5", "1.5.5GiB"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) accepted", in)
		}
	}
}

// TestServeMetricsListeners: with credentials enforced, unsigned scrapers
// get nothing from the API listener (issue 9: /metrics listed every
// endpoint and container to them) and the metrics from --metrics-listen;
// without policies on loopback, /metrics stays on the API listener too.
func TestServeMetricsListeners(t *testing.T) {
	testenv.Docker(t)
	creds := filepath.Join(t.TempDir(), "creds.yaml")
	os.WriteFile(creds, []byte(`
Credentials:
  - AccessKeyId: AKIAOPS00000EXAMPLE
    SecretAccessKey: ops-secret
    Arn: arn:aws:iam::123456789012:user/ops
    Policies:
      - Name: all
        Document: {Version: "2012-10-17", Statement: [{Effect: Allow, Action: "sagemaker:*", Resource: "*"}]}
`), 0o600)
	for _, c := range []struct {
		name      string
		creds     string
		apiStatus int
	}{
		{"credentials enforced", creds, 404},
		{"local development", "", 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := serveFlagsFor(t, freePort(t), "")
			f.files, f.credentials, f.metricsListen = nil, c.creds, freePort(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- serve(ctx, f) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("serve: %v", err)
				}
			}()
			get := func(url string) int {
				deadline := time.Now().Add(30 * time.Second)
				for {
					resp, err := http.Get(url)
					if err == nil {
						resp.Body.Close()
						return resp.StatusCode
					}
					if time.Now().After(deadline) {
						t.Fatalf("GET %s: %v", url, err)
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
			if got := get("http://" + f.metricsListen + "/metrics"); got != 200 {
				t.Errorf("--metrics-listen: %d", got)
			}
			if got := get("http://" + f.listen + "/metrics"); got != c.apiStatus {
				t.Errorf("/metrics on --listen: %d, want %d", got, c.apiStatus)
			}
			// The status page goes with the metrics.
			if got := get("http://" + f.metricsListen + "/status"); got != 200 {
				t.Errorf("/status on --metrics-listen: %d", got)
			}
			if got := get("http://" + f.listen + "/status"); got != c.apiStatus {
				t.Errorf("/status on --listen: %d, want %d", got, c.apiStatus)
			}
		})
	}
}
