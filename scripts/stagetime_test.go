package scripts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStageReportSlowest runs stagetime.sh report on a stage log and go
// test's JSON events as gotestsum keeps them (scripts/unit-test.sh): the
// packages and the top-level tests come slowest first, a failed one says
// so, subtests and events without a time are left out, and a line that is
// not JSON is skipped.
func TestStageReportSlowest(t *testing.T) {
	for _, p := range []string{"bash", "python3"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("no %s", p)
		}
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "stage-times.tsv")
	write := func(name, s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("stage-times.tsv.start", "")
	past := time.Now().Add(-time.Minute) // the events must be newer than the run's start
	if err := os.Chtimes(filepath.Join(dir, "stage-times.tsv.start"), past, past); err != nil {
		t.Fatal(err)
	}
	write("stage-times.tsv", "unit\t12.5\t1\t20.0\nold\t3.0\t0\n") // a line from before the CPU column
	write("unit-test.json", strings.Join([]string{
		`{"Action":"start","Package":"m/fast"}`,
		`{"Action":"run","Package":"m/fast","Test":"TestA"}`,
		`{"Action":"pass","Package":"m/fast","Test":"TestA","Elapsed":0.5}`,
		`{"Action":"pass","Package":"m/fast","Elapsed":0.7}`,
		`{"Action":"pass","Package":"m/slow","Test":"TestBig","Elapsed":9.25}`,
		`{"Action":"pass","Package":"m/slow","Test":"TestBig/sub","Elapsed":9}`,
		`{"Action":"fail","Package":"m/slow","Test":"TestBroken","Elapsed":2}`,
		`{"Action":"skip","Package":"m/slow","Test":"TestSkipped","Elapsed":30}`,
		`not json`,
		`{"Action":"fail","Package":"m/slow","Elapsed":11.5}`,
		`{"Action":"fail","Package":"m/nobuild"}`,
	}, "\n")+"\n")
	n, err := exec.Command("getconf", "_NPROCESSORS_ONLN").Output()
	if err != nil {
		t.Skipf("getconf: %v", err)
	}
	cores, err := strconv.ParseFloat(strings.TrimSpace(string(n)), 64)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "stagetime.sh", "report")
	cmd.Env = append(os.Environ(), "MCE_STAGE_LOG="+log)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("stagetime.sh report: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{
		"  unit                  12.5 s  CPU    20.0 s, " + fmt.Sprintf("%3.0f", 100*20/(12.5*cores)) + " %  FAILED (exit 1)",
		"  old                    3.0 s                        ok",
		"slowest packages (go test runs several at a time, make unit's UNIT_P; " + filepath.Join(dir, "unit-test.json") + "):\n" +
			"     11.5 s  m/slow  FAILED\n" +
			"      0.7 s  m/fast\n\n",
		"slowest tests (a test's time includes its subtests and the waits of its parallel ones):\n" +
			"      9.2 s  m/slow TestBig\n" +
			"      2.0 s  m/slow TestBroken  FAILED\n" +
			"      0.5 s  m/fast TestA\n" +
			"  wall clock",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks\n%s\n--- it is\n%s", want, got)
		}
	}
}

// TestStageRecordsCPU runs a stage that computes on one core for one to two
// seconds: its line in the log has its time, its exit status and the
// machine's CPU time while it ran, at least half of its time.
func TestStageRecordsCPU(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat")
	}
	log := filepath.Join(t.TempDir(), "stage-times.tsv")
	cmd := exec.Command("bash", "stagetime.sh", "spin", "bash", "-c", `end=$((SECONDS + 2)); while [ $SECONDS -lt $end ]; do :; done; exit 3`)
	cmd.Env = append(os.Environ(), "MCE_STAGE_LOG="+log)
	if out, err := cmd.CombinedOutput(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("stagetime.sh spin: %v, want exit status 3\n%s", err, out)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(strings.TrimSuffix(string(b), "\n"), "\t")
	if len(f) != 4 || f[0] != "spin" || f[2] != "3" {
		t.Fatalf("log line %q, want spin, seconds, 3, CPU seconds", b)
	}
	wall, err1 := strconv.ParseFloat(f[1], 64)
	cpu, err2 := strconv.ParseFloat(f[3], 64)
	if err1 != nil || err2 != nil || wall < 0.5 || cpu < 0.5*wall {
		t.Errorf("log line %q: want one to two seconds of wall time and at least half of it in CPU time", b)
	}
}
