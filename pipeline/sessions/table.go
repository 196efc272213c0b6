package sessions

import (
	"container/heap"
	"errors"
	"sync"
	"time"
)

// DefaultMax is the number of sessions a Table holds when Options.Max is 0.
// An entry takes a few hundred bytes (TestMemoryPerSession measures it), so
// a full table stays in tens of MiB.
const DefaultMax = 100_000

// ErrNoSession is Lookup's answer for a session the table does not hold:
// never opened, closed, expired, or pushed out by newer ones.
var ErrNoSession = errors.New("sessions: no such session")

// Options configure a Table. The zero value is usable.
type Options struct {
	// Max bounds the sessions held. Default DefaultMax.
	Max int
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// Persist, when not nil, is told of every session recorded (open
	// true) and every one dropped (open false: closed, expired, evicted,
	// gone with its endpoint), after the table changed and outside its
	// lock, so that sessions outlive a restart of mce as their containers
	// do. It must be safe for concurrent use.
	Persist func(s Session, open bool)
}

// Session is one stateful session: where it lives and until when.
type Session struct {
	// Endpoint and Component say whose session it is (Component is ""
	// on an endpoint without inference components).
	Endpoint, Component string
	// ID is the id the container gave it.
	ID string
	// Variant is the production variant of Instance.
	Variant string
	// Instance is the pipeline.Instance Key that opened the session.
	Instance string
	// Expires is the expiry the container set.
	Expires time.Time
}

type key struct{ endpoint, component, id string }

type entry struct {
	s     Session
	index int // in the expiry heap
}

// Table maps sessions to instances. It is safe for concurrent use.
type Table struct {
	max     int
	now     func() time.Time
	persist func(Session, bool)

	mu sync.Mutex
	m  map[key]*entry
	h  expiryHeap
}

// New returns an empty table configured by o.
func New(o Options) *Table {
	t := &Table{max: o.Max, now: o.Now, persist: o.Persist, m: make(map[key]*entry)}
	if t.max <= 0 {
		t.max = DefaultMax
	}
	if t.now == nil {
		t.now = time.Now
	}
	return t
}

// Open records s, replacing a session of the same endpoint, component and
// id. A session already expired is not recorded. It returns how many
// sessions it dropped to make room (expired ones not counted).
func (t *Table) Open(s Session) (evicted int) {
	dropped, evicted := t.open(s)
	t.tell(dropped)
	if s.Expires.After(t.now()) {
		t.tell1(s, true)
	}
	return evicted
}

// Restore is Open without telling Persist: sessions read back at start.
func (t *Table) Restore(s Session) {
	dropped, _ := t.open(s)
	t.tell(dropped)
}

func (t *Table) open(s Session) (dropped []Session, evicted int) {
	now := t.now()
	if !s.Expires.After(now) {
		return nil, 0
	}
	k := key{s.Endpoint, s.Component, s.ID}
	t.mu.Lock()
	defer t.mu.Unlock()
	dropped = t.sweepLocked(now)
	if e, ok := t.m[k]; ok {
		e.s = s
		heap.Fix(&t.h, e.index)
		return dropped, 0
	}
	for len(t.h) >= t.max {
		dropped = append(dropped, t.h[0].s)
		t.removeLocked(t.h[0])
		evicted++
	}
	e := &entry{s: s}
	t.m[k] = e
	heap.Push(&t.h, e)
	return dropped, evicted
}

func (t *Table) tell(ss []Session) {
	for _, s := range ss {
		t.tell1(s, false)
	}
}

func (t *Table) tell1(s Session, open bool) {
	if t.persist != nil {
		t.persist(s, open)
	}
}

// Lookup returns the live session id of endpoint and component, or
// ErrNoSession. An expired session is dropped.
func (t *Table) Lookup(endpoint, component, id string) (Session, error) {
	now := t.now()
	t.mu.Lock()
	e, ok := t.m[key{endpoint, component, id}]
	if !ok {
		t.mu.Unlock()
		return Session{}, ErrNoSession
	}
	if !e.s.Expires.After(now) {
		t.removeLocked(e)
		t.mu.Unlock()
		t.tell1(e.s, false)
		return Session{}, ErrNoSession
	}
	s := e.s
	t.mu.Unlock()
	return s, nil
}

// Close forgets a session (the container closed it, or its instance went
// away). It reports whether the table held it.
func (t *Table) Close(endpoint, component, id string) bool {
	t.mu.Lock()
	e, ok := t.m[key{endpoint, component, id}]
	if ok {
		t.removeLocked(e)
	}
	t.mu.Unlock()
	if ok {
		t.tell1(e.s, false)
	}
	return ok
}

// DropEndpoint forgets every session of endpoint (it was deleted or
// updated onto new instances) and returns how many.
func (t *Table) DropEndpoint(endpoint string) int {
	var dropped []Session
	t.mu.Lock()
	for k, e := range t.m {
		if k.endpoint == endpoint {
			t.removeLocked(e)
			dropped = append(dropped, e.s)
		}
	}
	t.mu.Unlock()
	t.tell(dropped)
	return len(dropped)
}

// Len returns the number of sessions held, expired ones not yet swept
// included.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

func (t *Table) sweepLocked(now time.Time) (dropped []Session) {
	for len(t.h) > 0 && !t.h[0].s.Expires.After(now) {
		dropped = append(dropped, t.h[0].s)
		t.removeLocked(t.h[0])
	}
	return dropped
}

func (t *Table) removeLocked(e *entry) {
	heap.Remove(&t.h, e.index)
	delete(t.m, key{e.s.Endpoint, e.s.Component, e.s.ID})
}

// expiryHeap orders entries by expiry, soonest first.
type expiryHeap []*entry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].s.Expires.Before(h[j].s.Expires) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *expiryHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
