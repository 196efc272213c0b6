package modelserver

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

func get(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServeMME(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- ServeMME(ctx, ln, Settings{MultiModel: true, MemoryBytes: 1 << 20}, t.TempDir(), &out, io.Discard)
	}()
	base := "http://" + ln.Addr().String()
	if code, _ := get(t, "GET", base+"/ping", ""); code != 200 {
		t.Errorf("ping %d", code)
	}
	if code, body := get(t, "GET", base+"/models", ""); code != 200 || body != "{\"models\":[]}\n" {
		t.Errorf("list %d %q", code, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeMME did not stop")
	}
	if !strings.Contains(out.String(), "multi-model mode, memory budget 1048576 bytes") {
		t.Errorf("stdout %q", out.String())
	}
}

func TestStartConfigErrors(t *testing.T) {
	for _, env := range [][]string{
		{"MODELSERVER_MEMORY_BYTES=lots"},
		{"MODELSERVER_MEMORY_BYTES=0"},
		{"MODELSERVER_WORKSPACE_BYTES=-1"},
		{"MODELSERVER_LOAD_DELAY=forever"},
		{"MODELSERVER_LOAD_DELAY=11m"},
		{"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME=../x"},
		{"SAGEMAKER_BIND_TO_PORT=0"},
	} {
		err := Start(t.Context(), nil, env, nil, io.Discard, io.Discard)
		if !errors.Is(err, smserve.ErrConfig) {
			t.Errorf("%v: %v, want a config error", env, err)
		}
	}
	err := Start(t.Context(), []string{"train"}, []string{"SAGEMAKER_MULTI_MODEL=true"}, nil, io.Discard, io.Discard)
	if !errors.Is(err, smserve.ErrConfig) {
		t.Errorf("bad args: %v", err)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1024": 1024, "256Mi": 256 << 20, "2Gi": 2 << 30, "3Ki": 3072, "1Ti": 1 << 40} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "-1", "1.5Mi", "Mi", "10MB", "99999999999Ti"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) accepted", in)
		}
	}
}

// TestSingleModel runs the same model through smserve's /invocations.
func TestSingleModel(t *testing.T) {
	for _, tc := range []struct {
		name, dir string
		env       []string
		files     map[string][]byte
		wantName  string
	}{
		{"root", ".", nil, tinyFiles(t, 0), "tiny"},
		{"subdir", "mymodel", nil, tinyFiles(t, 0), "mymodel"},
		{"default model", "b", []string{"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME=b"}, tinyFiles(t, 0), "b"},
		{"no config", ".", nil, map[string][]byte{ModelFile: specJSON(t, tinySpec())}, "model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range tc.files {
				p := filepath.Join(dir, tc.dir, name)
				_ = os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.name == "default model" { // a second model directory that the setting skips
				_ = os.MkdirAll(filepath.Join(dir, "a"), 0o755)
			}
			cfg, err := smserve.ConfigFromEnviron(append([]string{"SM_MODEL_DIR=" + dir}, tc.env...), nil)
			if err != nil {
				t.Fatal(err)
			}
			l, err := Load(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			go func() { _ = smserve.Serve(ctx, ln, Program(), cfg, io.Discard, io.Discard) }()
			base := "http://" + ln.Addr().String()
			deadline := time.Now().Add(10 * time.Second)
			for {
				if code, _ := get(t, "GET", base+"/ping", ""); code == 200 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("never ready")
				}
				time.Sleep(10 * time.Millisecond)
			}
			code, body := get(t, "POST", base+"/invocations", tinyReq)
			if code != 200 || !strings.Contains(body, `"model_name":"`+tc.wantName+`"`) || !strings.Contains(body, `"data":[3.5,16.5]`) {
				t.Errorf("invocations %d %s", code, body)
			}
			if !strings.Contains(l.Summary, "'"+tc.wantName+"'") {
				t.Errorf("summary %q", l.Summary)
			}
		})
	}
}

func TestSingleModelErrors(t *testing.T) {
	dir := t.TempDir()
	for name, data := range tinyFiles(t, 1<<30) {
		_ = os.WriteFile(filepath.Join(dir, name), data, 0o644)
	}
	cfg, _ := smserve.ConfigFromEnviron([]string{"SM_MODEL_DIR=" + dir}, nil)
	if _, err := Load(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "out of memory") {
		t.Errorf("too big: %v", err)
	}
	cfg, _ = smserve.ConfigFromEnviron([]string{"SM_MODEL_DIR=" + t.TempDir()}, nil)
	if _, err := Load(t.Context(), cfg); err == nil {
		t.Error("empty dir loaded")
	}
}
