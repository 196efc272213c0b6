package authz

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRoleARNs(t *testing.T) {
	for arn, want := range map[string]Role{
		"arn:aws:iam::123456789012:role/R":                  {ARN: "arn:aws:iam::123456789012:role/R", Name: "R", Path: "/", Account: "123456789012", Partition: "aws"},
		"arn:aws-cn:iam::123456789012:role/service-role/R2": {ARN: "arn:aws-cn:iam::123456789012:role/service-role/R2", Name: "R2", Path: "/service-role/", Account: "123456789012", Partition: "aws-cn"},
	} {
		if got, ok := ParseRoleARN(arn); !ok || got != want {
			t.Errorf("ParseRoleARN(%q) = %+v %v", arn, got, ok)
		}
	}
	for _, bad := range []string{"", "arn:aws:iam::123456789012:user/R", "arn:aws:iam::123456789012:role/", "arn:aws:iam::123456789012:role/a/", "arn:aws:sts::1:assumed-role/R/s", "arn:aws:iam:us-east-1:1:role/R"} {
		if _, ok := ParseRoleARN(bad); ok {
			t.Errorf("ParseRoleARN(%q) accepted", bad)
		}
	}
	r, session, ok := ParseAssumedRoleARN("arn:aws:sts::123456789012:assumed-role/R/me@example.com")
	if !ok || r.ARN != "arn:aws:iam::123456789012:role/R" || session != "me@example.com" {
		t.Errorf("ParseAssumedRoleARN = %+v %q %v", r, session, ok)
	}
	for _, bad := range []string{"arn:aws:sts::1:assumed-role/R", "arn:aws:sts::1:assumed-role/R/s/t", "arn:aws:sts::1:federated-user/x", "arn:aws:iam::1:role/R"} {
		if _, _, ok := ParseAssumedRoleARN(bad); ok {
			t.Errorf("ParseAssumedRoleARN(%q) accepted", bad)
		}
	}
	if a, b := UniqueID("arn:aws:sts::1:assumed-role/R/s"), UniqueID("arn:aws:iam::1:role/r"); !strings.HasPrefix(a, b+":") {
		t.Errorf("a session's ID %q is not its role's %q and its name", a, b)
	}
}

// TestRoleNamedByTwoARNs: IAM has one role of a name in an account; files
// that give it two paths are refused at load.
func TestRoleNamedByTwoARNs(t *testing.T) {
	dir := t.TempDir()
	cred := filepath.Join(dir, "c.yaml")
	os.WriteFile(cred, []byte(`
Credentials:
  - {AccessKeyId: AKIA1, SecretAccessKey: s, Arn: "arn:aws:iam::1:role/a/R", Policies: [{Name: p, Document: {Statement: {Effect: Allow, Action: "*", Resource: "*"}}}]}
  - {AccessKeyId: AKIA2, SecretAccessKey: s, Arn: "arn:aws:iam::1:role/b/r"}
`), 0o600)
	if _, err := Load(context.Background(), Config{CredentialsFile: cred}); err == nil || !strings.Contains(err.Error(), "two ARNs") {
		t.Fatalf("Load = %v, want the role named by two ARNs refused", err)
	}
}
