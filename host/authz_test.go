package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/spec"
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

// denyVictimAuthz: ops may do everything except on the endpoint "victim",
// where an explicit Deny scoped to its ARN applies.
func denyVictimAuthz(t *testing.T) *authz.Authorizer {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "creds.yaml"), []byte(`
Credentials:
  - AccessKeyId: AKIAOPS00000EXAMPLE
    SecretAccessKey: ops-secret
    Arn: arn:aws:iam::123456789012:user/ops
    Policies:
      - Name: all-but-victim
        Document:
          Version: "2012-10-17"
          Statement:
            - {Effect: Allow, Action: "sagemaker:*", Resource: "*"}
            - {Effect: Deny, Action: "sagemaker:*", Resource: "arn:aws:sagemaker:us-east-1:123456789012:endpoint/victim"}
`), 0o600)
	a, err := authz.Load(context.Background(), authz.Config{CredentialsFile: filepath.Join(dir, "creds.yaml"), Region: "us-east-1", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// signedControl sends a control-plane call with exactly body, signed by ops.
func (h *harness) signedControl(t *testing.T, op string, body []byte) (int, string, []byte) {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, h.http.URL+"/", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/x-amz-json-1.1")
	r.Header.Set("X-Amz-Target", "SageMaker."+op)
	resp, b := h.signedDo(t, r, body, "sagemaker", "AKIAOPS00000EXAMPLE", "ops-secret")
	return resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), b
}

// signedDo signs r, whose body is body, with SigV4 for service with the
// key and secret given, sends it to the harness and returns the answer
// and its whole body.
func (h *harness) signedDo(t *testing.T, r *http.Request, body []byte, service, key, secret string) (*http.Response, []byte) {
	t.Helper()
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: key, SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, hex.EncodeToString(sum[:]), service, "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := h.http.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestControlPlaneAuthorizesWhatItDecodes: a Deny scoped to one endpoint's
// ARN applies however the body spells the name. A body with a UTF-8 BOM was
// authorized against "*" (the authorization's own parse failed) while the
// operation's decoder accepted it, and the endpoint was deleted.
func TestControlPlaneAuthorizesWhatItDecodes(t *testing.T) {
	h := newHarness(t, Config{Authz: denyVictimAuthz(t)})
	for _, name := range []string{"victim", "other"} {
		if err := h.deploy(plan(name, "Serial", map[string][]string{"AllTraffic": {"c:A"}})); err != nil {
			t.Fatal(err)
		}
	}
	const denied, invalid = "AccessDeniedException", "ValidationException"
	bodies := []struct {
		name, body, want string
	}{
		{"plain", `{"EndpointName":"victim"}`, denied},
		{"BOM", "\xEF\xBB\xBF{\"EndpointName\":\"victim\"}", denied},
		{"escaped key", `{"\u0045ndpointName":"victim"}`, denied},
		{"escaped name", `{"EndpointName":"vict\u0069m"}`, denied},
		{"upper-case name", `{"EndpointName":"VICTIM"}`, denied},
		{"whitespace", " \r\n\t{ \"EndpointName\" :\n\"victim\" }\n", denied},
		{"BOM and duplicate", "\xEF\xBB\xBF{\"EndpointName\":\"other\",\"EndpointName\":\"victim\"}", invalid},
		{"case variant key", `{"endpointname":"victim"}`, invalid},
		{"both spellings", `{"EndpointName":"other","endpointName":"victim"}`, invalid},
		{"another member", `{"ModelName":"x","EndpointName":"victim"}`, invalid},
		{"truncated", "\xEF\xBB\xBF{\"EndpointName\":\"victim", invalid},
	}
	for _, op := range []string{"DeleteEndpoint", "DescribeEndpoint"} {
		for _, b := range bodies {
			t.Run(op+"/"+b.name, func(t *testing.T) {
				status, code, body := h.signedControl(t, op, []byte(b.body))
				if status < 400 || status >= 500 || code != b.want {
					t.Errorf("%s %q: %d %s %s; want %s", op, b.body, status, code, body, b.want)
				}
				if e := h.srv.reg.get("victim"); e == nil || e.Status() != spec.StatusInService {
					t.Fatalf("the victim endpoint was touched by %s %q", op, b.body)
				}
			})
		}
	}
	// The same spellings on another endpoint are allowed: the refusals
	// above came from the Deny, not from the spelling.
	if status, code, body := h.signedControl(t, "DescribeEndpoint", []byte("\xEF\xBB\xBF{\"EndpointName\":\"other\"}")); status != 200 {
		t.Fatalf("DescribeEndpoint other with a BOM: %d %s %s", status, code, body)
	}
}

// TestInvokeAuthorizesWhatItRoutes: the runtime path authorizes the
// endpoint it routes to, however the name is cased or escaped in the path.
func TestInvokeAuthorizesWhatItRoutes(t *testing.T) {
	h := newHarness(t, Config{Authz: denyVictimAuthz(t)})
	for _, name := range []string{"victim", "other"} {
		if err := h.deploy(plan(name, "Serial", map[string][]string{"AllTraffic": {"c:A"}})); err != nil {
			t.Fatal(err)
		}
	}
	ops := h.runtimeAs("AKIAOPS00000EXAMPLE", "ops-secret")
	for _, name := range []string{"victim", "VICTIM", "Victim", "vict%69m"} {
		_, err := ops.InvokeEndpoint(context.Background(), &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(name), Body: []byte("x")})
		var ae smithy.APIError
		if !errors.As(err, &ae) || (ae.ErrorCode() != "AccessDeniedException" && ae.ErrorCode() != "ValidationError") {
			t.Errorf("invoke %q: %v; want refused", name, err)
		}
	}
	if h.backend.container("victim/AllTraffic/c").calls.Load() != 0 {
		t.Fatal("the victim's container was called")
	}
	if _, err := ops.InvokeEndpoint(context.Background(), &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("Other"), Body: []byte("x")}); err != nil {
		t.Fatalf("invoke Other: %v", err)
	}
}

// TestReloadKeepsUnsignedCallersOut: emptying the credentials file while
// mce runs used to reload into "no policies", after which unsigned callers
// could create models. The reload is refused and the old policies stay.
func TestReloadKeepsUnsignedCallersOut(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "creds.yaml")
	os.WriteFile(creds, []byte(`
Credentials:
  - AccessKeyId: AKIAOPS00000EXAMPLE
    SecretAccessKey: ops-secret
    Arn: arn:aws:iam::123456789012:user/ops
    Policies:
      - {Version: "2012-10-17", Statement: [{Effect: Allow, Action: "sagemaker:*", Resource: "*"}]}
`), 0o600)
	a, err := authz.Load(context.Background(), authz.Config{CredentialsFile: creds, Region: "us-east-1", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{Authz: a})
	if err := os.WriteFile(creds, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(context.Background()); !errors.Is(err, authz.ErrReloadRefused) {
		t.Fatalf("Reload of an emptied credentials file: %v", err)
	}
	_, err = h.sm().CreateModel(context.Background(), &sagemaker.CreateModelInput{ModelName: aws.String("m"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("x")}})
	if code, _ := apiCode(t, err); code != "AccessDeniedException" {
		t.Fatalf("unsigned CreateModel after the reload: %v", err)
	}
	status, code, body := h.signedControl(t, "CreateModel", []byte(`{"ModelName":"m","PrimaryContainer":{"Image":"x"}}`))
	if status != 200 {
		t.Fatalf("signed CreateModel after the reload: %d %s %s", status, code, body)
	}
}

// TestAuthorizationAsync: InvokeEndpointAsync is authorized as
// sagemaker:InvokeEndpointAsync on the endpoint: a policy that allows only
// InvokeEndpoint does not allow it, "sagemaker:*" does.
func TestAuthorizationAsync(t *testing.T) {
	h := newHarness(t, Config{Authz: exampleAuthz(t)})
	p := plan("my-mce", "Direct", map[string][]string{"AllTraffic": {"customIps1:A"}})
	p.Async = &containers.AsyncPlan{OutputPath: "s3://b/out", FailurePath: "s3://b/failed", MaxConcurrentPerInstance: 1}
	if err := h.deploy(p); err != nil {
		t.Fatal(err)
	}
	in := &sagemakerruntime.InvokeEndpointAsyncInput{EndpointName: aws.String("my-mce"), InputLocation: aws.String("s3://b/in")}
	for _, tc := range []struct {
		who        string
		c          *sagemakerruntime.Client
		code, text string
	}{
		{"alice (InvokeEndpoint only)", h.runtimeAs("AKIAALICE0000EXAMPLE", "alice-example-secret-key-000000000000"), "AccessDeniedException", "sagemaker:InvokeEndpointAsync"},
		{"anonymous", h.runtimeAs("", ""), "AccessDeniedException", "sagemaker:InvokeEndpointAsync"},
		// Authorized; this host has no S3 access, which is the next thing it says.
		{"ops (sagemaker:*)", h.runtimeAs("AKIAOPS00000EXAMPLE", "ops-example-secret-key-00000000000000"), "ServiceUnavailable", "no S3 access"},
	} {
		_, err := tc.c.InvokeEndpointAsync(context.Background(), in, func(o *sagemakerruntime.Options) { o.RetryMaxAttempts = 1 })
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != tc.code || !strings.Contains(api.ErrorMessage(), tc.text) {
			t.Errorf("%s: %v; want %s %q", tc.who, err, tc.code, tc.text)
		}
	}
}
