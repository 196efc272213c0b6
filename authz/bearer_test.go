package authz

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Tokens made by botocore 1.43.11 exactly as the SageMaker SDK's token
// generator makes them (SigV4QueryAuth of POST https://sagemaker.amazonaws.com/
// with Action=CallWithBearerToken, "&Version=1" appended), signed at
// 2026-11-22T11:00:00Z in us-east-1 with the testdata's keys: alice's for
// 2 hours, dave's (with a session token) for 12.
const (
	botocoreAliceToken = "sagemaker-api-key-c2FnZW1ha2VyLmFtYXpvbmF3cy5jb20vP0FjdGlvbj1DYWxsV2l0aEJlYXJlclRva2VuJlgtQW16LUFsZ29yaXRobT1BV1M0LUhNQUMtU0hBMjU2JlgtQW16LUNyZWRlbnRpYWw9QUtJQUFMSUNFMDAwMEVYQU1QTEUlMkYyMDI2MTEyMiUyRnVzLWVhc3QtMSUyRnNhZ2VtYWtlciUyRmF3czRfcmVxdWVzdCZYLUFtei1EYXRlPTIwMjYxMTIyVDExMDAwMFomWC1BbXotRXhwaXJlcz03MjAwJlgtQW16LVNpZ25lZEhlYWRlcnM9aG9zdCZYLUFtei1TaWduYXR1cmU9ODA3MzNlYmQwN2Q1ZmY1Y2U0YTM5YjgyMjdmYzNmMTQ1MTViMjI1YTFlNTljMWZjN2YyNjI4MmM4ZWRhMWFhNSZWZXJzaW9uPTE="
	botocoreDaveToken  = "sagemaker-api-key-c2FnZW1ha2VyLmFtYXpvbmF3cy5jb20vP0FjdGlvbj1DYWxsV2l0aEJlYXJlclRva2VuJlgtQW16LUFsZ29yaXRobT1BV1M0LUhNQUMtU0hBMjU2JlgtQW16LUNyZWRlbnRpYWw9QUtJQVRPS0VOMDAwRVhBTVBMRSUyRjIwMjYxMTIyJTJGdXMtZWFzdC0xJTJGc2FnZW1ha2VyJTJGYXdzNF9yZXF1ZXN0JlgtQW16LURhdGU9MjAyNjExMjJUMTEwMDAwWiZYLUFtei1FeHBpcmVzPTQzMjAwJlgtQW16LVNpZ25lZEhlYWRlcnM9aG9zdCZYLUFtei1TZWN1cml0eS1Ub2tlbj10aGUtc2Vzc2lvbi10b2tlbiZYLUFtei1TaWduYXR1cmU9Y2QxNTFkYWE3MzkzMTBlMTY0NDAyMWExNjhmMGQxZWExMmQwMDZhMzU4NjBkZjY2ODgxN2ZmNzgzYmM0OTZlNSZWZXJzaW9uPTE="
)

var botocoreSignedAt = time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC)

func bearerRequest(auth ...string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/endpoints/e/openai/v1/chat/completions", nil)
	for _, a := range auth {
		r.Header.Add("Authorization", a)
	}
	return r
}

// decodeToken is a token's URL query, decoded.
func decodeToken(t *testing.T, token string) url.Values {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(token, BearerPrefix))
	if err != nil {
		t.Fatal(err)
	}
	_, q, _ := strings.Cut(strings.TrimSuffix(string(raw), bearerVersion), "?")
	v, err := url.ParseQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// encodeToken re-encodes a decoded token's URL with query.
func encodeToken(query string) string {
	return BearerPrefix + base64.StdEncoding.EncodeToString([]byte(bearerHost+"/?"+query+bearerVersion))
}

func TestBearerTokensOfTheSDKAuthenticate(t *testing.T) {
	a := loadTestdata(t)
	for token, want := range map[string]string{botocoreAliceToken: aliceARN, botocoreDaveToken: "arn:aws:iam::123456789012:user/dave"} {
		p, err := a.AuthenticateBearer(bearerRequest("Bearer " + token))
		if err != nil || p.ARN != want || p.Anonymous {
			t.Errorf("AuthenticateBearer = %+v, %v; want %s", p, err, want)
		}
	}
	// The scheme is case-insensitive (RFC 7235).
	if p, err := a.AuthenticateBearer(bearerRequest("bearer  " + botocoreAliceToken)); err != nil || p.ARN != aliceARN {
		t.Errorf("lower-case scheme: %+v, %v", p, err)
	}
}

// MakeBearerToken signs what botocore signs: the same credentials, region,
// lifetime and time give the same signature.
func TestMakeBearerTokenMatchesBotocore(t *testing.T) {
	for _, c := range []struct {
		token    string
		creds    aws.Credentials
		lifetime time.Duration
	}{
		{botocoreAliceToken, aws.Credentials{AccessKeyID: aliceKey, SecretAccessKey: aliceSecret}, 2 * time.Hour},
		{botocoreDaveToken, aws.Credentials{AccessKeyID: tokenKey, SecretAccessKey: tokenSecret, SessionToken: "the-session-token"}, 12 * time.Hour},
	} {
		got, err := MakeBearerToken(context.Background(), c.creds, "us-east-1", c.lifetime, botocoreSignedAt)
		if err != nil {
			t.Fatal(err)
		}
		want, have := decodeToken(t, c.token), decodeToken(t, got)
		if want.Encode() != have.Encode() {
			t.Errorf("MakeBearerToken's query\n%s\nwant botocore's\n%s", have.Encode(), want.Encode())
		}
	}
	for _, bad := range []time.Duration{0, time.Millisecond, MaxBearerLifetime + time.Second} {
		if _, err := MakeBearerToken(context.Background(), aws.Credentials{AccessKeyID: "a", SecretAccessKey: "b"}, "us-east-1", bad, testNow); err == nil {
			t.Errorf("lifetime %s: no error", bad)
		}
	}
}

func TestBearerTokenLifetime(t *testing.T) {
	for _, c := range []struct {
		now  time.Time
		code string
	}{
		{botocoreSignedAt, ""},
		{botocoreSignedAt.Add(2*time.Hour - time.Second), ""},
		{botocoreSignedAt.Add(2 * time.Hour), CodeInvalidSignature},                 // expired
		{botocoreSignedAt.Add(-5 * time.Minute), ""},                                // within the skew
		{botocoreSignedAt.Add(-15*time.Minute - time.Second), CodeInvalidSignature}, // not yet current
	} {
		a, err := Load(context.Background(), Config{CredentialsFile: "testdata/credentials.yaml", PoliciesFile: "testdata/policies.yaml",
			Region: "us-east-1", Now: func() time.Time { return c.now }})
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.AuthenticateBearer(bearerRequest("Bearer " + botocoreAliceToken))
		if ae, _ := IsAuthError(err); (c.code == "") != (err == nil) || ae != nil && (ae.Code != c.code || ae.Status != http.StatusUnauthorized) {
			t.Errorf("at %s: %v, want code %q", c.now, err, c.code)
		}
	}
}

// Every token that is not exactly one mce's keys made, in time, for this
// region and service, is refused with a message that says why, and never
// authenticates.
func TestBearerTokensHostile(t *testing.T) {
	a := loadTestdata(t)
	good := decodeToken(t, botocoreAliceToken)
	with := func(k, v string) string {
		q := url.Values{}
		for kk, vv := range good {
			q[kk] = vv
		}
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
		return encodeToken(q.Encode())
	}
	// presigned signs query with secret for region and service, as a
	// client with that secret would.
	presigned := func(secret, akid, region, service string, expires int) string {
		u := "https://" + bearerHost + "/?Action=" + bearerAction + "&X-Amz-Expires=" + strconv.Itoa(expires)
		req, _ := http.NewRequest(http.MethodPost, u, nil)
		s, _, err := v4.NewSigner().PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret}, req, emptySHA256, service, region, testNow)
		if err != nil {
			t.Fatal(err)
		}
		return BearerPrefix + base64.StdEncoding.EncodeToString([]byte(strings.TrimPrefix(s, "https://")+bearerVersion))
	}
	rawQuery := func(tok string) string {
		raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(tok, BearerPrefix))
		_, q, _ := strings.Cut(strings.TrimSuffix(string(raw), bearerVersion), "?")
		return q
	}
	for name, c := range map[string]struct {
		auth []string
		code string
		says string
	}{
		"sigv4 header":          {[]string{"AWS4-HMAC-SHA256 Credential=" + aliceKey + "/20261122/us-east-1/sagemaker/aws4_request, SignedHeaders=host, Signature=00"}, CodeIncompleteSignature, "not a SigV4 signature"},
		"basic":                 {[]string{"Basic YTpi"}, CodeIncompleteSignature, "Bearer <token>"},
		"two headers":           {[]string{"Bearer " + botocoreAliceToken, "Bearer " + botocoreAliceToken}, CodeIncompleteSignature, "Only one"},
		"empty token":           {[]string{"Bearer "}, CodeIncompleteSignature, "starts with"},
		"other prefix":          {[]string{"Bearer bedrock-api-key-" + strings.TrimPrefix(botocoreAliceToken, BearerPrefix)}, CodeIncompleteSignature, "starts with"},
		"not base64":            {[]string{"Bearer " + BearerPrefix + "!!!"}, CodeIncompleteSignature, "not base64"},
		"huge":                  {[]string{"Bearer " + BearerPrefix + strings.Repeat("A", 9000)}, CodeIncompleteSignature, "longer than"},
		"other host":            {[]string{"Bearer " + BearerPrefix + base64.StdEncoding.EncodeToString([]byte("bedrock.amazonaws.com/?"+rawQuery(botocoreAliceToken)+bearerVersion))}, CodeIncompleteSignature, "presigned URL of sagemaker"},
		"no version":            {[]string{"Bearer " + BearerPrefix + base64.StdEncoding.EncodeToString([]byte(bearerHost+"/?"+rawQuery(botocoreAliceToken)))}, CodeIncompleteSignature, "Version=1"},
		"extra parameter":       {[]string{"Bearer " + encodeToken(rawQuery(botocoreAliceToken)+"&X-Amz-Extra=1")}, CodeIncompleteSignature, "unexpected parameter"},
		"parameter twice":       {[]string{"Bearer " + encodeToken(rawQuery(botocoreAliceToken)+"&Action=CallWithBearerToken")}, CodeIncompleteSignature, "more than once"},
		"other action":          {[]string{"Bearer " + with("Action", "InvokeEndpoint")}, CodeIncompleteSignature, "Action must be"},
		"other headers signed":  {[]string{"Bearer " + with("X-Amz-SignedHeaders", "host;x-amz-date")}, CodeIncompleteSignature, "SignedHeaders"},
		"short signature":       {[]string{"Bearer " + with("X-Amz-Signature", "abc")}, CodeIncompleteSignature, "64 lower-case"},
		"no credential":         {[]string{"Bearer " + with("X-Amz-Credential", "")}, CodeIncompleteSignature, "X-Amz-Credential"},
		"bad date":              {[]string{"Bearer " + with("X-Amz-Date", "yesterday")}, CodeIncompleteSignature, "X-Amz-Date"},
		"negative lifetime":     {[]string{"Bearer " + with("X-Amz-Expires", "-1")}, CodeIncompleteSignature, "X-Amz-Expires"},
		"lifetime changed":      {[]string{"Bearer " + with("X-Amz-Expires", "7201")}, CodeInvalidSignature, "signature does not match"},
		"signature changed":     {[]string{"Bearer " + with("X-Amz-Signature", strings.Repeat("0", 64))}, CodeInvalidSignature, "signature does not match"},
		"longer than 12 hours":  {[]string{"Bearer " + presigned(aliceSecret, aliceKey, "us-east-1", "sagemaker", 43201)}, CodeInvalidSignature, "at most 43200"},
		"other region":          {[]string{"Bearer " + presigned(aliceSecret, aliceKey, "eu-west-1", "sagemaker", 600)}, CodeInvalidSignature, "valid region"},
		"other service":         {[]string{"Bearer " + presigned(aliceSecret, aliceKey, "us-east-1", "bedrock", 600)}, CodeInvalidSignature, "correct service"},
		"unknown key":           {[]string{"Bearer " + presigned(aliceSecret, "AKIAUNKNOWN00EXAMPLE", "us-east-1", "sagemaker", 600)}, CodeUnrecognizedClient, "does not know"},
		"wrong secret":          {[]string{"Bearer " + presigned("not-alice's-secret", aliceKey, "us-east-1", "sagemaker", 600)}, CodeInvalidSignature, "signature does not match"},
		"session token dropped": {[]string{"Bearer " + encodeToken(strings.Replace(rawQuery(botocoreDaveToken), "X-Amz-Security-Token=the-session-token&", "", 1))}, CodeUnrecognizedClient, "security token"},
		"session token added":   {[]string{"Bearer " + with("X-Amz-Security-Token", "the-session-token")}, CodeUnrecognizedClient, "security token"},
	} {
		p, err := a.AuthenticateBearer(bearerRequest(c.auth...))
		ae, ok := IsAuthError(err)
		if !ok || ae.Code != c.code || ae.Status != http.StatusUnauthorized || !strings.Contains(ae.Message, c.says) || p.ARN != "" {
			t.Errorf("%s: %+v, %v; want %s saying %q", name, p, err, c.code, c.says)
		}
	}
	// No Authorization: anonymous, as an unsigned SigV4 request is.
	if p, err := a.AuthenticateBearer(bearerRequest()); err != nil || !p.Anonymous {
		t.Errorf("no Authorization: %+v, %v", p, err)
	}
}

// Without a credentials file every caller is anonymous, token or not, as
// with SigV4.
func TestBearerWithoutCredentialsIsAnonymous(t *testing.T) {
	a, err := Load(context.Background(), Config{Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := a.AuthenticateBearer(bearerRequest("Bearer " + botocoreAliceToken)); err != nil || !p.Anonymous {
		t.Errorf("%+v, %v", p, err)
	}
}

// FuzzBearerToken feeds arbitrary tokens to verifyBearer: it must never
// panic and never authenticate (the only key's secret is not one the seeds
// were signed with).
func FuzzBearerToken(f *testing.F) {
	keys := map[string]*credential{aliceKey: {principal: Principal{ARN: aliceARN}, secret: []byte("a secret no seed knows")}}
	f.Add(botocoreAliceToken)
	f.Add(botocoreDaveToken)
	f.Add(BearerPrefix)
	f.Add(encodeToken("Action=CallWithBearerToken&X-Amz-Credential=%2F%2F%2F%2F&X-Amz-Date=20261122T110000Z"))
	f.Fuzz(func(t *testing.T, token string) {
		if c, _, code, msg := verifyBearer(token, keys, botocoreSignedAt, 5*time.Minute, "us-east-1", nil); c != nil || code == "" || msg == "" {
			t.Fatalf("verifyBearer(%q) = %v, %q, %q", token, c, code, msg)
		}
	})
}

func BenchmarkAuthenticateBearer(b *testing.B) {
	a := loadTestdata(b)
	r := bearerRequest("Bearer " + botocoreAliceToken)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.AuthenticateBearer(r); err != nil {
			b.Fatal(err)
		}
	}
}

// A remembered token still expires, and a reload of the credentials
// forgets it (the key may be gone).
func TestBearerCacheExpiresAndForgets(t *testing.T) {
	now := botocoreSignedAt
	a, err := Load(context.Background(), Config{CredentialsFile: "testdata/credentials.yaml", PoliciesFile: "testdata/policies.yaml",
		Region: "us-east-1", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	r := bearerRequest("Bearer " + botocoreAliceToken)
	for range 2 {
		if p, err := a.AuthenticateBearer(r); err != nil || p.ARN != aliceARN {
			t.Fatalf("%+v, %v", p, err)
		}
	}
	now = botocoreSignedAt.Add(2 * time.Hour)
	if _, err := a.AuthenticateBearer(r); err == nil {
		t.Error("a remembered token was taken after it expired")
	}
	now = botocoreSignedAt
	if _, err := a.AuthenticateBearer(r); err != nil {
		t.Fatal(err)
	}
	old := a.st.Load()
	if err := a.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.st.Load() == old {
		t.Fatal("the reload kept the generation: the cache's forgetting is not tested")
	}
	if c := a.bearers.get(a.st.Load(), botocoreAliceToken, now); c != nil {
		t.Error("a token verified by the previous generation was remembered after the reload")
	}
}

func BenchmarkVerifyBearer(b *testing.B) {
	a := loadTestdata(b)
	keys := a.st.Load().keys
	b.ReportAllocs()
	for b.Loop() {
		if c, _, _, msg := verifyBearer(botocoreAliceToken, keys, testNow, 15*time.Minute, "us-east-1", nil); c == nil {
			b.Fatal(msg)
		}
	}
}
