package applicationautoscaling

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mce-run/mce/internal/wire"
)

// APIError is an answer in one of the service's error shapes: HTTP status,
// the code written as __type, and the message.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// The service's error codes (its model's error shapes).
const (
	CodeValidation           = "ValidationException"
	CodeObjectNotFound       = "ObjectNotFoundException"
	CodeLimitExceeded        = "LimitExceededException"
	CodeConcurrentUpdate     = "ConcurrentUpdateException"
	CodeFailedResourceAccess = "FailedResourceAccessException"
	CodeInternal             = "InternalServiceException"
	codeAccessDenied         = "AccessDeniedException"
	codeUnknownOperation     = "UnknownOperationException"
	codeSerialization        = "SerializationException"
)

func newErr(status int, code, format string, args ...any) *APIError {
	return &APIError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func validation(format string, args ...any) *APIError {
	return newErr(http.StatusBadRequest, CodeValidation, format, args...)
}

func notFound(format string, args ...any) *APIError {
	return newErr(http.StatusBadRequest, CodeObjectNotFound, format, args...)
}

func limitExceeded(format string, args ...any) *APIError {
	return newErr(http.StatusBadRequest, CodeLimitExceeded, format, args...)
}

func internal(format string, args ...any) *APIError {
	return newErr(http.StatusInternalServerError, CodeInternal, format, args...)
}

var errBadTimestamp = errors.New("a timestamp out of range")

// WriteError writes an error in AWS JSON 1.1's shape: __type and message.
func WriteError(w http.ResponseWriter, e *APIError) {
	b, _ := json.Marshal(map[string]string{"__type": e.Code, "message": e.Message})
	w.Header().Set("Content-Type", contentType)
	w.Header().Set(wire.HeaderErrorType, e.Code)
	w.WriteHeader(e.Status)
	w.Write(b)
}
