package authz

import (
	"errors"
	"net/http"

	"github.com/mce-run/mce/internal/wire"
)

// AWS error codes of failed authentication (SigV4) and authorization.
const (
	CodeIncompleteSignature = "IncompleteSignatureException"
	CodeInvalidSignature    = "InvalidSignatureException"
	CodeUnrecognizedClient  = "UnrecognizedClientException"
	CodeAccessDenied        = "AccessDeniedException"
)

// AuthError is a failed SigV4 verification, with the AWS error code and the
// message AWS sends for it. The host writes it in the SageMaker error shape
// (X-Amzn-ErrorType: Code, body {"__type": Code, "Message": Message}) with
// Status.
//
// Status follows what AWS services were seen to answer: 400 for
// IncompleteSignatureException and for every failure of an awsJson1_1 call
// (control plane, POST / with X-Amz-Target); 403 for InvalidSignatureException
// and UnrecognizedClientException on the REST (runtime) API.
type AuthError struct {
	Status  int
	Code    string
	Message string
}

func (e *AuthError) Error() string { return e.Code + ": " + e.Message }

// IsAuthError reports whether err is (or wraps) an *AuthError and returns it.
func IsAuthError(err error) (*AuthError, bool) {
	var ae *AuthError
	if errors.As(err, &ae) {
		return ae, true
	}
	return nil, false
}

// authErr builds an AuthError with the status AWS uses for code on r's
// protocol.
func authErr(r *http.Request, code, msg string) *AuthError {
	status := http.StatusForbidden
	if code == CodeIncompleteSignature || r.Header.Get(wire.HeaderAmzTarget) != "" {
		status = http.StatusBadRequest
	}
	return &AuthError{Status: status, Code: code, Message: msg}
}

// ErrEvaluation marks a decision that failed to evaluate; the decision that
// comes with it is a deny (fail closed).
var ErrEvaluation = errors.New("authz: policy evaluation failed")

// ErrReloadRefused marks a reload that would have weakened the policies in
// force (switched them off, or read an emptied file); the previous
// generation stays.
var ErrReloadRefused = errors.New("authz: reload refused, the previous policies stay in force")
