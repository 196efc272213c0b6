package mme

import "context"

// Store holds the model files a [Manager] loads from: the folder the
// container sees at /opt/ml/models, where the files of TargetModel t are at
// /opt/ml/models/<ModelID(t)>/model. The local [*Cache] is one (the Docker
// engine's); package agent's Client is another, for a cache owned by a
// sidecar in the container's pod (the kubernetes engine's). Methods must be
// safe for concurrent use.
type Store interface {
	// Acquire makes target's files present and takes a reference on them,
	// which the caller gives back with Release. Errors as [Manager.Acquire]
	// documents for files: *ModelNotFoundError, artifact's unsafe,
	// too-large and invalid archive errors, the context's error.
	Acquire(ctx context.Context, target string) (Files, error)
	// Release gives back a reference taken by Acquire; when no reference is
	// left the files may be deleted, and drop deletes them at once. It must
	// not block for long: a Manager calls it with background work waiting.
	Release(f Files, drop bool)
	// Usage returns the bytes of model files on disk and the number of
	// models they belong to.
	Usage() (bytes int64, models int)
}

// Files is a reference on one model's files, from [Store.Acquire].
type Files interface {
	// Size is the bytes of the model's files.
	Size() int64
}

var _ Store = (*Cache)(nil)

// Acquire implements [Store].
func (c *Cache) Acquire(ctx context.Context, target string) (Files, error) {
	if err := ValidTargetModel(target); err != nil {
		return nil, err
	}
	e, err := c.acquire(ctx, target)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Release implements [Store]; Files from another Store are ignored.
func (c *Cache) Release(f Files, drop bool) {
	if e, ok := f.(*cacheEntry); ok && e != nil {
		c.release(e, drop)
	}
}

// Has reports whether target's files are on disk now.
func (c *Cache) Has(target string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[ModelID(target)]
	return ok && e.ready
}

// Size implements [Files].
func (e *cacheEntry) Size() int64 { return e.size }
