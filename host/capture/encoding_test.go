package capture

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestEncodingFor(t *testing.T) {
	csv, js := []string{"text/csv"}, []string{"application/json", "Application/JSONLines"}
	for _, tt := range []struct{ ct, want string }{
		{"text/csv", EncodingCSV},
		{"TEXT/CSV", EncodingCSV},
		{" text/csv ;charset=utf-8", EncodingCSV},
		{"text/csv;", EncodingCSV},
		{"application/json", EncodingJSON},
		{"application/jsonlines; charset=utf-8", EncodingJSON},
		{"application/json-seq", EncodingBase64},
		{"text/csvx", EncodingBase64},
		{"text/ csv", EncodingBase64},
		{"", EncodingBase64},
		{";text/csv", EncodingBase64},
		{"application/octet-stream", EncodingBase64},
	} {
		if got := EncodingFor(tt.ct, csv, js); got != tt.want {
			t.Errorf("EncodingFor(%q) = %s, want %s", tt.ct, got, tt.want)
		}
	}
	if got := EncodingFor("text/csv", nil, nil); got != EncodingBase64 {
		t.Errorf("no lists: %s, want BASE64", got)
	}
}

// FuzzEncoding: whatever the Content-Type header and body, the decision
// is one of the three encodings, does not depend on parameters or on the
// case of an ASCII media type, and the record written reads back, as JSON,
// to the exact bytes of the call.
func FuzzEncoding(f *testing.F) {
	for _, s := range []struct{ ct, data string }{
		{"text/csv", "1,2\n"}, {"application/json; charset=utf-8", `{"a":"<&>"}`}, {"image/png", "\x89PNG\x00\xff"},
		{"TEXT/CSV;q=1", "\u2028\"\\"}, {"text/csv", "\xed\xa0\x80"}, {"", ""}, {";;", "x"},
	} {
		f.Add(s.ct, []byte(s.data))
	}
	csv, js := []string{"text/csv"}, []string{"application/json"}
	f.Fuzz(func(t *testing.T, ct string, data []byte) {
		enc := EncodingFor(ct, csv, js)
		if enc != EncodingCSV && enc != EncodingJSON && enc != EncodingBase64 {
			t.Fatalf("EncodingFor(%q) = %q", ct, enc)
		}
		if !strings.Contains(ct, ";") {
			if got := EncodingFor(ct+"; charset=utf-8", csv, js); got != enc {
				t.Fatalf("EncodingFor(%q) = %s but with a parameter %s", ct, enc, got)
			}
		}
		if isASCII(ct) {
			if got := EncodingFor(strings.ToUpper(ct), csv, js); got != enc {
				t.Fatalf("EncodingFor(%q) = %s but in capitals %s", ct, enc, got)
			}
		}
		r := &pending{pol: &policy{csv: csv, json: js}, at: time.Unix(0, 0), hasInput: true, input: data, inType: ct}
		var buf bytes.Buffer
		if err := appendRecord(&buf, r, "id"); err != nil {
			t.Fatal(err)
		}
		var rec Record
		if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
			t.Fatalf("line %q is not JSON: %v", buf.Bytes(), err)
		}
		p := rec.CaptureData.EndpointInput
		got, err := p.Bytes()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("data %q written as %s %q reads back as %q, %v", data, p.Encoding, p.Data, got, err)
		}
		if p.Encoding != enc && (p.Encoding != EncodingBase64 || utf8.Valid(data)) {
			t.Fatalf("encoding %s, decided %s for valid UTF-8", p.Encoding, enc)
		}
		if utf8.ValidString(ct) && p.ObservedContentType != ct {
			t.Fatalf("observedContentType %q, want %q", p.ObservedContentType, ct)
		}
	})
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
