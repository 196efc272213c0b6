package authz

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// testNow is the server clock of the SigV4 tests.
var testNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

const (
	aliceKey    = "AKIAALICE0000EXAMPLE"
	aliceSecret = "alice/secret+key0000000000000000000000"
	aliceARN    = "arn:aws:iam::123456789012:user/alice"
	tokenKey    = "AKIATOKEN000EXAMPLE"
	tokenSecret = "token-secret-key-00000000000000000000"
)

func loadTestdata(t testing.TB, regoPaths ...string) *Authorizer {
	t.Helper()
	a, err := Load(context.Background(), Config{
		CredentialsFile: "testdata/credentials.yaml",
		PoliciesFile:    "testdata/policies.yaml",
		RegoPaths:       regoPaths,
		Region:          "us-east-1",
		Now:             func() time.Time { return testNow },
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// authServer answers every request with the principal Authenticate found,
// or the AuthError in SageMaker's error shape.
func authServer(t testing.TB, a *Authorizer) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 6<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		p, err := a.Authenticate(r, body)
		w.Header().Set("Content-Type", "application/json")
		if ae, ok := IsAuthError(err); ok {
			w.Header().Set("X-Amzn-ErrorType", ae.Code)
			w.WriteHeader(ae.Status)
			_ = json.NewEncoder(w).Encode(map[string]string{"__type": ae.Code, "Message": ae.Message})
			return
		} else if err != nil {
			t.Errorf("Authenticate: %v (not an *AuthError)", err)
			w.WriteHeader(500)
			return
		}
		who := p.ARN
		if p.Anonymous {
			who = "anonymous"
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"principal": who})
	}))
	t.Cleanup(s.Close)
	return s
}

type authReply struct {
	status    int
	principal string
	code      string
	message   string
}

func send(t *testing.T, req *http.Request) authReply {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("decode reply (status %d): %v", resp.StatusCode, err)
	}
	return authReply{resp.StatusCode, m["principal"], m["__type"], m["Message"]}
}

func sha256HexOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// signWithSDK signs r as alice, 3 s before testNow, with the SDK's signer.
func signWithSDK(t testing.TB, r *http.Request, body []byte) {
	t.Helper()
	creds := aws.Credentials{AccessKeyID: aliceKey, SecretAccessKey: aliceSecret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, sha256HexOf(body), "sagemaker", "us-east-1", testNow.Add(-3*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// signedRequest builds a request to base+path and signs it with the SDK's
// signer, as the sagemakerruntime / sagemaker clients do.
type reqSpec struct {
	runtime bool // POST /endpoints/my-mce/invocations vs POST / (awsJson1_1)
	key     string
	secret  string
	token   string
	at      time.Time
	path    string // overrides the runtime path (already escaped)
	query   string
}

func signedRequest(t testing.TB, base string, spec reqSpec) (*http.Request, []byte) {
	t.Helper()
	var body []byte
	var req *http.Request
	var err error
	if spec.runtime {
		body = []byte(`{"instances": [[1.0, 2.0, 3.0]]}`)
		p := spec.path
		if p == "" {
			p = "/endpoints/my-mce/invocations"
		}
		u, perr := url.Parse(base + p)
		if perr != nil {
			t.Fatal(perr)
		}
		u.RawQuery = spec.query
		req, err = http.NewRequest(http.MethodPost, u.String(), bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json")
			req.Header.Set("X-Amzn-SageMaker-Target-Model", "company_a/model.tar.gz")
			req.Header.Set("X-Amzn-SageMaker-Target-Container-Hostname", "customIps1")
		}
	} else {
		body = []byte(`{"EndpointName":"my-mce"}`)
		req, err = http.NewRequest(http.MethodPost, base+"/", bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-amz-json-1.1")
			req.Header.Set("X-Amz-Target", "SageMaker.DescribeEndpoint")
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if spec.key == "" {
		spec.key, spec.secret = aliceKey, aliceSecret
	}
	if spec.at.IsZero() {
		spec.at = testNow.Add(-3 * time.Second)
	}
	creds := aws.Credentials{AccessKeyID: spec.key, SecretAccessKey: spec.secret, SessionToken: spec.token}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, sha256HexOf(body), "sagemaker", "us-east-1", spec.at); err != nil {
		t.Fatal(err)
	}
	return req, body
}

func TestAuthenticateSDKSigner(t *testing.T) {
	a := loadTestdata(t)
	srv := authServer(t, a)

	type tc struct {
		name     string
		spec     reqSpec
		tamper   func(r *http.Request, body []byte)
		wantCode string
		wantMsg  string
	}
	cases := []tc{
		{name: "good signature"},
		{name: "wrong secret", spec: reqSpec{key: aliceKey, secret: "not-the-secret"},
			wantCode: CodeInvalidSignature, wantMsg: "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."},
		{name: "unknown key", spec: reqSpec{key: "AKIANOBODY00EXAMPLE", secret: "x"},
			wantCode: CodeUnrecognizedClient, wantMsg: "The security token included in the request is invalid."},
		{name: "expired", spec: reqSpec{at: testNow.Add(-16 * time.Minute)},
			wantCode: CodeInvalidSignature, wantMsg: "Signature expired: 20261122T114400Z is now earlier than 20261122T114500Z (20261122T120000Z - 15 min.)"},
		{name: "in the future", spec: reqSpec{at: testNow.Add(16 * time.Minute)},
			wantCode: CodeInvalidSignature, wantMsg: "Signature not yet current: 20261122T121600Z is still later than 20261122T121500Z (20261122T120000Z + 15 min.)"},
		{name: "tampered body", tamper: func(r *http.Request, body []byte) {
			b := bytes.Replace(body, []byte("my-mce"), []byte("my-mcf"), 1)
			b = bytes.Replace(b, []byte("1.0"), []byte("9.0"), 1)
			r.Body = io.NopCloser(bytes.NewReader(b))
		}, wantCode: CodeInvalidSignature, wantMsg: "does not match"},
		{name: "tampered header", tamper: func(r *http.Request, _ []byte) {
			r.Header.Set("Content-Type", "text/csv")
		}, wantCode: CodeInvalidSignature, wantMsg: "content-type:text/csv"},
		{name: "signed header removed", tamper: func(r *http.Request, _ []byte) {
			r.Header.Del("X-Amz-Target")
			r.Header.Del("X-Amzn-SageMaker-Target-Model")
		}, wantCode: CodeInvalidSignature, wantMsg: "Signed headers missing from the request"},
		{name: "unsigned header added is fine", tamper: func(r *http.Request, _ []byte) {
			r.Header.Set("X-Forwarded-For", "10.0.0.1")
		}},
		{name: "tampered path", tamper: func(r *http.Request, _ []byte) {
			r.URL.Path = strings.Replace(r.URL.Path, "/", "//", 1)
		}, wantCode: CodeInvalidSignature},
		{name: "malformed authorization", tamper: func(r *http.Request, _ []byte) {
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+aliceKey+"/20261122/us-east-1/sagemaker/aws4_request")
		}, wantCode: CodeIncompleteSignature, wantMsg: "Authorization header requires 'Signature' parameter. Authorization header requires 'SignedHeaders' parameter."},
		{name: "missing equal sign", tamper: func(r *http.Request, _ []byte) {
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential "+aliceKey+"/20261122/us-east-1/sagemaker/aws4_request, SignedHeaders=host, Signature=00")
		}, wantCode: CodeIncompleteSignature, wantMsg: "not a valid key=value pair (missing equal-sign) in Authorization header"},
		{name: "bearer token", tamper: func(r *http.Request, _ []byte) {
			r.Header.Set("Authorization", "Bearer abc")
		}, wantCode: CodeIncompleteSignature, wantMsg: "Authorization header requires 'Credential' parameter."},
		{name: "wrong service", tamper: func(r *http.Request, _ []byte) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/sagemaker/", "/runtime.sagemaker/", 1))
		}, wantCode: CodeInvalidSignature, wantMsg: "Credential should be scoped to correct service: 'sagemaker'."},
		{name: "wrong region", tamper: func(r *http.Request, _ []byte) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/us-east-1/", "/eu-west-1/", 1))
		}, wantCode: CodeInvalidSignature, wantMsg: "Credential should be scoped to a valid region"},
		{name: "no X-Amz-Date", tamper: func(r *http.Request, _ []byte) {
			r.Header.Del("X-Amz-Date")
		}, wantCode: CodeIncompleteSignature, wantMsg: "X-Amz-Date"},
		{name: "content sha256 header mismatch", tamper: func(r *http.Request, _ []byte) {
			r.Header.Set("X-Amz-Content-Sha256", sha256HexOf([]byte("other")))
		}, wantCode: CodeInvalidSignature, wantMsg: "x-amz-content-sha256"},
		{name: "presigned query refused", tamper: func(r *http.Request, _ []byte) {
			r.URL.RawQuery = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=00"
		}, wantCode: CodeIncompleteSignature, wantMsg: "presigned URLs"},
		{name: "unsigned is anonymous", tamper: func(r *http.Request, _ []byte) {
			r.Header.Del("Authorization")
		}},
		{name: "session token required", spec: reqSpec{key: tokenKey, secret: tokenSecret},
			wantCode: CodeUnrecognizedClient},
		{name: "session token good", spec: reqSpec{key: tokenKey, secret: tokenSecret, token: "the-session-token"}},
		{name: "session token wrong", spec: reqSpec{key: tokenKey, secret: tokenSecret, token: "other"},
			wantCode: CodeUnrecognizedClient},
		{name: "session token not echoed", spec: reqSpec{key: tokenKey, secret: tokenSecret, token: "the-session-token"},
			tamper:   func(r *http.Request, _ []byte) { r.Header.Set("Content-Type", "text/plain") },
			wantCode: CodeInvalidSignature, wantMsg: "x-amz-security-token:<redacted>\n"},
		{name: "token on a key without one", spec: reqSpec{key: aliceKey, secret: aliceSecret, token: "x"},
			wantCode: CodeUnrecognizedClient},
	}
	for _, runtime := range []bool{true, false} {
		api := "POST /"
		if runtime {
			api = "POST /endpoints/x/invocations"
		}
		for _, c := range cases {
			t.Run(api+"/"+c.name, func(t *testing.T) {
				spec := c.spec
				spec.runtime = runtime
				req, body := signedRequest(t, srv.URL, spec)
				if c.tamper != nil {
					c.tamper(req, body)
				}
				got := send(t, req)
				if c.wantCode == "" {
					want := aliceARN
					switch {
					case req.Header.Get("Authorization") == "":
						want = "anonymous"
					case spec.key == tokenKey:
						want = "arn:aws:iam::123456789012:user/dave"
					}
					if got.status != 200 || got.principal != want {
						t.Fatalf("got %+v, want 200 as %s", got, want)
					}
					return
				}
				if got.code != c.wantCode || !strings.Contains(got.message, c.wantMsg) {
					t.Fatalf("got %d %s %q\nwant %s containing %q", got.status, got.code, got.message, c.wantCode, c.wantMsg)
				}
				wantStatus := 403
				if c.wantCode == CodeIncompleteSignature || req.Header.Get("X-Amz-Target") != "" {
					wantStatus = 400
				}
				if got.status != wantStatus {
					t.Fatalf("status %d, want %d", got.status, wantStatus)
				}
			})
		}
	}
}

// TestAuthenticateEncodedPathAndQuery checks the canonical URI (the escaped
// path encoded again) and the canonical query against the SDK's signer.
func TestAuthenticateEncodedPathAndQuery(t *testing.T) {
	a := loadTestdata(t)
	srv := authServer(t, a)
	for _, c := range []struct{ path, query string }{
		{"/endpoints/a%3Ab/invocations", ""},
		{"/endpoints/with%20space/invocations", ""},
		{"/endpoints/x/invocations", "b=2&a=1&a=0&sp=x%20y&plus=%2B&empty="},
		{"/endpoints/%E2%9C%93/invocations", "k=%E2%9C%93"},
	} {
		t.Run(c.path+"?"+c.query, func(t *testing.T) {
			req, _ := signedRequest(t, srv.URL, reqSpec{runtime: true, path: c.path, query: c.query})
			if got := send(t, req); got.status != 200 || got.principal != aliceARN {
				t.Fatalf("got %+v", got)
			}
		})
	}
}

func TestAuthenticateWithoutCredentialsFile(t *testing.T) {
	a, err := Load(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, a)
	req, _ := signedRequest(t, srv.URL, reqSpec{runtime: true, key: "AKIAANY", secret: "whatever"})
	if got := send(t, req); got.status != 200 || got.principal != "anonymous" {
		t.Fatalf("got %+v, want anonymous (no credentials file: nothing is verified)", got)
	}
	if a.Enabled() {
		t.Fatal("Enabled with no policies")
	}
	d, err := a.Authorize(context.Background(), Input{Action: ActionDeleteEndpoint, Resource: "*"})
	if err != nil || !d.Allowed {
		t.Fatalf("dev mode: got %+v, %v; want allowed", d, err)
	}
}

func TestAuthErrorIs(t *testing.T) {
	var err error = &AuthError{Status: 403, Code: CodeInvalidSignature, Message: "m"}
	wrapped := errors.Join(errors.New("x"), err)
	if ae, ok := IsAuthError(wrapped); !ok || ae.Code != CodeInvalidSignature {
		t.Fatal("IsAuthError did not find the wrapped error")
	}
}

// TestCloudWatchIsSignedForMonitoring: CloudWatch metrics calls, in each of
// their protocols (AWS JSON 1.0 by X-Amz-Target, RPC v2 CBOR by path, the
// query protocol as a form POSTed to /), are signed for "monitoring" as
// CloudWatch's clients sign them; a signature for "sagemaker" is refused
// for them, and theirs for SageMaker's calls (an invocation whose body is a
// form included).
func TestCloudWatchIsSignedForMonitoring(t *testing.T) {
	srv := authServer(t, loadTestdata(t))
	for _, c := range []struct {
		name, path, target, contentType, service, want string
	}{
		{"json", "/", "GraniteServiceVersion20100801.GetMetricStatistics", "application/x-amz-json-1.0", "monitoring", ""},
		{"json as sagemaker", "/", "GraniteServiceVersion20100801.GetMetricStatistics", "application/x-amz-json-1.0", "sagemaker", "Credential should be scoped to correct service: 'monitoring'."},
		{"cbor", "/service/GraniteServiceVersion20100801/operation/GetMetricData", "", "application/cbor", "monitoring", ""},
		{"cbor as sagemaker", "/service/GraniteServiceVersion20100801/operation/GetMetricData", "", "application/cbor", "sagemaker", "'monitoring'"},
		{"query", "/", "", "application/x-www-form-urlencoded; charset=utf-8", "monitoring", ""},
		{"query as sagemaker", "/", "", "application/x-www-form-urlencoded", "sagemaker", "'monitoring'"},
		{"control plane as monitoring", "/", "SageMaker.ListEndpoints", "application/x-amz-json-1.1", "monitoring", "'sagemaker'"},
		{"a form invocation is SageMaker's", "/endpoints/ep/invocations", "", "application/x-www-form-urlencoded", "sagemaker", ""},
		{"a form invocation as monitoring", "/endpoints/ep/invocations", "", "application/x-www-form-urlencoded", "monitoring", "'sagemaker'"},
	} {
		body := []byte("Action=ListMetrics&Version=2010-08-01")
		req, _ := http.NewRequest(http.MethodPost, srv.URL+c.path, bytes.NewReader(body))
		if c.target != "" {
			req.Header.Set("X-Amz-Target", c.target)
		}
		req.Header.Set("Content-Type", c.contentType)
		creds := aws.Credentials{AccessKeyID: aliceKey, SecretAccessKey: aliceSecret}
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, sha256HexOf(body), c.service, "us-east-1", testNow.Add(-3*time.Second)); err != nil {
			t.Fatal(err)
		}
		got := send(t, req)
		switch {
		case c.want == "" && got.principal == "":
			t.Errorf("%s: %+v, want accepted", c.name, got)
		case c.want != "" && (got.code != CodeInvalidSignature || !strings.Contains(got.message, c.want)):
			t.Errorf("%s: %+v, want %q", c.name, got, c.want)
		}
	}
}

// TestSigningServiceFollowsTheTarget: CloudWatch Logs calls are signed for
// service "logs", every other call for "sagemaker"; a signature for one is
// refused for the other.
func TestSigningServiceFollowsTheTarget(t *testing.T) {
	srv := authServer(t, loadTestdata(t))
	for _, c := range []struct {
		target, service, want string
	}{
		{"Logs_20140328.FilterLogEvents", "logs", ""},
		{"Logs_20140328.FilterLogEvents", "sagemaker", "Credential should be scoped to correct service: 'logs'."},
		{"SageMaker.ListEndpoints", "logs", "Credential should be scoped to correct service: 'sagemaker'."},
		{"SageMaker.ListEndpoints", "sagemaker", ""},
	} {
		body := []byte(`{}`)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/", bytes.NewReader(body))
		req.Header.Set("X-Amz-Target", c.target)
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		creds := aws.Credentials{AccessKeyID: aliceKey, SecretAccessKey: aliceSecret}
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, sha256HexOf(body), c.service, "us-east-1", testNow.Add(-3*time.Second)); err != nil {
			t.Fatal(err)
		}
		got := send(t, req)
		switch {
		case c.want == "" && got.principal == "":
			t.Errorf("%s signed for %s: %+v, want accepted", c.target, c.service, got)
		case c.want != "" && (got.code != CodeInvalidSignature || !strings.Contains(got.message, c.want)):
			t.Errorf("%s signed for %s: %+v, want %q", c.target, c.service, got, c.want)
		}
	}
}
