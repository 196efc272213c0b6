package artifact

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Defaults and fixed bounds of extraction.
const (
	// DefaultMaxExtractedBytes is the default cap on the regular-file bytes
	// one artifact may extract or stage (16 GiB): a 7-billion-parameter
	// model in 16-bit floats (~14 GB) fits, and one artifact cannot fill a
	// typical disk. Larger models raise it with [MaxBytesFlag].
	DefaultMaxExtractedBytes int64 = 16 << 30
	// DefaultMaxRatio is the default cap on how many times its own size an
	// archive may expand to, once past [RatioFloorBytes]. Weights compress
	// 1–3:1 and text (tokenizers, configs) below 20:1, while deflate alone
	// reaches ~1032:1 on zeros and sparse entries reach any ratio; 100:1
	// keeps a wide margin over real models and stops both.
	DefaultMaxRatio = 100
	// RatioFloorBytes is what any archive may extract whatever its ratio,
	// so that small, very regular test models are never refused.
	RatioFloorBytes int64 = 64 << 20
	// DefaultMaxEntries is the default cap on the number of entries in one
	// archive.
	DefaultMaxEntries = 100_000
	// MaxNameLength is the longest entry name or link target accepted, in
	// bytes (Linux's PATH_MAX).
	MaxNameLength = 4096
	// MaxComponentLength is the longest component of a name, in bytes
	// (Linux's NAME_MAX).
	MaxComponentLength = 255
	// MaxDepth is the most components a name may have. It also bounds the
	// work done per entry, which checks each parent folder.
	MaxDepth = 64

	// MaxBytesFlag and MaxRatioFlag are the mce serve flags that set
	// [Limits.MaxBytes] and [Limits.MaxRatio]; limit errors name them.
	MaxBytesFlag = "--max-artifact-bytes"
	MaxRatioFlag = "--max-artifact-ratio"

	// maxTrailingBytes bounds the data read after the tar end-of-archive
	// marker of a gzip stream (read so that the gzip checksum is verified).
	maxTrailingBytes = 1 << 20
	// streamOverheadPerEntry is the decompressed-stream allowance per
	// permitted entry on top of the file bytes (headers, PAX records,
	// padding), so that a stream of headers alone cannot run unbounded.
	streamOverheadPerEntry = 16 << 10
	copyBufferSize         = 256 << 10
	// dirCacheBytes bounds the memory spent remembering verified directories.
	dirCacheBytes = 4 << 20
	// maxLinkHops is the number of symbolic links followed while checking
	// one link's resolution (the kernel's limit is 40 as well).
	maxLinkHops = 40
)

// Limits bound what [Extract] accepts. A zero or negative field takes its
// default.
type Limits struct {
	// MaxBytes caps the total size of regular files written; sparse entries
	// count at their logical size. An entry whose declared size would cross
	// it is refused before any of it is written.
	// Default [DefaultMaxExtractedBytes].
	MaxBytes int64
	// MaxEntries caps the number of archive entries of any kind.
	// Default [DefaultMaxEntries].
	MaxEntries int
	// MaxRatio caps the regular-file bytes written per byte of archive read,
	// once more than [RatioFloorBytes] are written. Default [DefaultMaxRatio].
	MaxRatio int64
	// SourceBytes is the size of the whole archive when known (a file, an
	// S3 object); with it the ratio becomes a byte cap checked before an
	// entry is written. Zero means unknown: the ratio is then checked
	// against the bytes read so far.
	SourceBytes int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxExtractedBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxRatio <= 0 {
		l.MaxRatio = DefaultMaxRatio
	}
	return l
}

// byteCap is the most regular-file bytes the archive may write and the
// error that crossing it gives: MaxBytes, or less when the archive's size
// is known and the ratio allows less.
func (l Limits) byteCap() (int64, *LimitError) {
	limit, lerr := l.MaxBytes, &LimitError{What: "extracted file content", Limit: l.MaxBytes, Unit: "bytes", Flag: MaxBytesFlag}
	if l.SourceBytes > 0 {
		r := RatioFloorBytes
		if l.SourceBytes <= (1<<62)/l.MaxRatio {
			r = max(r, l.SourceBytes*l.MaxRatio)
		} else {
			r = 1 << 62
		}
		if r < limit {
			limit, lerr = r, ratioError(l.MaxRatio)
		}
	}
	return limit, lerr
}

func ratioError(ratio int64) *LimitError {
	return &LimitError{What: fmt.Sprintf("expansion of the archive (past its first %d MiB)", RatioFloorBytes>>20),
		Limit: ratio, Unit: ":1", Flag: MaxRatioFlag}
}

// streamLimit is the most decompressed bytes an archive within l can need.
func (l Limits) streamLimit() int64 {
	const maxInt64 = 1<<63 - 1
	overhead := int64(l.MaxEntries)*streamOverheadPerEntry + maxTrailingBytes
	if l.MaxBytes > maxInt64-overhead {
		return maxInt64
	}
	return l.MaxBytes + overhead
}

// Extract unpacks a tar archive, optionally gzip-compressed (detected by the
// gzip magic bytes, not by a file name), from r into dest, which must be an
// existing directory, normally empty. It is the single-model path
// (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html):
// the result is mounted read-only at /opt/ml/model for a container running as
// any user.
//
// Rules:
//   - Names are at most [MaxNameLength] bytes, at most [MaxDepth]
//     components of at most [MaxComponentLength] bytes, without NUL and
//     without any ".." component; "." components and repeated slashes are
//     ignored, so "./a//b" is "a/b" and "./" is the root itself. Leading
//     slashes are stripped, as GNU tar and Python's tarfile data filter do
//     when extracting: "/" is the root itself (the SageMaker Python SDK's
//     repack_model writes it as its first entry, with tarfile's
//     add(model_dir, arcname="/")) and "/a/b" is "a/b". The same holds for
//     hard-link targets; symbolic-link targets must still be relative.
//   - Directories are created as needed with mode 0755. Regular files get
//     their archive permission bits without setuid, setgid and sticky, raised
//     to at least 0644 (0755 when any execute bit is set). Owners and times
//     are not restored.
//   - Symbolic links must have a relative target that, resolved from the
//     link's own folder against the final tree, stays inside dest; dangling
//     links that stay inside are kept. Hard links must name a regular file
//     extracted earlier (tar hard-link targets are archive paths).
//   - No entry is ever written through a link: an entry whose parent path
//     contains a symbolic link is refused, and all file operations go through
//     an [os.Root] opened on dest.
//   - Character and block devices, FIFOs and every other special type are
//     refused; PAX global headers are skipped.
//   - Duplicate names: a later file or link replaces an earlier file or link
//     (last one wins); a directory entry over an existing directory is a
//     no-op; a directory and a non-directory of the same name are refused.
//   - After a gzip stream's end-of-archive marker at most 1 MiB more is read
//     so that the gzip checksum is verified; more is an invalid archive.
//
// Refused entries give an [*UnsafeEntryError] ([ErrUnsafeArchive]); exceeded
// limits a [*LimitError] ([ErrTooLarge]); unreadable data [ErrInvalidArchive];
// a failing r its own error; a done ctx ctx.Err(). On error dest may hold
// part of the archive, including a link refused by the final resolution
// check; the caller must remove it ([Fetcher.Prepare] does).
func Extract(ctx context.Context, r io.Reader, dest string, lim Limits) error {
	lim = lim.withDefaults()
	root, err := os.OpenRoot(dest)
	if err != nil {
		return fmt.Errorf("opening extraction directory: %w", err)
	}
	defer root.Close()

	src := &sourceReader{ctx: ctx, r: r}
	stream := &capReader{left: lim.streamLimit(), limit: lim.streamLimit()}
	x := newExtractor(ctx, root, lim)
	x.src = src
	x.prog = newProgress(ctx, "extract", sourceOf(ctx), 0)
	err = x.extract(src, stream)
	if err == nil {
		x.prog.done()
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("extraction stopped: %w", cerr)
	}
	if src.err != nil {
		return fmt.Errorf("reading archive: %w", src.err)
	}
	if stream.hit {
		return &LimitError{What: "decompressed archive stream", Limit: stream.limit, Unit: "bytes"}
	}
	return err
}

// extractor holds the state of one Extract (or stage) call; it is not
// shared.
type extractor struct {
	ctx      context.Context
	root     *os.Root
	lim      Limits
	byteCap  int64
	capErr   *LimitError
	src      *sourceReader // nil when staging a folder
	prog     *progress     // nil when nobody is told
	entries  int
	written  int64
	symlinks bool
	buf      []byte
	// dirs holds paths known to be real directories (never links) inside
	// root; bounded by dirCacheBytes.
	dirs      map[string]struct{}
	dirsBytes int
}

func newExtractor(ctx context.Context, root *os.Root, lim Limits) *extractor {
	x := &extractor{ctx: ctx, root: root, lim: lim, dirs: make(map[string]struct{})}
	x.byteCap, x.capErr = lim.byteCap()
	return x
}

func (x *extractor) extract(src io.Reader, stream *capReader) error {
	br := bufio.NewReaderSize(src, 64<<10)
	magic, err := br.Peek(2)
	if len(magic) == 0 {
		if err == nil || errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: the input is empty", ErrInvalidArchive)
		}
		return err
	}
	var gz *gzip.Reader
	stream.r = br
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err = gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidArchive, err)
		}
		stream.r = gz
	}
	x.buf = make([]byte, copyBufferSize)
	if err := x.entriesFrom(tar.NewReader(stream)); err != nil {
		return err
	}
	if gz != nil {
		n, err := io.Copy(io.Discard, io.LimitReader(stream, maxTrailingBytes+1))
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidArchive, err)
		}
		if n > maxTrailingBytes {
			return fmt.Errorf("%w: more than %d bytes follow the end of the tar archive", ErrInvalidArchive, maxTrailingBytes)
		}
	}
	if x.symlinks {
		return x.checkSymlinks()
	}
	return nil
}

func (x *extractor) entriesFrom(tr *tar.Reader) error {
	for {
		if err := x.ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidArchive, err)
		}
		x.entries++
		if x.entries > x.lim.MaxEntries {
			return &LimitError{What: "number of archive entries", Limit: int64(x.lim.MaxEntries), Unit: "entries"}
		}
		if err := x.entry(tr, hdr); err != nil {
			return err
		}
	}
}

func (x *extractor) entry(tr *tar.Reader, hdr *tar.Header) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil // archive-wide PAX metadata (git archive writes one), no file
	}
	name, reason := cleanName(hdr.Name)
	if reason != "" {
		return unsafeEntry(hdr.Name, "%s", reason)
	}
	if hdr.Typeflag == tar.TypeDir {
		return x.dir(hdr.Name, name)
	}
	if name == "" {
		return unsafeEntry(hdr.Name, "a non-directory entry cannot name the extraction root")
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeGNUSparse:
		return x.file(tr, hdr, name)
	case tar.TypeSymlink:
		return x.symlink(hdr, name)
	case tar.TypeLink:
		return x.hardlink(hdr, name)
	case tar.TypeChar:
		return unsafeEntry(hdr.Name, "character devices are not allowed")
	case tar.TypeBlock:
		return unsafeEntry(hdr.Name, "block devices are not allowed")
	case tar.TypeFifo:
		return unsafeEntry(hdr.Name, "named pipes (FIFOs) are not allowed")
	default:
		return unsafeEntry(hdr.Name, "entry type %q is not allowed", hdr.Typeflag)
	}
}

// cleanName validates an archive name and returns it in clean relative form
// ("" for the root), or a reason for refusing it.
func cleanName(name string) (clean, reason string) {
	if reason := checkPathText(name); reason != "" {
		return "", reason
	}
	// Leading slashes fall away with the empty components below: "/" is the
	// root, "/a" is "a", as GNU tar extracts them.
	parts := strings.Split(name, "/")
	kept := parts[:0]
	for _, p := range parts {
		switch p {
		case "", ".":
		case "..":
			return "", `".." path components are not allowed`
		default:
			if len(p) > MaxComponentLength {
				return "", fmt.Sprintf("name components longer than %d bytes are not allowed", MaxComponentLength)
			}
			kept = append(kept, p)
		}
	}
	if len(kept) > MaxDepth {
		return "", fmt.Sprintf("names deeper than %d levels are not allowed", MaxDepth)
	}
	return strings.Join(kept, "/"), ""
}

// checkPathText applies the checks shared by names and link targets.
func checkPathText(s string) string {
	switch {
	case s == "":
		return "empty names are not allowed"
	case len(s) > MaxNameLength:
		return fmt.Sprintf("names longer than %d bytes are not allowed", MaxNameLength)
	case strings.IndexByte(s, 0) >= 0:
		return "names containing NUL bytes are not allowed"
	}
	return ""
}

func (x *extractor) dir(orig, name string) error {
	if name == "" {
		return nil // "./": the root itself
	}
	if err := x.ensureDir(orig, path.Dir(name)); err != nil {
		return err
	}
	fi, err := x.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := x.mkdir(name); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("extracting %s: %w", ShowName(orig), err)
	case !fi.IsDir():
		return unsafeEntry(orig, "a directory entry conflicts with an earlier non-directory entry of the same name")
	}
	x.rememberDir(name)
	return nil
}

func (x *extractor) file(tr *tar.Reader, hdr *tar.Header, name string) error {
	if hdr.Size < 0 || hdr.Size > x.byteCap-x.written {
		return x.capErr
	}
	if err := x.prepareTarget(hdr.Name, name); err != nil {
		return err
	}
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("extracting %s: %w", ShowName(hdr.Name), err)
	}
	n, err := x.copy(f, tr)
	if err == nil && n != hdr.Size {
		err = fmt.Errorf("%w: entry %s holds %d bytes, its header says %d", ErrInvalidArchive, ShowName(hdr.Name), n, hdr.Size)
	}
	if err == nil {
		err = f.Chmod(fileMode(hdr.Mode))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("extracting %s: %w", ShowName(hdr.Name), err)
	}
	return nil
}

// copy streams one entry's content, telling archive errors from disk
// errors, and counts it into x.written. When the archive's size is unknown
// the expansion ratio is checked against the bytes read so far.
func (x *extractor) copy(f *os.File, r io.Reader) (int64, error) {
	if x.buf == nil {
		x.buf = make([]byte, copyBufferSize)
	}
	var n int64
	for {
		nr, rerr := r.Read(x.buf)
		if nr > 0 {
			if int64(nr) > x.byteCap-x.written {
				return n, x.capErr
			}
			nw, werr := f.Write(x.buf[:nr])
			n += int64(nw)
			x.written += int64(nw)
			x.prog.add(int64(nw), 0)
			if werr != nil {
				return n, werr
			}
			if x.src != nil && x.lim.SourceBytes == 0 && x.written > RatioFloorBytes &&
				x.written/x.lim.MaxRatio > x.src.n {
				return n, ratioError(x.lim.MaxRatio)
			}
		}
		if errors.Is(rerr, io.EOF) {
			x.prog.add(0, 1)
			return n, nil
		}
		if rerr != nil {
			if x.src == nil { // staging a folder: a read error, not a bad archive
				return n, WithoutPath(rerr)
			}
			return n, fmt.Errorf("%w: %w", ErrInvalidArchive, rerr)
		}
	}
}

// fileMode keeps the permission bits of an archive mode, drops setuid,
// setgid and sticky, and makes the file readable (and, when executable for
// anyone, executable) by every user.
func fileMode(mode int64) fs.FileMode {
	perm := fs.FileMode(mode) & fs.ModePerm
	perm |= 0o644
	if perm&0o111 != 0 {
		perm |= 0o111
	}
	return perm
}

func (x *extractor) symlink(hdr *tar.Header, name string) error {
	target := hdr.Linkname
	if reason := checkPathText(target); reason != "" {
		return unsafeEntry(hdr.Name, "symbolic link target: %s", reason)
	}
	if strings.HasPrefix(target, "/") {
		return unsafeEntry(hdr.Name, "symbolic link target %s is absolute", ShowName(target))
	}
	if r := path.Join(path.Dir(name), target); r == ".." || strings.HasPrefix(r, "../") {
		return unsafeEntry(hdr.Name, "symbolic link target %s leads outside the extraction root", ShowName(target))
	}
	if err := x.prepareTarget(hdr.Name, name); err != nil {
		return err
	}
	if err := x.root.Symlink(target, name); err != nil {
		return fmt.Errorf("extracting %s: %w", ShowName(hdr.Name), err)
	}
	x.symlinks = true
	return nil
}

func (x *extractor) hardlink(hdr *tar.Header, name string) error {
	target, reason := cleanName(hdr.Linkname)
	if reason != "" {
		return unsafeEntry(hdr.Name, "hard link target %s: %s", ShowName(hdr.Linkname), reason)
	}
	if target == "" || target == name {
		return unsafeEntry(hdr.Name, "hard link target %s is not another file", ShowName(hdr.Linkname))
	}
	notEarlier := unsafeEntry(hdr.Name, "hard link target %s is not a regular file extracted earlier", ShowName(hdr.Linkname))
	if err := x.checkDirChain(hdr.Name, path.Dir(target), false); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return notEarlier
		}
		return err
	}
	fi, err := x.root.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.Mode().IsRegular()) {
		return notEarlier
	}
	if err != nil {
		return fmt.Errorf("extracting %s: %w", ShowName(hdr.Name), err)
	}
	if err := x.prepareTarget(hdr.Name, name); err != nil {
		return err
	}
	if err := x.root.Link(target, name); err != nil {
		return fmt.Errorf("extracting %s: %w", ShowName(hdr.Name), err)
	}
	return nil
}

// prepareTarget makes name's parent directories and removes an earlier file
// or link of the same name (last one wins), refusing to replace a directory.
func (x *extractor) prepareTarget(orig, name string) error {
	if err := x.ensureDir(orig, path.Dir(name)); err != nil {
		return err
	}
	fi, err := x.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("extracting %s: %w", ShowName(orig), err)
	case fi.IsDir():
		return unsafeEntry(orig, "a non-directory entry would replace an earlier directory of the same name")
	}
	if err := x.root.Remove(name); err != nil {
		return fmt.Errorf("extracting %s: replacing the earlier entry: %w", ShowName(orig), err)
	}
	return nil
}

// ensureDir makes sure every component of dir is a real directory, creating
// missing ones.
func (x *extractor) ensureDir(orig, dir string) error {
	return x.checkDirChain(orig, dir, true)
}

// checkDirChain walks dir's components; each must be a directory and never
// a symbolic link. Missing ones are created when create is set, otherwise an
// error matching fs.ErrNotExist is returned.
func (x *extractor) checkDirChain(orig, dir string, create bool) error {
	if dir == "." || dir == "" {
		return nil
	}
	if _, ok := x.dirs[dir]; ok {
		return nil
	}
	for i := 0; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		p := dir[:i]
		if _, ok := x.dirs[p]; ok {
			continue
		}
		fi, err := x.root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist) && create:
			if err := x.mkdir(p); err != nil {
				return fmt.Errorf("extracting %s: %w", ShowName(orig), err)
			}
		case err != nil:
			return fmt.Errorf("extracting %s: %w", ShowName(orig), err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return unsafeEntry(orig, "its path passes through the symbolic link %s; links are not followed while extracting", ShowName(p))
		case !fi.IsDir():
			return unsafeEntry(orig, "its parent %s is not a directory", ShowName(p))
		}
		x.rememberDir(p)
	}
	return nil
}

func (x *extractor) mkdir(name string) error {
	if err := x.root.Mkdir(name, 0o755); err != nil {
		return err
	}
	// Mkdir's mode is filtered by the umask; containers running as any user
	// must be able to traverse the tree.
	return x.root.Chmod(name, 0o755)
}

func (x *extractor) rememberDir(p string) {
	if _, ok := x.dirs[p]; ok {
		return
	}
	if x.dirsBytes+len(p) > dirCacheBytes {
		clear(x.dirs)
		x.dirsBytes = 0
	}
	x.dirs[p] = struct{}{}
	x.dirsBytes += len(p)
}

// sourceReader records the first failure of the caller's reader (or of ctx),
// so that Extract can report it instead of a tar or gzip error.
type sourceReader struct {
	ctx context.Context
	r   io.Reader
	err error
	n   int64 // bytes read
}

func (s *sourceReader) Read(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		s.err = err
		return 0, err
	}
	n, err := s.r.Read(p)
	s.n += int64(n)
	if err != nil && !errors.Is(err, io.EOF) && s.err == nil {
		s.err = err
	}
	return n, err
}

// capReader caps the decompressed archive stream.
type capReader struct {
	r     io.Reader
	left  int64
	limit int64
	hit   bool
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// At the cap: only the end of the stream is still acceptable.
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n == 0 {
			return 0, err
		}
		c.hit = true
		return 0, &LimitError{What: "decompressed archive stream", Limit: c.limit, Unit: "bytes"}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
