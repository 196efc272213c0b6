package artifact

import (
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// DiskBudgetFlag is the mce serve flag that sets the [Budget]'s limit.
const DiskBudgetFlag = "--artifact-disk-budget"

// DefaultDiskBudget is the default limit of a [Budget] in mce serve
// (64 GiB): four artifacts at [DefaultMaxExtractedBytes], or a multi-model
// cache of many smaller ones.
const DefaultDiskBudget int64 = 64 << 30

// Evictor holds artifacts on disk some of which nothing uses (a
// multi-model cache's unloaded models); a [Budget] deletes those, least
// recently used first across every Evictor, to make room.
type Evictor interface {
	// OldestIdle returns when the least recently used unused artifact was
	// last used; false when there is none.
	OldestIdle() (time.Time, bool)
	// EvictOldest deletes that artifact, releases its bytes from the Budget,
	// and returns them; 0 when there was none.
	EvictOldest() int64
}

// Budget bounds the disk bytes of every extracted artifact of a process:
// single-model artifacts while their endpoint lives, adapters while they
// are staged, and the files of multi-model caches. It is safe for concurrent use. A nil *Budget
// accounts nothing and refuses nothing.
//
// Bytes are reserved once an artifact is on disk (its size is known only
// then), so the total may pass the limit by the artifacts being extracted at
// that moment, each bounded by [Options.MaxExtractedBytes].
type Budget struct {
	limit int64
	used  atomic.Int64

	mu       sync.Mutex // serializes Reserve's evictions and the evictor set
	evictors map[*registration]struct{}
}

type registration struct{ e Evictor }

// NewBudget returns a Budget of limit bytes; zero or less means no limit
// (bytes are still counted).
func NewBudget(limit int64) *Budget {
	return &Budget{limit: limit, evictors: make(map[*registration]struct{})}
}

// Register adds e to the evictors and returns the function that removes it.
// e's methods are called with the Budget's lock held: they must not call
// Reserve.
func (b *Budget) Register(e Evictor) (unregister func()) {
	if b == nil {
		return func() {}
	}
	r := &registration{e: e}
	b.mu.Lock()
	b.evictors[r] = struct{}{}
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		delete(b.evictors, r)
		b.mu.Unlock()
	}
}

// Reserve counts n more bytes, first deleting unused artifacts, least
// recently used first, while they would pass the limit. When nothing is
// left to delete it counts nothing and returns a [*LimitError] naming
// [DiskBudgetFlag].
func (b *Budget) Reserve(n int64) error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.limit > 0 && b.used.Load()+n > b.limit {
		var (
			best   Evictor
			oldest time.Time
		)
		for r := range b.evictors {
			if t, ok := r.e.OldestIdle(); ok && (best == nil || t.Before(oldest)) {
				best, oldest = r.e, t
			}
		}
		if best == nil || best.EvictOldest() == 0 {
			return &LimitError{What: "disk space of model artifacts (extracted model data and adapters, and files cached for multi-model endpoints) in use",
				Limit: b.limit, Unit: "bytes", Flag: DiskBudgetFlag}
		}
	}
	b.used.Add(n)
	return nil
}

// Force counts n bytes without checking the limit: artifacts that are
// already on disk and in use (adopted after a restart).
func (b *Budget) Force(n int64) {
	if b != nil {
		b.used.Add(n)
	}
}

// Release gives back n bytes reserved earlier. It never blocks, so it may
// be called with an Evictor's own lock held.
func (b *Budget) Release(n int64) {
	if b != nil {
		b.used.Add(-n)
	}
}

// Used returns the bytes counted now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// DirSize sums the sizes of the regular files under dir, as a Budget
// counts them.
func DirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}
