package apierr

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/internal/wire"
)

// Runtime error codes and their HTTP statuses (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html#API_runtime_InvokeEndpoint_Errors).
const (
	CodeValidation       = "ValidationError"
	CodeModelError       = "ModelError"
	CodeModelNotReady    = "ModelNotReadyException"
	CodeInternalFailure  = "InternalFailure"
	CodeServiceUnavail   = "ServiceUnavailable"
	CodeInternalDep      = "InternalDependencyException"
	CodeUnknownOperation = "UnknownOperationException"
	CodeAccessDenied     = "AccessDeniedException"
	// The control plane's codes (awsJson1_1).
	CodeValidationException = "ValidationException"
	CodeResourceNotFound    = "ResourceNotFound"
	CodeResourceInUse       = "ResourceInUse"
	CodeRequestTimeout      = "RequestTimeout"
	MaxMessageLen           = 2048 // the Message shape's max length
	maxOriginalMessageLen   = 2048
)

// Error is an error as a SageMaker client receives it.
type Error struct {
	Status  int
	Code    string
	Message string
	// ModelError members; zero elsewhere.
	OriginalStatusCode *int
	OriginalMessage    string
	LogStreamArn       string
	// ErrorCode is the runtime's finer code where SageMaker sends one
	// (INFERENCE_COMPONENT_NAME_MISSING).
	ErrorCode string
	Cause     error // what caused it, for the log and errors.Is/As; never shown
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }
func (e *Error) Unwrap() error { return e.Cause }

// Validation is a 400 ValidationError.
func Validation(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeValidation, Message: fmt.Sprintf(format, args...)}
}

// ValidationException is the control plane's 400 ValidationException.
func ValidationException(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeValidationException, Message: fmt.Sprintf(format, args...)}
}

// errorBody is the JSON body of every error. Message is capitalised: older Go
// SDKs match only "Message" (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html#API_runtime_InvokeEndpoint_Errors). OriginalStatusCode is a JSON
// number: a string fails the Go SDK's decoding.
type errorBody struct {
	Type               string `json:"__type"`
	Message            string `json:"Message"`
	OriginalStatusCode *int   `json:"OriginalStatusCode,omitempty"`
	OriginalMessage    string `json:"OriginalMessage,omitempty"`
	LogStreamArn       string `json:"LogStreamArn,omitempty"`
	ErrorCode          string `json:"ErrorCode,omitempty"`
}

// Write is the one place an error reaches the wire.
func Write(w http.ResponseWriter, e *Error) {
	body := JSON(e)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set(wire.HeaderErrorType, e.Code)
	h.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(e.Status)
	w.Write(body)
}

// JSON is e's JSON body, as Write sends it (and as asynchronous
// inference writes it to a FailureLocation).
func JSON(e *Error) []byte {
	body, err := json.Marshal(errorBody{
		Type:               e.Code,
		Message:            Truncate(e.Message, MaxMessageLen),
		OriginalStatusCode: e.OriginalStatusCode,
		OriginalMessage:    Truncate(e.OriginalMessage, maxOriginalMessageLen),
		LogStreamArn:       e.LogStreamArn,
		ErrorCode:          e.ErrorCode,
	})
	if err != nil { // cannot happen for these field types; stay well-formed anyway
		body = []byte(`{"__type":"InternalFailure","Message":"error encoding failed"}`)
	}
	return body
}

// Printable bounds a caller-supplied value for a message or a log line: at
// most 128 bytes, control and other non-printable characters replaced (a
// terminal showing the message or reading the console log must not receive
// escape sequences).
func Printable(v string) string {
	const maxLen = 128
	cut := false
	if len(v) > maxLen {
		v, cut = v[:maxLen], true
	}
	v = strings.Map(func(r rune) rune {
		if !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(v, "?"))
	if cut {
		v += "…"
	}
	return v
}

// Truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}

// RedactPaths replaces the absolute host paths in s (a lower layer's error
// text shown to a caller) with "<path>": callers learn that a file was
// missing or unusable, never where mce keeps things. URLs other than
// file:// are kept ("s3://bucket/key"); file:// paths are redacted too.
// The quoted name after artifact.UnsafeEntryPrefix is an archive entry's
// name (archive content, escaped and bounded by the artifact package, never a
// host path) and is kept, so that users see which entry was refused.
func RedactPaths(s string) string {
	i := strings.Index(s, artifact.UnsafeEntryPrefix+`"`)
	if i < 0 {
		return redactHostPaths(s)
	}
	start := i + len(artifact.UnsafeEntryPrefix)
	name, err := strconv.QuotedPrefix(s[start:])
	if err != nil {
		return redactHostPaths(s)
	}
	end := start + len(name)
	return redactHostPaths(s[:start]) + name + RedactPaths(s[end:])
}

func redactHostPaths(s string) string {
	if strings.IndexByte(s, '/') < 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '/' || !pathStarts(s, i) {
			continue
		}
		j := i
		for j < len(s) && !pathEnds(s, j) {
			j++
		}
		b.WriteString(s[last:i])
		b.WriteString("<path>")
		last, i = j, j
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// pathStarts: the '/' at s[i] starts an absolute path, not a URL's "//" or
// a relative path's separator.
func pathStarts(s string, i int) bool {
	if i == 0 {
		return true
	}
	if strings.HasSuffix(s[:i], "file://") {
		return true
	}
	switch s[i-1] {
	case ' ', '\t', '\n', '"', '\'', '(', '[', '=', ',', '<':
		return true
	}
	return false
}

// pathEnds: s[j] ends a path that runs up to it.
func pathEnds(s string, j int) bool {
	switch s[j] {
	case ' ', '\t', '\n', '"', '\'', ')', ']', ',', ';', '>':
		return true
	case ':':
		return j+1 == len(s) || s[j+1] == ' '
	}
	return false
}

// Ended refuses to store what a caller no longer waits for: its request
// was cancelled or ran out of time before anything was created (nothing
// was). nil while ctx is live.
func Ended(ctx context.Context, arn string) error {
	if err := ctx.Err(); err != nil {
		return &Error{Status: http.StatusBadRequest, Code: CodeRequestTimeout, Cause: err,
			Message: fmt.Sprintf("The request ended (cancelled, or out of time) before %q was created; nothing was created.", arn)}
	}
	return nil
}
