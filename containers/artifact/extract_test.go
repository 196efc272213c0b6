package artifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// extractCase is one archive and what Extract must make of it.
type extractCase struct {
	name      string
	entries   []entry
	lim       Limits
	wantErr   error             // sentinel; nil means success
	wantEntry string            // UnsafeEntryError.Name, when wantErr is ErrUnsafeArchive
	wantTree  map[string]string // the whole tree under the root, on success
}

func extractCases() []extractCase {
	long := strings.Repeat("d/", MaxNameLength/2) + "f"
	return []extractCase{
		{
			name: "normal tree",
			entries: []entry{
				dir("models/"),
				dir("models/v1/"),
				file("models/v1/model.bin", "weights"),
				{name: "models/v1/serve.sh", body: "#!/bin/sh", mode: 0o700},
				{name: "setuid", body: "s", mode: 0o4755},
				{name: "setgid-sticky", body: "g", mode: 0o3640},
				{name: "private", body: "p", mode: 0o400},
				file("implicit/parents/file.txt", "deep"),
				file("./dot/./x", "dotted"),
				file("double//slash", "ds"),
			},
			wantTree: map[string]string{
				"models":                    "d 0755",
				"models/v1":                 "d 0755",
				"models/v1/model.bin":       "f 0644 weights",
				"models/v1/serve.sh":        "f 0755 #!/bin/sh",
				"setuid":                    "f 0755 s",
				"setgid-sticky":             "f 0644 g",
				"private":                   "f 0644 p",
				"implicit":                  "d 0755",
				"implicit/parents":          "d 0755",
				"implicit/parents/file.txt": "f 0644 deep",
				"dot":                       "d 0755",
				"dot/x":                     "f 0644 dotted",
				"double":                    "d 0755",
				"double/slash":              "f 0644 ds",
			},
		},
		{
			name:     "root entry ./ as written by tar -C dir .",
			entries:  []entry{dir("./"), dir("./a/"), file("./a/b", "x")},
			wantTree: map[string]string{"a": "d 0755", "a/b": "f 0644 x"},
		},
		{
			name:     "directory with restrictive mode still usable",
			entries:  []entry{{name: "ro/", typ: tar.TypeDir, mode: 0o500}, file("ro/f", "x")},
			wantTree: map[string]string{"ro": "d 0755", "ro/f": "f 0644 x"},
		},
		{
			// The SageMaker Python SDK's repack_model: tarfile.add(model_dir, arcname="/").
			name:     "root entry / as written by the SDK's repack",
			entries:  []entry{dir("/"), dir("code/"), file("code/inference.py", "x"), file("model.pth", "w")},
			wantTree: map[string]string{"code": "d 0755", "code/inference.py": "f 0644 x", "model.pth": "f 0644 w"},
		},
		{
			name:     "leading slashes are stripped as GNU tar does",
			entries:  []entry{dir("//"), file("/etc/evil", "x"), file("//a//b", "y"), file("a/c", "z"), hardlink("h", "/etc/evil")},
			wantTree: map[string]string{"etc": "d 0755", "etc/evil": "f 0644 x", "a": "d 0755", "a/b": "f 0644 y", "a/c": "f 0644 z", "h": "f 0644 x"},
		},
		{name: "symlink named /", entries: []entry{symlink("/", "a")}, wantErr: ErrUnsafeArchive, wantEntry: "/"},
		{name: "hardlink named /", entries: []entry{file("a", "x"), hardlink("/", "a")}, wantErr: ErrUnsafeArchive, wantEntry: "/"},
		{name: "slash then dotdot", entries: []entry{dir("/"), file("/../evil", "x")}, wantErr: ErrUnsafeArchive, wantEntry: "/../evil"},
		{name: "slash directory then dotdot", entries: []entry{dir("/../up/")}, wantErr: ErrUnsafeArchive, wantEntry: "/../up/"},
		{name: "slash nested dotdot escaping", entries: []entry{file("/a/../../x", "x")}, wantErr: ErrUnsafeArchive, wantEntry: "/a/../../x"},
		{name: "slash symlink out", entries: []entry{dir("/"), symlink("/link", "../outside.txt")}, wantErr: ErrUnsafeArchive, wantEntry: "/link"},
		{name: "slash symlink absolute", entries: []entry{dir("/"), symlink("/link", "/etc/passwd")}, wantErr: ErrUnsafeArchive, wantEntry: "/link"},
		{name: "slash hardlink out", entries: []entry{hardlink("h", "/../outside.txt")}, wantErr: ErrUnsafeArchive, wantEntry: "h"},
		{name: "slash character device", entries: []entry{dir("/"), {name: "/null", typ: tar.TypeChar}}, wantErr: ErrUnsafeArchive, wantEntry: "/null"},
		{
			name:      "slash writing through a symlink",
			entries:   []entry{dir("/"), dir("/sub/"), symlink("/link", "sub"), file("/link/file", "x")},
			wantErr:   ErrUnsafeArchive,
			wantEntry: "/link/file",
		},
		{name: "dotdot prefix", entries: []entry{file("../evil", "x")}, wantErr: ErrUnsafeArchive, wantEntry: "../evil"},
		{name: "nested dotdot escaping", entries: []entry{file("a/../../x", "x")}, wantErr: ErrUnsafeArchive, wantEntry: "a/../../x"},
		{name: "dotdot staying inside is refused too", entries: []entry{file("a/../b", "x")}, wantErr: ErrUnsafeArchive, wantEntry: "a/../b"},
		{name: "dotdot directory", entries: []entry{dir("../up/")}, wantErr: ErrUnsafeArchive, wantEntry: "../up/"},
		{name: "empty name", entries: []entry{file("", "x")}, wantErr: ErrUnsafeArchive, wantEntry: ""},
		{name: "file naming the root", entries: []entry{file(".", "x")}, wantErr: ErrUnsafeArchive, wantEntry: "."},
		{name: "symlink naming the root", entries: []entry{symlink("./.", "x")}, wantErr: ErrUnsafeArchive, wantEntry: "./."},
		{name: "name over 4096 bytes", entries: []entry{file(long, "x")}, wantErr: ErrUnsafeArchive, wantEntry: long},
		{name: "symlink out", entries: []entry{symlink("link", "../outside.txt")}, wantErr: ErrUnsafeArchive, wantEntry: "link"},
		{name: "symlink out from a subfolder", entries: []entry{symlink("a/b/link", "../../../x")}, wantErr: ErrUnsafeArchive, wantEntry: "a/b/link"},
		{name: "symlink absolute", entries: []entry{symlink("link", "/etc/passwd")}, wantErr: ErrUnsafeArchive, wantEntry: "link"},
		{name: "symlink empty target", entries: []entry{symlink("link", "")}, wantErr: ErrUnsafeArchive, wantEntry: "link"},
		{
			name: "symlinks in",
			entries: []entry{
				file("data/w.bin", "w"),
				symlink("models/file-link", "../data/w.bin"),
				symlink("models/dir-link", "../data"),
				symlink("self-dir", "."),
				symlink("dangling", "missing/file"),
			},
			wantTree: map[string]string{
				"data":             "d 0755",
				"data/w.bin":       "f 0644 w",
				"models":           "d 0755",
				"models/file-link": "l ../data/w.bin",
				"models/dir-link":  "l ../data",
				"self-dir":         "l .",
				"dangling":         "l missing/file",
			},
		},
		{
			name:      "symlink chain escaping through another link",
			entries:   []entry{dir("d/"), symlink("d/up", ".."), symlink("e", "d/up/..")},
			wantErr:   ErrUnsafeArchive,
			wantEntry: "e",
		},
		{
			name:      "symlink chain completed by a later entry",
			entries:   []entry{symlink("e", "d/up/../x"), dir("d/"), symlink("d/up", "..")},
			wantErr:   ErrUnsafeArchive,
			wantEntry: "e",
		},
		{
			name:      "symlink loop",
			entries:   []entry{symlink("a", "b"), symlink("b", "a")},
			wantErr:   ErrUnsafeArchive,
			wantEntry: "a",
		},
		{
			name:      "writing through a symlink",
			entries:   []entry{dir("sub/"), symlink("link", "sub"), file("link/file", "x")},
			wantErr:   ErrUnsafeArchive,
			wantEntry: "link/file",
		},
		{
			name:     "hardlink in",
			entries:  []entry{file("a.txt", "shared"), hardlink("dir/b.txt", "a.txt")},
			wantTree: map[string]string{"a.txt": "f 0644 shared", "dir": "d 0755", "dir/b.txt": "f 0644 shared"},
		},
		{name: "hardlink out", entries: []entry{hardlink("h", "../outside.txt")}, wantErr: ErrUnsafeArchive, wantEntry: "h"},
		{name: "hardlink absolute", entries: []entry{hardlink("h", "/etc/passwd")}, wantErr: ErrUnsafeArchive, wantEntry: "h"},
		{name: "hardlink to nothing", entries: []entry{hardlink("h", "nope")}, wantErr: ErrUnsafeArchive, wantEntry: "h"},
		{name: "hardlink to itself", entries: []entry{file("h", "x"), hardlink("h", "h")}, wantErr: ErrUnsafeArchive, wantEntry: "h"},
		{name: "hardlink to a directory", entries: []entry{dir("d/"), hardlink("h", "d")}, wantErr: ErrUnsafeArchive, wantEntry: "h"},
		{name: "hardlink to a symlink", entries: []entry{file("t", "x"), symlink("s", "t"), hardlink("h", "s")}, wantErr: ErrUnsafeArchive, wantEntry: "h"},
		{
			name:      "hardlink through a symlink",
			entries:   []entry{file("sub/f", "x"), symlink("l", "sub"), hardlink("h", "l/f")},
			wantErr:   ErrUnsafeArchive,
			wantEntry: "h",
		},
		{name: "character device", entries: []entry{{name: "null", typ: tar.TypeChar}}, wantErr: ErrUnsafeArchive, wantEntry: "null"},
		{name: "block device", entries: []entry{{name: "sda", typ: tar.TypeBlock}}, wantErr: ErrUnsafeArchive, wantEntry: "sda"},
		{name: "fifo", entries: []entry{{name: "pipe", typ: tar.TypeFifo}}, wantErr: ErrUnsafeArchive, wantEntry: "pipe"},
		{
			name: "pax global header is skipped",
			entries: []entry{
				{name: "pax_global_header", typ: tar.TypeXGlobalHeader, pax: map[string]string{"comment": "commit 1234"}},
				file("a", "x"),
			},
			wantTree: map[string]string{"a": "f 0644 x"},
		},
		{
			name:     "duplicate file: last one wins",
			entries:  []entry{file("a", "one"), file("a", "two")},
			wantTree: map[string]string{"a": "f 0644 two"},
		},
		{
			name:     "file replaces a symlink without writing through it",
			entries:  []entry{file("t", "target"), symlink("x", "t"), file("x", "new")},
			wantTree: map[string]string{"t": "f 0644 target", "x": "f 0644 new"},
		},
		{
			name:     "symlink replaces a file",
			entries:  []entry{file("t", "target"), file("x", "old"), symlink("x", "t")},
			wantTree: map[string]string{"t": "f 0644 target", "x": "l t"},
		},
		{
			name:     "duplicate directory",
			entries:  []entry{dir("d/"), file("d/f", "x"), dir("d/")},
			wantTree: map[string]string{"d": "d 0755", "d/f": "f 0644 x"},
		},
		{name: "directory over a file", entries: []entry{file("a", "x"), dir("a/")}, wantErr: ErrUnsafeArchive, wantEntry: "a/"},
		{name: "file over a directory", entries: []entry{dir("a/"), file("a", "x")}, wantErr: ErrUnsafeArchive, wantEntry: "a"},
		{name: "file under a file", entries: []entry{file("a", "x"), file("a/b", "y")}, wantErr: ErrUnsafeArchive, wantEntry: "a/b"},
		{
			name:    "over the byte cap in one file",
			entries: []entry{file("small", "x"), {name: "bomb", zeros: 2 << 20}},
			lim:     Limits{MaxBytes: 1 << 20},
			wantErr: ErrTooLarge,
		},
		{
			name:    "over the entry cap",
			entries: []entry{file("1", "x"), file("2", "x"), file("3", "x")},
			lim:     Limits{MaxEntries: 2},
			wantErr: ErrTooLarge,
		},
		{
			name:     "exactly at both caps",
			entries:  []entry{file("1", "abc"), file("2", "de")},
			lim:      Limits{MaxEntries: 2, MaxBytes: 5},
			wantTree: map[string]string{"1": "f 0644 abc", "2": "f 0644 de"},
		},
	}
}

func TestExtract(t *testing.T) {
	for _, tc := range extractCases() {
		for _, gz := range []bool{true, false} {
			t.Run(tc.name+map[bool]string{true: " (tar.gz)", false: " (tar)"}[gz], func(t *testing.T) {
				t.Parallel()
				data := buildTar(t, gz, tc.entries...)
				root, checkOutside := sandbox(t)
				err := Extract(context.Background(), bytes.NewReader(data), root, tc.lim)
				checkOutside()
				if tc.wantErr == nil {
					if err != nil {
						t.Fatalf("Extract: %v", err)
					}
					diffTrees(t, treeOf(t, root), tc.wantTree)
					return
				}
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Extract error = %v, want %v", err, tc.wantErr)
				}
				if tc.wantErr != ErrUnsafeArchive {
					return
				}
				var ue *UnsafeEntryError
				if !errors.As(err, &ue) {
					t.Fatalf("Extract error %v holds no *UnsafeEntryError", err)
				}
				if ue.Name != tc.wantEntry || ue.Reason == "" {
					t.Errorf("UnsafeEntryError = {Name: %q, Reason: %q}, want Name %q and a reason", ue.Name, ue.Reason, tc.wantEntry)
				}
			})
		}
	}
}

func TestExtractLongestName(t *testing.T) {
	// 4096 bytes in components the file system accepts: allowed.
	name := strings.Repeat(strings.Repeat("n", 99)+"/", 40)
	name += strings.Repeat("f", MaxNameLength-len(name))
	if len(name) != MaxNameLength {
		t.Fatalf("test name is %d bytes", len(name))
	}
	root, checkOutside := sandbox(t)
	err := Extract(context.Background(), bytes.NewReader(buildTar(t, true, file(name, "x"))), root, Limits{})
	checkOutside()
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	// The full path passes PATH_MAX; read it relative to the root.
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := r.ReadFile(name)
	if err != nil || string(b) != "x" {
		t.Errorf("read %q, %v; want \"x\"", b, err)
	}
}

func TestExtractHardlinkSharesInode(t *testing.T) {
	root, _ := sandbox(t)
	data := buildTar(t, true, file("a", "shared"), hardlink("b", "a"))
	if err := Extract(context.Background(), bytes.NewReader(data), root, Limits{}); err != nil {
		t.Fatal(err)
	}
	a, errA := os.Stat(filepath.Join(root, "a"))
	b, errB := os.Stat(filepath.Join(root, "b"))
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if !os.SameFile(a, b) {
		t.Error("b is not a hard link to a")
	}
}

// TestExtractStopsAtByteCap checks that a stream of small files is cut off
// at the byte cap, not after writing it all.
func TestExtractStopsAtByteCap(t *testing.T) {
	const limit = 1 << 20
	var entries []entry
	for i := range 64 {
		entries = append(entries, entry{name: fmt.Sprintf("part-%02d", i), zeros: 64 << 10})
	}
	data := buildTar(t, true, entries...)
	if len(data) > 64<<10 {
		t.Fatalf("the compressed bomb is %d bytes; expected it to be small", len(data))
	}
	root, checkOutside := sandbox(t)
	err := Extract(context.Background(), bytes.NewReader(data), root, Limits{MaxBytes: limit})
	checkOutside()
	var le *LimitError
	if !errors.As(err, &le) || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Extract error = %v, want a *LimitError", err)
	}
	if le.Limit != limit || le.Unit != "bytes" {
		t.Errorf("LimitError = %+v, want limit %d bytes", le, limit)
	}
	var total int64
	err = filepath.Walk(root, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			total += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if total > limit {
		t.Errorf("%d bytes on disk, want at most the %d-byte cap", total, limit)
	}
	if total == 0 {
		t.Error("nothing was extracted before the cap; want the files that fit")
	}
}

// TestExtractStreamCap feeds GNU long-name records, which archive/tar
// consumes without returning an entry, so only the stream cap stops them.
func TestExtractStreamCap(t *testing.T) {
	var raw bytes.Buffer
	for range 4 {
		const size = 512 << 10
		raw.Write(rawHeader("././@LongLink", 'L', size))
		raw.Write(bytes.Repeat([]byte("n"), size))
	}
	raw.Write(buildTar(t, false, file("f", "x")))
	lim := Limits{MaxBytes: 1024, MaxEntries: 1}
	root, checkOutside := sandbox(t)
	err := Extract(context.Background(), bytes.NewReader(gzipBytes(t, raw.Bytes())), root, lim)
	checkOutside()
	var le *LimitError
	if !errors.As(err, &le) {
		t.Fatalf("Extract error = %v, want a *LimitError", err)
	}
	if want := lim.withDefaults().streamLimit(); le.Limit != want || le.What != "decompressed archive stream" {
		t.Errorf("LimitError = %+v, want the decompressed stream limit %d", le, want)
	}
}

func TestExtractInvalid(t *testing.T) {
	good := buildTar(t, true, file("a", strings.Repeat("payload ", 1000)))
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-8] ^= 0xff // gzip trailer: CRC-32 of the data
	corruptBody := bytes.Clone(good)
	for i := 20; i < 60 && i < len(corruptBody); i++ {
		corruptBody[i] ^= 0x55
	}
	trailing := gzipBytes(t, append(buildTar(t, false, file("a", "x")), make([]byte, 2<<20)...))
	tests := []struct {
		name string
		data []byte
	}{
		{"empty input", nil},
		{"one byte", []byte{0x1f}},
		{"gzip magic only", []byte{0x1f, 0x8b}},
		{"text file", []byte(strings.Repeat("this is not a tar archive\n", 40))},
		{"corrupt gzip body", corruptBody},
		{"truncated gzip", good[:len(good)/2]},
		{"gzip checksum mismatch", badCRC},
		{"truncated tar", buildTar(t, false, file("a", strings.Repeat("y", 2000)))[:1024]},
		{"more than 1 MiB after the end of the archive", trailing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root, checkOutside := sandbox(t)
			err := Extract(context.Background(), bytes.NewReader(tc.data), root, Limits{})
			checkOutside()
			if !errors.Is(err, ErrInvalidArchive) {
				t.Fatalf("Extract error = %v, want ErrInvalidArchive", err)
			}
		})
	}
}

func TestExtractTrailingZeroPadding(t *testing.T) {
	// GNU tar pads archives to 10 KiB records; that must be accepted.
	data := gzipBytes(t, append(buildTar(t, false, file("a", "x")), make([]byte, 9*1024)...))
	root, _ := sandbox(t)
	if err := Extract(context.Background(), bytes.NewReader(data), root, Limits{}); err != nil {
		t.Fatalf("Extract: %v", err)
	}
	diffTrees(t, treeOf(t, root), map[string]string{"a": "f 0644 x"})
}

type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestExtractSourceAndContextErrors(t *testing.T) {
	data := buildTar(t, true, file("a", strings.Repeat("z", 100_000)))
	errDisk := errors.New("disk on fire")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		r       io.Reader
		wantErr error
	}{
		{"reader fails mid-stream", context.Background(), &failingReader{data: data[:len(data)/2], err: errDisk}, errDisk},
		{"context cancelled", cancelled, bytes.NewReader(data), context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root, _ := sandbox(t)
			err := Extract(tc.ctx, tc.r, root, Limits{})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Extract error = %v, want %v", err, tc.wantErr)
			}
			if errors.Is(err, ErrInvalidArchive) {
				t.Errorf("Extract error %v blames the archive for a %v", err, tc.wantErr)
			}
		})
	}
}

func TestExtractDestMustExist(t *testing.T) {
	err := Extract(context.Background(), bytes.NewReader(buildTar(t, false, file("a", "x"))), filepath.Join(t.TempDir(), "missing"), Limits{})
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Extract error = %v, want os.ErrNotExist", err)
	}
}

func TestExtractIgnoresUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	root, _ := sandbox(t)
	data := buildTar(t, false, dir("d/"), file("d/e/f", "x"))
	if err := Extract(context.Background(), bytes.NewReader(data), root, Limits{}); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, treeOf(t, root), map[string]string{"d": "d 0755", "d/e": "d 0755", "d/e/f": "f 0644 x"})
}

// TestExtractSDKRepackedArchive extracts testdata/sdk-repack.tar.gz, written
// by Python's tarfile exactly as the SageMaker Python SDK's repack_model
// writes model.tar.gz (testdata/make_sdk_repack.py: add(model_dir,
// arcname="/")): its first entry is the directory "/".
func TestExtractSDKRepackedArchive(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "sdk-repack.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	first, err := tar.NewReader(zr).Next()
	if err != nil || first.Name != "/" || first.Typeflag != tar.TypeDir {
		t.Fatalf("fixture's first entry = %+v, %v; want the directory \"/\"", first, err)
	}
	root, checkOutside := sandbox(t)
	if err := Extract(context.Background(), bytes.NewReader(data), root, Limits{}); err != nil {
		t.Fatalf("Extract: %v", err)
	}
	checkOutside()
	diffTrees(t, treeOf(t, root), map[string]string{
		"code":              "d 0755",
		"code/inference.py": "f 0644 def model_fn(model_dir):\n    return None\n",
		"model.pth":         "f 0644 weights\n",
	})
}

// TestUnsafeEntryMessage: a refused entry's message names the entry as
// written in the archive, escaped and bounded, so that a user sees which one
// it was.
func TestUnsafeEntryMessage(t *testing.T) {
	long := strings.Repeat("a/", 300) + "x"
	tests := []struct {
		name    string
		entries []entry
		want    string // the whole message, or its prefix when it ends in "…"
	}{
		{"dotdot", []entry{file("/../etc/passwd", "x")},
			`unsafe archive entry "/../etc/passwd": ".." path components are not allowed`},
		{"control characters", []entry{file("a\n\x1b[31m/../b", "x")},
			`unsafe archive entry "a\n\x1b[31m/../b": ".." path components are not allowed`},
		{"long name", []entry{file(long+"/../z", "x")},
			`unsafe archive entry "` + long[:maxShownName] + `"… (606 bytes): ".." path components are not allowed`},
		{"symlink target", []entry{symlink("l", "/etc/\tpasswd")},
			`unsafe archive entry "l": symbolic link target "/etc/\tpasswd" is absolute`},
		{"device", []entry{dir("/"), {name: "/dev/null", typ: tar.TypeChar}},
			`unsafe archive entry "/dev/null": character devices are not allowed`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root, _ := sandbox(t)
			err := Extract(context.Background(), bytes.NewReader(buildTar(t, true, tc.entries...)), root, Limits{})
			if err == nil || err.Error() != tc.want {
				t.Errorf("Extract error =\n  %v\nwant\n  %s", err, tc.want)
			}
		})
	}
}

// TestExtractFileNamedSlash: "/" is the root only as a directory; a regular
// file of that name (archive/tar will not write one) is refused.
func TestExtractFileNamedSlash(t *testing.T) {
	data := append(rawHeader("/", tar.TypeReg, 0), make([]byte, 1024)...)
	root, checkOutside := sandbox(t)
	err := Extract(context.Background(), bytes.NewReader(data), root, Limits{})
	checkOutside()
	var ue *UnsafeEntryError
	if !errors.As(err, &ue) || ue.Name != "/" {
		t.Fatalf("Extract error = %v, want an UnsafeEntryError for \"/\"", err)
	}
}
