package authz

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mce-run/mce/internal/wire"
)

// SigV4 as aws-sdk-go-v2 (aws/signer/v4) and botocore sign requests for
// service "sagemaker" (the signing name of both the runtime and the control
// plane). Facts this file relies on:
//   - Authorization: "AWS4-HMAC-SHA256 Credential=AKID/YYYYMMDD/REGION/sagemaker/aws4_request,
//     SignedHeaders=h1;h2, Signature=<64 hex>"; X-Amz-Date "YYYYMMDDTHHMMSSZ".
//   - Canonical URI: the path as sent (already percent-encoded), encoded once
//     more with every byte outside A-Z a-z 0-9 - . _ ~ and '/' as %XX (non-S3
//     services double-encode: "v1%3A0" is signed as "v1%253A0").
//   - Canonical query: names and values decoded, re-encoded the same way
//     (space as %20), sorted by name then value.
//   - Canonical headers: lower-case name ':' value trimmed with runs of spaces
//     collapsed, several values joined with ','; host is the Host header;
//     the Go SDK also signs content-length when the body is not empty.
//   - Payload hash: hex sha256 of the body (X-Amz-Content-Sha256 is sent only
//     by S3 clients; when present it must equal that hash).
//   - Key: HMAC chain "AWS4"+secret → date → region → service → "aws4_request".

const (
	sigAlgorithm     = "AWS4-HMAC-SHA256"
	amzDateLayout    = "20060102T150405Z"
	scopeDateLayout  = "20060102"
	signingService   = "sagemaker"
	logsService      = "logs"
	scopeTerminator  = "aws4_request"
	maxAuthHeaderLen = 8 << 10
	maxSignedHeaders = 64
	maxQueryParams   = 256
	maxEchoLen       = 512
	maxSigMessage    = 2048
)

// sigV4Auth is a parsed Authorization header.
type sigV4Auth struct {
	accessKeyID   string
	scopeDate     string
	region        string
	service       string
	terminator    string
	signedHeaders []string
	signature     string
}

// verifySigV4 authenticates r against keys. It returns the credential whose
// secret made the request's signature, or an *AuthError saying why not.
// now is the server's clock; skew the largest distance allowed between it
// and X-Amz-Date. region, when not empty, is the only region a credential
// scope may name.
func verifySigV4(r *http.Request, body []byte, keys map[string]*credential, now time.Time, skew time.Duration, region string) (*credential, *AuthError) {
	sv, aerr := verifySigV4Headers(r, keys, now, skew, region)
	if aerr != nil {
		return nil, aerr
	}
	// A query-protocol form names its service only in its body (Version):
	// the headers let it be signed for any query service (formServices),
	// and the body decides which one the scope must name.
	if want := formService(r, body); want != "" && sv.auth.service != want {
		return nil, authErr(r, CodeInvalidSignature, "Credential should be scoped to correct service: '"+want+"'. ")
	}
	payloadHash := sha256Hex(body)
	if ph := r.Header.Values(wire.HeaderAmzContentSHA256); len(ph) > 0 {
		if len(ph) > 1 || !strings.EqualFold(ph[0], payloadHash) {
			return nil, authErr(r, CodeInvalidSignature, contentSHAMismatch)
		}
		if sv.signatureChecked { // with this very hash
			return sv.cred, nil
		}
	}
	if aerr := sv.verifySignature(r, payloadHash); aerr != nil {
		return nil, aerr
	}
	return sv.cred, nil
}

const contentSHAMismatch = "The provided 'x-amz-content-sha256' header does not match what was computed."

// headerChecked is a request whose headers passed verifySigV4Headers: what
// is left to check is the signature over the payload.
type headerChecked struct {
	auth    sigV4Auth
	amzDate string
	cred    *credential
	// signatureChecked: the signature was verified with the signed
	// X-Amz-Content-Sha256 header's hash.
	signatureChecked bool
}

// LogsTargetPrefix starts the X-Amz-Target of CloudWatch Logs calls
// (awsJson1_1, e.g. "Logs_20140328.FilterLogEvents"), which mce answers for
// endpoints' container output.
const LogsTargetPrefix = "Logs_20140328."

// AutoScalingTargetPrefix starts the X-Amz-Target of Application Auto
// Scaling's calls (awsJson1_1, e.g. "AnyScaleFrontendService.PutScalingPolicy"),
// which clients sign for "application-autoscaling".
const (
	AutoScalingTargetPrefix = "AnyScaleFrontendService."
	autoScalingService      = "application-autoscaling"
)

// CloudWatch metrics calls (host/cloudwatch) are told by their target in
// AWS JSON 1.0 and by their path in RPC v2 CBOR; in the query protocol they
// are the form POSTed to / (no SageMaker call is one: the control plane
// names its operation in X-Amz-Target, the runtime posts to /endpoints/…).
const (
	monitoringService      = "monitoring"
	cloudWatchTargetPrefix = "GraniteServiceVersion20100801."
	cloudWatchCBORPrefix   = "/service/GraniteServiceVersion20100801/"
)

// SigningService is the service a request must be signed for: "logs" for
// CloudWatch Logs calls (clients sign those for CloudWatch Logs),
// "monitoring" for CloudWatch metrics calls, "application-autoscaling" for
// Application Auto Scaling's, else "sagemaker". A signature
// is valid for its own service only.
func SigningService(r *http.Request) string {
	target := r.Header.Get(wire.HeaderAmzTarget)
	switch {
	case strings.HasPrefix(target, LogsTargetPrefix):
		return logsService
	case strings.HasPrefix(target, AutoScalingTargetPrefix):
		return autoScalingService
	case strings.HasPrefix(target, cloudWatchTargetPrefix),
		strings.HasPrefix(r.URL.Path, cloudWatchCBORPrefix),
		target == "" && r.URL.Path == "/" && isForm(r.Header.Get("Content-Type")):
		return monitoringService
	}
	return signingService
}

// formServices are the other query-protocol services whose forms are
// POSTed to / as CloudWatch's are: before the body is read a form may be
// signed for any of them; once it is, formService says which one.
var formServices = map[string]bool{"sts": true, "iam": true}

// formVersions are the query services' API versions, by the service they
// are signed for; any other Version is CloudWatch's to answer (it refuses
// one that is not its own).
var formVersions = map[string]string{"2011-06-15": "sts", "2010-05-08": "iam"}

// formService is the service a query-protocol form must be signed for,
// read from the Version of its body; "" when r is no such form.
func formService(r *http.Request, body []byte) string {
	if SigningService(r) != monitoringService || r.Header.Get(wire.HeaderAmzTarget) != "" || r.URL.Path != "/" {
		return ""
	}
	for rest := body; len(rest) > 0; {
		var pair []byte
		pair, rest, _ = bytes.Cut(rest, []byte("&"))
		if v, ok := bytes.CutPrefix(pair, []byte("Version=")); ok {
			if svc, ok := formVersions[string(v)]; ok {
				return svc
			}
			break
		}
	}
	return monitoringService
}

func isForm(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/x-www-form-urlencoded")
}

// verifySigV4Headers makes every check of verifySigV4 that needs no body:
// the Authorization header's shape, X-Amz-Date, the credential scope, that
// the access key exists, the clock skew and the session token. When the
// request carries X-Amz-Content-Sha256, the signature is checked too with
// that hash (the body must still match it: verifySigV4 checks that).
func verifySigV4Headers(r *http.Request, keys map[string]*credential, now time.Time, skew time.Duration, region string) (headerChecked, *AuthError) {
	hdrs := r.Header.Values("Authorization")
	if len(hdrs) != 1 {
		return headerChecked{}, authErr(r, CodeIncompleteSignature, "Only one Authorization header is allowed.")
	}
	h := hdrs[0]
	if len(h) > maxAuthHeaderLen {
		return headerChecked{}, authErr(r, CodeIncompleteSignature, fmt.Sprintf("Authorization header is longer than %d bytes.", maxAuthHeaderLen))
	}
	auth, aerr := parseAuthorization(r, h)
	if aerr != nil {
		return headerChecked{}, aerr
	}

	dates := r.Header.Values(wire.HeaderAmzDate)
	if len(dates) != 1 {
		return headerChecked{}, authErr(r, CodeIncompleteSignature, "Authorization header requires existence of a 'X-Amz-Date' header (mce does not accept the 'Date' header). Authorization="+echo(h))
	}
	amzDate := dates[0]
	signedAt, err := time.Parse(amzDateLayout, amzDate)
	if err != nil {
		return headerChecked{}, authErr(r, CodeIncompleteSignature, "Date must be in ISO-8601 'basic format'. Got '"+echo(amzDate)+"'. See http://en.wikipedia.org/wiki/ISO_8601")
	}

	// Credential scope.
	if auth.terminator != scopeTerminator {
		return headerChecked{}, authErr(r, CodeInvalidSignature, "Credential should be scoped with a valid terminator: 'aws4_request', not '"+echo(auth.terminator)+"'.")
	}
	if want := SigningService(r); auth.service != want && (want != monitoringService || !formServices[auth.service]) {
		return headerChecked{}, authErr(r, CodeInvalidSignature, "Credential should be scoped to correct service: '"+want+"'. ")
	}
	// IAM is global: clients sign it for us-east-1 whatever their region.
	if region != "" && auth.region != region && (auth.service != "iam" || auth.region != "us-east-1") {
		return headerChecked{}, authErr(r, CodeInvalidSignature, "Credential should be scoped to a valid region, not '"+echo(auth.region)+"'. ")
	}
	if auth.scopeDate != amzDate[:8] {
		return headerChecked{}, authErr(r, CodeInvalidSignature, fmt.Sprintf("Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '%s' != '%s', from '%s'.", echo(auth.scopeDate), amzDate[:8], amzDate))
	}

	cred, ok := keys[auth.accessKeyID]
	if !ok {
		return headerChecked{}, authErr(r, CodeUnrecognizedClient, "The security token included in the request is invalid.")
	}

	// Clock skew.
	now = now.UTC()
	if signedAt.Before(now.Add(-skew)) {
		return headerChecked{}, authErr(r, CodeInvalidSignature, fmt.Sprintf("Signature expired: %s is now earlier than %s (%s - %s.)",
			amzDate, now.Add(-skew).Format(amzDateLayout), now.Format(amzDateLayout), skewText(skew)))
	}
	if signedAt.After(now.Add(skew)) {
		return headerChecked{}, authErr(r, CodeInvalidSignature, fmt.Sprintf("Signature not yet current: %s is still later than %s (%s + %s.)",
			amzDate, now.Add(skew).Format(amzDateLayout), now.Format(amzDateLayout), skewText(skew)))
	}

	// Session token: required when the credential has one, refused otherwise.
	tokens := r.Header.Values(wire.HeaderAmzSecurityToken)
	switch {
	case len(tokens) > 1:
		return headerChecked{}, authErr(r, CodeIncompleteSignature, "Only one X-Amz-Security-Token header is allowed.")
	case cred.token == "" && len(tokens) == 1,
		cred.token != "" && (len(tokens) == 0 || !hmac.Equal([]byte(tokens[0]), []byte(cred.token))):
		return headerChecked{}, authErr(r, CodeUnrecognizedClient, "The security token included in the request is invalid.")
	}
	sv := headerChecked{auth: auth, amzDate: amzDate, cred: cred}

	// A payload hash announced in a header can never match a body when it
	// is not a SHA-256; when the header is signed, the signature can be
	// checked before the body arrives (verifySigV4 still compares the hash
	// with the body).
	if ph := r.Header.Values(wire.HeaderAmzContentSHA256); len(ph) > 0 {
		v := strings.ToLower(ph[0])
		if len(ph) > 1 || len(v) != 2*sha256.Size || !isLowerHex(v) {
			return headerChecked{}, authErr(r, CodeInvalidSignature, contentSHAMismatch)
		}
		if slices.Contains(auth.signedHeaders, strings.ToLower(wire.HeaderAmzContentSHA256)) { // SignedHeaders are lower case
			if aerr := sv.verifySignature(r, v); aerr != nil {
				return headerChecked{}, aerr
			}
			sv.signatureChecked = true
		}
	}
	return sv, nil
}

// verifySignature checks the request's signature over payloadHash, the hex
// SHA-256 of its body.
func (sv headerChecked) verifySignature(r *http.Request, payloadHash string) *AuthError {
	auth := sv.auth
	canonical, missing := canonicalRequest(r, auth.signedHeaders, payloadHash)
	scope := auth.scopeDate + "/" + auth.region + "/" + auth.service + "/" + auth.terminator
	stringToSign := sigAlgorithm + "\n" + sv.amzDate + "\n" + scope + "\n" + sha256Hex([]byte(canonical))
	key := signingKey(sv.cred.secret, auth.scopeDate, auth.region, auth.service)
	want := hex.EncodeToString(hmacSHA256(key, []byte(stringToSign)))
	if !hmac.Equal([]byte(want), []byte(auth.signature)) {
		return authErr(r, CodeInvalidSignature, mismatchMessage(canonical, stringToSign, missing))
	}
	return nil
}

// parseAuthorization splits "AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…,
// Signature=…" and checks the shape of each part.
func parseAuthorization(r *http.Request, h string) (sigV4Auth, *AuthError) {
	var a sigV4Auth
	alg, rest, _ := strings.Cut(strings.TrimLeft(h, " "), " ")
	if alg != sigAlgorithm {
		if strings.HasPrefix(alg, "AWS4-") {
			return a, authErr(r, CodeIncompleteSignature, "Unsupported AWS 'algorithm': '"+echo(alg)+"'. mce verifies AWS4-HMAC-SHA256 only.")
		}
		return a, authErr(r, CodeIncompleteSignature, "Authorization header requires 'Credential' parameter. Authorization header requires 'Signature' parameter. Authorization header requires 'SignedHeaders' parameter. Authorization="+echo(h))
	}
	var credential, signedHeaders, signature string
	var haveCred, haveSH, haveSig bool
	for _, part := range strings.Split(rest, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return a, authErr(r, CodeIncompleteSignature, "'"+echo(part)+"' not a valid key=value pair (missing equal-sign) in Authorization header: '"+echo(h)+"'.")
		}
		switch k {
		case "Credential":
			credential, haveCred = v, true
		case "SignedHeaders":
			signedHeaders, haveSH = v, true
		case "Signature":
			signature, haveSig = v, true
		default:
			// AWS ignores unknown parameters; so do we.
		}
	}
	var missing []string
	if !haveCred {
		missing = append(missing, "Authorization header requires 'Credential' parameter.")
	}
	if !haveSig {
		missing = append(missing, "Authorization header requires 'Signature' parameter.")
	}
	if !haveSH {
		missing = append(missing, "Authorization header requires 'SignedHeaders' parameter.")
	}
	if len(missing) > 0 {
		return a, authErr(r, CodeIncompleteSignature, strings.Join(missing, " ")+" Authorization="+echo(h))
	}

	parts := strings.Split(credential, "/")
	if len(parts) != 5 || parts[0] == "" || len(parts[0]) > 128 || len(parts[1]) != 8 || parts[2] == "" || len(parts[2]) > 64 {
		return a, authErr(r, CodeIncompleteSignature, "Credential is malformed; expecting \"<ACCESS_KEY_ID>/YYYYMMDD/REGION/sagemaker/aws4_request\", got '"+echo(credential)+"'.")
	}
	a.accessKeyID, a.scopeDate, a.region, a.service, a.terminator = parts[0], parts[1], parts[2], parts[3], parts[4]

	if signedHeaders == "" {
		return a, authErr(r, CodeIncompleteSignature, "Authorization header requires 'SignedHeaders' parameter. Authorization="+echo(h))
	}
	names := strings.Split(signedHeaders, ";")
	if len(names) > maxSignedHeaders {
		return a, authErr(r, CodeIncompleteSignature, fmt.Sprintf("SignedHeaders names more than %d headers.", maxSignedHeaders))
	}
	hasHost := false
	for i, n := range names {
		if n == "" || !validHeaderName(n) {
			return a, authErr(r, CodeIncompleteSignature, "SignedHeaders is malformed: '"+echo(signedHeaders)+"'.")
		}
		if i > 0 && names[i-1] >= n {
			return a, authErr(r, CodeIncompleteSignature, "SignedHeaders must be lower-case, sorted and without duplicates: '"+echo(signedHeaders)+"'.")
		}
		if n == "host" {
			hasHost = true
		}
	}
	if !hasHost {
		return a, authErr(r, CodeInvalidSignature, "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.")
	}
	a.signedHeaders = names

	if len(signature) != 64 || !isLowerHex(signature) {
		return a, authErr(r, CodeIncompleteSignature, "Signature must be 64 lower-case hexadecimal characters. Authorization="+echo(h))
	}
	a.signature = signature
	return a, nil
}

// canonicalRequest builds the SigV4 canonical request of r. missing lists
// the signed headers r does not carry (for the error message).
func canonicalRequest(r *http.Request, signed []string, payloadHash string) (string, []string) {
	var b strings.Builder
	b.Grow(256)
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(canonicalURI(r))
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(r.URL.RawQuery))
	b.WriteByte('\n')
	var missing []string
	for _, name := range signed {
		b.WriteString(name)
		b.WriteByte(':')
		var vals []string
		switch name {
		case "host":
			host := r.Host
			if host == "" {
				host = r.URL.Host
			}
			vals = []string{host}
		case "content-length":
			vals = r.Header.Values("Content-Length")
			if len(vals) == 0 && r.ContentLength >= 0 {
				vals = []string{strconv.FormatInt(r.ContentLength, 10)}
			}
		default:
			vals = r.Header[textproto.CanonicalMIMEHeaderKey(name)]
		}
		if len(vals) == 0 {
			missing = append(missing, name)
		}
		for i, v := range vals {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(collapseSpaces(v))
		}
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(signed, ";"))
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return b.String(), missing
}

// canonicalURI is the request path exactly as the client sent it (from the
// request line), URI-encoded once more.
func canonicalURI(r *http.Request) string {
	p := ""
	if ru := r.RequestURI; strings.HasPrefix(ru, "/") {
		p, _, _ = strings.Cut(ru, "?")
	} else {
		p = r.URL.EscapedPath()
	}
	if p == "" {
		return "/"
	}
	return uriEncode(p, false)
}

// canonicalQuery decodes and re-encodes every query parameter and sorts them.
func canonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	type kv struct{ k, v string }
	var params []kv
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		if len(params) == maxQueryParams {
			break // the signature will not match; no need to sort more
		}
		k, v, _ := strings.Cut(part, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if dv, err := url.QueryUnescape(v); err == nil {
			v = dv
		}
		params = append(params, kv{uriEncode(k, true), uriEncode(v, true)})
	}
	sort.Slice(params, func(i, j int) bool {
		if params[i].k != params[j].k {
			return params[i].k < params[j].k
		}
		return params[i].v < params[j].v
	})
	var b strings.Builder
	for i, p := range params {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

// uriEncode percent-encodes every byte outside the RFC 3986 unreserved set,
// and '/' too when encodeSlash.
func uriEncode(s string, encodeSlash bool) string {
	const hexdig = "0123456789ABCDEF"
	n := 0
	for i := 0; i < len(s); i++ {
		if !unreserved(s[i]) && (encodeSlash || s[i] != '/') {
			n++
		}
	}
	if n == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) || (!encodeSlash && c == '/') {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hexdig[c>>4], hexdig[c&15])
	}
	return string(b)
}

func unreserved(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// collapseSpaces trims spaces at both ends and turns every run of spaces
// inside into one, as the signers do.
func collapseSpaces(v string) string {
	v = strings.Trim(v, " ")
	if !strings.Contains(v, "  ") {
		return v
	}
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if v[i] == ' ' && i > 0 && v[i-1] == ' ' {
			continue
		}
		b = append(b, v[i])
	}
	return string(b)
}

func validHeaderName(n string) bool {
	if len(n) > 128 {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func signingKey(secret []byte, date, region, service string) []byte {
	k := make([]byte, 0, 4+len(secret))
	k = append(append(k, "AWS4"...), secret...)
	k = hmacSHA256(k, []byte(date))
	k = hmacSHA256(k, []byte(region))
	k = hmacSHA256(k, []byte(service))
	return hmacSHA256(k, []byte(scopeTerminator))
}

func hmacSHA256(key, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(data)
	return m.Sum(nil)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// mismatchMessage is AWS's text for a wrong signature; like AWS it shows the
// canonical request and string to sign the server computed (no secret is in
// either), when they fit in a SageMaker error message.
func mismatchMessage(canonical, stringToSign string, missing []string) string {
	const base = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
	msg := base
	if len(missing) > 0 {
		msg += " Signed headers missing from the request: " + strings.Join(missing, ", ") + "."
	}
	full := msg + "\n\nThe Canonical String for this request should have been\n'" + redactToken(canonical) + "'\n\nThe String-to-Sign should have been\n'" + stringToSign + "'\n"
	if len(full) <= maxSigMessage {
		return full
	}
	return msg
}

// redactToken hides the session token in a canonical request shown in an
// error message (the host may log messages).
func redactToken(canonical string) string {
	h := "\n" + strings.ToLower(wire.HeaderAmzSecurityToken) + ":" // canonical headers are lower case
	i := strings.Index(canonical, h)
	if i < 0 {
		return canonical
	}
	j := strings.IndexByte(canonical[i+len(h):], '\n')
	if j < 0 {
		return canonical
	}
	return canonical[:i+len(h)] + "<redacted>" + canonical[i+len(h)+j:]
}

// echo bounds client text put back into a message.
func echo(s string) string {
	if len(s) > maxEchoLen {
		return s[:maxEchoLen] + "…"
	}
	return s
}

func skewText(d time.Duration) string {
	if d%time.Minute == 0 {
		return strconv.FormatInt(int64(d/time.Minute), 10) + " min"
	}
	return d.String()
}

// presigned reports whether r carries query-string (presigned URL) auth.
func presigned(r *http.Request) bool {
	for part := range strings.SplitSeq(r.URL.RawQuery, "&") {
		k, _, _ := strings.Cut(part, "=")
		switch k {
		case "X-Amz-Signature", "X-Amz-Algorithm", "X-Amz-Credential":
			return true
		}
	}
	return false
}

// accessKeyFromHeader extracts the access key id of a SigV4 Authorization
// header without verifying anything (for logs in allow-all mode).
func accessKeyFromHeader(h string) string {
	_, after, ok := strings.Cut(h, "Credential=")
	if !ok {
		return ""
	}
	akid, _, _ := strings.Cut(after, "/")
	if len(akid) > 128 {
		return ""
	}
	return akid
}
