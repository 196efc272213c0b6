package store

import "github.com/mce-run/mce/pipeline/sessions"

// SessionBacking keeps stateful sessions (pipeline/sessions) in the
// Sessions bucket, each write durable before it returns (batched).
type SessionBacking struct{ S *Store }

var _ sessions.Backing = SessionBacking{}

func (b SessionBacking) Put(name string, s sessions.Session) error {
	return b.S.PutBatched(Sessions, name, s)
}

func (b SessionBacking) Delete(name string) error { return b.S.DeleteBatched(Sessions, name) }

func (b SessionBacking) Load(fn func(sessions.Session) error) error {
	return List(b.S, Sessions, fn)
}
