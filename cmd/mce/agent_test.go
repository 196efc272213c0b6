package main

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/containers/mme/agent"
)

// TestAgentCommand runs `mce agent` as the pod's sidecar would: it serves
// the cache over a file:// prefix, answers an acquire through agent.Client,
// and stops on its context; bad flags exit 2.
func TestAgentCommand(t *testing.T) {
	dir := t.TempDir()
	models := filepath.Join(dir, "models")
	if err := os.MkdirAll(models, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTarGz(t, filepath.Join(models, "m.tar.gz"), map[string]string{"weights.bin": "w"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"agent", "--prefix", "file://" + models + "/", "--dir", filepath.Join(dir, "cache"),
			"--model-root", models, "--listen", addr, "--disk-capacity", "1MiB", "--log-format", "json"})
	}()
	c, err := agent.NewClient(agent.ClientOptions{BaseURL: func() string { return "http://" + addr }, ResetFirst: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); c.Ping(ctx) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the agent did not come up")
		}
	}
	f, err := c.Acquire(ctx, "m.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cache", mme.ModelID("m.tar.gz"), "model", "weights.bin")); err != nil || f.Size() != 1 {
		t.Errorf("files: %v, size %d", err, f.Size())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("agent stopped with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not stop")
	}

	for _, args := range [][]string{
		{"agent"}, // no prefix
		{"agent", "--prefix", "http://example.com/"},
		{"agent", "--prefix", "s3://b/p/", "--max-artifact-bytes", "-1"},
	} {
		err := run(context.Background(), append(args, "--dir", t.TempDir(), "--listen", "127.0.0.1:0"))
		var ee *exitError
		if err == nil || (len(args) > 1 && (!errors.As(err, &ee) || ee.code != 2)) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
