package probe

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/mce-run/mce/internal/wire"
)

func TestSessions(t *testing.T) {
	h, _ := newProbe(t)
	rec := post(h, "hi", wire.HeaderSessionID, "NEW_SESSION")
	nsid := rec.Header().Get(wire.HeaderNewSessionID)
	if rec.Code != http.StatusOK || !regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9])*;\sExpires=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$`).MatchString(nsid) {
		t.Fatalf("NEW_SESSION: %d, New-Session-Id %q", rec.Code, nsid)
	}
	id, _, _ := strings.Cut(nsid, ";")
	var a SessionAnswer
	rec = post(h, "again", wire.HeaderSessionID, id)
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil || a.Hostname != "probe-host" || a.Calls != 2 || a.Session != id {
		t.Fatalf("session call: %d %s (%v)", rec.Code, rec.Body, err)
	}
	rec = post(h, "bye", wire.HeaderSessionID, id, AttributesHeader, "close-session")
	if rec.Code != http.StatusOK || rec.Header().Get(wire.HeaderClosedSessionID) != id {
		t.Fatalf("close: %d, Closed-Session-Id %q", rec.Code, rec.Header().Get(wire.HeaderClosedSessionID))
	}
	if rec = post(h, "after", wire.HeaderSessionID, id); rec.Code != http.StatusBadRequest {
		t.Fatalf("a closed session answered %d", rec.Code)
	}
	if rec = post(h, "x", wire.HeaderSessionID, "NEW_SESSION", AttributesHeader, "session-ttl=48h"); rec.Code != http.StatusBadRequest {
		t.Fatalf("session-ttl over the cap answered %d", rec.Code)
	}
	if rec = post(h, "", AttributesHeader, "info"); !strings.Contains(rec.Body.String(), `"instance":`) {
		t.Fatalf("info has no instance: %s", rec.Body)
	}
	if rec = post(h, "plain"); rec.Code != http.StatusOK || rec.Body.String() != "plain" {
		t.Fatalf("a call without a session is no longer echoed: %d %q", rec.Code, rec.Body)
	}
}
