package statuspage

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ansiEscape matches terminal control sequences (colours, cursor moves).
var ansiEscape = regexp.MustCompile(`\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])`)

// cleanLogLines makes container output safe to show as text: valid UTF-8,
// no terminal escapes, no control or bidirectional-override characters
// (which could make a line read as something else), at most MaxLogLineRunes
// runes each.
func cleanLogLines(lines []string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, cleanLogLine(l))
	}
	return out
}

func cleanLogLine(l string) string {
	l = strings.ToValidUTF8(l, "\uFFFD")
	l = ansiEscape.ReplaceAllString(l, "")
	l = strings.Map(func(r rune) rune {
		switch {
		case r == '\t':
			return ' '
		case unicode.IsControl(r), unicode.Is(unicode.Bidi_Control, r):
			return '\uFFFD'
		}
		return r
	}, l)
	if utf8.RuneCountInString(l) > MaxLogLineRunes {
		l = string([]rune(l)[:MaxLogLineRunes]) + "…"
	}
	return l
}
