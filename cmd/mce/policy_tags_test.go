package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyTagKeys: mce policy check refuses a condition key mce never
// sets, naming it; mce policy eval evaluates the tag keys, aws:TagKeys
// given once per tag key.
func TestPolicyTagKeys(t *testing.T) {
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
      - Statement:
          - {Effect: Allow, Action: "*", Resource: "*"}
          - {Effect: Deny, Action: "*", Resource: "*", Condition: {StringEquals: {"aws:PrincipalTag/team": red}}}
`)
	ctx := context.Background()
	if out, err := runCLI(ctx, "policy", "check", "--credentials", bad); err == nil || !strings.Contains(err.Error()+out, `condition key "aws:PrincipalTag/team": mce cannot evaluate it`) {
		t.Fatalf("policy check of a key mce never sets: %v\n%s", err, out)
	}
	good := write("good.yaml", `Credentials:
  - AccessKeyId: AKIAALICE0000EXAMPLE
    SecretAccessKey: s
    Arn: arn:aws:iam::123456789012:user/alice
    Policies:
      - Statement:
          - {Effect: Allow, Action: "*", Resource: "*"}
          - {Sid: NotProd, Effect: Deny, Action: "*", Resource: "*", Condition: {StringEquals: {"aws:ResourceTag/env": prod}}}
          - {Sid: NoOwner, Effect: Deny, Action: "*", Resource: "*", Condition: {"ForAnyValue:StringEquals": {"aws:TagKeys": owner}}}
`)
	if out, err := runCLI(ctx, "policy", "check", "--credentials", good); err != nil {
		t.Fatalf("policy check: %v\n%s", err, out)
	}
	eval := func(context ...string) error {
		args := []string{"policy", "eval", "--credentials", good, "--access-key-id", "AKIAALICE0000EXAMPLE",
			"--action", "sagemaker:AddTags", "--endpoint", "ep", "--fail-on-deny"}
		for _, c := range context {
			args = append(args, "--context", c)
		}
		_, err := runCLI(ctx, args...)
		return err
	}
	if err := eval("aws:ResourceTag/env=prod"); err == nil {
		t.Error("eval with aws:ResourceTag/env=prod: allowed")
	}
	if err := eval("aws:TagKeys=team", "aws:TagKeys=owner"); err == nil {
		t.Error("eval with aws:TagKeys team, owner: allowed")
	}
	if err := eval("aws:ResourceTag/env=dev", "aws:TagKeys=team"); err != nil {
		t.Errorf("eval with env=dev and TagKeys team: %v", err)
	}
	out, err := runCLI(ctx, "policy", "eval", "--credentials", good, "--access-key-id", "AKIAALICE0000EXAMPLE",
		"--action", "sagemaker:AddTags", "--endpoint", "ep", "--context", "aws:TagKeys=team", "--context", "aws:TagKeys=owner")
	if err != nil || !strings.Contains(out, `ForAnyValue:StringEquals aws:TagKeys ["owner"]: request ["team" "owner"] -> true`) {
		t.Errorf("eval's explanation of aws:TagKeys: %v\n%s", err, out)
	}
}
