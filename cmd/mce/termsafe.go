package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Text that comes from a server, a container or a file (endpoint and image
// names, error messages, log lines, reports) is printed through termSafe or
// termWriter: its control characters are shown escaped (ESC as \x1b, C1
// controls as \u009b) instead of reaching the terminal, where they could
// recolour, move the cursor, rewrite the title or the screen, or ring the
// bell. Newlines and tabs stay, for multi-line messages and logs; termLine
// escapes them too, for one table cell or one line. Invocation answers
// (mce invoke's body) are data and are written as they came.

// termSafe escapes the control characters of s other than '\n' and '\t'.
func termSafe(s string) string { return escapeControls(s, true) }

// termLine escapes every control character of s, newlines and tabs too.
func termLine(s string) string { return escapeControls(s, false) }

func escapeControls(s string, keepLines bool) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if isControl(r, keepLines) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case !isControl(r, keepLines):
			b.WriteString(s[i : i+n])
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.String()
}

// isControl: C0 controls, DEL and C1 controls (U+0080–U+009F).
func isControl(r rune, keepLines bool) bool {
	if keepLines && (r == '\n' || r == '\t') {
		return false
	}
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f)
}

// termWriter escapes what is written through it as termSafe does. A UTF-8
// sequence split between two writes is held until it is whole.
type termWriter struct {
	w       io.Writer
	pending []byte
}

func newTermWriter(w io.Writer) *termWriter { return &termWriter{w: w} }

func (t *termWriter) Write(p []byte) (int, error) {
	buf := append(t.pending, p...)
	t.pending = nil
	// Hold back an incomplete rune at the end.
	cut := len(buf)
	for k := 1; k < utf8.UTFMax && k <= len(buf); k++ {
		c := buf[len(buf)-k]
		if c < 0x80 {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(buf[len(buf)-k:]) {
				cut = len(buf) - k
			}
			break
		}
	}
	t.pending = append([]byte(nil), buf[cut:]...)
	if _, err := io.WriteString(t.w, termSafe(string(buf[:cut]))); err != nil {
		return 0, err
	}
	return len(p), nil
}
