package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: the file holds the new content, no temporary file is left,
// and a write into a folder that is gone fails without leaving anything.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, content := range []string{"old", "new"} {
		if err := Write(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != content {
			t.Fatalf("read %q, %v; want %q", b, err, content)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("the folder holds %d files, want only state.json", len(ents))
	}
	if err := Write(filepath.Join(dir, "gone", "x.json"), []byte("x")); err == nil {
		t.Fatal("a write into a missing folder succeeded")
	}
	if !IsTemp(TempPrefix+"123") || IsTemp("state.json") {
		t.Error("IsTemp")
	}
}

// TestReplace: gone removes the file, and again without error; not gone
// writes it.
func TestReplace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	if err := Replace(path, []byte("x"), false); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "x" {
		t.Fatalf("read %q, %v", b, err)
	}
	for range 2 {
		if err := Replace(path, nil, true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the file is still there: %v", err)
	}
}
