package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/artifact"
)

// Adapters of inference components (containers.AdapterStore): each copy
// of a component whose ContainerSpec has Adapters mounts the folder
// adapters/<endpoint>/<hostname> of the instance's state folder read-only
// at containers.AdapterMount. StageAdapter extracts an adapter's artifact
// into a fresh folder beside it (with the artifact package's limits on
// hostile archives) and renames it into place, so a copy sees a whole
// adapter or none, also when it started before the adapter was staged.
// An adapter's extracted bytes count against the runtime's disk budget
// (--artifact-disk-budget) as model data does, from its staging until it
// is removed or replaced; one that does not fit is refused and its files
// deleted.

var _ containers.AdapterStore = (*Engine)(nil)

// adapterNameRe is the shape of the names that become folder names here:
// SageMaker's endpoint and component names.
var adapterNameRe = regexp.MustCompile(`^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?$`)

func (rt *Runtime) adaptersRoot() string { return filepath.Join(rt.instanceDir(), "adapters") }

// adapterDir is the folder of the adapters of component hostname on
// endpoint, created if missing.
func (rt *Runtime) adapterDir(endpoint, hostname string) (string, error) {
	for _, n := range []string{endpoint, hostname} {
		if len(n) > 63 || !adapterNameRe.MatchString(n) {
			return "", fmt.Errorf("%q is not an endpoint or inference component name", n)
		}
	}
	dir := filepath.Join(rt.adaptersRoot(), strings.ToLower(endpoint), strings.ToLower(hostname))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the adapter folder: %w", artifact.WithoutPath(err))
	}
	// Containers run as any user: the folders must be readable by all.
	for d := dir; d != rt.adaptersRoot() && strings.HasPrefix(d, rt.adaptersRoot()); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			return "", fmt.Errorf("creating the adapter folder: %w", artifact.WithoutPath(err))
		}
	}
	return dir, nil
}

// StageAdapter implements containers.AdapterStore.
func (e *Engine) StageAdapter(ctx context.Context, endpoint, base, name, artifactURL, baseDir string) (string, error) {
	rt := e.Runtime
	if len(name) > 63 || !adapterNameRe.MatchString(name) {
		return "", fmt.Errorf("%q is not an inference component name", name)
	}
	dir, err := rt.adapterDir(endpoint, base)
	if err != nil {
		return "", err
	}
	f, err := rt.artifactFetcher()
	if err != nil {
		return "", err
	}
	work := filepath.Join(rt.adaptersRoot(), ".work")
	staged, err := f.Prepare(ctx, artifactURL, baseDir, work)
	if err != nil {
		return "", err
	}
	// Counted once on disk (its size is known only then), as model data
	// is; the adapter it replaces stays counted until it is gone.
	size, err := artifact.DirSize(staged)
	if err == nil {
		err = rt.budget.Reserve(size)
	}
	if err != nil {
		os.RemoveAll(staged)
		return "", err
	}
	final := filepath.Join(dir, strings.ToLower(name))
	key := adapterKey(endpoint, base, name)
	// The old one (a restart stages again) is moved aside first: a rename
	// does not replace a folder that is not empty.
	if err := setAside(final, work); err != nil {
		os.RemoveAll(staged)
		rt.budget.Release(size)
		return "", err
	}
	rt.releaseAdapter(key)
	if err := os.Rename(staged, final); err != nil {
		os.RemoveAll(staged)
		rt.budget.Release(size)
		return "", fmt.Errorf("placing the adapter: %w", artifact.WithoutPath(err))
	}
	rt.mu.Lock()
	if rt.adapterBytes == nil {
		rt.adapterBytes = map[string]int64{}
	}
	rt.adapterBytes[key] = size
	rt.mu.Unlock()
	return containers.AdapterMount + "/" + strings.ToLower(name), nil
}

// adapterKey names an adapter in Runtime.adapterBytes.
func adapterKey(endpoint, base, name string) string {
	return strings.ToLower(endpoint) + "/" + strings.ToLower(base) + "/" + strings.ToLower(name)
}

// releaseAdapter gives back the disk budget an adapter's staged files
// hold (none before its first staging in this process: what an earlier
// run staged is replaced, or removed, uncounted).
func (rt *Runtime) releaseAdapter(key string) {
	rt.mu.Lock()
	n := rt.adapterBytes[key]
	delete(rt.adapterBytes, key)
	rt.mu.Unlock()
	rt.budget.Release(n)
}

// RemoveAdapter implements containers.AdapterStore.
func (e *Engine) RemoveAdapter(endpoint, base, name string) error {
	rt := e.Runtime
	for _, n := range []string{endpoint, base, name} {
		if len(n) > 63 || !adapterNameRe.MatchString(n) {
			return fmt.Errorf("%q is not an endpoint or inference component name", n)
		}
	}
	final := filepath.Join(rt.adaptersRoot(), strings.ToLower(endpoint), strings.ToLower(base), strings.ToLower(name))
	if err := setAside(final, filepath.Join(rt.adaptersRoot(), ".work")); err != nil {
		return err
	}
	rt.releaseAdapter(adapterKey(endpoint, base, name))
	return nil
}

// setAside removes the folder at path, if any, by first renaming it into
// work (so that it leaves the copies' view at once) and then deleting it.
func setAside(path, work string) error {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := os.MkdirAll(work, 0o700); err != nil {
		return fmt.Errorf("removing the adapter: %w", artifact.WithoutPath(err))
	}
	old, err := os.MkdirTemp(work, "old-")
	if err != nil {
		return fmt.Errorf("removing the adapter: %w", artifact.WithoutPath(err))
	}
	if err := os.Rename(path, filepath.Join(old, "a")); err != nil {
		os.Remove(old)
		return fmt.Errorf("removing the adapter: %w", artifact.WithoutPath(err))
	}
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("removing the adapter: %w", artifact.WithoutPath(err))
	}
	return nil
}
