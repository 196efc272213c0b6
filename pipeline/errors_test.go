package pipeline

import "testing"

func TestFormatLimit(t *testing.T) {
	for n, want := range map[int]string{6291456: "6 MiB", 1 << 20: "1 MiB", 1000: "1000 bytes", 6291457: "6291457 bytes"} {
		if got := formatLimit(n); got != want {
			t.Errorf("formatLimit(%d) = %q, want %q", n, got, want)
		}
	}
}
