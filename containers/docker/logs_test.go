package docker

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestLineWriter(t *testing.T) {
	var out bytes.Buffer
	ring := newLineRing(3)
	log := zerolog.New(&out).With().Str("container", "c1").Logger()
	w := &lineWriter{log: &log, stream: "stderr", tail: ring}
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
	log := zerolog.New(&out)
	w := &lineWriter{log: &log, stream: "stdout"}
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

// TestLogSubsDropsForSlowFollowers: a follower that does not read never
// blocks the writer; it gets what fits in its buffer, then the next line it
// receives counts what it missed.
func TestLogSubsDropsForSlowFollowers(t *testing.T) {
	var subs logSubs
	slow := subs.add(2)
	w := &lineWriter{stream: "stdout", subs: &subs}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10 {
			w.Write([]byte(strings.Repeat("x", i+1) + "\n"))
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the writer blocked on a follower that does not read")
	}
	first, second := <-slow.ch, <-slow.ch
	if first.Text != "x" || second.Text != "xx" || first.Dropped != 0 || second.Dropped != 0 {
		t.Fatalf("buffered lines = %+v, %+v", first, second)
	}
	w.Write([]byte("after\n"))
	got := <-slow.ch
	if got.Text != "after" || got.Dropped != 8 || got.Stream != "stdout" {
		t.Errorf("line after the drops = %+v, want Text after, Dropped 8", got)
	}
	subs.remove(slow)
	w.Write([]byte("unheard\n"))
	select {
	case l := <-slow.ch:
		t.Errorf("a removed follower got %+v", l)
	default:
	}
}
