package iam

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/internal/awsquery"
)

func call(t *testing.T, s *Service, form string) (int, string) {
	t.Helper()
	f, err := awsquery.Parse([]byte(form), awsquery.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(form))
	s.Serve(w, r, f, authz.Principal{Anonymous: true}, func(context.Context, string, string) error { return nil }, "req-1")
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(b)
}

// TestHostileSimulations: what a caller chooses is bounded and refused in
// IAM's words — a forged Marker, MaxItems out of range, policies mce would
// have to add to the simulation, a list too long, a context key of a type
// IAM does not have.
func TestHostileSimulations(t *testing.T) {
	s := New(Options{Account: "123456789012"})
	base := "Action=SimulatePrincipalPolicy&Version=2010-05-08&PolicySourceArn=" + url.QueryEscape("arn:aws:iam::123456789012:role/R") + "&ActionNames.member.1=sagemaker:CreateModel"
	for name, c := range map[string]struct {
		form string
		code string
	}{
		"forged marker":    {base + "&Marker=bWNlLXNpbXVsYXRlOjk5", "InvalidInput"},
		"garbage marker":   {base + "&Marker=%00%01", "InvalidInput"},
		"MaxItems 0":       {base + "&MaxItems=0", "ValidationError"},
		"MaxItems 1001":    {base + "&MaxItems=1001", "ValidationError"},
		"PolicyInputList":  {base + "&PolicyInputList.member.1=%7B%7D", "InvalidInput"},
		"ResourcePolicy":   {base + "&ResourcePolicy=%7B%7D", "InvalidInput"},
		"no actions":       {strings.Replace(base, "&ActionNames.member.1=sagemaker:CreateModel", "", 1), "ValidationError"},
		"action form":      {base + "&ActionNames.member.2=CreateModel", "InvalidInput"},
		"context type":     {base + "&ContextEntries.member.1.ContextKeyName=k&ContextEntries.member.1.ContextKeyValues.member.1=v&ContextEntries.member.1.ContextKeyType=blob", "InvalidInput"},
		"two values":       {base + "&ContextEntries.member.1.ContextKeyName=k&ContextEntries.member.1.ContextKeyValues.member.1=v&ContextEntries.member.1.ContextKeyValues.member.2=w&ContextEntries.member.1.ContextKeyType=string", "InvalidInput"},
		"short source arn": {strings.Replace(base, url.QueryEscape("arn:aws:iam::123456789012:role/R"), "x", 1), "ValidationError"},
		"too many actions": {base + manyActions(1001), "InvalidInput"},
		"other operation":  {"Action=DeleteRole&Version=2010-05-08&RoleName=R", "InvalidAction"},
	} {
		status, body := call(t, s, c.form)
		if status/100 != 4 || !strings.Contains(body, "<Code>"+c.code+"</Code>") || !strings.Contains(body, "<RequestId>req-1</RequestId>") {
			t.Errorf("%s: %d %s, want %s", name, status, body, c.code)
		}
	}
	// Pages: 3 actions × 1 resource, 2 a page: the Marker of the first
	// page gives the third result and the end.
	form := base + "&ActionNames.member.2=sagemaker:DeleteModel&ActionNames.member.3=sagemaker:ListModels&MaxItems=2"
	_, body := call(t, s, form)
	if strings.Count(body, "<EvalActionName>") != 2 || !strings.Contains(body, "<IsTruncated>true</IsTruncated>") {
		t.Fatalf("first page: %s", body)
	}
	marker := body[strings.Index(body, "<Marker>")+len("<Marker>") : strings.Index(body, "</Marker>")]
	_, body = call(t, s, form+"&Marker="+url.QueryEscape(marker))
	if strings.Count(body, "<EvalActionName>") != 1 || !strings.Contains(body, "sagemaker:ListModels") || !strings.Contains(body, "<IsTruncated>false</IsTruncated>") {
		t.Fatalf("second page: %s", body)
	}
}

func manyActions(n int) string {
	var b strings.Builder
	for i := 2; i <= n+1; i++ {
		b.WriteString("&ActionNames.member." + strconv.Itoa(i) + "=sagemaker:X")
	}
	return b.String()
}

// TestExecutionRolesAreKnown: with policies in force, GetRole knows the
// roles the files name and those models name as their ExecutionRoleArn,
// and no other.
func TestExecutionRolesAreKnown(t *testing.T) {
	dir := t.TempDir()
	cred := dir + "/c.yaml"
	if err := writeFile(cred, `
Credentials:
  - {AccessKeyId: AKIA1, SecretAccessKey: s, Arn: "arn:aws:iam::123456789012:user/u", Policies: [{Name: p, Document: {Statement: {Effect: Allow, Action: "*", Resource: "*"}}}]}
`); err != nil {
		t.Fatal(err)
	}
	a, err := authz.Load(context.Background(), authz.Config{CredentialsFile: cred})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Authorizer: a, Account: "123456789012", ExecutionRoles: func() []string {
		return []string{"arn:aws:iam::123456789012:role/service-role/ModelRole", "not an arn"}
	}})
	if status, body := call(t, s, "Action=GetRole&Version=2010-05-08&RoleName=ModelRole"); status != 200 ||
		!strings.Contains(body, "<Arn>arn:aws:iam::123456789012:role/service-role/ModelRole</Arn>") {
		t.Errorf("GetRole ModelRole: %d %s", status, body)
	}
	if status, body := call(t, s, "Action=GetRole&Version=2010-05-08&RoleName=Other"); status != 404 || !strings.Contains(body, "<Code>NoSuchEntity</Code>") {
		t.Errorf("GetRole Other: %d %s", status, body)
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }
