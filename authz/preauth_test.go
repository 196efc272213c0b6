package authz

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// TestAuthenticateHeadersBeforeBody: every failure that the headers alone
// decide is found by AuthenticateHeaders before the body is read (the
// server below never reads a body it refused), with the code Authenticate
// gives; what needs the body is left to Authenticate.
func TestAuthenticateHeadersBeforeBody(t *testing.T) {
	a := loadTestdata(t)
	type result struct{ PreCode, PreWho, Code string }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var res result
		p, complete, err := a.AuthenticateHeaders(r)
		if ae, ok := IsAuthError(err); ok {
			res.PreCode = ae.Code
		} else if err != nil {
			t.Errorf("AuthenticateHeaders: %v is not an *AuthError", err)
		} else if complete {
			res.PreWho = "anonymous"
			if !p.Anonymous {
				res.PreWho = p.ARN
			}
		}
		body, _ := io.ReadAll(r.Body)
		if _, err := a.Authenticate(r, body); err != nil {
			ae, _ := IsAuthError(err)
			res.Code = ae.Code
		}
		json.NewEncoder(w).Encode(res)
	}))
	defer srv.Close()

	withSHA := func(r *http.Request, body []byte) {
		// Signed again afterwards, so the hash header is part of the signature.
		r.Header.Set("X-Amz-Content-Sha256", sha256HexOf(body))
	}
	cases := []struct {
		name     string
		spec     reqSpec
		hashHdr  bool // send X-Amz-Content-Sha256 (signed)
		tamper   func(r *http.Request, body []byte)
		pre      string // code of AuthenticateHeaders; "" for passed
		preWho   string // principal when the headers decide it all
		wantCode string // code of Authenticate
	}{
		{name: "good signature"},
		{name: "unsigned", tamper: func(r *http.Request, _ []byte) { r.Header.Del("Authorization") }, preWho: "anonymous"},
		{name: "unknown key", spec: reqSpec{key: "AKIANOBODY00EXAMPLE", secret: "x"}, pre: CodeUnrecognizedClient, wantCode: CodeUnrecognizedClient},
		{name: "expired", spec: reqSpec{at: testNow.Add(-16 * time.Minute)}, pre: CodeInvalidSignature, wantCode: CodeInvalidSignature},
		{name: "in the future", spec: reqSpec{at: testNow.Add(16 * time.Minute)}, pre: CodeInvalidSignature, wantCode: CodeInvalidSignature},
		{name: "no date", tamper: func(r *http.Request, _ []byte) { r.Header.Del("X-Amz-Date") }, pre: CodeIncompleteSignature, wantCode: CodeIncompleteSignature},
		{name: "bearer", tamper: func(r *http.Request, _ []byte) { r.Header.Set("Authorization", "Bearer x") }, pre: CodeIncompleteSignature, wantCode: CodeIncompleteSignature},
		{name: "presigned", tamper: func(r *http.Request, _ []byte) { r.URL.RawQuery = "X-Amz-Signature=00" }, pre: CodeIncompleteSignature, wantCode: CodeIncompleteSignature},
		{name: "session token missing", spec: reqSpec{key: tokenKey, secret: tokenSecret}, pre: CodeUnrecognizedClient, wantCode: CodeUnrecognizedClient},
		// The signature over the body can only be checked with the body...
		{name: "wrong secret", spec: reqSpec{secret: "not-the-secret"}, wantCode: CodeInvalidSignature},
		{name: "tampered body", tamper: func(r *http.Request, body []byte) {
			r.Body = io.NopCloser(bytes.NewReader(bytes.ToUpper(body)))
		}, wantCode: CodeInvalidSignature},
		// ...unless the payload hash comes in a signed header.
		{name: "hash header, good", hashHdr: true},
		{name: "hash header, wrong secret", spec: reqSpec{secret: "not-the-secret"}, hashHdr: true, pre: CodeInvalidSignature, wantCode: CodeInvalidSignature},
		{name: "hash header, tampered body", hashHdr: true, tamper: func(r *http.Request, body []byte) {
			r.Body = io.NopCloser(bytes.NewReader(bytes.ToUpper(body)))
		}, wantCode: CodeInvalidSignature},
		{name: "hash header not a hash", tamper: func(r *http.Request, _ []byte) {
			r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		}, pre: CodeInvalidSignature, wantCode: CodeInvalidSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := c.spec
			spec.runtime = true
			if spec.secret == "not-the-secret" {
				spec.key = aliceKey
			}
			req, body := signedRequest(t, srv.URL, spec)
			if c.hashHdr {
				withSHA(req, body)
				resign(t, req, body, spec)
			}
			if c.tamper != nil {
				c.tamper(req, body)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got result
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if got.PreCode != c.pre || got.Code != c.wantCode || got.PreWho != c.preWho {
				t.Fatalf("got headers %q (principal %q), full %q; want %q (%q), %q", got.PreCode, got.PreWho, got.Code, c.pre, c.preWho, c.wantCode)
			}
			if c.pre != "" && !strings.Contains(got.Code, c.pre) {
				t.Fatalf("the full check disagrees: %q vs %q", got.Code, c.pre)
			}
		})
	}
}

// resign signs r again as spec says (after a header was added).
func resign(t *testing.T, r *http.Request, body []byte, spec reqSpec) {
	t.Helper()
	r.Header.Del("Authorization")
	r.Header.Del("X-Amz-Date")
	if spec.key == "" {
		spec.key, spec.secret = aliceKey, aliceSecret
	}
	if spec.at.IsZero() {
		spec.at = testNow.Add(-3 * time.Second)
	}
	creds := aws.Credentials{AccessKeyID: spec.key, SecretAccessKey: spec.secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, sha256HexOf(body), "sagemaker", "us-east-1", spec.at); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Header.Get("Authorization"), "x-amz-content-sha256") {
		t.Fatalf("the hash header is not signed: %s", r.Header.Get("Authorization"))
	}
}
