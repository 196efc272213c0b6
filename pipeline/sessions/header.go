package sessions

import (
	"regexp"
	"time"
)

// IDPattern is the pattern of a session id (SessionIdHeader in the runtime
// API model), at most MaxIDLength characters.
const (
	IDPattern   = `^[a-zA-Z0-9](-*[a-zA-Z0-9])*$`
	MaxIDLength = 256
)

// NewSession is the SessionId value that asks for a new session.
const NewSession = "NEW_SESSION"

var (
	idRe         = regexp.MustCompile(IDPattern)
	newSessionRe = regexp.MustCompile(`^([a-zA-Z0-9](?:-*[a-zA-Z0-9])*);\sExpires=([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z)$`)
)

// ValidID reports whether id is a session id SageMaker accepts.
func ValidID(id string) bool { return len(id) <= MaxIDLength && idRe.MatchString(id) }

// ParseNewSession parses a container's X-Amzn-SageMaker-New-Session-Id,
// "<id>; Expires=<YYYY-MM-DDThh:mm:ssZ>" (NewSessionResponseHeader's
// pattern). ok is false for anything else.
func ParseNewSession(v string) (id string, expires time.Time, ok bool) {
	if len(v) > MaxIDLength+40 {
		return "", time.Time{}, false
	}
	m := newSessionRe.FindStringSubmatch(v)
	if m == nil || len(m[1]) > MaxIDLength {
		return "", time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, m[2])
	if err != nil {
		return "", time.Time{}, false
	}
	return m[1], t, true
}
