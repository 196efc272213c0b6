package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// Runtime error codes and their HTTP statuses (contracts doc §1.5).
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
	err                error
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }
func (e *APIError) Unwrap() error { return e.err }

// validationError is a 400 ValidationError.
func validationError(format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Code: CodeValidation, Message: fmt.Sprintf(format, args...)}
}

// errorBody is the JSON body of every error. Message is capitalised: older Go
// SDKs match only "Message" (contracts doc §1.5). OriginalStatusCode is a JSON
// number: a string fails the Go SDK's decoding.
type errorBody struct {
	Type               string `json:"__type"`
	Message            string `json:"Message"`
	OriginalStatusCode *int   `json:"OriginalStatusCode,omitempty"`
	OriginalMessage    string `json:"OriginalMessage,omitempty"`
	LogStreamArn       string `json:"LogStreamArn,omitempty"`
}

// writeError is the one place an error reaches the wire.
func writeError(w http.ResponseWriter, e *APIError) {
	body, err := json.Marshal(errorBody{
		Type:               e.Code,
		Message:            truncate(e.Message, maxMessageLen),
		OriginalStatusCode: e.OriginalStatusCode,
		OriginalMessage:    truncate(e.OriginalMessage, maxOriginalMessageLen),
		LogStreamArn:       e.LogStreamArn,
	})
	if err != nil { // cannot happen for these field types; stay well-formed anyway
		body = []byte(`{"__type":"InternalFailure","Message":"error encoding failed"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Amzn-ErrorType", e.Code)
	h.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(e.Status)
	w.Write(body)
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
func (s *Server) toAPIError(endpoint string, err error) *APIError {
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
		// loading; SDKs with legacy retries try again (contracts doc §1.5, §4.1).
		return &APIError{Status: http.StatusTooManyRequests, Code: CodeModelNotReady, err: err,
			Message: "Model " + notReady.TargetModel + " is still being loaded on endpoint " + endpoint + "; the load carries on. Wait and try your request again."}
	case errors.As(err, &notFound):
		return &APIError{Status: http.StatusBadRequest, Code: CodeValidation, err: err,
			Message: "Failed to download model data for TargetModel " + notFound.TargetModel + ": " + err.Error() + ". Make sure the artifact exists under the endpoint's ModelDataUrl prefix."}
	case errors.Is(err, mme.ErrInvalidTargetModel), errors.Is(err, artifact.ErrUnsafeArchive),
		errors.Is(err, artifact.ErrOutsideModelRoots),
		errors.Is(err, artifact.ErrTooLarge), errors.Is(err, artifact.ErrInvalidArchive):
		return &APIError{Status: http.StatusBadRequest, Code: CodeValidation, Message: err.Error(), err: err}
	case errors.As(err, &loadErr):
		code := loadErr.Status
		return &APIError{Status: http.StatusFailedDependency, Code: CodeModelError, err: err,
			Message: "The container refused to load model " + loadErr.TargetModel + ": " + err.Error(), OriginalStatusCode: &code,
			OriginalMessage: loadErr.Message, LogStreamArn: s.logStreamARN(endpoint)}
	case errors.Is(err, mme.ErrNoMemory):
		code := http.StatusInsufficientStorage
		return &APIError{Status: http.StatusFailedDependency, Code: CodeModelError, err: err,
			Message: err.Error(), OriginalStatusCode: &code, OriginalMessage: err.Error(), LogStreamArn: s.logStreamARN(endpoint)}
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
		return &APIError{Status: http.StatusBadRequest, Code: CodeValidation, Message: sErr.Error(), err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &APIError{Status: http.StatusServiceUnavailable, Code: CodeServiceUnavail, Message: "The request timed out in mce.", err: err}
	}
	return &APIError{Status: http.StatusInternalServerError, Code: CodeInternalFailure,
		Message: "An internal error occurred in mce: " + err.Error(), err: err}
}

// logStreamARN points at the endpoint's log group in SageMaker's form; in mce
// the logs are mce's own output, labelled with the endpoint.
func (s *Server) logStreamARN(endpoint string) string {
	return fmt.Sprintf("arn:aws:logs:%s:%s:log-group:/aws/sagemaker/Endpoints/%s", s.cfg.Region, s.cfg.Account, endpoint)
}
