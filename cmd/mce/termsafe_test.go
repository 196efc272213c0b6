package main

import (
	"bytes"
	"testing"
)

func TestTermSafe(t *testing.T) {
	for _, tc := range []struct{ in, safe, line string }{
		{"plain name", "plain name", "plain name"},
		{"img\x1b[31mred\a", `img\x1b[31mred\x07`, `img\x1b[31mred\x07`},
		{"a\nb\tc\rd", "a\nb\tc\\x0dd", `a\x0ab\x09c\x0dd`},
		{"del\x7f csi\u009b2J é", `del\x7f csi\u009b2J é`, `del\x7f csi\u009b2J é`},
		{"title \x1b]0;pwned\x07", `title \x1b]0;pwned\x07`, `title \x1b]0;pwned\x07`},
	} {
		if got := termSafe(tc.in); got != tc.safe {
			t.Errorf("termSafe(%q) = %q, want %q", tc.in, got, tc.safe)
		}
		if got := termLine(tc.in); got != tc.line {
			t.Errorf("termLine(%q) = %q, want %q", tc.in, got, tc.line)
		}
	}
}

// termWriter escapes a C1 control split across two writes, and keeps
// other multi-byte characters whole.
func TestTermWriter(t *testing.T) {
	var b bytes.Buffer
	w := newTermWriter(&b)
	csi := []byte("\u009b")
	for _, p := range [][]byte{[]byte("x\x1b[1m é"[:7]), []byte("x\x1b[1m é"[7:]), csi[:1], csi[1:], []byte("2J\n")} {
		if _, err := w.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := b.String(), `x\x1b[1m é\u009b2J`+"\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
