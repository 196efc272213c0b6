package sessions

import (
	"errors"
	"strings"

	"github.com/mce-run/mce/pipeline"
)

// Begin prepares req for a call whose SessionId header is sid ("" when the
// call names none, and then Begin does nothing and takes no lock).
// NEW_SESSION is passed on to the container and routed as usual; an id is
// looked up and the call pinned to its instance and variant. stream is true
// for InvokeEndpointWithResponseStream, whose SessionId cannot be
// NEW_SESSION. The errors are *pipeline.ValidationError.
func (t *Table) Begin(endpoint, component, sid string, stream bool, req *pipeline.Request) error {
	if sid == "" {
		return nil
	}
	req.SessionID = sid
	if sid == NewSession {
		if stream {
			return &pipeline.ValidationError{Endpoint: endpoint, Message: "1 validation error detected: Value '" + NewSession +
				"' at 'sessionId' failed to satisfy constraint: Member must satisfy regular expression pattern: " + IDPattern}
		}
		return nil
	}
	s, err := t.Lookup(endpoint, component, sid)
	if err != nil {
		return &pipeline.ValidationError{Endpoint: endpoint, Message: "Session " + sid + " is not an open session of " +
			target(endpoint, component) + ": it was closed, it expired, or it was never opened. Start a new session with NEW_SESSION."}
	}
	if req.TargetVariant != "" && !strings.EqualFold(req.TargetVariant, s.Variant) {
		return &pipeline.ValidationError{Endpoint: endpoint, Message: "Session " + sid + " belongs to variant " + s.Variant +
			" of endpoint " + endpoint + ", not to the TargetVariant " + req.TargetVariant + "."}
	}
	req.TargetVariant = s.Variant
	req.SessionInstance = s.Instance
	return nil
}

// End records what a successful call's answer said about sessions: a
// session the container opened (on a NEW_SESSION call, on the instance that
// answered) or closed. It returns the NewSessionId and ClosedSessionId to
// give the caller, "" for none; a NewSessionId that is not
// "<id>; Expires=<time>Z" is not recorded and not relayed.
func (t *Table) End(endpoint, component string, req *pipeline.Request, resp *pipeline.Response) (newID, closedID string) {
	if resp.NewSessionID == "" && resp.ClosedSessionID == "" {
		return "", ""
	}
	if v := resp.NewSessionID; v != "" && req.SessionID == NewSession {
		if id, exp, ok := ParseNewSession(v); ok {
			t.Open(Session{Endpoint: endpoint, Component: component, ID: id, Variant: resp.Variant, Instance: resp.Instance, Expires: exp})
			newID = v
		}
	}
	if id := resp.ClosedSessionID; id != "" && ValidID(id) {
		t.Close(endpoint, component, id)
		closedID = id
	}
	return newID, closedID
}

// Failed forgets the session of a call that failed because its instance
// is gone (pipeline.SessionGoneError): later calls get the unknown-session
// error at once.
func (t *Table) Failed(endpoint, component string, req *pipeline.Request, err error) {
	var gone *pipeline.SessionGoneError
	if req.SessionInstance != "" && errors.As(err, &gone) {
		t.Close(endpoint, component, req.SessionID)
	}
}

func target(endpoint, component string) string {
	if component != "" {
		return "inference component " + component + " of endpoint " + endpoint
	}
	return "endpoint " + endpoint
}
