package artifact

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// stage copies the model folder opened as src into dest, an existing empty
// directory, under the rules [Extract] applies to archives: regular files
// (permissions normalised as [Extract] does), folders, and relative symbolic
// links that resolve inside the folder; sockets, devices, FIFOs and links
// leading out are refused. Sizes, entries, depth and name lengths are bounded
// by lim as for an archive.
//
// The copy, rather than a bind mount of the folder itself, is what makes the
// checks hold: the container sees mce's copy, which nobody else writes, so a
// file swapped for a socket or link after the check cannot reach it. Every
// read goes through src (an [os.Root]), and each file's type is checked
// again on the open file. On error dest may hold part of the copy; the
// caller removes it.
func stage(ctx context.Context, src *os.Root, dest string, lim Limits) error {
	lim = lim.withDefaults()
	lim.SourceBytes = 0 // a copy does not expand
	dst, err := os.OpenRoot(dest)
	if err != nil {
		return fmt.Errorf("opening the staging directory: %w", WithoutPath(err))
	}
	defer dst.Close()
	x := newExtractor(ctx, dst, lim)
	x.prog = newProgress(ctx, "stage", sourceOf(ctx), 0)
	err = fs.WalkDir(src.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("reading the model folder: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		x.entries++
		if x.entries > lim.MaxEntries {
			return &LimitError{What: "number of files and folders", Limit: int64(lim.MaxEntries), Unit: "entries"}
		}
		if _, reason := cleanName(p); reason != "" {
			return unsafeEntry(p, "%s", reason)
		}
		switch t := d.Type(); {
		case t.IsDir():
			return x.mkdir(p)
		case t&fs.ModeSymlink != 0:
			return x.stageLink(src, p)
		case t.IsRegular():
			return x.stageFile(src, p)
		default:
			return unsafeEntry(p, "%s", specialReason(t))
		}
	})
	if err != nil {
		return err
	}
	if x.symlinks {
		if err := x.checkSymlinks(); err != nil {
			return err
		}
	}
	x.prog.done()
	return nil
}

func specialReason(t fs.FileMode) string {
	switch {
	case t&fs.ModeSocket != 0:
		return "sockets are not allowed in model data"
	case t&fs.ModeNamedPipe != 0:
		return "named pipes (FIFOs) are not allowed in model data"
	case t&fs.ModeDevice != 0:
		return "devices are not allowed in model data"
	}
	return "only regular files, folders and symbolic links are allowed in model data"
}

// stageLink copies a symbolic link whose target is relative and stays
// inside the folder; the whole tree's links are resolved once at the end.
func (x *extractor) stageLink(src *os.Root, p string) error {
	target, err := src.Readlink(p)
	if err != nil {
		return fmt.Errorf("reading the model folder: %w", err)
	}
	if reason := checkPathText(target); reason != "" {
		return unsafeEntry(p, "symbolic link target: %s", reason)
	}
	// The messages leave the target out: it may name a host folder.
	if strings.HasPrefix(target, "/") {
		return unsafeEntry(p, "its symbolic link target is absolute; links in model data must be relative")
	}
	if r := path.Join(path.Dir(p), target); r == ".." || strings.HasPrefix(r, "../") {
		return unsafeEntry(p, "its symbolic link leads outside the model folder")
	}
	if err := x.root.Symlink(target, p); err != nil {
		return fmt.Errorf("staging %q: %w", p, WithoutPath(err))
	}
	x.symlinks = true
	return nil
}

// stageFile copies one regular file, checking its type on the open file.
func (x *extractor) stageFile(src *os.Root, p string) error {
	// O_NONBLOCK: a file swapped for a FIFO does not hang the open. A file
	// swapped for a link is followed only inside the folder.
	in, err := src.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("reading the model folder: %w", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return fmt.Errorf("reading the model folder: %w", WithoutPath(err))
	}
	if !fi.Mode().IsRegular() {
		return unsafeEntry(p, "%s", specialReason(fi.Mode().Type()))
	}
	if fi.Size() > x.byteCap-x.written {
		return x.capErr
	}
	out, err := x.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("staging %q: %w", p, WithoutPath(err))
	}
	// The file may grow while it is copied: the byte cap holds regardless.
	_, err = x.copy(out, io.Reader(in))
	if err == nil {
		err = out.Chmod(fileMode(int64(fi.Mode().Perm())))
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("staging %q: %w", p, WithoutPath(err))
	}
	return nil
}
