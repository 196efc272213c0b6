// Package atomicfile writes a state file so that a crash leaves the old
// content or the new, never a mix: a temporary file in the same folder,
// written, fsynced, renamed over the old one, and the folder fsynced.
//
// A write cut short leaves its temporary file behind, named with
// TempPrefix; a loader that reads the folder removes those (IsTemp).
// Written here rather than taken from a library (renameio does the same)
// because the loaders need to know the temporary files' names to clear
// them at start.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TempPrefix starts the name of every temporary file Write makes.
const TempPrefix = ".tmp-"

// IsTemp reports whether a file's name is one of Write's temporary files:
// a write that did not finish.
func IsTemp(name string) bool { return strings.HasPrefix(name, TempPrefix) }

// Replace writes b to path atomically (Write), or with gone removes path
// (a path already gone is no error): how a store keeps one file per record
// in step with the record.
func Replace(path string, b []byte, gone bool) error {
	if !gone {
		return Write(path, b)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Write replaces path with b atomically (see the package comment).
func Write(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), TempPrefix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	// The rename is durable once the folder is.
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
