package artifact

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Sentinel errors. Every error returned by this package that falls in one of
// these classes matches it with [errors.Is].
var (
	// ErrNotFound: the file, S3 object or S3 bucket named by the URL does
	// not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnsupportedURL: the URL is empty, malformed or uses a scheme other
	// than s3:// and file://.
	ErrUnsupportedURL = errors.New("unsupported model data URL")
	// ErrUnsafeArchive: an archive entry was refused; the error chain also
	// holds an [*UnsafeEntryError] naming the entry.
	ErrUnsafeArchive = errors.New("unsafe archive")
	// ErrTooLarge: a size or count limit was exceeded; the error chain also
	// holds a [*LimitError].
	ErrTooLarge = errors.New("too large")
	// ErrInvalidArchive: the data is not a readable tar or gzip-compressed
	// tar archive (corrupt, truncated, empty or another format).
	ErrInvalidArchive = errors.New("not a valid tar or tar.gz archive")
	// ErrOutsideModelRoots: a file:// URL names a path, or a symbolic link
	// leads, outside every model root ([Options.ModelRoots]).
	ErrOutsideModelRoots = errors.New("outside the model roots")
	// ErrNoCredentials: an s3:// URL was given but no AWS credentials were
	// found; the message says where mce looked.
	ErrNoCredentials = errors.New("no AWS credentials found")
)

// UnsafeEntryError reports an archive entry that [Extract] refused. It
// matches [ErrUnsafeArchive].
type UnsafeEntryError struct {
	// Name is the entry's name as written in the archive.
	Name string
	// Reason says why it was refused, in words meant for users.
	Reason string
}

func (e *UnsafeEntryError) Error() string {
	return UnsafeEntryPrefix + ShowName(e.Name) + ": " + e.Reason
}

// UnsafeEntryPrefix starts an [*UnsafeEntryError]'s message; the entry's
// name, as [ShowName] renders it, follows.
const UnsafeEntryPrefix = "unsafe archive entry "

// maxShownName is how many bytes of an archive name an error message shows.
const maxShownName = 200

// ShowName renders a name taken from an archive (an entry name or a link
// target) for an error message a user reads: double-quoted with Go's
// escapes, so control characters, quotes and invalid UTF-8 appear as
// escapes, and cut after [maxShownName] bytes with the full length said.
// Archive names are the archive author's text, never a host path.
func ShowName(name string) string {
	if len(name) <= maxShownName {
		return strconv.Quote(name)
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(name[:maxShownName]), len(name))
}

// Is reports whether target is [ErrUnsafeArchive].
func (e *UnsafeEntryError) Is(target error) bool { return target == ErrUnsafeArchive }

// LimitError reports an exceeded limit. It matches [ErrTooLarge].
type LimitError struct {
	// What was limited, e.g. "extracted file content" or "number of archive entries".
	What string
	// Limit is the configured maximum.
	Limit int64
	// Unit of Limit: "bytes", "entries", "levels" or ":1".
	Unit string
	// Flag is the mce serve flag that sets the limit; empty when fixed.
	Flag string
}

func (e *LimitError) Error() string {
	unit := " " + e.Unit
	if strings.HasPrefix(e.Unit, ":") {
		unit = e.Unit
	}
	if e.Flag == "" {
		return fmt.Sprintf("too large: %s exceeds the limit of %d%s", e.What, e.Limit, unit)
	}
	return fmt.Sprintf("too large: %s exceeds the limit of %d%s (set with %s)", e.What, e.Limit, unit, e.Flag)
}

// Is reports whether target is [ErrTooLarge].
func (e *LimitError) Is(target error) bool { return target == ErrTooLarge }

func unsafeEntry(name, format string, args ...any) error {
	return &UnsafeEntryError{Name: name, Reason: fmt.Sprintf(format, args...)}
}
