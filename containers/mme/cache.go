package mme

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/go-units"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers/artifact"
)

// CacheOptions configure a [Cache].
type CacheOptions struct {
	// Dir is the host folder mounted read-only at /opt/ml/models in the
	// container; model files go to Dir/<id>/model. Created if missing. The
	// Cache owns it: NewCache removes the temporary, trash and model
	// folders (64-hex names) an earlier run left there, and nothing else
	// may write into it. Required.
	Dir string
	// Prefix is the variant's ModelDataUrl prefix; a model's artifact is
	// Prefix + TargetModel, a tar or tar.gz archive. s3://bucket/prefix/ or
	// file://dir/ (relative to BaseDir) or file:///abs/dir/. A missing
	// trailing '/' is added. Required.
	Prefix string
	// BaseDir is the folder that relative file:// prefixes start from (the
	// endpoint file's folder). Empty means the working directory.
	BaseDir string
	// Fetcher downloads and extracts artifacts, with its S3 settings, model
	// roots and size limits. Nil means artifact.NewFetcher(artifact.Options{}),
	// which serves no file:// prefix.
	Fetcher *artifact.Fetcher
	// Capacity bounds the bytes of extracted model files on disk; 0 means
	// unlimited. When a download takes the total over it, the files of
	// models no Manager has loaded are deleted, least recently used first.
	// Files of loaded models are never deleted, so the total may stay over
	// Capacity until they are unloaded (then they go first).
	Capacity int64
	// Budget, if set, bounds the disk bytes of this cache together with
	// every other artifact of the process: a download that would pass it
	// first deletes unused models of any registered cache, least recently
	// used first, and fails with artifact.ErrTooLarge when none is left.
	// Close gives the cache's bytes back.
	Budget *artifact.Budget
	// Observer receives ModelDownloadingTime. Nil means none.
	Observer Observer
	// Logger receives download and deletion events.
	Logger zerolog.Logger
}

// Cache keeps the model files of one ModelDataUrl prefix on disk, shared by
// the Managers of a variant's container copies. It is safe for concurrent
// use. Concurrent requests for one model's files share one download.
type Cache struct {
	dir      string
	prefix   string
	baseDir  string
	fetcher  *artifact.Fetcher
	capacity int64
	budget   *artifact.Budget
	obs      Observer
	log      zerolog.Logger

	unregister func() // from the Budget
	mu         sync.Mutex
	closed     bool                      // Close gave the bytes back to the Budget
	entries    map[string]*cacheEntry    // by id: downloading or on disk
	idle       *lru[string, *cacheEntry] // on disk and referenced by no Manager
	used       int64                     // bytes of files on disk
	trashN     uint64                    // names trash folders
}

// cacheEntry is one model's files. Fields after done are guarded by
// Cache.mu, except err, written once before done is closed.
type cacheEntry struct {
	id, target string
	done       chan struct{} // closed when the download ends
	err        error         // the download's error

	ready    bool      // on disk
	size     int64     // bytes of regular files
	refs     int       // Managers holding the files (loaded, loading or waiting)
	lastUsed time.Time // when refs last dropped to 0
}

// NewCache validates o and prepares o.Dir.
func NewCache(o CacheOptions) (*Cache, error) {
	if o.Dir == "" {
		return nil, errors.New("mme cache: Dir is required")
	}
	if o.Capacity < 0 {
		return nil, errors.New("mme cache: Capacity must not be negative")
	}
	switch {
	case strings.HasPrefix(o.Prefix, "s3://"):
		if b, _, _ := strings.Cut(strings.TrimPrefix(o.Prefix, "s3://"), "/"); b == "" {
			return nil, fmt.Errorf("mme cache: prefix %q names no bucket", o.Prefix)
		}
	case strings.HasPrefix(o.Prefix, "file://") && len(o.Prefix) > len("file://"):
	default:
		return nil, fmt.Errorf("mme cache: prefix %q must be s3://bucket/prefix/ or file://folder/", o.Prefix)
	}
	if !strings.HasSuffix(o.Prefix, "/") {
		o.Prefix += "/"
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("mme cache: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("mme cache: creating its folder: %w", artifact.WithoutPath(err))
	}
	if o.Fetcher == nil {
		if o.Fetcher, err = artifact.NewFetcher(artifact.Options{}); err != nil {
			return nil, err
		}
	}
	if o.Observer == nil {
		o.Observer = NopObserver{}
	}
	c := &Cache{
		dir: dir, prefix: o.Prefix, baseDir: o.BaseDir, fetcher: o.Fetcher, capacity: o.Capacity,
		budget: o.Budget, obs: o.Observer, log: o.Logger.With().Str("component", "mme-cache").Logger(),
		entries: make(map[string]*cacheEntry), idle: newLRU[string, *cacheEntry](),
	}
	if err := c.clean(); err != nil {
		return nil, err
	}
	c.unregister = c.budget.Register(c)
	return c, nil
}

var _ artifact.Evictor = (*Cache)(nil)

// Close takes the cache off its Budget and gives back the bytes of its
// files; the owner removes the folder. The cache must not be used after.
func (c *Cache) Close() {
	c.unregister()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		c.budget.Release(c.used)
	}
}

// OldestIdle implements artifact.Evictor: when the least recently used
// model no Manager holds was last used.
func (c *Cache) OldestIdle() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, e, ok := c.idle.oldest()
	if !ok {
		return time.Time{}, false
	}
	return e.lastUsed, true
}

// EvictOldest implements artifact.Evictor: it deletes the files of the
// least recently used model no Manager holds.
func (c *Cache) EvictOldest() int64 {
	c.mu.Lock()
	_, e, ok := c.idle.oldest()
	if !ok {
		c.mu.Unlock()
		return 0
	}
	size := e.size
	trash := c.discardLocked(e)
	c.mu.Unlock()
	c.removeAll([]string{trash})
	return size
}

// Dir returns the absolute path of the cache folder.
func (c *Cache) Dir() string { return c.dir }

// Capacity returns CacheOptions.Capacity: the bytes of model files the
// cache keeps on disk, 0 for unlimited.
func (c *Cache) Capacity() int64 { return c.capacity }

// Usage returns the bytes of model files on disk and the number of models
// they belong to.
func (c *Cache) Usage() (bytes int64, models int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.ready {
			models++
		}
	}
	return c.used, models
}

// clean removes what an earlier run left in the cache folder.
func (c *Cache) clean() error {
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("mme cache: %w", artifact.WithoutPath(err))
	}
	for _, de := range des {
		n := de.Name()
		if strings.HasPrefix(n, ".tmp-") || strings.HasPrefix(n, ".trash-") || isModelID(n) {
			if err := os.RemoveAll(filepath.Join(c.dir, n)); err != nil {
				return fmt.Errorf("mme cache: removing a leftover: %w", artifact.WithoutPath(err))
			}
		}
	}
	return nil
}

func isModelID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// acquire makes target's files present under Dir/<id>/model and takes a
// reference on them, which the caller gives back with release. Concurrent
// callers share one download, which runs on the first caller's ctx.
func (c *Cache) acquire(ctx context.Context, target string) (*cacheEntry, error) {
	id := ModelID(target)
	for {
		c.mu.Lock()
		e, ok := c.entries[id]
		if !ok {
			e = &cacheEntry{id: id, target: target, done: make(chan struct{}), refs: 1}
			c.entries[id] = e
			c.mu.Unlock()
			if err := c.download(ctx, e); err != nil {
				return nil, err
			}
			return e, nil
		}
		e.refs++
		if e.ready {
			c.idle.remove(id)
			c.mu.Unlock()
			return e, nil
		}
		c.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			c.release(e, false)
			return nil, ctx.Err()
		}
		if e.err == nil {
			return e, nil
		}
		// The first caller's context ended its download; try again on ours.
		if ctx.Err() == nil && (errors.Is(e.err, context.Canceled) || errors.Is(e.err, context.DeadlineExceeded)) {
			continue
		}
		return nil, e.err
	}
}

// release gives back a reference taken by acquire. When no reference is
// left the files become deletable; drop deletes them at once.
func (c *Cache) release(e *cacheEntry, drop bool) {
	var trash []string
	c.mu.Lock()
	if c.entries[e.id] != e || e.refs == 0 {
		c.mu.Unlock()
		return
	}
	e.refs--
	if e.refs == 0 && e.ready {
		if drop {
			trash = append(trash, c.discardLocked(e))
		} else {
			e.lastUsed = time.Now()
			c.idle.touch(e.id, e)
			trash = c.trimLocked()
		}
	}
	c.mu.Unlock()
	c.removeAll(trash)
}

// download fetches e's artifact and publishes the outcome to e's waiters.
func (c *Cache) download(ctx context.Context, e *cacheEntry) error {
	start := time.Now()
	size, err := c.fetch(ctx, e)
	if err == nil {
		// Outside c.mu: making room may delete this cache's own idle models.
		if err = c.budget.Reserve(size); err != nil {
			if rerr := os.RemoveAll(filepath.Join(c.dir, e.id)); rerr != nil {
				c.log.Warn().Err(rerr).Str("model", e.target).Msg("could not remove model files over the disk budget")
			}
			err = fmt.Errorf("model %q: %w", e.target, err)
		}
	}
	var trash []string
	c.mu.Lock()
	if err != nil {
		delete(c.entries, e.id)
		e.err = err
	} else {
		e.ready, e.size = true, size
		c.used += size
		if c.closed { // closed while downloading: the bytes are not the Budget's
			c.budget.Release(size)
		}
		if e.refs == 0 {
			e.lastUsed = time.Now()
			c.idle.touch(e.id, e)
		}
		trash = c.trimLocked()
	}
	close(e.done)
	c.mu.Unlock()
	c.removeAll(trash)
	if err != nil {
		c.log.Debug().Err(err).Str("model", e.target).Msg("model download failed")
		return err
	}
	d := time.Since(start)
	c.obs.ModelDownloadingTime(d)
	c.log.Debug().Str("event", "model_downloaded").Str("model", e.target).Int64("bytes", size).Dur("took_ms", d).
		Msgf("downloaded model %s (%s) in %s", e.target, units.HumanSize(float64(size)), roundDuration(d))
	return nil
}

// fetch downloads and extracts e's artifact into Dir/<id>/model through a
// temporary folder, and returns the bytes of its files. On error nothing
// is left behind.
func (c *Cache) fetch(ctx context.Context, e *cacheEntry) (int64, error) {
	url := c.prefix + e.target
	tmp, err := os.MkdirTemp(c.dir, ".tmp-")
	if err != nil {
		return 0, fmt.Errorf("mme cache: creating a download folder: %w", artifact.WithoutPath(err))
	}
	committed := false
	defer func() {
		if !committed {
			os.RemoveAll(tmp)
		}
	}()
	lctx := c.log.With().Str("model", e.target).Logger().WithContext(ctx) // progress of long downloads
	dir, err := c.fetcher.PrepareArchive(lctx, url, c.baseDir, tmp)
	if err != nil {
		if errors.Is(err, artifact.ErrNotFound) {
			return 0, &ModelNotFoundError{TargetModel: e.target, URL: url, Err: c.hidePrefix(url, e.target, err)}
		}
		return 0, c.hidePrefix(url, e.target, err)
	}
	model := filepath.Join(tmp, "model")
	if err := os.Rename(dir, model); err != nil {
		return 0, fmt.Errorf("mme cache: %w", artifact.WithoutPath(err))
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return 0, fmt.Errorf("mme cache: %w", artifact.WithoutPath(err))
	}
	size, err := artifact.DirSize(model)
	if err != nil {
		return 0, fmt.Errorf("mme cache: measuring model %q: %w", e.target, artifact.WithoutPath(err))
	}
	dst := filepath.Join(c.dir, e.id)
	if err := os.RemoveAll(dst); err != nil {
		return 0, fmt.Errorf("mme cache: removing stale files: %w", artifact.WithoutPath(err))
	}
	if err := os.Rename(tmp, dst); err != nil {
		return 0, fmt.Errorf("mme cache: %w", artifact.WithoutPath(err))
	}
	committed = true
	return size, nil
}

// hidePrefix rewrites an artifact error for callers of the runtime API:
// with a file:// prefix the URL is a host path, which they never see; the
// TargetModel names the artifact instead. The error chain is kept.
func (c *Cache) hidePrefix(url, target string, err error) error {
	msg := err.Error()
	if strings.HasPrefix(url, "file://") {
		msg = strings.ReplaceAll(msg, strconv.Quote(url), "of TargetModel "+strconv.Quote(target))
		msg = strings.ReplaceAll(msg, url, "TargetModel "+strconv.Quote(target))
	}
	return &hiddenError{msg: msg, err: err}
}

// hiddenError replaces an error's message, keeping it for errors.Is/As.
type hiddenError struct {
	msg string
	err error
}

func (e *hiddenError) Error() string { return e.msg }
func (e *hiddenError) Unwrap() error { return e.err }

// trimLocked deletes unreferenced files, least recently used first, while
// the cache is over capacity; it returns trash folders to remove.
func (c *Cache) trimLocked() []string {
	var trash []string
	for c.capacity > 0 && c.used > c.capacity {
		_, e, ok := c.idle.oldest()
		if !ok {
			c.log.Warn().Int64("bytes", c.used).Int64("capacity", c.capacity).
				Msg("model cache over capacity; the rest belongs to loaded models")
			break
		}
		trash = append(trash, c.discardLocked(e))
	}
	return trash
}

// discardLocked forgets e and moves its folder aside (an atomic rename, so
// that a new download of the same model cannot collide with the deletion);
// it returns the folder to remove, or "".
func (c *Cache) discardLocked(e *cacheEntry) string {
	c.idle.remove(e.id)
	delete(c.entries, e.id)
	c.used -= e.size
	if !c.closed {
		c.budget.Release(e.size)
	}
	c.trashN++
	trash := filepath.Join(c.dir, ".trash-"+strconv.FormatUint(c.trashN, 10)+"-"+e.id[:16])
	if err := os.Rename(filepath.Join(c.dir, e.id), trash); err != nil {
		c.log.Warn().Err(err).Str("model", e.target).Msg("could not delete cached model files")
		return ""
	}
	c.log.Debug().Str("event", "model_files_deleted").Str("model", e.target).Int64("bytes", e.size).
		Msgf("deleted the cached files of model %s (%s)", e.target, units.HumanSize(float64(e.size)))
	return trash
}

func (c *Cache) removeAll(trash []string) {
	for _, p := range trash {
		if p == "" {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			c.log.Warn().Err(err).Str("path", p).Msg("could not remove deleted model files")
		}
	}
}
