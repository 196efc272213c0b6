package httpc

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

func TestReadCapped(t *testing.T) {
	errBroken := errors.New("broken")
	tests := []struct {
		name       string
		body       string
		announced  int64
		limit      int
		oneByte    bool // deliver one byte per Read
		wantTooBig bool
		wantErr    error
	}{
		{"announced fits", "hello", 5, 10, false, false, nil},
		{"announced at limit", "0123456789", 10, 10, false, false, nil},
		{"announced over limit", "0123456789a", 11, 10, false, true, nil},
		{"unknown fits", "hello", -1, 10, true, false, nil},
		{"unknown at limit", "0123456789", -1, 10, true, false, nil},
		{"unknown over limit", strings.Repeat("z", 100), -1, 10, false, true, nil},
		{"unknown grows past a buffer", strings.Repeat("y", 3*minBuffer+7), -1, 1 << 20, false, false, nil},
		{"empty", "", -1, 10, false, false, nil},
		{"announced empty", "", 0, 10, false, false, nil},
		{"announced but short", "abc", 5, 10, false, false, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r io.Reader = strings.NewReader(tt.body)
			if tt.oneByte {
				r = iotest.OneByteReader(r)
			}
			counting := &countingReader{r: r}
			dst := &buffer{b: make([]byte, 0, 2)}
			tooBig, err := readCapped(dst, counting, tt.announced, tt.limit)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tooBig != tt.wantTooBig {
				t.Fatalf("tooBig = %v, want %v", tooBig, tt.wantTooBig)
			}
			if counting.n > int64(tt.limit)+1 {
				t.Errorf("read %d bytes with a limit of %d", counting.n, tt.limit)
			}
			if !tooBig && err == nil && string(dst.b) != tt.body {
				t.Errorf("read %q, want %q", dst.b, tt.body)
			}
		})
	}
	t.Run("read error", func(t *testing.T) {
		r := io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(errBroken))
		_, err := readCapped(&buffer{}, r, -1, 100)
		if !errors.Is(err, errBroken) {
			t.Errorf("err = %v, want %v", err, errBroken)
		}
	})
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

func TestClip(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // "" means: check only the invariants
	}{
		{"short", "bad input", "bad input"},
		{"empty", "", ""},
		{"invalid bytes replaced", "a\xffb", "a\uFFFDb"},
		{"long ascii", strings.Repeat("a", 5000), strings.Repeat("a", MaxErrorBody)},
		{"rune not cut", strings.Repeat("a", MaxErrorBody-1) + "é", strings.Repeat("a", MaxErrorBody-1)},
		{"long invalid", strings.Repeat("\xff\x01", 4000), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := clip(tt.in)
			if len(got) > MaxErrorBody || !utf8.ValidString(got) {
				t.Fatalf("clip gave %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("clip = %q, want %q", got, tt.want)
			}
			if tt.want == "" && tt.in != "" && got == "" {
				t.Error("clip dropped everything")
			}
		})
	}
}
