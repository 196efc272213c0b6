package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/internal/wire"
	"github.com/mce-run/mce/pipeline"
)

// Runtime error codes and their HTTP statuses (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html#API_runtime_InvokeEndpoint_Errors).
const (
	CodeValidation        = "ValidationError"
	CodeModelError        = "ModelError"
	CodeModelNotReady     = "ModelNotReadyException"
	CodeInternalFailure   = "InternalFailure"
	CodeServiceUnavail    = "ServiceUnavailable"
	CodeInternalDep       = "InternalDependencyException"
	CodeUnknownOperation  = "UnknownOperationException"
	CodeAccessDenied      = "AccessDeniedException"
	maxMessageLen         = 2048 // the Message shape's max length
	maxOriginalMessageLen = 2048
)

// APIError is an error as a SageMaker client receives it.
type APIError struct {
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
	err       error
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }
func (e *APIError) Unwrap() error { return e.err }

// validationError is a 400 ValidationError.
func validationError(format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Code: CodeValidation, Message: fmt.Sprintf(format, args...)}
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

// writeError is the one place an error reaches the wire.
func writeError(w http.ResponseWriter, e *APIError) {
	body := errorJSON(e)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set(wire.HeaderErrorType, e.Code)
	h.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(e.Status)
	w.Write(body)
}

// errorJSON is e's JSON body, as writeError sends it (and as asynchronous
// inference writes it to a FailureLocation).
func errorJSON(e *APIError) []byte {
	body, err := json.Marshal(errorBody{
		Type:               e.Code,
		Message:            truncate(e.Message, maxMessageLen),
		OriginalStatusCode: e.OriginalStatusCode,
		OriginalMessage:    truncate(e.OriginalMessage, maxOriginalMessageLen),
		LogStreamArn:       e.LogStreamArn,
		ErrorCode:          e.ErrorCode,
	})
	if err != nil { // cannot happen for these field types; stay well-formed anyway
		body = []byte(`{"__type":"InternalFailure","Message":"error encoding failed"}`)
	}
	return body
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}

// toAPIError maps the typed errors of the layers below to SageMaker's shapes.
// Failures that are mce's own become a generic InternalFailure naming reqID.
func (s *Server) toAPIError(endpoint, reqID string, err error) *APIError {
	var api *APIError
	var mErr *pipeline.ModelError
	var vErr *pipeline.ValidationError
	var uErr *pipeline.UnavailableError
	var sErr *spec.ValidationError
	var notReady *mme.NotReadyError
	var notFound *mme.ModelNotFoundError
	var loadErr *mme.LoadError
	switch {
	case errors.As(err, &api):
		return api
	case errors.As(err, &notReady):
		// ModelNotReadyException: the model is still downloading or
		// loading; SDKs with legacy retries try again (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html#API_runtime_InvokeEndpoint_Errors, https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html).
		return &APIError{Status: http.StatusTooManyRequests, Code: CodeModelNotReady, err: err,
			Message: "Model " + notReady.TargetModel + " is still being loaded on endpoint " + endpoint + "; the load carries on. Wait and try your request again."}
	case errors.As(err, &notFound):
		return &APIError{Status: http.StatusBadRequest, Code: CodeValidation, err: err,
			Message: "Failed to download model data for TargetModel " + notFound.TargetModel + ": " + redactPaths(err.Error()) + ". Make sure the artifact exists under the endpoint's ModelDataUrl prefix."}
	case errors.Is(err, mme.ErrInvalidTargetModel), errors.Is(err, artifact.ErrUnsafeArchive),
		errors.Is(err, artifact.ErrOutsideModelRoots),
		errors.Is(err, artifact.ErrTooLarge), errors.Is(err, artifact.ErrInvalidArchive):
		return &APIError{Status: http.StatusBadRequest, Code: CodeValidation, Message: redactPaths(err.Error()), err: err}
	case errors.As(err, &loadErr):
		code := loadErr.Status
		return &APIError{Status: http.StatusFailedDependency, Code: CodeModelError, err: err,
			Message: "The container refused to load model " + loadErr.TargetModel + ": " + redactPaths(err.Error()), OriginalStatusCode: &code,
			OriginalMessage: loadErr.Message, LogStreamArn: s.logStreamARN(endpoint)}
	case errors.Is(err, mme.ErrNoMemory):
		code := http.StatusInsufficientStorage
		msg := redactPaths(err.Error())
		return &APIError{Status: http.StatusFailedDependency, Code: CodeModelError, err: err,
			Message: msg, OriginalStatusCode: &code, OriginalMessage: msg, LogStreamArn: s.logStreamARN(endpoint)}
	case errors.As(err, &mErr):
		code := mErr.OriginalStatusCode
		return &APIError{
			Status: http.StatusFailedDependency, Code: CodeModelError, Message: mErr.Message,
			OriginalStatusCode: &code, OriginalMessage: mErr.OriginalMessage,
			LogStreamArn: s.logStreamARN(endpoint), err: err,
		}
	case errors.As(err, &vErr):
		return &APIError{Status: http.StatusBadRequest, Code: CodeValidation, Message: vErr.Message, err: err}
	case errors.As(err, &uErr):
		return &APIError{Status: http.StatusServiceUnavailable, Code: CodeServiceUnavail, Message: uErr.Message, err: err}
	case errors.As(err, &sErr):
		return &APIError{Status: http.StatusBadRequest, Code: CodeValidation, Message: redactPaths(sErr.Error()), err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &APIError{Status: http.StatusServiceUnavailable, Code: CodeServiceUnavail, Message: "The request timed out in mce.", err: err}
	}
	return s.internalError(reqID, err)
}

// internalError is the answer to a failure that is mce's, not the
// caller's: a generic message with the request ID, while the details (which
// may name host paths, addresses or internals) go to the log.
func (s *Server) internalError(reqID string, err error) *APIError {
	s.log.Error().Err(err).Str("request_id", reqID).Msg("internal error")
	return &APIError{Status: http.StatusInternalServerError, Code: CodeInternalFailure, err: err,
		Message: "An internal error occurred in mce (request ID " + reqID + "; the operator finds the details in mce's log)."}
}

// redactPaths replaces the absolute host paths in s (a lower layer's error
// text shown to a caller) with "<path>": callers learn that a file was
// missing or unusable, never where mce keeps things. URLs other than
// file:// are kept ("s3://bucket/key"); file:// paths are redacted too.
// The quoted name after artifact.UnsafeEntryPrefix is an archive entry's
// name (archive content, escaped and bounded by the artifact package, never a
// host path) and is kept, so that users see which entry was refused.
func redactPaths(s string) string {
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
	return redactHostPaths(s[:start]) + name + redactPaths(s[end:])
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

// logStreamARN points at the endpoint's log group in SageMaker's form; in mce
// the logs are mce's own output, labelled with the endpoint.
func (s *Server) logStreamARN(endpoint string) string {
	return fmt.Sprintf("arn:aws:logs:%s:%s:log-group:/aws/sagemaker/Endpoints/%s", s.cfg.Region, s.cfg.Account, endpoint)
}
