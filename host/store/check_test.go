package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"
)

// realState writes a state database with enough records to span many
// pages, closes it, and returns its path and size.
func realState(t *testing.T) (string, int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("p", 3000)
	for i := range 200 {
		if err := s.Put(Endpoints, "ep"+strconv.Itoa(i), map[string]any{"Name": "ep" + strconv.Itoa(i), "Pad": pad}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, fi.Size()
}

func copyTruncated(t *testing.T, src string, n int64) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(dst, b[:n], 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

func wantUnusable(t *testing.T, path string, err error, locked bool) {
	t.Helper()
	var ue *UnusableError
	if !errors.As(err, &ue) {
		t.Fatalf("%v, want an *UnusableError", err)
	}
	msg := err.Error()
	if ue.Locked != locked || !strings.Contains(msg, path) {
		t.Errorf("message %q: want the file named, locked %v", msg, locked)
	}
	if !locked && !strings.Contains(msg, "mv "+path+" "+path+".broken") {
		t.Errorf("message %q does not say how to move the file aside", msg)
	}
}

// TestTruncatedDatabaseIsAClearError: a state.db cut short anywhere is a
// clear error naming the file and the way out, in this process — not a
// SIGBUS that kills it (bbolt maps the file and reads past its end).
func TestTruncatedDatabaseIsAClearError(t *testing.T) {
	path, size := realState(t)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m0, _ := readMeta(f, 0)
	m1, _ := readMeta(f, int64(m0.pageSize))
	f.Close()
	inUse := int64(max(m0.pgid, m1.pgid)) * int64(m0.pageSize) // the file may be longer: bbolt grows it ahead
	for _, n := range []int64{inUse - 1, inUse - 4096, size / 2, 65536, 3 * 4096, 2*4096 + 100, 8192, 5000, 4096, 100} {
		t.Run(strconv.FormatInt(n, 10), func(t *testing.T) {
			p := copyTruncated(t, path, n)
			s, err := Open(p)
			if err == nil {
				s.Close()
				t.Fatalf("a copy cut to %d of %d bytes opened", n, size)
			}
			wantUnusable(t, p, err, false)
		})
	}
	// The whole file still opens, with its records.
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	if err := List(s, Endpoints, func(map[string]any) error { n++; return nil }); err != nil || n != 200 {
		t.Errorf("List = %d records, %v", n, err)
	}
}

// TestDamageBehindTheHeaderIsAClearError: where the header is intact but
// the pages it points at are gone, the read-through at open turns the
// fault into an error (the header check is bypassed here to reach it).
func TestDamageBehindTheHeaderIsAClearError(t *testing.T) {
	path, size := realState(t)
	// bbolt maps at least 32 KiB and follows the header's page numbers:
	// past a short file's end it reads beyond its mapping (a fault, SIGSEGV
	// or SIGBUS, or whatever memory lies there, which it panics on); cut
	// in half, pages read back as zeros, which it panics on.
	for _, n := range []int64{8192, 3 * 4096, size / 2} {
		p := copyTruncated(t, path, n)
		db, err := openChecked(p, &bolt.Options{Timeout: 1})
		if err == nil {
			db.Close()
			t.Fatalf("a file cut to %d bytes opened", n)
		}
		wantUnusable(t, p, err, false)
		t.Logf("cut to %d: %v", n, err)
	}
}

// TestNotADatabaseIsAClearError: a file of something else, or a database
// with both header pages overwritten.
func TestNotADatabaseIsAClearError(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string][]byte{
		"text":  []byte(strings.Repeat("not a database\n", 2000)),
		"short": []byte("x"),
		"zeros": make([]byte, 64<<10),
	} {
		p := filepath.Join(dir, name+".db")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(p)
		wantUnusable(t, p, err, false)
	}
	path, _ := realState(t)
	b, _ := os.ReadFile(path)
	copy(b[16:32], bytes.Repeat([]byte{0xff}, 16))           // meta 0's magic
	copy(b[4096+16:4096+32], bytes.Repeat([]byte{0xff}, 16)) // meta 1's
	p := filepath.Join(dir, "headers.db")
	os.WriteFile(p, b, 0o600)
	_, err := Open(p)
	wantUnusable(t, p, err, false)
}

// TestLockedDatabaseIsAClearError: a file another holder has open is an
// error that says so and does not tell to move it aside.
func TestLockedDatabaseIsAClearError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = Open(path) // a second open file description: flock conflicts
	wantUnusable(t, path, err, true)
}

type checked struct{ Name string }

func (c *checked) CheckRecord() error {
	if c.Name == "" {
		return errors.New("no Name")
	}
	return nil
}

// TestListQuarantinesDamagedRecords: a record that does not decode, or
// fails its CheckRecord, is moved to the quarantine bucket with an error in
// the log; the others are listed and the listing succeeds.
func TestListQuarantinesDamagedRecords(t *testing.T) {
	var logs bytes.Buffer
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := OpenWith(path, Options{Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Put(AsyncRequests, "a", checked{"a"})
	s.Put(AsyncRequests, "c", checked{"c"})
	s.Put(AsyncRequests, "empty", checked{})
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(AsyncRequests)).Put([]byte("b"), []byte(`{"Name":"b",`)) // cut short
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := List(s, AsyncRequests, func(r checked) error { got = append(got, r.Name); return nil }); err != nil {
		t.Fatalf("List: %v", err)
	}
	if strings.Join(got, ",") != "a,c" {
		t.Errorf("listed %v, want a,c", got)
	}
	var moved []string
	s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(Quarantine)).ForEach(func(k, v []byte) error {
			moved = append(moved, string(k))
			if strings.HasPrefix(string(k), AsyncRequests+"/b/") && string(v) != `{"Name":"b",` {
				t.Errorf("quarantined bytes %q", v)
			}
			return nil
		})
	})
	if len(moved) != 2 || !strings.HasPrefix(moved[0], AsyncRequests+"/b/") || !strings.HasPrefix(moved[1], AsyncRequests+"/empty/") {
		t.Errorf("quarantine holds %v", moved)
	}
	var r checked
	if err := s.Get(AsyncRequests, "b", &r); !errors.Is(err, ErrNotFound) {
		t.Errorf("the damaged record is still in its bucket: %v", err)
	}
	for _, want := range []string{`"level":"error"`, `"name":"b"`, `"name":"empty"`, "quarantine"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
	// Listed again, nothing is left to quarantine and the listing is the same.
	got = nil
	if err := List(s, AsyncRequests, func(r checked) error { got = append(got, r.Name); return nil }); err != nil || len(got) != 2 {
		t.Errorf("second List: %v, %v", got, err)
	}
}
