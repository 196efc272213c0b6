package authz

import (
	"context"
	"io"
	"testing"
)

// TestExamples keeps examples/authz loading and its Rego tests passing.
func TestExamples(t *testing.T) {
	const dir = "../examples/authz/"
	a, err := Load(context.Background(), Config{
		CredentialsFile: dir + "credentials.yaml",
		PoliciesFile:    dir + "policies.yaml",
		RegoPaths:       []string{dir + "rego"},
	})
	if err != nil {
		t.Fatal(err)
	}
	bob, _ := a.LookupAccessKey("AKIABOB00000EXAMPLE")
	in := Input{Principal: bob, Action: ActionInvokeEndpoint, Resource: EndpointARN("us-east-1", "123456789012", "my-mce"),
		Context: map[string]string{KeyTargetContainerHostname: "special-1"}}
	if d, err := a.Authorize(context.Background(), in); err != nil || d.Allowed || !d.ExplicitDeny {
		t.Fatalf("bob special-1: %+v, %v", d, err)
	}
	sum, err := RunRegoTests(context.Background(), []string{dir + "rego"}, io.Discard)
	if err != nil || !sum.OK() {
		t.Fatalf("%+v, %v", sum, err)
	}
}
