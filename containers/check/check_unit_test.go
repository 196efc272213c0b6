package check

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A /proc/net/tcp table as Linux writes it: a LISTEN socket on
// 0.0.0.0:8080, one on 127.0.0.11:44273 (Docker's DNS), an established
// connection (state 01) from 172.18.0.2:8080, and a TIME_WAIT one.
const procTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 123 1 0000000000000000 100 0 0 10 0
   1: 0B00007F:ACF1 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 124 1 0000000000000000 100 0 0 10 0
   2: 020012AC:1F90 010012AC:D2A4 01 00000000:00000000 00:00000000 00000000     0        0 125 1 0000000000000000 20 4 30 10 -1
   3: 020012AC:1F90 010012AC:D2A6 06 00000000:00000000 03:00001767 00000000     0        0 0 3 0000000000000000
`

// tcp6: [::]:8080 and ::1:9000 listening, [::ffff:127.0.0.1]:7000 listening.
const procTCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 00000000000000000000000001000000:2328 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:1B58 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3 1 0 100 0 0 10 0
`

func TestParseProcNet(t *testing.T) {
	for _, tc := range []struct {
		name, table string
		want        []string
	}{
		{"tcp", procTCP, []string{"0.0.0.0:8080", "127.0.0.11:44273"}},
		{"tcp6", procTCP6, []string{"[::]:8080", "[::1]:9000", "127.0.0.1:7000"}},
		{"header only", "  sl  local_address\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcNet(strings.NewReader(tc.table))
			if err != nil {
				t.Fatal(err)
			}
			var gs []string
			for _, g := range got {
				gs = append(gs, g.String())
			}
			if strings.Join(gs, " ") != strings.Join(tc.want, " ") {
				t.Errorf("got %v, want %v", gs, tc.want)
			}
		})
	}
	if _, err := parseProcNet(strings.NewReader("h\n 0: ZZ:1F90 0:0 0A\n")); err == nil {
		t.Error("a bad address parsed")
	}
}

func TestListenersReadsTheContainersNamespace(t *testing.T) {
	root := t.TempDir()
	const id = "0123456789abcdef"
	write := func(p, s string) {
		t.Helper()
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("42/cgroup", "12:pids:/docker/"+id+"\n")
	write("42/net/tcp", procTCP)
	write("42/net/tcp6", procTCP6)
	write("43/cgroup", "0::/user.slice\n")
	ls, err := listeners(root, 42, id)
	if err != nil {
		t.Fatal(err)
	}
	got := otherPorts(ls, 8080)
	want := []string{"127.0.0.1:7000", "[::1]:9000"} // sorted; Docker's DNS left out
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("other ports %v, want %v", got, want)
	}
	if _, err := listeners(root, 43, id); err != errProcHidden {
		t.Errorf("another container's process: %v, want errProcHidden", err)
	}
	if _, err := listeners(root, 44, id); err != errProcHidden {
		t.Errorf("a missing process: %v, want errProcHidden", err)
	}
}

func TestFormatResult(t *testing.T) {
	got := FormatResult(Result{Name: "/ping 200 within 120s", Status: Pass, DurationMS: 412})
	want := "PASS  /ping 200 within 120s" + strings.Repeat(" ", nameWidth-len("/ping 200 within 120s")) + "  (412.0 ms)\n"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	got = FormatResult(Result{Name: "starts with serve", Status: Fail, Detail: "exited with status 3\nlast log lines:\nboom"})
	if !strings.HasPrefix(got, "FAIL  starts with serve ") || !strings.HasSuffix(got, "exited with status 3\n      | last log lines:\n      | boom\n") {
		t.Errorf("got %q", got)
	}
	if d := formatDuration(1500 * time.Millisecond); d != "1.5 s" {
		t.Errorf("1.5 s formatted %q", d)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		ok   bool
	}{
		{"image only", Options{Image: "x"}, true},
		{"no image", Options{}, false},
		{"input without type", Options{Image: "x", Input: []byte("a")}, false},
		{"input over 6 MiB", Options{Image: "x", Input: make([]byte, MaxInput+1), ContentType: "a/b"}, false},
		{"multi-model without data", Options{Image: "x", MultiModel: MultiModelOn}, false},
		{"bad mode", Options{Image: "x", MultiModel: "sometimes"}, false},
		{"bad env name", Options{Image: "x", Env: map[string]string{"A-B": "1"}}, false},
		{"negative window", Options{Image: "x", HealthWindow: -time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.validate()
			if (err == nil) != tc.ok {
				t.Fatalf("validate: %v, want ok=%v", err, tc.ok)
			}
			if tc.ok && (tc.o.HealthWindow != DefaultHealthWindow || tc.o.Timeout != DefaultTimeout || tc.o.MultiModel != MultiModelAuto) {
				t.Errorf("defaults not filled: %+v", tc.o)
			}
		})
	}
}

func TestModelURL(t *testing.T) {
	wd, _ := os.Getwd()
	for _, tc := range []struct{ in, url, root string }{
		{"s3://b/k.tar.gz", "s3://b/k.tar.gz", ""},
		{"file:///data/m.tar.gz", "file:///data/m.tar.gz", "/data"},
		{"m/model.tar.gz", "file://" + filepath.Join(wd, "m/model.tar.gz"), filepath.Join(wd, "m")},
	} {
		u, root, err := modelURL(tc.in)
		if err != nil || u != tc.url || root != tc.root {
			t.Errorf("modelURL(%q) = %q, %q, %v; want %q, %q", tc.in, u, root, err, tc.url, tc.root)
		}
	}
	if _, _, err := modelURL("https://example.com/m.tar.gz"); err == nil {
		t.Error("an https URL was taken")
	}
}
