package apierr

import (
	"strings"
	"testing"
)

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"ab-test":                   "ab-test",
		"a\x1b[31mred":              "a?[31mred",
		"bad\xffutf8":               "bad?utf8",
		strings.Repeat("x", 200):    strings.Repeat("x", 128) + "…",
		"tab\there\nnewline\u2028x": "tab?here?newline?x",
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}
