package host

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/internal/wire"
)

// Header names of InvokeEndpoint (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html), spelled in Go's
// canonical form: net/http canonicalises incoming names, so boto3's mixed
// case and the Go SDK's spelling both arrive like this, and lookups can index
// the map directly instead of canonicalising on every call (hot path). Each
// name is declared once, in package wire.
var (
	hdrCustomAttributes = http.CanonicalHeaderKey(wire.HeaderCustomAttributes)
	hdrTargetModel      = http.CanonicalHeaderKey(wire.HeaderTargetModel)
	hdrTargetVariant    = http.CanonicalHeaderKey(wire.HeaderTargetVariant)
	hdrTargetContainer  = http.CanonicalHeaderKey(wire.HeaderTargetContainer)
	hdrInferenceID      = http.CanonicalHeaderKey(wire.HeaderInferenceID)
	hdrEnableExplain    = http.CanonicalHeaderKey(wire.HeaderEnableExplanations)
	hdrInferenceComp    = http.CanonicalHeaderKey(wire.HeaderInferenceComponent)
	hdrSessionID        = http.CanonicalHeaderKey(wire.HeaderSessionID)
	hdrNewSessionID     = http.CanonicalHeaderKey(wire.HeaderNewSessionID)
	hdrClosedSessionID  = http.CanonicalHeaderKey(wire.HeaderClosedSessionID)
	hdrPrefixAwareID    = http.CanonicalHeaderKey(wire.HeaderPrefixAwareID)
	hdrInvokedVariant   = http.CanonicalHeaderKey(wire.HeaderInvokedVariant)
	hdrRequestID        = http.CanonicalHeaderKey(wire.HeaderRequestID)
)

const (
	hdrContentType       = "Content-Type"
	hdrAccept            = "Accept"
	defaultContentType   = "application/octet-stream"
	namePatternText      = wire.NamePattern
	printPatternText     = `\A\S[\p{Print}]*\z`
	componentPatternText = `^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?$`
	sessionPatternText   = `^(NEW_SESSION)$|` + wire.NamePattern + `$`
)

// header returns the first value of a header whose name is given in
// canonical form, without canonicalising it again.
func header(h http.Header, canonical string) string {
	if v := h[canonical]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// printMatcher matches \A\S[\p{Print}]*\z without a regexp, in Java's
// dialect (the service model's): \p{Print} is ASCII [ -~], and \S any
// character but [ \t\n\x0B\f\r].
type printMatcher struct{}

func (printMatcher) MatchString(s string) bool {
	if s == "" {
		return false
	}
	switch s[0] { // Java's \s: [ \t\n\x0B\f\r]
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return false
	}
	_, size := utf8.DecodeRuneInString(s)
	for i := size; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// nameMatcher adapts wire.ValidName to the rule table.
type nameMatcher struct{}

func (nameMatcher) MatchString(s string) bool { return wire.ValidName(s) }

type matcher interface{ MatchString(string) bool }

var (
	namePattern      matcher = nameMatcher{}
	printPattern     matcher = printMatcher{}
	componentPattern         = regexp.MustCompile(componentPatternText)
	sessionPattern           = regexp.MustCompile(sessionPatternText)
)

// headerRule is one member's constraints as the service model states them.
type headerRule struct {
	header  string
	member  string // the member name in validation messages (lower camel case)
	min     int
	max     int
	ascii   bool
	pattern matcher
	shown   string // the pattern as SageMaker prints it
}

var invokeRules = []headerRule{
	{header: hdrContentType, member: "contentType", max: 1024, ascii: true},
	{header: hdrAccept, member: "accept", max: 1024, ascii: true},
	{header: hdrCustomAttributes, member: "customAttributes", max: 1024, ascii: true},
	{header: hdrTargetModel, member: "targetModel", min: 1, max: 1024, pattern: printPattern, shown: printPatternText},
	{header: hdrTargetVariant, member: "targetVariant", max: 63, pattern: namePattern, shown: namePatternText},
	{header: hdrTargetContainer, member: "targetContainerHostname", max: 63, pattern: namePattern, shown: namePatternText},
	{header: hdrInferenceID, member: "inferenceId", min: 1, max: 64, pattern: printPattern, shown: printPatternText},
	{header: hdrEnableExplain, member: "enableExplanations", min: 1, max: 64, pattern: printPattern, shown: printPatternText},
	{header: hdrInferenceComp, member: "inferenceComponentName", max: 63, pattern: componentPattern, shown: componentPatternText},
	{header: hdrSessionID, member: "sessionId", max: 256, pattern: sessionPattern, shown: sessionPatternText},
	// The model states no bounds for PrefixAwareId; mce takes at most 256
	// printable characters (docs/sessions.md).
	{header: hdrPrefixAwareID, member: "prefixAwareId", min: 1, max: 256, pattern: printPattern, shown: printPatternText},
}

// validateInvokeHeaders checks every InvokeEndpoint header that is present and
// reports all violations at once, in SageMaker's wording.
func validateInvokeHeaders(endpoint string, h http.Header) *apierr.Error {
	return validateHeaderRules(endpoint, h, invokeRules)
}

// validateHeaderRules checks the endpoint name and the headers of rules.
func validateHeaderRules(endpoint string, h http.Header, rules []headerRule) *apierr.Error {
	var problems []string
	if len(endpoint) > 63 {
		problems = append(problems, constraint(endpoint, "endpointName", "Member must have length less than or equal to 63"))
	} else if !namePattern.MatchString(endpoint) {
		problems = append(problems, constraint(endpoint, "endpointName", "Member must satisfy regular expression pattern: "+namePatternText))
	}
	for _, r := range rules {
		vs := h[r.header]
		if len(vs) == 0 {
			continue
		}
		v := strings.Join(vs, ",")
		switch {
		case len(v) > r.max:
			problems = append(problems, constraint(v, r.member, fmt.Sprintf("Member must have length less than or equal to %d", r.max)))
		case len(v) < r.min:
			problems = append(problems, constraint(v, r.member, fmt.Sprintf("Member must have length greater than or equal to %d", r.min)))
		case r.ascii && !isASCII(v):
			problems = append(problems, constraint(v, r.member, `Member must satisfy regular expression pattern: \p{ASCII}*`))
		case r.pattern != nil && v != "" && !r.pattern.MatchString(v):
			problems = append(problems, constraint(v, r.member, "Member must satisfy regular expression pattern: "+r.shown))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	noun := "error"
	if len(problems) > 1 {
		noun = "errors"
	}
	return apierr.Validation("%d validation %s detected: %s", len(problems), noun, strings.Join(problems, "; "))
}

func constraint(value, member, rule string) string {
	const maxShown = 128
	value = strings.ToValidUTF8(value, "\uFFFD") // the value is echoed into a JSON message
	if len(value) > maxShown {
		value = apierr.Truncate(value, maxShown) + "..."
	}
	return fmt.Sprintf("Value '%s' at '%s' failed to satisfy constraint: %s", value, member, rule)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// maxTargetModelSegment is the longest '/'-separated segment of a
// TargetModel: a file name's limit on the file systems mce keeps and finds
// artifacts on.
const maxTargetModelSegment = 255

// validateTargetModel checks what mce needs of a TargetModel beyond the
// service model's pattern, before anything reaches the artifact store or
// the cache: a relative path below the ModelDataUrl prefix (no leading '/',
// no empty, "." or ".." segment) whose segments fit in a file name.
func validateTargetModel(v string) *apierr.Error {
	if err := mme.ValidTargetModel(v); err != nil {
		why := err.Error() // "invalid TargetModel "…": why", the value quoted
		if i := strings.LastIndex(why, ": "); i >= 0 {
			why = why[i+2:]
		}
		return apierr.Validation("1 validation error detected: %s", constraint(v, "targetModel",
			"Member must be a relative path below the ModelDataUrl prefix: "+why))
	}
	for seg := range strings.SplitSeq(v, "/") {
		if len(seg) > maxTargetModelSegment {
			return apierr.Validation("1 validation error detected: %s", constraint(v, "targetModel",
				fmt.Sprintf("Each '/'-separated part of the TargetModel must have length less than or equal to %d", maxTargetModelSegment)))
		}
	}
	return nil
}
