package statuspage

import (
	"strconv"
	"strings"
	"testing"
)

// TestCleanLogLine covers what a container may print.
func TestCleanLogLine(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                        "plain",
		"\x1b[1;31mERROR\x1b[0m x":     "ERROR x",
		"\x1b]0;title\x07after":        "after",
		"tab\there":                    "tab here",
		"nul\x00 cr\r":                 "nul\uFFFD cr\uFFFD",
		"\u202Eevil":                   "\uFFFDevil",
		"bad \xc3\x28":                 "bad \uFFFD(",
		strings.Repeat("é", 400):       strings.Repeat("é", MaxLogLineRunes) + "…",
		`<img src=x onerror=alert(1)>`: `<img src=x onerror=alert(1)>`, // escaped by the template, kept as text
	} {
		if got := cleanLogLine(in); got != want {
			t.Errorf("cleanLogLine(%q) = %q, want %q", in, got, want)
		}
	}
	if got := humanBytes(3 << 20); got != "3.0 MiB" {
		t.Errorf("humanBytes = %q", got)
	}
	if got := strconv.Itoa(len(cleanLogLines(nil))); got != "0" {
		t.Errorf("cleanLogLines(nil) has %s lines", got)
	}
}
