package textfeat

import (
	"strings"
	"unicode"
)

// Tokenize splits s into maximal runs of Unicode letters and digits, lower-cased. Everything else
// (spaces, punctuation, apostrophes, symbols, invalid UTF-8) separates tokens, so "Don't" gives "don", "t".
func Tokenize(s string) []string {
	var out []string
	start := -1
	for i, r := range s {
		if isWordRune(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			out = append(out, strings.ToLower(s[start:i]))
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, strings.ToLower(s[start:]))
	}
	return out
}

func isWordRune(r rune) bool {
	return r != unicode.ReplacementChar && (unicode.IsLetter(r) || unicode.IsDigit(r))
}
