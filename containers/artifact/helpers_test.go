package artifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
)

// entry describes one archive member for buildTar.
type entry struct {
	name  string
	typ   byte // tar.TypeReg when zero
	body  string
	zeros int64 // when set, the body is this many zero bytes
	link  string
	mode  int64 // 0o644 when zero
	pax   map[string]string
}

func file(name, body string) entry { return entry{name: name, body: body} }
func dir(name string) entry        { return entry{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) entry {
	return entry{name: name, typ: tar.TypeSymlink, link: target, mode: 0o777}
}
func hardlink(name, target string) entry { return entry{name: name, typ: tar.TypeLink, link: target} }

// buildTar writes entries as a tar archive, gzip-compressed when gz is set.
func buildTar(tb testing.TB, gz bool, entries ...entry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	var w io.Writer = &buf
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	tw := tar.NewWriter(w)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:       e.name,
			Typeflag:   e.typ,
			Linkname:   e.link,
			Mode:       e.mode,
			PAXRecords: e.pax,
			Format:     tar.FormatPAX,
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			hdr = &tar.Header{Typeflag: tar.TypeXGlobalHeader, PAXRecords: e.pax}
		}
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		if hdr.Mode == 0 && hdr.Typeflag != tar.TypeXGlobalHeader {
			hdr.Mode = 0o644
		}
		if hdr.Typeflag == tar.TypeReg {
			hdr.Size = int64(len(e.body)) + e.zeros
		}
		if hdr.Typeflag == tar.TypeChar || hdr.Typeflag == tar.TypeBlock {
			hdr.Devmajor, hdr.Devminor = 1, 3
		}
		if err := tw.WriteHeader(hdr); err != nil {
			tb.Fatalf("tar header %q: %v", e.name, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			tb.Fatal(err)
		}
		if _, err := io.CopyN(tw, zeroReader{}, e.zeros); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			tb.Fatal(err)
		}
	}
	return buf.Bytes()
}

// gzipBytes compresses b.
func gzipBytes(tb testing.TB, b []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// rawHeader builds one 512-byte tar header by hand, for header types
// archive/tar refuses to write (GNU long-name records).
func rawHeader(name string, typ byte, size int64) []byte {
	h := make([]byte, 512)
	copy(h[0:100], name)
	copy(h[100:108], "0000644\x00")
	copy(h[108:116], "0000000\x00")
	copy(h[116:124], "0000000\x00")
	copy(h[124:136], fmt.Sprintf("%011o\x00", size))
	copy(h[136:148], "00000000000\x00")
	h[156] = typ
	copy(h[257:263], "ustar ")
	copy(h[263:265], " \x00")
	copy(h[148:156], "        ")
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return h
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// treeOf describes every path under dir: "d 0755" for directories,
// "f 0644 <content>" for files, "l <target>" for symbolic links.
func treeOf(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			got[rel] = "l " + target
		case fi.IsDir():
			got[rel] = "d " + modeString(fi.Mode())
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			got[rel] = "f " + modeString(fi.Mode()) + " " + string(b)
		default:
			got[rel] = "? " + fi.Mode().String()
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("walking %s: %v", dir, err)
	}
	return got
}

func modeString(m fs.FileMode) string {
	return fmt.Sprintf("%04o", uint32(m.Perm())|setBits(m))
}

// setBits renders setuid, setgid and sticky in the octal thousands digit.
func setBits(m fs.FileMode) uint32 {
	var b uint32
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// sortedKeys lists a map's keys in order, for readable failure messages.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// diffTrees reports the paths whose descriptions differ.
func diffTrees(t *testing.T, got, want map[string]string) {
	t.Helper()
	for _, k := range sortedKeys(want) {
		if g, ok := got[k]; !ok {
			t.Errorf("missing %s (want %s)", k, strconv.Quote(want[k]))
		} else if g != want[k] {
			t.Errorf("%s = %s, want %s", k, strconv.Quote(g), strconv.Quote(want[k]))
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s = %s", k, strconv.Quote(got[k]))
		}
	}
}

// sandbox makes parent/root plus a sentinel file beside root and returns
// root and a function that fails the test when anything beside root
// changed.
func sandbox(tb testing.TB) (root string, checkOutside func()) {
	tb.Helper()
	parent := tb.TempDir()
	root = filepath.Join(parent, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		tb.Fatal(err)
	}
	sentinel := filepath.Join(parent, "outside.txt")
	if err := os.WriteFile(sentinel, []byte("untouched"), 0o644); err != nil {
		tb.Fatal(err)
	}
	return root, func() {
		tb.Helper()
		ents, err := os.ReadDir(parent)
		if err != nil {
			tb.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if len(names) != 2 || names[0] != "outside.txt" || names[1] != "root" {
			tb.Errorf("parent folder holds %q, want only [outside.txt root]", names)
		}
		if b, err := os.ReadFile(sentinel); err != nil || string(b) != "untouched" {
			tb.Errorf("sentinel beside the root changed: %q, %v", b, err)
		}
		if fi, err := os.Lstat(sentinel); err != nil || !fi.Mode().IsRegular() {
			tb.Errorf("sentinel beside the root is no longer a regular file: %v", err)
		}
	}
}
