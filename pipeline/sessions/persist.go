package sessions

// Backing keeps a Table's sessions across restarts of mce (the host's state
// store). Names are unique per session. It must be safe for concurrent use.
type Backing interface {
	Put(name string, s Session) error
	Delete(name string) error
	// Load calls fn for every session kept.
	Load(fn func(Session) error) error
}

// Open returns a table configured by o whose every change is written
// through to b (o.Persist is replaced), holding the sessions b kept that
// have not expired; expired ones are deleted from b. A session lives in its
// container, and containers outlive mce (adopted at the next start), so its
// routing does too; one whose instance did not come back gets the session
// error on its next call. logErr, if not nil, hears of failed writes.
func Open(o Options, b Backing, logErr func(error)) *Table {
	report := func(err error) {
		if err != nil && logErr != nil {
			logErr(err)
		}
	}
	o.Persist = func(s Session, open bool) {
		if open {
			report(b.Put(s.name(), s))
		} else {
			report(b.Delete(s.name()))
		}
	}
	t := New(o)
	now := t.now()
	var stale []string
	report(b.Load(func(s Session) error {
		if s.Expires.After(now) && ValidID(s.ID) {
			t.Restore(s)
		} else {
			stale = append(stale, s.name())
		}
		return nil
	}))
	for _, n := range stale {
		report(b.Delete(n))
	}
	return t
}

// name is the session's key in a Backing.
func (s Session) name() string { return s.Endpoint + "/" + s.Component + "/" + s.ID }
