package artifact

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// ModelRootFlag is the mce serve flag that names extra model roots; errors
// about file:// paths name it.
const ModelRootFlag = "--model-root"

// modelRoot is one folder that file:// model data may come from, as given
// (absolute, cleaned) and with its symbolic links resolved.
type modelRoot struct {
	given, real string
}

// systemFolders can never be model roots nor lie inside one: they hold the
// engine's socket, devices, kernel interfaces and host configuration.
func systemFolders() []string {
	return []string{"/proc", "/sys", "/dev", "/etc", "/var/run", "/run", "/boot", "/usr", "/bin", "/sbin", "/lib"}
}

// within reports whether p is base or lies below it, both absolute and
// clean, and returns p relative to base ("." for base itself).
func within(p, base string) (string, bool) {
	if p == base {
		return ".", true
	}
	if base == "/" {
		return strings.TrimPrefix(p, "/"), true
	}
	rest, ok := strings.CutPrefix(p, base+"/")
	return rest, ok
}

// isSystemFolder reports whether p (absolute, clean) is "/" or a system
// folder, lies inside one or holds one. Every top-level folder named lib* counts
// (/lib, /lib32, /lib64, /libx32).
func isSystemFolder(p string) bool {
	if p == "/" {
		return true
	}
	top, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if strings.HasPrefix(top, "lib") {
		return true
	}
	for _, s := range systemFolders() {
		if _, ok := within(p, s); ok {
			return true
		}
		if _, ok := within(s, p); ok {
			return true // p holds a system folder, as /var holds /var/run
		}
	}
	return false
}

// SystemFolder reports whether p (absolute) is "/", a system folder, lies
// inside one or holds one: never a place for model data, on this machine or
// (for the kubernetes engine's volumes) a node or a pod.
func SystemFolder(p string) bool { return isSystemFolder(filepath.Clean(p)) }

// newModelRoot checks one operator-named folder and resolves it.
func newModelRoot(dir string) (modelRoot, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return modelRoot{}, fmt.Errorf("model root %q: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return modelRoot{}, fmt.Errorf("model root %q: %w", dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return modelRoot{}, fmt.Errorf("model root %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return modelRoot{}, fmt.Errorf("model root %q is not a folder", dir)
	}
	if isSystemFolder(abs) || isSystemFolder(real) {
		return modelRoot{}, fmt.Errorf("model root %q: / and the system folders (/proc, /sys, /dev, /etc, /run, /var/run, /boot, /usr, /bin, /sbin, /lib*) can never hold model data", dir)
	}
	return modelRoot{given: abs, real: real}, nil
}

// ValidModelRoot reports whether dir may be a model root: an existing
// folder that is not "/", a system folder, inside one or holding one.
func ValidModelRoot(dir string) error {
	_, err := newModelRoot(dir)
	return err
}

// newModelRoots checks and resolves every root, dropping duplicates.
func newModelRoots(dirs []string) ([]modelRoot, error) {
	var roots []modelRoot
	seen := map[string]bool{}
	for _, d := range dirs {
		r, err := newModelRoot(d)
		if err != nil {
			return nil, err
		}
		if !seen[r.real] {
			seen[r.real] = true
			roots = append(roots, r)
		}
	}
	return roots, nil
}

// outsideRoots is the error for a file:// URL that leads outside every root.
// It names only what the caller sent.
func outsideRoots(modelDataURL string) error {
	return fmt.Errorf("model data %q is %w; mce reads file:// model data only from the folders of its -f endpoint files and from folders named with %s",
		modelDataURL, ErrOutsideModelRoots, ModelRootFlag)
}

// exampleBuilds are the folders of mce's own example models, as the
// repository's endpoint files name them, and the command that builds them
// (Makefile, scripts/): the first that a path lies in.
var exampleBuilds = []struct{ folder, command string }{
	{"build/models/framework/", "make framework-models"},
	{"build/models/mme-torch/", "make framework-models"},
	{"build/mme-models/", "scripts/mme-models.sh"},
	{"build/models/", "make models"},
}

// ExampleBuild returns the command that builds the file:// model data of
// modelDataURL when its path is where one of mce's own example models
// lives (build/models/…, build/mme-models/…), "" otherwise.
func ExampleBuild(modelDataURL string) string {
	p, ok := strings.CutPrefix(modelDataURL, "file://")
	if !ok || p == "" {
		return ""
	}
	p = "/" + filepath.ToSlash(filepath.Clean(p)) + "/"
	for _, e := range exampleBuilds {
		if strings.Contains(p, "/"+e.folder) {
			return e.command
		}
	}
	return ""
}

// fileNotFound is the error for file:// data that does not exist (inside
// the roots, or named by the operator's files): it names only the URL, and
// the command that builds it when it is one of mce's example models.
func fileNotFound(modelDataURL string) error {
	msg := "no such file or folder"
	if c := ExampleBuild(modelDataURL); c != "" {
		msg += " (one of mce's example models, which `" + c + "` builds)"
	}
	return fmt.Errorf("%w: %s", ErrNotFound, msg)
}

// modelRoots is the roots now.
func (f *Fetcher) modelRoots() []modelRoot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.roots
}

// locate finds the model root holding the path of a file:// URL and the
// path relative to it. Symbolic links on the way are resolved, and must
// stay inside the root; the files are later opened through an [os.Root] on
// that root, which enforces the same confinement against races.
//
// A path outside every root is [ErrOutsideModelRoots] whether it exists or
// not (an API caller learns nothing of the files there), except at or
// under a path the operator's files named (Options.NamedData): missing, it
// is [ErrNotFound]; there now, its folder becomes a root.
func (f *Fetcher) locate(modelDataURL, p string) (root modelRoot, rel string, err error) {
	p = filepath.Clean(p)
	r, rel, err := f.locateIn(f.modelRoots(), modelDataURL, p)
	if !errors.Is(err, ErrOutsideModelRoots) {
		return r, rel, err
	}
	for _, n := range f.named {
		if _, ok := within(p, n); !ok {
			continue
		}
		fi, serr := os.Stat(n)
		if errors.Is(serr, fs.ErrNotExist) || errors.Is(serr, syscall.ENOTDIR) {
			return modelRoot{}, "", fileNotFound(modelDataURL)
		}
		if serr != nil {
			break
		}
		dir := n
		if !fi.IsDir() {
			dir = filepath.Dir(n)
		}
		mr, rerr := newModelRoot(dir)
		if rerr != nil {
			break // a system folder, or gone again: never a root
		}
		f.mu.Lock()
		if !slices.ContainsFunc(f.roots, func(x modelRoot) bool { return x.real == mr.real }) {
			f.roots = append(slices.Clip(f.roots), mr)
		}
		f.mu.Unlock()
		return f.locateIn([]modelRoot{mr}, modelDataURL, p)
	}
	return modelRoot{}, "", err
}

// locateIn is locate among roots.
func (f *Fetcher) locateIn(roots []modelRoot, modelDataURL, p string) (root modelRoot, rel string, err error) {
	for _, r := range roots {
		rel, ok := within(p, r.given)
		if !ok {
			rel, ok = within(p, r.real)
		}
		if !ok {
			continue
		}
		real, err := filepath.EvalSymlinks(filepath.Join(r.real, rel))
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.ENOTDIR):
			// Missing: os.Root reports it below, or finds a link escaping.
		case err != nil:
			return modelRoot{}, "", fmt.Errorf("model data %q cannot be read: %w", modelDataURL, WithoutPath(err))
		default:
			if _, ok := within(real, r.real); !ok {
				return modelRoot{}, "", outsideRoots(modelDataURL)
			}
		}
		return r, rel, nil
	}
	return modelRoot{}, "", outsideRoots(modelDataURL)
}

// WithoutPath drops the path from a *fs.PathError or *os.LinkError, so that
// host paths never reach a caller; other errors are returned as they are.
func WithoutPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// CheckModelDataURL reports, early and without opening any file, whether a
// file:// URL resolves inside the model roots, relative URLs starting at
// baseDir (empty: the working directory); other URLs pass, and so does
// data that is missing (it is reported when it is read). The error
// matches [ErrOutsideModelRoots] and names only the URL. [Fetcher.Prepare]
// enforces the same rule again when it reads the files.
func (f *Fetcher) CheckModelDataURL(modelDataURL, baseDir string) error {
	p, ok := strings.CutPrefix(modelDataURL, "file://")
	if !ok || p == "" {
		return nil
	}
	if !filepath.IsAbs(p) {
		if baseDir == "" {
			baseDir, _ = os.Getwd()
		}
		p = filepath.Join(baseDir, p)
	}
	_, _, err := f.locate(modelDataURL, p)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
