package accesslog

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// TestNeverBlocks: with a writer that does not accept bytes,
// requests' lines are dropped and counted instead of waiting; once the
// writer moves again, the count is written before the next line.
func TestNeverBlocks(t *testing.T) {
	pr, pw := io.Pipe()
	l := New(pw)
	n := Buffer + 500
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			l.Add([]byte(`{"line":1}` + "\n"))
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("adding access lines blocked on a stuck writer")
	}
	// l.Dropped() alone is not a measure here: the writer may already have
	// taken the count for its {"dropped":N} line and be blocked writing it.
	got := make(chan []string, 1)
	go func() {
		var lines []string
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		got <- lines
	}()
	l.Add([]byte(`{"line":2}` + "\n"))
	l.Close()
	pw.Close()
	lines := <-got
	var dropped int64
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if d, ok := m["dropped"].(float64); ok {
			dropped += int64(d)
		}
	}
	written := int64(strings.Count(strings.Join(lines, "\n"), `"line":`))
	if dropped < 499 {
		t.Errorf("%d lines reported dropped, want at least 499", dropped)
	}
	if written+dropped != int64(n)+1 || written < Buffer {
		t.Errorf("%d lines written and %d reported dropped, want %d in all", written, dropped, n+1)
	}
	l.Add([]byte("after close\n")) // ignored, no panic
}

// TestFailLimiter: failLogBurst lines per period; the lines beyond are
// counted and reported with the next line allowed.
