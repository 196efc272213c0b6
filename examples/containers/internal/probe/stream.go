package probe

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

// maxGates bounds the gates waited on or opened and not yet passed.
const maxGates = 1024

// stream answers a.Parts parts "part I of N, B bytes in\n" (I from 1, B the request body's length, the
// tag before the newline), each written and flushed on its own, so that a client of HTTP/1.1 receives
// them as chunks as they are produced.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, ct string, a Attributes) {
	if ct == "" {
		ct = "text/plain"
	}
	in, err := io.Copy(io.Discard, io.LimitReader(r.Body, smserve.MaxBodyBytes))
	if err != nil {
		smserve.WriteError(w, smserve.Errorf(http.StatusBadRequest, "read request body: %w", err))
		return
	}
	suffix := ", " + strconv.FormatInt(in, 10) + " bytes in" + h.s.Tag + "\n"
	var gate <-chan struct{}
	if a.Gate != "" {
		if gate = h.gates.wait(a.Gate); gate == nil {
			smserve.WriteError(w, smserve.Errorf(http.StatusServiceUnavailable, "probe: too many gates"))
			return
		}
		defer h.gates.done(a.Gate)
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	n := strconv.Itoa(a.Parts)
	for i := 1; i <= a.Parts; i++ {
		if i > 1 {
			if !h.pause(r, gate, a.Every) {
				return
			}
			gate = nil // open: the other parts follow
		}
		if _, err := w.Write([]byte("part " + strconv.Itoa(i) + " of " + n + suffix)); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		switch i {
		case a.Cut:
			panic(http.ErrAbortHandler) // net/http closes the connection without ending the answer
		case a.Die:
			h.exit(1)
			return
		case a.Stall:
			<-r.Context().Done()
			return
		}
	}
}

// pause waits for gate (when not nil) and then d; it reports false when the request was cancelled first.
func (h *Handler) pause(r *http.Request, gate <-chan struct{}, d time.Duration) bool {
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return false
		}
	}
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// gates are named one-shot gates: a streaming answer waits on one, another request opens it. Opening
// first is allowed (the waiter then passes at once).
type gates struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func (g *gates) get(name string) chan struct{} {
	if g.m == nil {
		g.m = map[string]chan struct{}{}
	}
	c, ok := g.m[name]
	if !ok {
		if len(g.m) >= maxGates {
			return nil
		}
		c = make(chan struct{})
		g.m[name] = c
	}
	return c
}

// wait returns the channel closed when name is opened, nil when there are too many gates.
func (g *gates) wait(name string) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.get(name)
}

// open opens name; false when there are too many gates.
func (g *gates) open(name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.get(name)
	if c == nil {
		return false
	}
	select {
	case <-c:
	default:
		close(c)
	}
	return true
}

// done forgets name once its waiter is finished.
func (g *gates) done(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.m, name)
}
