package sessions

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTable(max int) (*Table, *clock) {
	c := &clock{t: time.Date(2026, 11, 28, 20, 0, 0, 0, time.UTC)}
	return New(Options{Max: max, Now: c.now}), c
}

func TestOpenLookupClose(t *testing.T) {
	tb, c := newTable(0)
	s := Session{Endpoint: "ep", ID: "s1", Variant: "v", Instance: "http://a", Expires: c.t.Add(time.Minute)}
	tb.Open(s)
	got, err := tb.Lookup("ep", "", "s1")
	if err != nil || got != s {
		t.Fatalf("Lookup = %+v, %v; want %+v", got, err, s)
	}
	if _, err := tb.Lookup("other", "", "s1"); err != ErrNoSession {
		t.Fatalf("another endpoint's Lookup: %v, want ErrNoSession", err)
	}
	if _, err := tb.Lookup("ep", "comp", "s1"); err != ErrNoSession {
		t.Fatalf("a component's Lookup: %v, want ErrNoSession", err)
	}
	if !tb.Close("ep", "", "s1") || tb.Close("ep", "", "s1") {
		t.Fatal("Close should report true once")
	}
	if _, err := tb.Lookup("ep", "", "s1"); err != ErrNoSession {
		t.Fatalf("closed: %v, want ErrNoSession", err)
	}
}

func TestExpiry(t *testing.T) {
	tb, c := newTable(0)
	tb.Open(Session{Endpoint: "ep", ID: "old", Expires: c.t.Add(-time.Second)})
	if tb.Len() != 0 {
		t.Fatal("an already expired session was recorded")
	}
	tb.Open(Session{Endpoint: "ep", ID: "a", Expires: c.t.Add(time.Minute)})
	tb.Open(Session{Endpoint: "ep", ID: "b", Expires: c.t.Add(time.Hour)})
	c.t = c.t.Add(2 * time.Minute)
	if _, err := tb.Lookup("ep", "", "a"); err != ErrNoSession {
		t.Fatalf("expired: %v", err)
	}
	if tb.Len() != 1 {
		t.Fatalf("Len = %d after the expired Lookup, want 1", tb.Len())
	}
	c.t = c.t.Add(2 * time.Hour)
	tb.Open(Session{Endpoint: "ep", ID: "c", Expires: c.t.Add(time.Minute)}) // sweeps b
	if tb.Len() != 1 {
		t.Fatalf("Len = %d, want 1 (Open sweeps)", tb.Len())
	}
}

func TestBoundEvictsSoonestExpiry(t *testing.T) {
	tb, c := newTable(3)
	for i, d := range []time.Duration{3, 1, 2} {
		tb.Open(Session{Endpoint: "ep", ID: fmt.Sprint("s", i), Expires: c.t.Add(d * time.Minute)})
	}
	if n := tb.Open(Session{Endpoint: "ep", ID: "new", Expires: c.t.Add(time.Hour)}); n != 1 {
		t.Fatalf("evicted %d, want 1", n)
	}
	if _, err := tb.Lookup("ep", "", "s1"); err != ErrNoSession {
		t.Fatal("the session closest to expiry should have made room")
	}
	if tb.Len() != 3 {
		t.Fatalf("Len = %d, want 3", tb.Len())
	}
}

func TestDropEndpoint(t *testing.T) {
	tb, c := newTable(0)
	for i := range 5 {
		tb.Open(Session{Endpoint: "a", ID: fmt.Sprint("s", i), Expires: c.t.Add(time.Hour)})
		tb.Open(Session{Endpoint: "b", ID: fmt.Sprint("s", i), Expires: c.t.Add(time.Hour)})
	}
	if n := tb.DropEndpoint("a"); n != 5 || tb.Len() != 5 {
		t.Fatalf("DropEndpoint = %d, Len %d", n, tb.Len())
	}
}

func TestParseNewSession(t *testing.T) {
	for _, tc := range []struct {
		in     string
		id     string
		ok     bool
		expiry string
	}{
		{"abc-1; Expires=2026-11-28T20:10:00Z", "abc-1", true, "2026-11-28T20:10:00Z"},
		{"abc;\tExpires=2026-11-28T20:10:00Z", "abc", true, "2026-11-28T20:10:00Z"},
		{"abc; Expires=2026-11-28T20:10:00+01:00", "", false, ""},
		{"-abc; Expires=2026-11-28T20:10:00Z", "", false, ""},
		{"abc", "", false, ""},
		{"abc; Expires=2026-13-28T20:10:00Z", "", false, ""},
		{strings.Repeat("a", 257) + "; Expires=2026-11-28T20:10:00Z", "", false, ""},
		{strings.Repeat("a", 1<<20), "", false, ""},
	} {
		id, exp, ok := ParseNewSession(tc.in)
		if ok != tc.ok || id != tc.id || (ok && exp.Format(time.RFC3339) != tc.expiry) {
			t.Errorf("ParseNewSession(%.40q) = %q, %v, %v", tc.in, id, exp, ok)
		}
	}
	if !ValidID("a-b--c") || ValidID("NEW_SESSION") || ValidID(strings.Repeat("a", 257)) || ValidID("") {
		t.Error("ValidID")
	}
}

// TestMemoryPerSession measures a full table: the bound holds, and each
// session costs a bounded number of bytes.
func TestMemoryPerSession(t *testing.T) {
	const n = 20_000
	tb, c := newTable(n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 2 * n { // twice the bound: half are evicted
		tb.Open(Session{Endpoint: "endpoint-with-a-name", Variant: "AllTraffic", Instance: "http://172.18.0.3:8080",
			ID: fmt.Sprintf("session-%040d", i), Expires: c.t.Add(time.Duration(i+1) * time.Second)})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if tb.Len() != n {
		t.Fatalf("Len = %d, want the bound %d", tb.Len(), n)
	}
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.0f bytes per session (%d sessions)", per, n)
	if per > 600 {
		t.Errorf("%.0f bytes per session, want at most 600", per)
	}
	runtime.KeepAlive(tb)
}

func BenchmarkLookup(b *testing.B) {
	tb, c := newTable(0)
	for i := range 10_000 {
		tb.Open(Session{Endpoint: "ep", ID: fmt.Sprint("s", i), Expires: c.t.Add(time.Hour)})
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := tb.Lookup("ep", "", "s42"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestPersist: Persist hears of every session recorded and dropped, and
// Restore reads one back without telling it again.
func TestPersist(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 28, 20, 0, 0, 0, time.UTC)}
	held := map[string]Session{}
	var mu sync.Mutex
	tb := New(Options{Max: 2, Now: c.now, Persist: func(s Session, open bool) {
		mu.Lock()
		defer mu.Unlock()
		if open {
			held[s.ID] = s
		} else {
			delete(held, s.ID)
		}
	}})
	tb.Open(Session{Endpoint: "ep", ID: "a", Expires: c.t.Add(time.Minute)})
	tb.Open(Session{Endpoint: "ep", ID: "b", Expires: c.t.Add(time.Hour)})
	tb.Open(Session{Endpoint: "ep", ID: "c", Expires: c.t.Add(time.Hour)}) // evicts a
	tb.Close("ep", "", "b")
	if len(held) != 1 || held["c"].ID != "c" {
		t.Fatalf("persisted %v, want c only", held)
	}
	again := New(Options{Now: c.now, Persist: func(Session, bool) { t.Error("Restore told Persist") }})
	for _, s := range held {
		again.Restore(s)
	}
	if _, err := again.Lookup("ep", "", "c"); err != nil {
		t.Fatal(err)
	}
}
