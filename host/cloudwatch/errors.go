package cloudwatch

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/mce-run/mce/internal/awsquery"
)

// APIError is an error a client sees, in CloudWatch's terms: Code is the
// query protocol's code (InvalidParameterValue), which JSON and CBOR
// clients get through the x-amzn-query-error header CloudWatch's
// awsQueryCompatible trait defines, and Type the error shape's name
// (InvalidParameterValueException), their __type. Every protocol writes it
// in its own shape in exactly one place (writeError).
type APIError struct {
	Status  int
	Code    string
	Type    string
	Message string
	// Fault is Sender for the caller's mistakes, Receiver for mce's.
	Fault awsquery.Fault
	// messageKey is the member the shape names its message with
	// ("message"; InternalServiceFault says "Message").
	messageKey string
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// Error codes (query code, shape name), as CloudWatch's model names them.
const (
	CodeInvalidParameterValue       = "InvalidParameterValue"
	CodeInvalidParameterCombination = "InvalidParameterCombination"
	CodeMissingParameter            = "MissingParameter"
	CodeInvalidNextToken            = "InvalidNextToken"
	CodeValidationError             = "ValidationError"
	CodeAccessDenied                = "AccessDenied"
	CodeInternalServiceError        = "InternalServiceError"
	CodeInvalidAction               = "InvalidAction"
	CodeMalformedQueryString        = "MalformedQueryString"
	CodeSerialization               = "SerializationException"
	CodeUnknownOperation            = "UnknownOperationException"
	CodeRequestTooLarge             = "RequestEntityTooLarge"
)

func newErr(status int, code, typ, msg string) *APIError {
	return &APIError{Status: status, Code: code, Type: typ, Message: msg, Fault: awsquery.Sender, messageKey: "message"}
}

// invalidValue: a member's value is bad or out of range (400).
func invalidValue(format string, args ...any) *APIError {
	return newErr(http.StatusBadRequest, CodeInvalidParameterValue, "InvalidParameterValueException", fmt.Sprintf(format, args...))
}

// invalidCombination: members that cannot go together (400).
func invalidCombination(format string, args ...any) *APIError {
	return newErr(http.StatusBadRequest, CodeInvalidParameterCombination, "InvalidParameterCombinationException", fmt.Sprintf(format, args...))
}

// missing: a required member is absent (400).
func missing(name string) *APIError {
	return newErr(http.StatusBadRequest, CodeMissingParameter, "MissingRequiredParameterException", "The parameter "+name+" is required.")
}

// validation: GetMetricData's refusals, which CloudWatch answers as
// ValidationError (400), a code its model does not declare.
func validation(format string, args ...any) *APIError {
	return newErr(http.StatusBadRequest, CodeValidationError, "ValidationError", fmt.Sprintf(format, args...))
}

func invalidNextToken() *APIError {
	return newErr(http.StatusBadRequest, CodeInvalidNextToken, "InvalidNextToken", "The service couldn't process the NextToken; it does not come from this request's previous page.")
}

func internalError(msg string) *APIError {
	e := newErr(http.StatusInternalServerError, CodeInternalServiceError, "InternalServiceFault", msg)
	e.Fault = awsquery.Receiver
	e.messageKey = "Message"
	return e
}

// accessDenied wraps what Options.Authorize answered, keeping its message
// (host writes "User: … is not authorized to perform: cloudwatch:…").
func accessDenied(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	return newErr(http.StatusForbidden, CodeAccessDenied, "AccessDeniedException", err.Error())
}

// limitExceeded: a bound of the service is reached (LimitExceededFault,
// 400).
func limitExceeded(format string, args ...any) *APIError {
	return newErr(http.StatusBadRequest, "LimitExceeded", "LimitExceededFault", fmt.Sprintf(format, args...))
}

// resourceNotFound: the named alarm does not exist (ResourceNotFound,
// 404).
func resourceNotFound(format string, args ...any) *APIError {
	return newErr(http.StatusNotFound, "ResourceNotFound", "ResourceNotFound", fmt.Sprintf(format, args...))
}
