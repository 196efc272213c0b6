package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/authz"
)

func exampleAuthz(t *testing.T) *authz.Authorizer {
	t.Helper()
	dir := filepath.Join("..", "examples", "authz")
	a, err := authz.Load(context.Background(), authz.Config{
		CredentialsFile: filepath.Join(dir, "credentials.yaml"),
		PoliciesFile:    filepath.Join(dir, "policies.yaml"),
		Region:          "us-east-1", Logger: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (h *harness) runtimeAs(key, secret string) *sagemakerruntime.Client {
	var creds aws.CredentialsProvider = aws.AnonymousCredentials{}
	if key != "" {
		creds = credentials.NewStaticCredentialsProvider(key, secret, "")
	}
	return sagemakerruntime.New(sagemakerruntime.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.http.URL),
		Credentials: creds, HTTPClient: h.http.Client()})
}

// TestAuthorizationDocPolicies enforces the SageMaker guide's direct
// invocation policies on requests signed by the Go SDK with different keys.
func TestAuthorizationDocPolicies(t *testing.T) {
	h := newHarness(t, Config{Authz: exampleAuthz(t)})
	if err := h.deploy(plan("my-mce", "Direct", map[string][]string{"AllTraffic": {"customIps1:A", "common2:B", "special3:C", "other4:D"}})); err != nil {
		t.Fatal(err)
	}
	alice := h.runtimeAs("AKIAALICE0000EXAMPLE", "alice-example-secret-key-000000000000")
	bob := h.runtimeAs("AKIABOB00000EXAMPLE", "bob-example-secret-key-00000000000000")
	cases := []struct {
		who     string
		c       *sagemakerruntime.Client
		host    string
		allowed bool
	}{
		{"alice", alice, "customIps1", true},
		{"alice", alice, "common2", true},
		{"alice", alice, "special3", false},
		{"alice", alice, "other4", false},
		{"bob", bob, "customIps1", true},
		{"bob", bob, "other4", true},
		{"bob", bob, "special3", false},
		{"anonymous", h.runtimeAs("", ""), "common2", false},
	}
	for _, tc := range cases {
		t.Run(tc.who+"/"+tc.host, func(t *testing.T) {
			_, err := tc.c.InvokeEndpoint(context.Background(), &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("my-mce"),
				TargetContainerHostname: aws.String(tc.host), Body: []byte("x")})
			if tc.allowed {
				if err != nil {
					t.Fatalf("denied: %v", err)
				}
				return
			}
			var ae smithy.APIError
			if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDeniedException" {
				t.Fatalf("err = %v, want AccessDeniedException", err)
			}
			if !strings.Contains(ae.ErrorMessage(), "is not authorized to perform: sagemaker:InvokeEndpoint on resource: arn:aws:sagemaker:us-east-1:123456789012:endpoint/my-mce") {
				t.Errorf("message = %q", ae.ErrorMessage())
			}
		})
	}

	t.Run("wrong secret", func(t *testing.T) {
		_, err := h.runtimeAs("AKIAALICE0000EXAMPLE", "not-the-secret").InvokeEndpoint(context.Background(),
			&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("my-mce"), TargetContainerHostname: aws.String("common2"), Body: []byte("x")})
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidSignatureException" {
			t.Fatalf("err = %v, want InvalidSignatureException", err)
		}
	})
	t.Run("unknown key", func(t *testing.T) {
		_, err := h.runtimeAs("AKIANOBODY000EXAMPLE", "x").InvokeEndpoint(context.Background(),
			&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("my-mce"), TargetContainerHostname: aws.String("common2"), Body: []byte("x")})
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "UnrecognizedClientException" {
			t.Fatalf("err = %v, want UnrecognizedClientException", err)
		}
	})
	t.Run("control plane", func(t *testing.T) {
		sm := func(key, secret string) *sagemaker.Client {
			return sagemaker.New(sagemaker.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.http.URL),
				Credentials: credentials.NewStaticCredentialsProvider(key, secret, ""), HTTPClient: h.http.Client()})
		}
		_, err := sm("AKIAALICE0000EXAMPLE", "alice-example-secret-key-000000000000").DeleteEndpoint(context.Background(),
			&sagemaker.DeleteEndpointInput{EndpointName: aws.String("my-mce")})
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDeniedException" || !strings.Contains(ae.ErrorMessage(), "sagemaker:DeleteEndpoint") {
			t.Fatalf("alice DeleteEndpoint: %v", err)
		}
		if _, err := sm("AKIAOPS00000EXAMPLE", "ops-example-secret-key-00000000000000").DescribeEndpoint(context.Background(),
			&sagemaker.DescribeEndpointInput{EndpointName: aws.String("my-mce")}); err != nil {
			t.Fatalf("ops DescribeEndpoint: %v", err)
		}
	})
}

// TestStatusPageNeedsListEndpoints: /mce/endpoints tells what ListEndpoints
// tells, so an unsigned caller without that permission is refused.
func TestStatusPageNeedsListEndpoints(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "creds.yaml"), []byte(`
Credentials:
  - AccessKeyId: AKIAOPS00000EXAMPLE
    SecretAccessKey: ops-secret
    Arn: arn:aws:iam::123456789012:user/ops
    Policies:
      - Name: all
        Document: {Version: "2012-10-17", Statement: [{Effect: Allow, Action: "sagemaker:*", Resource: "*"}]}
`), 0o600)
	a, err := authz.Load(context.Background(), authz.Config{CredentialsFile: filepath.Join(dir, "creds.yaml"), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{Authz: a})
	resp, err := h.http.Client().Get(h.http.URL + "/mce/endpoints")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || resp.Header.Get("X-Amzn-ErrorType") != "AccessDeniedException" {
		t.Errorf("unsigned /mce/endpoints: %d %s", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"))
	}
}
