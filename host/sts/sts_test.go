package sts

import (
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/internal/awsquery"
)

func serve(t *testing.T, s *Service, form string, c Caller) (int, string) {
	t.Helper()
	f, err := awsquery.Parse([]byte(form), awsquery.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	s.Serve(w, f, c, "req-1")
	return w.Code, html.UnescapeString(w.Body.String()) // XML's escapes (&#39;) read as the text they stand for
}

// TestAnswers: the caller's identity, the local one without credentials,
// none for an unsigned caller while policies are in force; STS's other
// operations and unknown actions are refused in STS's shape, saying which.
func TestAnswers(t *testing.T) {
	s := New(Options{Account: "111122223333"})
	const get = "Action=GetCallerIdentity&Version=2011-06-15"
	for name, c := range map[string]struct {
		caller Caller
		status int
		want   []string
	}{
		"user": {Caller{Principal: authz.PrincipalFromARN("arn:aws:iam::123456789012:user/team/alice")}, 200,
			[]string{"<Arn>arn:aws:iam::123456789012:user/team/alice</Arn>", "<Account>123456789012</Account>", "<UserId>AIDA"}},
		"session": {Caller{Principal: authz.PrincipalFromARN("arn:aws:sts::123456789012:assumed-role/R/s")}, 200,
			[]string{"<Arn>arn:aws:sts::123456789012:assumed-role/R/s</Arn>", ":s</UserId>", "<UserId>AROA"}},
		"local": {Caller{Local: true, Principal: authz.Principal{Anonymous: true}}, 200,
			[]string{"<Arn>arn:aws:sts::111122223333:assumed-role/mce-local/mce</Arn>", "<Account>111122223333</Account>"}},
		"unsigned": {Caller{Principal: authz.Principal{Anonymous: true}}, http.StatusForbidden,
			[]string{"<Code>MissingAuthenticationToken</Code>", "<RequestId>req-1</RequestId>"}},
	} {
		status, body := serve(t, s, get, c.caller)
		if status != c.status {
			t.Errorf("%s: %d %s, want %d", name, status, body, c.status)
		}
		for _, w := range c.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: %s lacks %s", name, body, w)
			}
		}
	}
	user := Caller{Principal: authz.PrincipalFromARN("arn:aws:iam::123456789012:user/alice")}
	for form, want := range map[string]string{
		"Action=AssumeRole&Version=2011-06-15&RoleArn=x&RoleSessionName=yy": "mce does not serve STS's AssumeRole",
		"Action=GetSessionToken&Version=2011-06-15":                         "mce does not serve STS's GetSessionToken",
		"Action=" + strings.Repeat("X", 200) + "&Version=2011-06-15":        "Could not find operation 'XXXX",
		"Version=2011-06-15": "Could not find operation ''",
	} {
		status, body := serve(t, s, form, user)
		if status != http.StatusBadRequest || !strings.Contains(body, "<Code>InvalidAction</Code>") || !strings.Contains(body, want) {
			t.Errorf("%.60s: %d %s, want 400 InvalidAction with %q", form, status, body, want)
		}
		if len(body) > 1024 {
			t.Errorf("%.60s: the answer is %d bytes: a caller's action name must be cut", form, len(body))
		}
	}
}
