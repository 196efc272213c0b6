package host

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mce-run/mce/host/apierr"
)

// FuzzValidateInvokeHeaders feeds arbitrary endpoint names and header values
// to the validator: it must never panic, must accept what the service model
// accepts, and its messages must stay valid for the JSON error body.
func FuzzValidateInvokeHeaders(f *testing.F) {
	for _, seed := range [][3]string{
		{"ab-test", "english", "model.tar.gz"},
		{"bad_name", "x y", ""},
		{strings.Repeat("a", 64), strings.Repeat("b", 70), "\x00"},
		{"e", "é", " leading-space"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, endpoint, hostname, model string) {
		h := http.Header{}
		h.Set(hdrTargetContainer, hostname)
		h.Set(hdrTargetModel, model)
		h.Set(hdrCustomAttributes, model)
		err := validateInvokeHeaders(endpoint, h)
		valid := len(endpoint) <= 63 && namePattern.MatchString(endpoint) &&
			len(hostname) <= 63 && (hostname == "" || namePattern.MatchString(hostname)) &&
			len(model) >= 1 && len(model) <= 1024 && printPattern.MatchString(model) && isASCII(model)
		if valid && err != nil {
			t.Fatalf("valid input refused: %v", err)
		}
		if err != nil && !utf8.ValidString(apierr.Truncate(err.Message, apierr.MaxMessageLen)) {
			t.Fatalf("message not valid UTF-8: %q", err.Message)
		}
	})
}

// FuzzPrintMatcher checks the TargetModel/InferenceId matcher against the
// regexp it replaces.
func FuzzPrintMatcher(f *testing.F) {
	re := regexp.MustCompile(`\A[^ \t\n\x0B\f\r][ -~]*\z`) // Java's \S and \p{Print}
	for _, s := range []string{"", " a", "a", "model.tar.gz", "a\tb", "é", "\xff", "x\x7f", "a~ b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := (printMatcher{}).MatchString(s), re.MatchString(s); got != want {
			t.Fatalf("printMatcher(%q) = %v, the regexp says %v", s, got, want)
		}
	})
}
