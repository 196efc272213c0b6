package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestServeMetrics(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metric 1\n") })
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
