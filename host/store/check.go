package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// UnusableError says that the state database file cannot be used: it is
// truncated, damaged, not a database, or held by another process. Its
// message names the file and the way out.
type UnusableError struct {
	// Path is the database file.
	Path string
	// Reason says what is wrong, in words.
	Reason string
	// Locked is true when another process holds the file: moving it aside
	// is then not the fix.
	Locked bool
	// Err is the underlying error, if any.
	Err error
}

func (e *UnusableError) Error() string {
	if e.Locked {
		return fmt.Sprintf("state database %s: %s; stop the other mce that uses it, or start this one with its own state folder", e.Path, e.Reason)
	}
	return fmt.Sprintf("state database %s is unusable: %s. Move it aside (mv %s %s.broken) and start mce again: "+
		"it starts with an empty state (the models, endpoint configs and endpoints the file held must be created again)",
		e.Path, e.Reason, e.Path, e.Path)
}

func (e *UnusableError) Unwrap() error { return e.Err }

// bbolt's file format (go.etcd.io/bbolt/internal/common): every page starts
// with a 16-byte header; pages 0 and 1 are meta pages holding, after it, the
// magic, version and page size (uint32 each), the flags, the root bucket
// (16 bytes), the freelist page, the high-water mark (pgid: pages in use),
// the transaction id (uint64 each) and an FNV-64a checksum of the fields
// before it. Integers are in the machine's byte order, little-endian on
// every platform mce is built for.
const (
	boltPageHeader  = 16
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	boltMetaSummed  = 56 // bytes of meta before the checksum
	boltMetaPgidOff = 40 // offset of pgid in meta
	boltMetaTxidOff = 48
)

type boltMeta struct {
	pageSize   uint32
	pgid, txid uint64
}

// readMeta decodes the meta page at off; ok is false when it is not a
// valid one (wrong magic, version or checksum, or cut short).
func readMeta(f io.ReaderAt, off int64) (boltMeta, bool) {
	var buf [boltPageHeader + boltMetaSummed + 8]byte
	if n, _ := f.ReadAt(buf[:], off); n != len(buf) {
		return boltMeta{}, false
	}
	m := buf[boltPageHeader:]
	le := binary.LittleEndian
	if le.Uint32(m[0:]) != boltMagic || le.Uint32(m[4:]) != boltVersion {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	h.Write(m[:boltMetaSummed])
	if h.Sum64() != le.Uint64(m[boltMetaSummed:]) {
		return boltMeta{}, false
	}
	return boltMeta{pageSize: le.Uint32(m[8:]), pgid: le.Uint64(m[boltMetaPgidOff:]), txid: le.Uint64(m[boltMetaTxidOff:])}, true
}

// precheck reads the database's meta pages as bbolt does, before bbolt maps
// the file: a file shorter than the pages its meta says are in use would
// make bbolt read past its end, which the kernel answers with SIGBUS (a
// crash, not an error). A missing or empty file is fine: Open creates it.
func precheck(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &UnusableError{Path: path, Reason: "it cannot be read: " + err.Error(), Err: err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return &UnusableError{Path: path, Reason: "it cannot be read: " + err.Error(), Err: err}
	}
	size := fi.Size()
	if !fi.Mode().IsRegular() {
		return &UnusableError{Path: path, Reason: "it is not a regular file"}
	}
	if size == 0 {
		return nil
	}
	// The newest valid meta page wins, as in bbolt; page 1 lies one page
	// size in, and the page size is in page 0 (or, page 0 being damaged,
	// found by trying the sizes bbolt allows).
	best, ok := readMeta(f, 0)
	if ok {
		if m1, ok1 := readMeta(f, int64(best.pageSize)); ok1 && m1.txid > best.txid {
			best = m1
		}
	} else {
		for ps := int64(1 << 10); ps <= 16<<20 && ps < size; ps <<= 1 {
			if m1, ok1 := readMeta(f, ps); ok1 && int64(m1.pageSize) == ps {
				best, ok = m1, true
				break
			}
		}
	}
	if !ok {
		if size < 2*4096 {
			return &UnusableError{Path: path, Reason: fmt.Sprintf("it is %d bytes long, shorter than a database's two header pages, and its headers are damaged (truncated?)", size), Err: berrors.ErrInvalid}
		}
		return &UnusableError{Path: path, Reason: "it is not a bbolt database, or both of its header pages are damaged", Err: berrors.ErrInvalid}
	}
	if best.pageSize < 512 || best.pageSize > 16<<20 {
		return &UnusableError{Path: path, Reason: fmt.Sprintf("its header gives an impossible page size (%d)", best.pageSize), Err: berrors.ErrInvalid}
	}
	if want := int64(best.pgid) * int64(best.pageSize); size < want {
		return &UnusableError{Path: path, Reason: fmt.Sprintf("it is truncated: %d bytes, but its header counts %d pages of %d bytes (%d bytes)",
			size, best.pgid, best.pageSize, want)}
	}
	return nil
}

// openChecked opens the database and reads every page of it once, so that
// damage shows now, as an error, rather than as a crash in the middle of a
// request: bbolt panics on pages it cannot make sense of, and the kernel's
// SIGBUS on a read past the file's end becomes a panic here too
// (debug.SetPanicOnFault, for this goroutine).
func openChecked(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if v := recover(); v != nil {
			if db != nil {
				db.Close()
			}
			db, err = nil, &UnusableError{Path: path, Reason: fmt.Sprintf("it is damaged (%v)", v)}
		}
	}()
	start := time.Now()
	db, err = bolt.Open(path, 0o600, opts)
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, &UnusableError{Path: path, Locked: true, Err: err,
			Reason: fmt.Sprintf("another process holds it (waited %s for its lock)", time.Since(start).Round(time.Millisecond))}
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrChecksum):
		return nil, &UnusableError{Path: path, Reason: "it is not a bbolt database of this version, or its headers are damaged (" + err.Error() + ")", Err: err}
	case err != nil:
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	crc := crc32.NewIEEE()
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return walk(b, crc)
		})
	})
	if err != nil {
		db.Close()
		return nil, &UnusableError{Path: path, Reason: "reading it failed (" + err.Error() + ")", Err: err}
	}
	return db, nil
}

// walk reads every key and value of b and of its nested buckets.
func walk(b *bolt.Bucket, sum io.Writer) error {
	return b.ForEach(func(k, v []byte) error {
		sum.Write(k)
		if v == nil {
			if nb := b.Bucket(k); nb != nil {
				return walk(nb, sum)
			}
			return nil
		}
		sum.Write(v)
		return nil
	})
}
