package host

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"

	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/pipeline/sessions"
)

var fakeSessionSeq atomic.Int64

// fakeSession answers a call of a stateful session as a stateful container
// does: NEW_SESSION opens one (ttl= in the custom attributes sets its life),
// close ends the session named; the body names the container's address.
func fakeSession(w http.ResponseWriter, r *http.Request, f *fakeContainer, sid string) {
	attrs := r.Header.Get(hdrCustomAttributes)
	switch {
	case sid == "NEW_SESSION":
		ttl := time.Hour
		if v, ok := strings.CutPrefix(attrs, "ttl="); ok {
			ttl, _ = time.ParseDuration(v)
		}
		id := fmt.Sprintf("s-%d", fakeSessionSeq.Add(1))
		w.Header().Set(hdrNewSessionID, id+"; Expires="+time.Now().Add(ttl).UTC().Format("2006-01-02T15:04:05Z"))
		sid = id
	case attrs == "close":
		w.Header().Set(hdrClosedSessionID, sid)
	}
	fmt.Fprintf(w, "%s %s", f.srv.URL, sid)
}

// TestSessionsStickAndClose: sessions opened on a 3-instance variant keep
// every call on their instance; a closed, expired or unknown session is a
// ValidationError; NEW_SESSION is refused on the response stream.
func TestSessionsStickAndClose(t *testing.T) {
	h := newHarness(t, Config{})
	p := plan("stateful", "Serial", map[string][]string{"v": {"primary:t"}})
	p.Variants[0].InstanceCount = 3
	if err := h.deploy(p); err != nil {
		t.Fatal(err)
	}
	type sess struct{ id, where string }
	var ss []sess
	where := map[string]int{}
	for range 12 {
		out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("stateful"), Body: body("x"),
			SessionId: aws.String("NEW_SESSION")})
		if err != nil {
			t.Fatal(err)
		}
		id, _, ok := strings.Cut(aws.ToString(out.NewSessionId), ";")
		if !ok {
			t.Fatalf("NewSessionId = %q", aws.ToString(out.NewSessionId))
		}
		url, _, _ := strings.Cut(string(out.Body), " ")
		ss = append(ss, sess{id, url})
		where[url]++
	}
	if len(where) < 2 {
		t.Errorf("12 NEW_SESSION calls all went to one instance: %v", where)
	}
	for i := range 120 {
		s := ss[i%len(ss)]
		out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("stateful"), Body: body("x"), SessionId: aws.String(s.id)})
		if err != nil {
			t.Fatal(err)
		}
		if got := string(out.Body); got != s.where+" "+s.id {
			t.Fatalf("session %s on %s answered by %q", s.id, s.where, got)
		}
	}
	// Close one: ClosedSessionId comes back, and the session is gone.
	out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("stateful"), Body: body("x"),
		SessionId: aws.String(ss[0].id), CustomAttributes: aws.String("close")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(out.ClosedSessionId) != ss[0].id {
		t.Fatalf("ClosedSessionId = %q", aws.ToString(out.ClosedSessionId))
	}
	_, err = h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("stateful"), Body: body("x"), SessionId: aws.String(ss[0].id)})
	wantAPIError(t, err, "ValidationError", "Session "+ss[0].id+" is not an open session of endpoint stateful")
	_, err = h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("stateful"), Body: body("x"), SessionId: aws.String("never-opened")})
	wantAPIError(t, err, "ValidationError", "never-opened")

	// Expiry: a session of one second is refused once it passed.
	out, err = h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("stateful"), Body: body("x"),
		SessionId: aws.String("NEW_SESSION"), CustomAttributes: aws.String("ttl=1s")})
	if err != nil {
		t.Fatal(err)
	}
	short, _, _ := strings.Cut(aws.ToString(out.NewSessionId), ";")
	time.Sleep(2100 * time.Millisecond) // Expires has whole seconds
	_, err = h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("stateful"), Body: body("x"), SessionId: aws.String(short)})
	wantAPIError(t, err, "ValidationError", short)

	// The response stream takes an existing session, never NEW_SESSION.
	_, err = h.client.InvokeEndpointWithResponseStream(t.Context(), &sagemakerruntime.InvokeEndpointWithResponseStreamInput{
		EndpointName: aws.String("stateful"), Body: body("x"), SessionId: aws.String("NEW_SESSION")})
	wantAPIError(t, err, "ValidationError", "sessionId")
	st, err := h.client.InvokeEndpointWithResponseStream(t.Context(), &sagemakerruntime.InvokeEndpointWithResponseStreamInput{
		EndpointName: aws.String("stateful"), Body: body("x"), SessionId: aws.String(ss[1].id)})
	if err != nil {
		t.Fatal(err)
	}
	st.GetStream().Close()

	// Too long or malformed ids are refused before any lookup.
	_, err = h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("stateful"), Body: body("x"), SessionId: aws.String(strings.Repeat("a", 1<<12))})
	wantAPIError(t, err, "ValidationError", "sessionId")
	// A session id of 1 MiB is refused (by the header limit or the
	// validation) and the endpoint serves on.
	if _, err = h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("stateful"), Body: body("x"), SessionId: aws.String(strings.Repeat("a", 1<<20))}); err == nil {
		t.Fatal("a 1 MiB session id was accepted")
	}
	if _, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("stateful"), Body: body("x"), SessionId: aws.String(ss[2].id)}); err != nil {
		t.Fatal(err)
	}

	// Scaling in removes instances: their sessions get the error.
	gone := 0
	e, err := h.srv.getEndpoint("stateful")
	if err != nil {
		t.Fatal(err)
	}
	v := e.route.Load().Variants()[0]
	v.SetInstances(v.Instances()[:1]) // as scaling in does
	for _, s := range ss[1:] {
		_, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("stateful"), Body: body("x"), SessionId: aws.String(s.id)})
		if err != nil {
			wantAPIError(t, err, "ValidationError", s.id)
			gone++
		}
	}
	if gone == 0 {
		t.Error("no session was lost when two of three instances went away")
	}
}

// TestSessionsOutliveRestart: the sessions' table is written through to
// the store and read back by the next start (containers outlive mce).
func TestSessionsOutliveRestart(t *testing.T) {
	st := openStore(t)
	h := newHarness(t, Config{Store: st})
	if err := h.deploy(plan("kept", "Serial", map[string][]string{"v": {"primary:t"}})); err != nil {
		t.Fatal(err)
	}
	out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("kept"), Body: body("x"), SessionId: aws.String("NEW_SESSION")})
	if err != nil {
		t.Fatal(err)
	}
	id, _, _ := strings.Cut(aws.ToString(out.NewSessionId), ";")
	again := sessions.Open(sessions.Options{}, store.SessionBacking{S: st}, nil)
	s, err := again.Lookup("kept", "", id)
	if err != nil || s.Variant != "v" || s.Instance == "" {
		t.Fatalf("read back: %+v, %v", s, err)
	}
	h.srv.deleteEndpoint(h.srv.reg.get("kept"))
	for deadline := time.Now().Add(10 * time.Second); h.srv.sessions.Len() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := sessions.Open(sessions.Options{}, store.SessionBacking{S: st}, nil).Lookup("kept", "", id); err == nil {
		t.Fatal("a session of a deleted endpoint was read back")
	}
}
