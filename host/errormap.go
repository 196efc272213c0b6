package host

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

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

// logStreamARN points at the endpoint's log group in SageMaker's form; in mce
// the logs are mce's own output, labelled with the endpoint.
func (s *Server) logStreamARN(endpoint string) string {
	return fmt.Sprintf("arn:aws:logs:%s:%s:log-group:/aws/sagemaker/Endpoints/%s", s.cfg.Region, s.cfg.Account, endpoint)
}
