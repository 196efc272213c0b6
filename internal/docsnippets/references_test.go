package docsnippets

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoReferencesOutsideTheRepository: documentation and comments cite what
// a reader can open (AWS's documentation, public sources, files in the
// repository), never notes that live outside it. The needles are built from
// parts so that this file does not match itself.
func TestNoReferencesOutsideTheRepository(t *testing.T) {
	root := repoRoot(t)
	needles := []string{
		"sagemaker-" + "contracts.md", "contracts " + "doc", "contracts " + "§",
		"../" + "shared", "framework-" + "containers.md", "kubernetes-" + "local.md",
	}
	// Project notes may be cited only if the repository has them.
	for _, n := range []string{"DESIGN" + ".md", "STYLE" + ".md"} {
		if _, err := os.Stat(filepath.Join(root, n)); err != nil {
			needles = append(needles, n)
		}
	}
	files := 0
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") && name != ".ci" || name == "build" || name == "bin" || name == "__pycache__") {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil || !info.Mode().IsRegular() || info.Size() > 4<<20 {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.IndexByte(b, 0) >= 0 { // a binary
			return nil
		}
		files++
		rel, _ := filepath.Rel(root, p)
		for i, line := range strings.Split(string(b), "\n") {
			for _, n := range needles {
				if strings.Contains(line, n) {
					t.Errorf("%s:%d cites %q, which is not in the repository: cite what a reader can open (an AWS documentation URL, a public source)", rel, i+1, n)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read only %d files: the walk is broken", files)
	}
}
