//go:build unix

package loadtest

import (
	"path/filepath"
	"syscall"
	"testing"
)

// TestReadPayloadsRefusesAFIFO: a payload that is not a regular file (a
// FIFO would block the read forever) is refused.
func TestReadPayloadsRefusesAFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPayloads(fifo, nil); err == nil {
		t.Error("a FIFO: no error")
	}
}
