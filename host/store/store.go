// Package store keeps mce's control-plane state — models, endpoint configs and
// endpoints — in an embedded bbolt database. Every write is one bbolt
// transaction, fsynced before it returns, so killing mce at any moment leaves
// either the old record or the new one, never half of either.
//
// Records are JSON; names are keyed lower-cased, as SageMaker's names are
// unique regardless of case (their ARNs are lower-cased). The store knows
// nothing of Docker or HTTP.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Kinds of records, one bucket each.
const (
	Models          = "models"
	EndpointConfigs = "endpoint-configs"
	Endpoints       = "endpoints"
	// AsyncRequests holds accepted InvokeEndpointAsync requests until
	// their answer is in S3.
	AsyncRequests = "async-requests"
)

// ErrNotFound is returned by Get for a missing record.
var ErrNotFound = errors.New("not found")

// Store is safe for concurrent use.
type Store struct{ db *bolt.DB }

// Open opens (creating if needed) the database at path. A second process with
// the same file waits up to a second and then fails: the caller holds the
// instance lock anyway.
func Open(path string) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	// Batched writes wait this long for company: short, because a queued
	// request's caller waits for its write (bbolt's default is 10 ms).
	db.MaxBatchDelay = 2 * time.Millisecond
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range []string{Models, EndpointConfigs, Endpoints, AsyncRequests} {
			if _, err := tx.CreateBucketIfNotExists([]byte(b)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("initialise state database: %w", err)
	}
	return &Store{db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func key(name string) []byte { return []byte(strings.ToLower(name)) }

// Put writes a record, replacing any with the same name.
func (s *Store) Put(kind, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s %q: %w", kind, name, err)
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte(kind)).Put(key(name), b) })
}

// Create writes a record only if none with the name exists; it reports
// whether it wrote.
func (s *Store) Create(kind, name string, v any) (bool, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return false, fmt.Errorf("encode %s %q: %w", kind, name, err)
	}
	created := false
	err = s.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(kind))
		if bk.Get(key(name)) != nil {
			return nil
		}
		created = true
		return bk.Put(key(name), b)
	})
	return created, err
}

// Get reads a record into v; ErrNotFound if there is none.
func (s *Store) Get(kind, name string, v any) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(kind)).Get(key(name))
		if b == nil {
			return ErrNotFound
		}
		return json.Unmarshal(b, v)
	})
}

// Delete removes a record; it reports whether one existed.
func (s *Store) Delete(kind, name string) (bool, error) {
	existed := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(kind))
		existed = bk.Get(key(name)) != nil
		return bk.Delete(key(name))
	})
	return existed, err
}

// Update rewrites an existing record in one transaction: fn receives the
// stored JSON and returns the new JSON. It reports false, without calling fn,
// when there is no record, so an update never recreates a deleted one.
func (s *Store) Update(kind, name string, fn func([]byte) ([]byte, error)) (bool, error) {
	found := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(kind))
		old := bk.Get(key(name))
		if old == nil {
			return nil
		}
		found = true
		b, err := fn(append([]byte(nil), old...))
		if err != nil {
			return err
		}
		return bk.Put(key(name), b)
	})
	return found, err
}

// List decodes every record of a kind, in key order, calling fn for each.
func List[T any](s *Store, kind string, fn func(T) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(kind)).ForEach(func(_, b []byte) error {
			var v T
			if err := json.Unmarshal(b, &v); err != nil {
				return err
			}
			return fn(v)
		})
	})
}

// PutBatched is Put through bbolt's Batch: concurrent callers share one
// transaction and one fsync, and each returns only once it is durable. For
// writes that come many at a time (queued requests); fn may run twice, so a
// put is safe.
func (s *Store) PutBatched(kind, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s %q: %w", kind, name, err)
	}
	return s.db.Batch(func(tx *bolt.Tx) error { return tx.Bucket([]byte(kind)).Put(key(name), b) })
}

// DeleteBatched is Delete through bbolt's Batch, as PutBatched.
func (s *Store) DeleteBatched(kind, name string) error {
	return s.db.Batch(func(tx *bolt.Tx) error { return tx.Bucket([]byte(kind)).Delete(key(name)) })
}
