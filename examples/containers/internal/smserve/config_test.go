package smserve

import (
	"errors"
	"fmt"
	"testing"
)

func TestConfigFromEnviron(t *testing.T) {
	tests := []struct {
		name      string
		environ   []string
		wantPort  int
		wantDir   string
		wantAcc   string
		wantError bool
	}{
		{name: "defaults", environ: nil, wantPort: 8080, wantDir: "/opt/ml/model"},
		{name: "bind to port", environ: []string{"SAGEMAKER_BIND_TO_PORT=9001"}, wantPort: 9001, wantDir: "/opt/ml/model"},
		{name: "empty port means default", environ: []string{"SAGEMAKER_BIND_TO_PORT="}, wantPort: 8080, wantDir: "/opt/ml/model"},
		{name: "last value wins", environ: []string{"SAGEMAKER_BIND_TO_PORT=1", "SAGEMAKER_BIND_TO_PORT=2"}, wantPort: 2, wantDir: "/opt/ml/model"},
		{name: "model dir override", environ: []string{"SM_MODEL_DIR=/tmp/m"}, wantPort: 8080, wantDir: "/tmp/m"},
		{name: "default accept", environ: []string{"SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT=text/csv"}, wantPort: 8080, wantDir: "/opt/ml/model", wantAcc: "text/csv"},
		{name: "port zero", environ: []string{"SAGEMAKER_BIND_TO_PORT=0"}, wantError: true},
		{name: "port too big", environ: []string{"SAGEMAKER_BIND_TO_PORT=65536"}, wantError: true},
		{name: "port not a number", environ: []string{"SAGEMAKER_BIND_TO_PORT=http"}, wantError: true},
		{name: "port with space", environ: []string{"SAGEMAKER_BIND_TO_PORT= 8080"}, wantError: true},
		{name: "malformed entries ignored", environ: []string{"NOEQUALS", "=x", "SAGEMAKER_BIND_TO_PORT=7000"}, wantPort: 7000, wantDir: "/opt/ml/model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ConfigFromEnviron(tt.environ, nil)
			if tt.wantError {
				if !errors.Is(err, ErrConfig) {
					t.Fatalf("err = %v, want one wrapping ErrConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Port != tt.wantPort || got.ModelDir != tt.wantDir || got.DefaultAccept != tt.wantAcc {
				t.Errorf("got port %d dir %q accept %q, want %d %q %q",
					got.Port, got.ModelDir, got.DefaultAccept, tt.wantPort, tt.wantDir, tt.wantAcc)
			}
		})
	}
}

func TestConfigGetenvAndExit(t *testing.T) {
	var code int
	cfg, err := ConfigFromEnviron([]string{"A=1", "B=x=y", "A=3"}, func(c int) { code = c })
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"A": "3", "B": "x=y", "C": ""} {
		if got := cfg.Getenv(key); got != want {
			t.Errorf("Getenv(%q) = %q, want %q", key, got, want)
		}
	}
	cfg.Exit(7)
	if code != 7 {
		t.Errorf("exit code = %d, want 7", code)
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{fmt.Errorf("wrapped: %w", ErrConfig), 2},
		{errors.New("boom"), 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.err), func(t *testing.T) {
			if got := ExitCode(tt.err); got != tt.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}
