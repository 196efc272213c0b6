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
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"
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
	// InferenceComponents holds inference components and their copies.
	InferenceComponents = "inference-components"
	// Sessions holds the open stateful sessions (pipeline/sessions), so
	// that calls reach the containers holding them after mce restarts.
	Sessions = "sessions"
)

// ErrNotFound is returned by Get for a missing record.
var ErrNotFound = errors.New("not found")

// Quarantine holds the records that could not be decoded, moved out of
// their kind's bucket by List so that one damaged record does not stop
// mce; the key is "<kind>/<name>/<time moved>", the value the raw bytes.
const Quarantine = "quarantine"

// Store is safe for concurrent use.
type Store struct {
	db  *bolt.DB
	log zerolog.Logger
}

// Options configure OpenWith.
type Options struct {
	// Logger receives an error line for each record moved to Quarantine.
	// The zero value logs nothing.
	Logger zerolog.Logger
}

// Open is OpenWith with no logger.
func Open(path string) (*Store, error) { return OpenWith(path, Options{}) }

// OpenWith opens (creating if needed) the database at path. A second
// process with the same file waits up to a second and then fails: the caller
// holds the instance lock anyway. A file that cannot be used — truncated,
// damaged, not a database, held by another process — is an *UnusableError
// whose message names the file and the way out, never a crash: the file is
// checked against its header before bbolt maps it, and read through once.
func OpenWith(path string, o Options) (*Store, error) {
	if err := precheck(path); err != nil {
		return nil, err
	}
	db, err := openChecked(path, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	// Batched writes wait this long for company: short, because a queued
	// request's caller waits for its write (bbolt's default is 10 ms).
	db.MaxBatchDelay = 2 * time.Millisecond
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range []string{Models, EndpointConfigs, Endpoints, AsyncRequests, InferenceComponents, Sessions, Quarantine} {
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
	return &Store{db: db, log: o.Logger}, nil
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

// Checker is implemented by record types that can tell a record that
// decodes but cannot be used (a required field empty); List quarantines
// those as it does records that do not decode.
type Checker interface {
	CheckRecord() error
}

// List decodes every record of a kind, in key order, calling fn for each.
// A record that does not decode (or whose CheckRecord fails) is moved to the
// Quarantine bucket with an error in the log, and the listing goes on: one
// damaged record must not keep mce from starting.
func List[T any](s *Store, kind string, fn func(T) error) error {
	type bad struct {
		key, raw []byte
		err      error
	}
	var bads []bad
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(kind)).ForEach(func(k, b []byte) error {
			var v T
			err := json.Unmarshal(b, &v)
			if c, ok := any(&v).(Checker); ok && err == nil {
				err = c.CheckRecord()
			}
			if err != nil {
				bads = append(bads, bad{key: append([]byte(nil), k...), raw: append([]byte(nil), b...), err: err})
				return nil
			}
			return fn(v)
		})
	})
	for _, r := range bads {
		s.quarantine(kind, r.key, r.raw, r.err)
	}
	return err
}

// quarantine moves one record of kind to the Quarantine bucket, if it is
// still the bytes that failed, and logs it; a failure to move is logged
// too, and the record stays where it was (List skips it again next time).
func (s *Store) quarantine(kind string, k, raw []byte, cause error) {
	qkey := kind + "/" + string(k) + "/" + time.Now().UTC().Format(time.RFC3339Nano)
	err := s.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(kind))
		if cur := bk.Get(k); cur == nil || !bytes.Equal(cur, raw) {
			return nil // rewritten or deleted meanwhile
		}
		if err := tx.Bucket([]byte(Quarantine)).Put([]byte(qkey), raw); err != nil {
			return err
		}
		return bk.Delete(k)
	})
	ev := s.log.Error().Str("kind", kind).Str("name", string(k)).AnErr("cause", cause).Int("bytes", len(raw))
	if err != nil {
		ev.Err(err).Msg("a damaged record of the state could not be moved to quarantine; it is skipped")
		return
	}
	ev.Str("quarantine_key", qkey).Msgf("a damaged %s record %q of the state was moved to the quarantine bucket and is skipped", kind, k)
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
