package containers

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestLineWriter(t *testing.T) {
	var out bytes.Buffer
	ring := newLineRing(3)
	w := &lineWriter{log: zerolog.New(&out).With().Str("container", "c1").Logger(), stream: "stderr", tail: ring}
	for _, chunk := range []string{"first li", "ne\nsecond\r\nthi", "rd\nfourth", ""} {
		w.Write([]byte(chunk))
	}
	w.flush()
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var ev map[string]string
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if ev["stream"] != "stderr" || ev["container"] != "c1" {
			t.Errorf("event fields = %v", ev)
		}
		got = append(got, ev["message"])
	}
	want := []string{"first line", "second", "third", "fourth"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines = %q, want %q", got, want)
	}
	if tail := strings.Join(ring.lines(), "|"); tail != "stderr: second|stderr: third|stderr: fourth" {
		t.Errorf("tail = %q", tail)
	}
}

func TestLineWriterSplitsLongLines(t *testing.T) {
	var out bytes.Buffer
	w := &lineWriter{log: zerolog.New(&out), stream: "stdout"}
	w.Write(bytes.Repeat([]byte("x"), maxLogLine+10))
	w.flush()
	if n := strings.Count(out.String(), "\n"); n != 2 {
		t.Errorf("a line over the cap became %d events, want 2", n)
	}
}

func TestLineRing(t *testing.T) {
	r := newLineRing(2)
	if got := r.lines(); len(got) != 0 {
		t.Errorf("empty ring = %q", got)
	}
	r.add("a")
	if got := strings.Join(r.lines(), ","); got != "a" {
		t.Errorf("got %q", got)
	}
	r.add("b")
	r.add("c")
	if got := strings.Join(r.lines(), ","); got != "b,c" {
		t.Errorf("got %q", got)
	}
}
