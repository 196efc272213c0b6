package authz

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Bearer tokens of SageMaker's OpenAI-compatible route, as the SageMaker
// Python SDK's token generator (sagemaker.core.token_generator.generate_token)
// makes them
// (https://docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-openai-compatible.html).
// Facts this file relies on:
//   - The token is "sagemaker-api-key-" followed by the standard, padded
//     base64 of a presigned URL without its scheme, with "&Version=1"
//     appended after signing (so not signed).
//   - The URL is a SigV4 query presign of "POST https://sagemaker.amazonaws.com/"
//     with Action=CallWithBearerToken: X-Amz-Algorithm, X-Amz-Credential
//     (AKID/YYYYMMDD/REGION/sagemaker/aws4_request), X-Amz-Date, X-Amz-Expires,
//     X-Amz-SignedHeaders=host, X-Amz-Security-Token for temporary
//     credentials, X-Amz-Signature. The payload hash is the empty body's
//     SHA-256 (botocore signs it over https, and so does this file).
//   - X-Amz-Expires is at most 43200 (12 hours); the token is good from
//     X-Amz-Date until X-Amz-Date + X-Amz-Expires.
//   - The caller needs sagemaker:CallWithBearerToken and
//     sagemaker:InvokeEndpoint.

// BearerPrefix starts every SageMaker bearer token.
const BearerPrefix = "sagemaker-api-key-"

// MaxBearerLifetime is the longest life a bearer token may have.
const MaxBearerLifetime = 12 * time.Hour

// ActionCallWithBearerToken is the action a bearer token's caller needs,
// beside sagemaker:InvokeEndpoint.
const ActionCallWithBearerToken = "sagemaker:CallWithBearerToken"

const (
	bearerHost    = "sagemaker.amazonaws.com"
	bearerAction  = "CallWithBearerToken"
	bearerVersion = "&Version=1"
	// maxBearerLen bounds the token before anything is decoded: a real one
	// is about 700 bytes, 1.5 KiB with a session token.
	maxBearerLen = 8 << 10
	emptySHA256  = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// MakeBearerToken makes the bearer token the SageMaker SDK's token generator
// makes for creds in region, good for lifetime (1 s to 12 h) from now.
func MakeBearerToken(ctx context.Context, creds aws.Credentials, region string, lifetime time.Duration, now time.Time) (string, error) {
	if lifetime < time.Second || lifetime > MaxBearerLifetime {
		return "", fmt.Errorf("a bearer token lives from 1s to %s, not %s", MaxBearerLifetime, lifetime)
	}
	if region == "" {
		return "", fmt.Errorf("a bearer token names a region: none given")
	}
	u := "https://" + bearerHost + "/?Action=" + bearerAction + "&X-Amz-Expires=" + strconv.Itoa(int(lifetime/time.Second))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return "", err
	}
	signed, _, err := v4.NewSigner().PresignHTTP(ctx, creds, req, emptySHA256, signingService, region, now.UTC())
	if err != nil {
		return "", err
	}
	return BearerPrefix + base64.StdEncoding.EncodeToString([]byte(strings.TrimPrefix(signed, "https://")+bearerVersion)), nil
}

// bearerParams are the parameters a token's URL may carry, each once.
var bearerParams = map[string]bool{
	"Action": true, "X-Amz-Algorithm": true, "X-Amz-Credential": true, "X-Amz-Date": true, "X-Amz-Expires": true,
	"X-Amz-SignedHeaders": true, "X-Amz-Signature": true, "X-Amz-Security-Token": true,
}

// AuthenticateBearer authenticates a request of the OpenAI-compatible route
// by its "Authorization: Bearer <token>" header and returns the principal of
// the access key that signed the token. A request without Authorization is
// anonymous, as an unsigned SigV4 request is; without a credentials file
// every caller is anonymous. Failures are *AuthError with status 401.
func (a *Authorizer) AuthenticateBearer(r *http.Request) (Principal, error) {
	hdrs := r.Header.Values("Authorization")
	if len(hdrs) == 0 {
		return Principal{Anonymous: true}, nil
	}
	fail := func(akid, code, msg string) (Principal, error) {
		a.logAuthFailure(akid, r.RemoteAddr, code, "bearer token refused")
		return Principal{}, &AuthError{Status: http.StatusUnauthorized, Code: code, Message: msg}
	}
	if len(hdrs) > 1 {
		return fail("", CodeIncompleteSignature, "Only one Authorization header is allowed.")
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(hdrs[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		if scheme == sigAlgorithm {
			return fail(accessKeyFromHeader(hdrs[0]), CodeIncompleteSignature, "The OpenAI-compatible route takes a bearer token (Authorization: Bearer "+BearerPrefix+"…), not a SigV4 signature: make one with `mce token` or the SageMaker SDK's generate_token.")
		}
		return fail("", CodeIncompleteSignature, "The Authorization header must be 'Bearer <token>'.")
	}
	if a.cfg.CredentialsFile == "" {
		return Principal{Anonymous: true}, nil
	}
	token = strings.TrimSpace(token)
	st, now := a.st.Load(), a.now()
	if c := a.bearers.get(st, token, now); c != nil {
		return c.principal, nil
	}
	var valid bearerWindow
	cred, akid, code, msg := verifyBearer(token, st.keys, now, a.skew, a.cfg.Region, &valid)
	if cred == nil {
		return fail(akid, code, msg)
	}
	a.bearers.put(st, token, cred, valid)
	return cred.principal, nil
}

// bearerCache remembers tokens verifyBearer accepted, for the generation of
// credentials that accepted them and until they expire: a client sends the
// same token for hours, and a hit costs a hash instead of the five HMACs
// and the parsing. A reload (a new generation) forgets every token.
type bearerCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]bearerEntry
}

type bearerEntry struct {
	st        *state
	cred      *credential
	notBefore time.Time // signed at, less the skew
	end       time.Time
}

// maxBearerCache bounds the tokens remembered; when full, all are forgotten.
const maxBearerCache = 1024

func (c *bearerCache) get(st *state, token string, now time.Time) *credential {
	k := sha256.Sum256([]byte(token))
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if !ok || e.st != st || now.Before(e.notBefore) || !now.Before(e.end) {
		return nil
	}
	return e.cred
}

// bearerWindow is when a token verifyBearer accepted may be taken: from
// its signing time less the skew until it expires.
type bearerWindow struct{ notBefore, end time.Time }

// put remembers a token verifyBearer accepted, within its window.
func (c *bearerCache) put(st *state, token string, cred *credential, w bearerWindow) {
	e := bearerEntry{st: st, cred: cred, notBefore: w.notBefore, end: w.end}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxBearerCache {
		c.m = make(map[[sha256.Size]byte]bearerEntry)
	}
	c.m[sha256.Sum256([]byte(token))] = e
	c.mu.Unlock()
}

// verifyBearer checks a bearer token against keys at now: its shape, its
// credential scope, its lifetime, its session token and its signature. It
// returns the credential that signed it, or the access key it names (for
// the log), an error code and a message saying why not. The window of an
// accepted token is written to valid when it is not nil.
func verifyBearer(token string, keys map[string]*credential, now time.Time, skew time.Duration, region string, valid *bearerWindow) (cred *credential, akid, code, msg string) {
	bad := func(m string) (*credential, string, string, string) {
		return nil, akid, CodeIncompleteSignature, "The bearer token is malformed: " + m
	}
	if len(token) > maxBearerLen {
		return bad(fmt.Sprintf("it is longer than %d bytes.", maxBearerLen))
	}
	enc, ok := strings.CutPrefix(token, BearerPrefix)
	if !ok {
		return bad("a SageMaker bearer token starts with " + BearerPrefix + ".")
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(enc); err != nil {
			return bad("what follows " + BearerPrefix + " is not base64.")
		}
	}
	decoded := string(raw)
	address, query, _ := strings.Cut(decoded, "?")
	if address != bearerHost+"/" {
		return bad("it must be a presigned URL of " + bearerHost + "/, not of " + echo(strconv.Quote(address)) + ".")
	}
	query, ok = strings.CutSuffix(query, bearerVersion)
	if !ok {
		return bad("its URL must end with " + bearerVersion + ".")
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return bad("its URL's query does not parse.")
	}
	for k, v := range values {
		if !bearerParams[k] {
			return bad("its URL carries an unexpected parameter " + echo(strconv.Quote(k)) + ".")
		}
		if len(v) != 1 {
			return bad("its URL carries " + k + " more than once.")
		}
	}
	get := values.Get
	switch {
	case get("Action") != bearerAction:
		return bad("its Action must be " + bearerAction + ".")
	case get("X-Amz-Algorithm") != sigAlgorithm:
		return bad("its X-Amz-Algorithm must be " + sigAlgorithm + ".")
	case get("X-Amz-SignedHeaders") != "host":
		return bad("its X-Amz-SignedHeaders must be host.")
	}
	sig := get("X-Amz-Signature")
	if len(sig) != 64 || !isLowerHex(sig) {
		return bad("its X-Amz-Signature must be 64 lower-case hexadecimal digits.")
	}
	parts := strings.Split(get("X-Amz-Credential"), "/")
	if len(parts) != 5 || parts[0] == "" {
		return bad("its X-Amz-Credential must be AKID/YYYYMMDD/REGION/sagemaker/aws4_request.")
	}
	akid = parts[0]
	if len(akid) > 128 {
		akid = ""
		return bad("its access key id is longer than 128 bytes.")
	}
	amzDate := get("X-Amz-Date")
	signedAt, err := time.Parse(amzDateLayout, amzDate)
	if err != nil {
		return bad("its X-Amz-Date must be YYYYMMDDTHHMMSSZ.")
	}
	expires, err := strconv.Atoi(get("X-Amz-Expires"))
	if err != nil || expires < 1 || strconv.Itoa(expires) != get("X-Amz-Expires") {
		return bad("its X-Amz-Expires must be a whole number of seconds.")
	}
	invalid := func(m string) (*credential, string, string, string) {
		return nil, akid, CodeInvalidSignature, m
	}
	switch {
	case parts[4] != scopeTerminator:
		return invalid("The bearer token's credential should be scoped with a valid terminator: 'aws4_request', not '" + echo(parts[4]) + "'.")
	case parts[3] != signingService:
		return invalid("The bearer token's credential should be scoped to correct service: 'sagemaker', not '" + echo(parts[3]) + "'.")
	case region != "" && parts[2] != region:
		return invalid("The bearer token's credential should be scoped to a valid region, not '" + echo(parts[2]) + "': mce serves " + region + ".")
	case parts[1] != amzDate[:8]:
		return invalid("The bearer token's credential date " + echo(parts[1]) + " does not match its X-Amz-Date " + amzDate + ".")
	case time.Duration(expires)*time.Second > MaxBearerLifetime:
		return invalid(fmt.Sprintf("The bearer token lives %d seconds: at most %d (12 hours) are allowed.", expires, int(MaxBearerLifetime/time.Second)))
	}
	now = now.UTC()
	if signedAt.After(now.Add(skew)) {
		return invalid(fmt.Sprintf("The bearer token is not yet current: it was signed at %s, later than %s (%s + %s).",
			amzDate, now.Add(skew).Format(amzDateLayout), now.Format(amzDateLayout), skewText(skew)))
	}
	end := signedAt.Add(time.Duration(expires) * time.Second)
	if !now.Before(end) {
		return invalid("The bearer token expired at " + end.Format(amzDateLayout) + "; it is now " + now.Format(amzDateLayout) + ". Make a new one.")
	}
	c, ok := keys[akid]
	if !ok {
		return nil, akid, CodeUnrecognizedClient, "The bearer token was signed with an access key mce does not know."
	}
	tok, hasTok := values["X-Amz-Security-Token"]
	if (c.token == "") == hasTok || hasTok && !hmac.Equal([]byte(tok[0]), []byte(c.token)) {
		return nil, akid, CodeUnrecognizedClient, "The security token included in the bearer token is invalid."
	}
	// Everything but the signature is signed, in the canonical order.
	var rest []string
	for part := range strings.SplitSeq(query, "&") {
		if !strings.HasPrefix(part, "X-Amz-Signature=") {
			rest = append(rest, part)
		}
	}
	canonical := "POST\n/\n" + canonicalQuery(strings.Join(rest, "&")) + "\nhost:" + bearerHost + "\n\nhost\n" + emptySHA256
	scope := parts[1] + "/" + parts[2] + "/" + parts[3] + "/" + parts[4]
	stringToSign := sigAlgorithm + "\n" + amzDate + "\n" + scope + "\n" + sha256Hex([]byte(canonical))
	want := hex.EncodeToString(hmacSHA256(signingKey(c.secret, parts[1], parts[2], parts[3]), []byte(stringToSign)))
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return invalid("The bearer token's signature does not match: it was not made with this access key's secret, or it was changed after it was made.")
	}
	if valid != nil {
		*valid = bearerWindow{notBefore: signedAt.Add(-skew), end: end}
	}
	return c, akid, "", ""
}
