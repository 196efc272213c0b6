package wire

import (
	"regexp"
	"strings"
	"testing"
)

// FuzzValidName checks the hand-written name matcher against the regular
// expression of the service model it replaces, and EntityNamePattern against
// NamePattern with at most 63 letters and digits.
func FuzzValidName(f *testing.F) {
	re := regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9])*$`)
	entity := regexp.MustCompile("^" + EntityNamePattern + "$")
	if NamePattern+"$" != re.String() {
		f.Fatalf("NamePattern %q is not the service model's ModelName pattern %q", NamePattern, re)
	}
	for _, s := range []string{"", "a", "-", "a-", "-a", "a--b", "ab-c9", "a_b", "é", "A1-b2--C3",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a-", 31) + "a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidName(s), re.MatchString(s); got != want {
			t.Fatalf("ValidName(%q) = %v, the regexp says %v", s, got, want)
		}
		// {0,62} counts letters and digits, not dashes: the length limit of
		// 63 is a separate rule of the service model.
		if got, want := entity.MatchString(s), ValidName(s) && len(s)-strings.Count(s, "-") <= 63; got != want {
			t.Fatalf("EntityNamePattern on %q = %v, want ValidName with at most 63 letters and digits: %v", s, got, want)
		}
	})
}
