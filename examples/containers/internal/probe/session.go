package probe

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
	"github.com/mce-run/mce/internal/wire"
)

// Stateful sessions (https://docs.aws.amazon.com/sagemaker/latest/dg/stateful-sessions.html), as a
// stateful container plays them: a request with X-Amzn-SageMaker-Session-Id is answered here, not echoed.
//
//	NEW_SESSION            open a session: answer X-Amzn-SageMaker-New-Session-Id "<id>; Expires=<time>Z"
//	                       (life: session-ttl=DUR in the custom attributes, default 20m, at most 24h)
//	<id>                   answer with the session's count of calls
//	<id> + close-session   close it: answer X-Amzn-SageMaker-Closed-Session-Id <id>
//
// Every answer is JSON {"hostname": …, "instance": …, "session": …, "calls": …}: instance (the
// container's IP addresses; a variant's instances share their hostname) tells a test which served it. An id this container did not open (or closed, or let expire) is a 400.
// The table holds at most maxSessions; opening one more drops the oldest.

const (
	defaultSessionTTL = 20 * time.Minute
	maxSessionTTL     = 24 * time.Hour
	maxSessions       = 10_000
)

type probeSession struct {
	expires time.Time
	calls   int
}

type sessionTable struct {
	mu    sync.Mutex
	m     map[string]*probeSession
	order []string // ids in opening order, for the bound
}

// SessionAnswer is the body of a session call's answer.
type SessionAnswer struct {
	Hostname string `json:"hostname"`
	Instance string `json:"instance"` // as Info.Instance
	Session  string `json:"session"`
	Calls    int    `json:"calls"`
}

func (h *Handler) session(w http.ResponseWriter, r *http.Request, sid string) {
	attrs := r.Header.Get(AttributesHeader)
	t := &h.sessions
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*probeSession{}
	}
	if sid == "NEW_SESSION" {
		ttl := defaultSessionTTL
		if v, ok := attrValue(attrs, "session-ttl"); ok {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 || d > maxSessionTTL {
				smserve.WriteError(w, smserve.Errorf(http.StatusBadRequest, "probe: session-ttl %q: want a duration up to %s", v, maxSessionTTL))
				return
			}
			ttl = d
		}
		var b [8]byte
		_, _ = rand.Read(b[:])
		id := strings.TrimSuffix(h.hostname, ".") + "-" + hex.EncodeToString(b[:])
		id = strings.Map(func(c rune) rune { // the session id pattern: letters, digits, hyphens
			if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
				return c
			}
			return '-'
		}, id)
		for len(t.order) >= maxSessions {
			delete(t.m, t.order[0])
			t.order = t.order[1:]
		}
		s := &probeSession{expires: now.Add(ttl).Truncate(time.Second), calls: 1}
		t.m[id] = s
		t.order = append(t.order, id)
		w.Header().Set(wire.HeaderNewSessionID, id+"; Expires="+s.expires.UTC().Format("2006-01-02T15:04:05Z"))
		smserve.WriteJSON(w, http.StatusOK, SessionAnswer{Hostname: h.hostname, Instance: h.instance.get(), Session: id, Calls: 1})
		return
	}
	s, ok := t.m[sid]
	if !ok || !now.Before(s.expires) {
		delete(t.m, sid)
		smserve.WriteError(w, smserve.Errorf(http.StatusBadRequest, "probe %s: no session %s", h.hostname, sid))
		return
	}
	s.calls++
	if _, closing := attrValue(attrs, "close-session"); closing {
		delete(t.m, sid)
		w.Header().Set(wire.HeaderClosedSessionID, sid)
	}
	smserve.WriteJSON(w, http.StatusOK, SessionAnswer{Hostname: h.hostname, Instance: h.instance.get(), Session: sid, Calls: s.calls})
}

// attrValue finds key (or key=value) among comma-separated custom attributes.
func attrValue(attrs, key string) (string, bool) {
	for _, kv := range strings.Split(attrs, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		if k == key {
			return v, true
		}
	}
	return "", false
}

// instanceID is the container's addresses, read on first use once it has one: an engine may attach the
// endpoint's network after the process started.
type instanceID struct {
	mu sync.Mutex
	v  string
}

func (i *instanceID) get() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.v == "" {
		i.v = instanceAddrs()
	}
	return i.v
}

// instanceAddrs lists the machine's non-loopback IP addresses, space-separated ("" when it has none).
func instanceAddrs() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	var out []string
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			out = append(out, ipn.IP.String())
		}
	}
	return strings.Join(out, " ")
}
