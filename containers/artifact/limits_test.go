package artifact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ustarHeader builds one POSIX (ustar magic) header by hand, for the PAX
// sparse records archive/tar will not write.
func ustarHeader(name string, typ byte, size int64) []byte {
	h := rawHeader(name, typ, size)
	copy(h[257:265], "ustar\x0000")
	return checksum(h)
}

// checksum recomputes a header's checksum after it was edited.
func checksum(h []byte) []byte {
	copy(h[148:156], "        ")
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return h
}

// pad512 pads b to a whole number of tar blocks.
func pad512(b []byte) []byte {
	if r := len(b) % 512; r != 0 {
		b = append(b, make([]byte, 512-r)...)
	}
	return b
}

func paxRecord(k, v string) string {
	n := len(k) + len(v) + 3 // ' ', '=', '\n'
	for l := len(fmt.Sprint(n)); ; l++ {
		if len(fmt.Sprint(n+l)) == l {
			return fmt.Sprintf("%d %s=%s\n", n+l, k, v)
		}
	}
}

// sparsePAX is a gzip-compressed tar holding one PAX 1.0 sparse file of
// logical size realSize with a single data byte at its end.
func sparsePAX(tb testing.TB, realSize int64) []byte {
	recs := paxRecord("GNU.sparse.major", "1") + paxRecord("GNU.sparse.minor", "0") +
		paxRecord("GNU.sparse.name", "sparse") + paxRecord("GNU.sparse.realsize", fmt.Sprint(realSize))
	data := pad512([]byte(fmt.Sprintf("1\n%d\n1\n", realSize-1)))
	data = append(data, 'x')
	var raw []byte
	raw = append(raw, ustarHeader("PaxHeaders/sparse", 'x', int64(len(recs)))...)
	raw = append(raw, pad512([]byte(recs))...)
	raw = append(raw, ustarHeader("GNUSparseFile.0/sparse", '0', int64(len(data)))...)
	raw = append(raw, pad512(data)...)
	raw = append(raw, make([]byte, 1024)...)
	return gzipBytes(tb, raw)
}

// sparseGNU is a gzip-compressed tar holding one old-GNU sparse file ('S')
// of logical size realSize that is all hole.
func sparseGNU(tb testing.TB, realSize int64) []byte {
	h := rawHeader("sparse", 'S', 0)
	copy(h[386:398], fmt.Sprintf("%011o\x00", 0)) // one entry: offset 0,
	copy(h[398:410], fmt.Sprintf("%011o\x00", 0)) // length 0
	copy(h[483:495], fmt.Sprintf("%011o\x00", realSize))
	raw := append(checksum(h), make([]byte, 1024)...)
	return gzipBytes(tb, raw)
}

// multiMemberBomb is a tar of one file of n×8 MiB zeros, written as many
// concatenated gzip members (one per 8 MiB, the same bytes repeated), so
// that it is cheap to build and ~1000 times smaller than its content.
func multiMemberBomb(tb testing.TB, n int) []byte {
	const chunk = 8 << 20
	var out bytes.Buffer
	out.Write(gzipBytes(tb, ustarHeader("zeros", '0', int64(n)*chunk)))
	zeros := gzipBytes(tb, make([]byte, chunk))
	for range n {
		out.Write(zeros)
	}
	out.Write(gzipBytes(tb, make([]byte, 1024)))
	return out.Bytes()
}

// bytesUnder sums the regular-file bytes under dir.
func bytesUnder(tb testing.TB, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			fi, ierr := d.Info()
			if ierr != nil {
				return ierr
			}
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// TestArchiveBombsRefused reproduces issue 9, class 5: a 225-byte archive
// holding a sparse 3 GiB file and a multi-member gzip expanding 1000:1 were
// extracted in full. Through Prepare (the archive's size is known) they are
// refused before anything is written; through Extract on a stream, once the
// ratio floor is passed.
func TestArchiveBombsRefused(t *testing.T) {
	bombs := map[string][]byte{
		"sparse PAX 1.0 3 GiB": sparsePAX(t, 3<<30),
		"sparse old GNU 3 GiB": sparseGNU(t, 3<<30),
		"multi-member gzip":    multiMemberBomb(t, 32),
	}
	base := t.TempDir()
	f, err := NewFetcher(Options{ModelRoots: []string{base}})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range bombs {
		t.Run(name, func(t *testing.T) {
			t.Logf("archive: %d bytes", len(data))
			if err := os.WriteFile(filepath.Join(base, "bomb.tar.gz"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			work := t.TempDir()
			_, err := f.Prepare(context.Background(), "file://bomb.tar.gz", base, work)
			var le *LimitError
			if !errors.As(err, &le) || le.Flag != MaxRatioFlag {
				t.Fatalf("Prepare = %v, want the ratio limit", err)
			}
			if !strings.Contains(err.Error(), "exceeds the limit of 100:1 (set with --max-artifact-ratio)") {
				t.Errorf("message %q does not name the limit and its flag", err)
			}
			if left := workDirEntries(t, work); len(left) != 0 {
				t.Errorf("refused archive left %q", left)
			}

			root := t.TempDir()
			err = Extract(context.Background(), bytes.NewReader(data), root, Limits{})
			if !errors.As(err, &le) || le.Flag != MaxRatioFlag {
				t.Fatalf("Extract on a stream = %v, want the ratio limit", err)
			}
			if n := bytesUnder(t, root); n > RatioFloorBytes+copyBufferSize {
				t.Errorf("%d bytes written before the refusal, want at most the %d-byte floor", n, RatioFloorBytes)
			}
		})
	}
	if n := len(bombs["sparse old GNU 3 GiB"]); n > 256 {
		t.Errorf("the sparse archive is %d bytes; the probe's was 225", n)
	}
}

// TestSparseCountsLogicalSize: a sparse entry counts at its logical size
// against the absolute cap, refused before a byte is written.
func TestSparseCountsLogicalSize(t *testing.T) {
	root := t.TempDir()
	err := Extract(context.Background(), bytes.NewReader(sparseGNU(t, 3<<30)), root,
		Limits{MaxBytes: 1 << 30, MaxRatio: 1 << 40})
	var le *LimitError
	if !errors.As(err, &le) || le.Flag != MaxBytesFlag || le.Limit != 1<<30 {
		t.Fatalf("Extract = %v, want the 1 GiB byte cap", err)
	}
	if !strings.Contains(err.Error(), "(set with --max-artifact-bytes)") {
		t.Errorf("message %q does not name the flag", err)
	}
	if n := bytesUnder(t, root); n != 0 {
		t.Errorf("%d bytes written; want none", n)
	}
}

// TestRatioAllowsRealModels: content that compresses like weights (not at
// all) and small, very regular archives under the floor pass.
func TestRatioAllowsRealModels(t *testing.T) {
	random := make([]byte, 1<<20)
	for i := range random {
		random[i] = byte(i*7919 + i>>8*31)
	}
	for name, data := range map[string][]byte{
		"incompressible":        buildTar(t, true, file("w.bin", string(random))),
		"zeros under the floor": buildTar(t, true, entry{name: "z", zeros: 8 << 20}),
	} {
		t.Run(name, func(t *testing.T) {
			lim := Limits{SourceBytes: int64(len(data))}
			if err := Extract(context.Background(), bytes.NewReader(data), t.TempDir(), lim); err != nil {
				t.Errorf("Extract with the size known: %v", err)
			}
			if err := Extract(context.Background(), bytes.NewReader(data), t.TempDir(), Limits{}); err != nil {
				t.Errorf("Extract on a stream: %v", err)
			}
		})
	}
}

// TestNameShapeLimits: depth, component and total name lengths. Deep names
// are refused before any folder is made, so the per-entry work that grows
// with depth (each parent checked) never starts: the probe's archives of
// thousands of levels took seconds of CPU each.
func TestNameShapeLimits(t *testing.T) {
	deep := func(levels int) string { return strings.Repeat("d/", levels-1) + "f" }
	tests := []struct {
		name    string
		entry   string
		wantMsg string // "" means accepted
	}{
		{"64 levels", deep(MaxDepth), ""},
		{"65 levels", deep(MaxDepth + 1), "deeper than 64 levels"},
		{"2,000 levels", deep(2000), "deeper than 64 levels"},
		{"5,000 levels", deep(5000), "longer than 4096 bytes"},
		{"255-byte component", "a/" + strings.Repeat("c", 255), ""},
		{"256-byte component", "a/" + strings.Repeat("c", 256), "components longer than 255 bytes"},
		{"dots do not count", strings.Repeat("./", 100) + "f", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			entries := []entry{file(tc.entry, "x")}
			for i := 1; tc.wantMsg != "" && i < 100; i++ { // refused at the first one
				entries = append(entries, file(tc.entry+fmt.Sprint(i), "x"))
			}
			root := t.TempDir()
			err := Extract(context.Background(), bytes.NewReader(buildTar(t, true, entries...)), root, Limits{})
			if tc.wantMsg == "" {
				if err != nil {
					t.Fatalf("Extract: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrUnsafeArchive) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("Extract = %v, want an unsafe entry: %s", err, tc.wantMsg)
			}
			if ents, _ := os.ReadDir(root); len(ents) != 0 {
				t.Errorf("the refused archive made %d entries first", len(ents))
			}
		})
	}
}

// BenchmarkExtractDeepest: the cost of the deepest names allowed, 1,000
// files 64 levels deep.
func BenchmarkExtractDeepest(b *testing.B) {
	var entries []entry
	for i := range 1000 {
		entries = append(entries, file(strings.Repeat(fmt.Sprintf("d%d/", i%10), MaxDepth-1)+fmt.Sprint(i), "x"))
	}
	data := buildTar(b, true, entries...)
	for b.Loop() {
		b.StopTimer()
		root := b.TempDir()
		b.StartTimer()
		if err := Extract(context.Background(), bytes.NewReader(data), root, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRefuseDeep: an archive of 1,000 entries 2,000 levels deep is
// refused at its first entry.
func BenchmarkRefuseDeep(b *testing.B) {
	var entries []entry
	for i := range 1000 {
		entries = append(entries, file(strings.Repeat("d/", 1999)+fmt.Sprint(i), "x"))
	}
	data := buildTar(b, true, entries...)
	root := b.TempDir()
	for b.Loop() {
		if err := Extract(context.Background(), bytes.NewReader(data), root, Limits{}); !errors.Is(err, ErrUnsafeArchive) {
			b.Fatal(err)
		}
	}
}
