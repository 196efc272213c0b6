package artifact

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzExtract feeds arbitrary bytes to Extract and checks, whatever the
// outcome, that nothing beside the root changed and, on success, that the
// tree is safe to mount: only directories, regular files and symbolic links
// that resolve inside the root, all readable by anyone, no setuid bits.
func FuzzExtract(f *testing.F) {
	for _, tc := range extractCases() {
		f.Add(buildTar(f, true, tc.entries...))
		f.Add(buildTar(f, false, tc.entries...))
	}
	f.Add([]byte{})
	if sdk, err := os.ReadFile(filepath.Join("testdata", "sdk-repack.tar.gz")); err == nil {
		f.Add(sdk)
	}
	f.Add([]byte{0x1f, 0x8b})
	f.Add(append(rawHeader("././@LongLink", 'L', 3), []byte("abc")...))
	f.Add(buildTar(f, false, symlink("e", "d/up/../x"), dir("d/"), symlink("d/up", ".."), file("e/y", "z")))

	f.Fuzz(func(t *testing.T, data []byte) {
		root, checkOutside := sandbox(t)
		err := Extract(context.Background(), bytes.NewReader(data), root, Limits{MaxBytes: 4 << 20, MaxEntries: 256})
		checkOutside()
		if err != nil {
			return // the caller removes a failed extraction
		}
		checkTreeSafe(t, root)
	})
}

// checkTreeSafe verifies a successful extraction with the operating
// system's own path resolution (filepath.EvalSymlinks), independently of
// the package's checks.
func checkTreeSafe(t *testing.T, root string) {
	t.Helper()
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		mode := fi.Mode()
		switch {
		case mode&fs.ModeSymlink != 0:
			resolved, err := filepath.EvalSymlinks(p)
			if err != nil {
				return nil // dangling: resolves nowhere
			}
			if resolved != realRoot && !strings.HasPrefix(resolved, realRoot+string(filepath.Separator)) {
				t.Errorf("symbolic link %s resolves outside the root, to %s", p, resolved)
			}
		case mode.IsDir():
			if mode.Perm() != 0o755 {
				t.Errorf("directory %s has mode %v, want 0755", p, mode)
			}
		case mode.IsRegular():
			if mode.Perm()&0o444 != 0o444 || mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
				t.Errorf("file %s has mode %v, want readable by all and no special bits", p, mode)
			}
		default:
			t.Errorf("%s is a special file (%v)", p, mode)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
