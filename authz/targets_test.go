package authz

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGlobsMeet(t *testing.T) {
	for _, c := range []struct {
		p, q string
		want bool
	}{
		{"arn:aws:sagemaker:*:*:inference-component/*", "arn:aws:sagemaker:us-east-1:123:endpoint/*", false},
		{"arn:aws:sagemaker:*:*:endpoint/*", "arn:aws:sagemaker:us-east-1:123:endpoint/*", true},
		{"arn:aws:sagemaker:us-east-1:123:endpoint/prod", "arn:aws:sagemaker:us-east-1:123:endpoint/*", true},
		{"arn:aws:sagemaker:us-west-2:123:endpoint/prod", "arn:aws:sagemaker:us-east-1:123:endpoint/*", false},
		{"arn:aws:sagemaker:*", "arn:aws:sagemaker:us-east-1:123:model/*", true},
		{"arn:aws:sagemaker:*:*:inference-component/*", "arn:aws:sagemaker:*:*:endpoint/*", false},
		{"arn:aws:sagemaker:*:*:endpoint/a/b", "arn:aws:sagemaker:*:*:endpoint/*", false}, // names hold no '/'
		{"arn:aws:sagemaker:*:*:endpoint/a*b", "arn:aws:sagemaker:*:*:endpoint/*", true},
		{"arn:aws:sagemaker:*:*:endpoint/a?b", "arn:aws:sagemaker:*:*:endpoint/*", true},
		{"*", "arn:aws:s3:::**", true},
		{"arn:aws:s3:::bucket/a/b:c", "arn:aws:s3:::**", true},
		{"arn:aws:s3:::bucket/a/b:c", "arn:aws:s3:::*", false},
		{"arn:aws:logs:*:*:log-group:/aws/sagemaker/Endpoints/x:*", "arn:aws:logs:r:a:log-group:/aws/sagemaker/Endpoints/*:**", true},
		{"arn:aws:sagemaker:??-east-1:*:endpoint/x", "arn:aws:sagemaker:us-east-1:123:endpoint/*", true},
		{"arn:aws:sagemaker:?-east-1:*:endpoint/x", "arn:aws:sagemaker:us-east-1:123:endpoint/*", false},
		{"arn:aws:sagemaker:us-east-1:123:Endpoint/x", "arn:aws:sagemaker:us-east-1:123:endpoint/*", false}, // ARNs match case-sensitively
		{"a*b*c", "*x*", true},
		{"a?c", "abc", true},
		{"a?", "abc", false},
		{"", "*", true},
		{"", "", true},
		{"a", "", false},
	} {
		if got := globsMeet(c.p, c.q); got != c.want {
			t.Errorf("globsMeet(%q, %q) = %v, want %v", c.p, c.q, got, c.want)
		}
	}
}

// TestUnreachableStatements: with Targets, a statement that can never
// apply is reported with its file and line; one that can is not. mce
// policy check used to accept a Deny of sagemaker:InvokeEndpoint on
// inference-component ARNs in silence, though invocations are authorized
// on the endpoint's ARN: it denied nothing.
func TestUnreachableStatements(t *testing.T) {
	dir := t.TempDir()
	creds := `Credentials:
  - AccessKeyId: AKIADEV00000EXAMPLE
    SecretAccessKey: dev-secret
    Arn: arn:aws:iam::123456789012:user/dev
    Policies:
      - Name: dev
        Document:
          Version: "2012-10-17"
          Statement:
            - {Sid: Everything, Effect: Allow, Action: "*", Resource: "*"}
            - {Sid: NoComponentCalls, Effect: Deny, Action: "sagemaker:InvokeEndpoint", Resource: "arn:aws:sagemaker:*:*:inference-component/*"}
            - {Sid: NoProdCalls, Effect: Deny, Action: "sagemaker:Invoke*", Resource: "arn:aws:sagemaker:*:*:endpoint/prod-*"}
            - {Sid: ListOneEndpoint, Effect: Allow, Action: "sagemaker:ListEndpoints", Resource: "arn:aws:sagemaker:*:*:endpoint/mine"}
            - {Sid: Training, Effect: Deny, Action: "sagemaker:CreateTrainingJob", Resource: "*"}
            - {Sid: OtherRegion, Effect: Deny, Action: "sagemaker:DeleteEndpoint", Resource: "arn:aws:sagemaker:eu-west-1:123456789012:endpoint/*"}
            - {Sid: NotRes, Effect: Deny, Action: "sagemaker:InvokeEndpoint", NotResource: "arn:aws:sagemaker:*:*:inference-component/*"}
            - {Sid: Objects, Effect: Deny, Action: "s3:GetObject", Resource: "arn:aws:s3:::secret/*"}
`
	path := filepath.Join(dir, "creds.yaml")
	if err := os.WriteFile(path, []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	targets := Targets{
		"sagemaker:InvokeEndpoint":               {"arn:aws:sagemaker:us-east-1:123456789012:endpoint/*"},
		"sagemaker:InvokeEndpointAsync":          {"arn:aws:sagemaker:us-east-1:123456789012:endpoint/*"},
		"sagemaker:ListEndpoints":                {ResourceNone},
		"sagemaker:DeleteEndpoint":               {"arn:aws:sagemaker:us-east-1:123456789012:endpoint/*"},
		"sagemaker:DeleteInferenceComponent":     {"arn:aws:sagemaker:us-east-1:123456789012:inference-component/*"},
		"s3:GetObject":                           {"arn:aws:s3:::**"},
		"sagemaker:CreateInferenceComponent":     {"arn:aws:sagemaker:us-east-1:123456789012:inference-component/*", "arn:aws:sagemaker:us-east-1:123456789012:endpoint/*"},
		"sagemaker:InvokeEndpointWithResponseSt": {"arn:aws:sagemaker:us-east-1:123456789012:endpoint/*"},
	}
	a, err := Load(context.Background(), Config{CredentialsFile: path, Targets: targets})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(a.Warnings(), "\n")
	want := path + `:11: policy "dev": statement dev:NoComponentCalls (Deny) can never apply: mce authorizes sagemaker:InvokeEndpoint on arn:aws:sagemaker:us-east-1:123456789012:endpoint/*, and its Resource matches none of them
` + path + `:13: policy "dev": statement dev:ListOneEndpoint (Allow) can never apply: mce authorizes sagemaker:ListEndpoints on *, and its Resource matches none of them
` + path + `:14: policy "dev": statement dev:Training (Deny) can never apply: its Action names no action mce authorizes
` + path + `:15: policy "dev": statement dev:OtherRegion (Deny) can never apply: mce authorizes sagemaker:DeleteEndpoint on arn:aws:sagemaker:us-east-1:123456789012:endpoint/*, and its Resource matches none of them`
	if got != want {
		t.Errorf("warnings:\n%s\nwant:\n%s", got, want)
	}
	// Without Targets nothing is judged.
	a, err = Load(context.Background(), Config{CredentialsFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if w := a.Warnings(); len(w) != 0 {
		t.Errorf("warnings without Targets: %q", w)
	}
}
