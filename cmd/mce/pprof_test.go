package main

import (
	"net/http"
	"testing"
)

func TestDebugListenLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:6060", "nonsense"} {
		if stop, err := servePprof(addr); err == nil {
			stop()
			t.Errorf("servePprof(%q) accepted a non-loopback address", addr)
		}
	}
	addr := freePort(t)
	stop, err := servePprof(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/debug/pprof/: %d", resp.StatusCode)
	}
}
