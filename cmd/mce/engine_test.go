package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeEngineFlags: an unknown engine and a kubeconfig that names no
// cluster stop serve with a clear message before anything runs.
func TestServeEngineFlags(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	state := t.TempDir()
	base := []string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "off", "--state-dir", state}
	_, err := runCLI(ctx, append(base, "--engine", "podman")...)
	if err == nil || !strings.Contains(err.Error(), `--engine "podman": use docker or kubernetes`) {
		t.Errorf("--engine podman: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(empty, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err = runCLI(ctx, append(base, "--engine", "kubernetes", "--kubeconfig", empty)...)
	if err == nil || !strings.Contains(err.Error(), "kubernetes engine: no cluster to talk to") {
		t.Errorf("--engine kubernetes with an empty kubeconfig: %v", err)
	}
}
