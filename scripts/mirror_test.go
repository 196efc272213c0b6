// Package scripts holds the repository's shell scripts; its tests run the
// ones whose logic can be checked without side effects.
package scripts

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDebianMirror runs debian-mirror.sh on apt source files in both formats
// (testdata/apt) and checks the mirror it picks, or its refusal.
func TestDebianMirror(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	for _, tc := range []struct {
		files []string
		want  string // "" means: exit status 1 and a message
	}{
		{[]string{"deb822.sources"}, "http://mirror.example/debian"},
		{[]string{"security-first.sources"}, "https://second.example/debian"},
		{[]string{"oneline.list"}, "http://one.example/debian"},
		{[]string{"trixie.list"}, "http://trixie.example/debian"},
		{[]string{"trixie.list", "oneline.list"}, "http://one.example/debian"}, // the wanted suite wins over order
		{[]string{"none.list", "deb822.sources"}, "http://mirror.example/debian"},
		{[]string{"none.list"}, ""},
		{[]string{"empty.sources"}, ""},
		{[]string{"missing.list"}, ""},
	} {
		t.Run(strings.Join(tc.files, "+"), func(t *testing.T) {
			args := []string{"debian-mirror.sh"}
			for _, f := range tc.files {
				args = append(args, filepath.Join("testdata", "apt", f))
			}
			cmd := exec.Command("bash", args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			got := strings.TrimSpace(string(out))
			if tc.want == "" {
				if err == nil || got != "" || !strings.Contains(stderr.String(), "no Debian mirror") {
					t.Errorf("got %q, %v, stderr %q; want exit status 1 and a message", got, err, stderr.String())
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v (stderr %q); want %q", got, err, stderr.String(), tc.want)
			}
		})
	}
}

// TestFrameworkBasePrintMirror: --print-mirror prints MCE_DEBIAN_MIRROR when
// set, and builds nothing.
func TestFrameworkBasePrintMirror(t *testing.T) {
	cmd := exec.Command("bash", "framework-base.sh", "--print-mirror")
	cmd.Env = append(cmd.Environ(), "MCE_DEBIAN_MIRROR=file:///srv/debian")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "file:///srv/debian" {
		t.Errorf("framework-base.sh --print-mirror = %q, %v", out, err)
	}
}
