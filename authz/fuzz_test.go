package authz

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// FuzzVerifySigV4 feeds arbitrary Authorization headers, dates, paths,
// queries, bodies and extra headers to Authenticate. It must never panic,
// must fail only with the AWS codes and statuses, and must never
// authenticate: the only key's secret is random and unknown to the inputs
// (the seeds are well-formed requests signed with another secret).
func FuzzVerifySigV4(f *testing.F) {
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	creds := filepath.Join(dir, "creds.yaml")
	if err := os.WriteFile(creds, []byte("Credentials:\n  - AccessKeyId: "+aliceKey+"\n    SecretAccessKey: "+hex.EncodeToString(secret)+"\n    Arn: "+aliceARN+"\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	a, err := Load(context.Background(), Config{CredentialsFile: creds, Now: func() time.Time { return testNow }})
	if err != nil {
		f.Fatal(err)
	}
	// Seeds: requests signed by the SDK with alice's testdata secret.
	srvURL := "http://localhost"
	for _, runtime := range []bool{true, false} {
		req, body := signedRequest(f, srvURL, reqSpec{runtime: runtime})
		f.Add(req.Header.Get("Authorization"), req.Header.Get("X-Amz-Date"), req.URL.EscapedPath(), req.URL.RawQuery, body, "Content-Type", req.Header.Get("Content-Type"))
	}
	f.Add("AWS4-HMAC-SHA256 Credential=AKIAALICE0000EXAMPLE/20261122/us-east-1/sagemaker/aws4_request, SignedHeaders=host;x-amz-date, Signature="+strings.Repeat("0", 64), "20261122T120000Z", "/", "", []byte{}, "X-Amz-Target", "SageMaker.ListEndpoints")
	f.Add("AWS4-HMAC-SHA256 Credential=/////, SignedHeaders=;;, Signature=", "x", "/%zz", "a=%zz&b", []byte("x"), "X-Amz-Security-Token", "t")
	f.Add("", "", "/", "X-Amz-Signature=1", []byte(nil), "", "")

	f.Fuzz(func(t *testing.T, auth, amzDate, path, query string, body []byte, hName, hVal string) {
		h := http.Header{}
		if auth != "" {
			h["Authorization"] = []string{auth}
		}
		if amzDate != "" {
			h["X-Amz-Date"] = []string{amzDate}
		}
		h.Set("Content-Type", "application/json")
		if hName != "" {
			h[http.CanonicalHeaderKey(hName)] = append(h[http.CanonicalHeaderKey(hName)], hVal)
		}
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		r := &http.Request{
			Method:        http.MethodPost,
			URL:           &url.URL{Path: path, RawPath: path, RawQuery: query},
			RequestURI:    path + "?" + query,
			Host:          "localhost",
			Header:        h,
			ContentLength: int64(len(body)),
		}
		p, err := a.Authenticate(r, body)
		if err == nil {
			if !p.Anonymous || p.ARN != "" {
				t.Fatalf("authenticated without the secret: %+v", p)
			}
			if len(h.Values("Authorization")) != 0 {
				t.Fatalf("a signed request came back anonymous")
			}
			return
		}
		ae, ok := IsAuthError(err)
		if !ok {
			t.Fatalf("not an AuthError: %v", err)
		}
		switch ae.Code {
		case CodeIncompleteSignature, CodeInvalidSignature, CodeUnrecognizedClient:
		default:
			t.Fatalf("unexpected code %q", ae.Code)
		}
		if ae.Status != 400 && ae.Status != 403 {
			t.Fatalf("unexpected status %d", ae.Status)
		}
		if len(ae.Message) > 4*maxEchoLen+maxSigMessage {
			t.Fatalf("message of %d bytes", len(ae.Message))
		}
	})
}

// FuzzParsePolicy feeds arbitrary bytes to the IAM policy parser, as JSON
// and as YAML. It must never panic, every error must be located in the
// file, and an accepted policy must convert to evaluator data.
func FuzzParsePolicy(f *testing.F) {
	for _, p := range []string{
		"testdata/policies/doc-hostname-allow.json",
		"testdata/policies/doc-allow-all-deny-special.json",
		"testdata/policies/doc-target-model.json",
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"Version": "2012-10-17", "Statement": {"Effect": "Deny", "NotAction": "*", "NotResource": "arn:*", "Condition": {"NullIfExists": {"a:b": true}, "IpAddress": {"aws:SourceIp": ["::1", "10.0.0.0/8"]}, "DateLessThan": {"aws:CurrentTime": 5}}}}`))
	f.Add([]byte("Version: 2012-10-17\nStatement:\n  Effect: Allow\n  Action: '*'\n  Resource: '*'\n  Condition: {StringLike: {a:b: [x*, y?]}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(doc *policyDoc, err error) {
			if err != nil {
				if !strings.HasPrefix(err.Error(), "f:") {
					t.Fatalf("error not located in the file: %v", err)
				}
				return
			}
			for _, s := range doc.stmts {
				_ = s.data()
			}
		}
		check(parsePolicyJSON("fuzz", "f", data))
		if len(data) > 16<<10 {
			return
		}
		var y yaml.Node
		if yaml.NewDecoder(bytes.NewReader(data)).Decode(&y) != nil {
			return
		}
		tree, err := yamlTree("f", &y)
		if err != nil {
			check(nil, err)
			return
		}
		check(parsePolicyTree("fuzz", "f", tree))
	})
}
