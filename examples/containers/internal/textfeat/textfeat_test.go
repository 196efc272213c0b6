package textfeat

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestTokenize(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Hello, World!", []string{"hello", "world"}},
		{"Don't charge me TWICE", []string{"don", "t", "charge", "me", "twice"}},
		{"Größe: 42cm — ÜBER", []string{"größe", "42cm", "über"}},
		{"  tabs\tand\nlines  ", []string{"tabs", "and", "lines"}},
		{"bad\xffutf8", []string{"bad", "utf8"}},
		{"order#12345", []string{"order", "12345"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := Tokenize(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Tokenize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseVocabulary(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr bool
	}{
		{name: "lf", in: "refund\ninvoice\n", want: []string{"refund", "invoice"}},
		{name: "crlf and blanks", in: "refund\r\n\r\ninvoice", want: []string{"refund", "invoice"}},
		{name: "unicode", in: "größe\n", want: []string{"größe"}},
		{name: "empty", in: "\n\n", wantErr: true},
		{name: "upper case", in: "Refund\n", wantErr: true},
		{name: "two tokens on a line", in: "credit card\n", wantErr: true},
		{name: "punctuation", in: "refund!\n", wantErr: true},
		{name: "duplicate", in: "a\nb\na\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := ParseVocabulary(strings.NewReader(tt.in))
			if tt.wantErr {
				if !errors.Is(err, ErrBadVocabulary) {
					t.Fatalf("err = %v, want ErrBadVocabulary", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Tokens(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("tokens = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseVocabularyTooLarge(t *testing.T) {
	big := strings.Repeat("a", MaxVocabBytes+1)
	if _, err := ParseVocabulary(strings.NewReader(big)); !errors.Is(err, ErrBadVocabulary) {
		t.Errorf("err = %v, want ErrBadVocabulary", err)
	}
}

func FuzzParseVocabulary(f *testing.F) {
	for _, s := range []string{"refund\ninvoice\n", "a\r\nb", "Größe\n", "x\x00y\n", "a\na\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		v, err := ParseVocabulary(strings.NewReader(in))
		if err != nil {
			return
		}
		// Whatever parses must survive a write/parse round trip unchanged.
		var buf bytes.Buffer
		if _, err := v.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		again, err := ParseVocabulary(&buf)
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		if !reflect.DeepEqual(again.Tokens(), v.Tokens()) {
			t.Fatalf("round trip changed %q to %q", v.Tokens(), again.Tokens())
		}
	})
}

func TestBuildVocabulary(t *testing.T) {
	docs := []string{"Refund my card", "card declined, refund please", "Where is my parcel?"}
	tests := []struct {
		minCount int
		want     []string
	}{
		{1, []string{"card", "declined", "is", "my", "parcel", "please", "refund", "where"}},
		{2, []string{"card", "my", "refund"}},
	}
	for _, tt := range tests {
		t.Run(strings.Repeat("+", tt.minCount), func(t *testing.T) {
			v, err := BuildVocabulary(docs, tt.minCount)
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Tokens(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("tokens = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestVectorize(t *testing.T) {
	v, err := NewVocabulary([]string{"card", "refund", "parcel"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		doc  string
		want []float64
	}{
		{"refund", []float64{0, 1, 0}},
		{"Card card REFUND refund", []float64{1 / math.Sqrt2, 1 / math.Sqrt2, 0}},
		{"card card card refund refund refund refund", []float64{0.6, 0.8, 0}},
		{"nothing known here", []float64{0, 0, 0}},
		{"", []float64{0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.doc, func(t *testing.T) {
			got := v.Vectorize(tt.doc, nil)
			if len(got) != len(tt.want) {
				t.Fatalf("len = %d, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if math.Abs(got[i]-tt.want[i]) > 1e-12 {
					t.Fatalf("Vectorize(%q) = %v, want %v", tt.doc, got, tt.want)
				}
			}
		})
	}
	// Reused storage must be cleared first.
	buf := v.Vectorize("parcel", nil)
	if got := v.Vectorize("card", buf); got[2] != 0 || got[0] != 1 {
		t.Errorf("reused vector = %v, want [1 0 0]", got)
	}
}
