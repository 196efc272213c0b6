package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyCheckWarnsOfStatementsThatNeverApply: mce policy check warns,
// with FILE:LINE, about a statement whose Action and Resource name nothing
// mce authorizes: a Deny of sagemaker:InvokeEndpoint on
// inference-component ARNs (invocations are authorized on the endpoint's
// ARN) used to pass in silence and deny nothing. --strict makes a warning
// exit 1; statements that can apply draw none.
func TestPolicyCheckWarnsOfStatementsThatNeverApply(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.yaml", `Credentials:
  - AccessKeyId: AKIAALICE0000EXAMPLE
    SecretAccessKey: s
    Arn: arn:aws:iam::123456789012:user/alice
    Policies:
      - Name: alice
        Document:
          Statement:
            - {Effect: Allow, Action: "*", Resource: "*"}
            - {Sid: NoSecretModel, Effect: Deny, Action: "sagemaker:InvokeEndpoint", Resource: "arn:aws:sagemaker:*:*:inference-component/secret-*"}
`)
	ctx := context.Background()
	out, err := runCLI(ctx, "policy", "check", "--credentials", bad)
	want := "warning: " + bad + `:10: policy "alice": statement alice:NoSecretModel (Deny) can never apply: mce authorizes sagemaker:InvokeEndpoint on arn:*:sagemaker:*:*:endpoint/*, and its Resource matches none of them`
	if err != nil || !strings.Contains(out, want) || !strings.Contains(out, "ok: policies load and compile (1 statement(s) can never apply)") {
		t.Fatalf("policy check: %v\n%s\nwant the warning\n%s", err, out, want)
	}
	var ee *exitError
	if _, err := runCLI(ctx, "policy", "check", "--strict", "--credentials", bad); !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("policy check --strict: %v; want exit status 1", err)
	}
	// In the host's region and account only, a statement naming another
	// account's ARNs can never apply either.
	other := write("other.yaml", `Credentials:
  - AccessKeyId: AKIAALICE0000EXAMPLE
    SecretAccessKey: s
    Arn: arn:aws:iam::123456789012:user/alice
    Policies:
      - Name: alice
        Document:
          Statement:
            - {Effect: Allow, Action: "*", Resource: "*"}
            - {Sid: TheirEndpoints, Effect: Deny, Action: "sagemaker:*", Resource: "arn:aws:sagemaker:us-east-1:999999999999:endpoint/*"}
`)
	if out, err := runCLI(ctx, "policy", "check", "--credentials", other); err != nil || strings.Contains(out, "warning") {
		t.Fatalf("policy check for any account: %v\n%s", err, out)
	}
	if out, err := runCLI(ctx, "policy", "check", "--credentials", other, "--region", "us-east-1", "--account", "123456789012"); err != nil ||
		!strings.Contains(out, `statement alice:TheirEndpoints (Deny) can never apply`) {
		t.Fatalf("policy check for account 123456789012: %v\n%s", err, out)
	}
	good := write("good.yaml", `Credentials:
  - AccessKeyId: AKIAALICE0000EXAMPLE
    SecretAccessKey: s
    Arn: arn:aws:iam::123456789012:user/alice
    Policies:
      - Name: alice
        Document:
          Statement:
            - {Effect: Allow, Action: "*", Resource: "*"}
            - {Effect: Deny, Action: "sagemaker:*", Resource: "arn:aws:sagemaker:*:*:inference-component/secret-*"}
            - {Effect: Deny, Action: "sagemaker:InvokeEndpoint*", Resource: "arn:aws:sagemaker:*:*:endpoint/prod-*"}
            - {Effect: Deny, Action: "s3:GetObject", Resource: "arn:aws:s3:::secrets/*"}
            - {Effect: Deny, Action: "logs:*", Resource: "arn:aws:logs:*:*:log-group:/aws/sagemaker/Endpoints/prod-*"}
            - {Effect: Deny, Action: "sagemaker:InvokeEndpoint", NotResource: "arn:aws:sagemaker:*:*:endpoint/*"}
`)
	if out, err := runCLI(ctx, "policy", "check", "--strict", "--credentials", good); err != nil || strings.Contains(out, "warning") {
		t.Fatalf("policy check of statements that apply: %v\n%s", err, out)
	}
}
