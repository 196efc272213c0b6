package artifact

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
)

// checkSymlinks resolves every symbolic link of the finished tree. A link
// whose target looked harmless on its own can still escape once other links
// exist (a -> d/l/.. with d/l -> ..), and a later entry can complete such a
// chain, so the check runs once all entries are written.
func (x *extractor) checkSymlinks() error {
	return fs.WalkDir(x.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("checking links: %w", err)
		}
		if err := x.ctx.Err(); err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		return x.checkResolution(p)
	})
}

// checkResolution follows the symbolic link name the way the kernel does,
// with the extraction root standing in for the top of the file system, and
// refuses it when the resolution climbs above the root. A link that does not
// resolve (a missing component, a file used as a directory) cannot lead
// anywhere and is accepted.
func (x *extractor) checkResolution(name string) error {
	var real []string // resolved components, all real directories
	pending := strings.Split(name, "/")
	hops := 0
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(real) == 0 {
				return unsafeEntry(name, "symbolic link resolves outside the extraction root")
			}
			real = real[:len(real)-1]
			continue
		}
		p := strings.Join(append(real[:len(real):len(real)], c), "/")
		fi, err := x.root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("checking symbolic link %s: %w", ShowName(name), err)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			hops++
			if hops > maxLinkHops {
				return unsafeEntry(name, "too many levels of symbolic links")
			}
			target, err := x.root.Readlink(p)
			if err != nil {
				return fmt.Errorf("checking symbolic link %s: %w", ShowName(name), err)
			}
			if strings.HasPrefix(target, "/") {
				return unsafeEntry(name, "symbolic link resolves to the absolute path %s", ShowName(target))
			}
			pending = append(strings.Split(target, "/"), pending...)
		case fi.IsDir():
			real = append(real, c)
		default:
			// A file: the end of the resolution, or a component used as a
			// directory, which does not resolve.
			return nil
		}
	}
	return nil
}
