package host

import (
	"context"
	"errors"
	"net/http"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/cloudwatchlogs"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// toAPIError maps the typed errors of the layers below to SageMaker's shapes.
// Failures that are mce's own become a generic InternalFailure naming reqID.
func (s *Server) toAPIError(endpoint, reqID string, err error) *apierr.Error {
	var api *apierr.Error
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
		return &apierr.Error{Status: http.StatusTooManyRequests, Code: apierr.CodeModelNotReady, Cause: err,
			Message: "Model " + notReady.TargetModel + " is still being loaded on endpoint " + endpoint + "; the load carries on. Wait and try your request again."}
	case errors.As(err, &notFound):
		return &apierr.Error{Status: http.StatusBadRequest, Code: apierr.CodeValidation, Cause: err,
			Message: "Failed to download model data for TargetModel " + notFound.TargetModel + ": " + apierr.RedactPaths(err.Error()) + ". Make sure the artifact exists under the endpoint's ModelDataUrl prefix."}
	case errors.Is(err, mme.ErrInvalidTargetModel), errors.Is(err, artifact.ErrUnsafeArchive),
		errors.Is(err, artifact.ErrOutsideModelRoots),
		errors.Is(err, artifact.ErrTooLarge), errors.Is(err, artifact.ErrInvalidArchive):
		return &apierr.Error{Status: http.StatusBadRequest, Code: apierr.CodeValidation, Message: apierr.RedactPaths(err.Error()), Cause: err}
	case errors.As(err, &loadErr):
		code := loadErr.Status
		return &apierr.Error{Status: http.StatusFailedDependency, Code: apierr.CodeModelError, Cause: err,
			Message: "The container refused to load model " + loadErr.TargetModel + ": " + apierr.RedactPaths(err.Error()), OriginalStatusCode: &code,
			OriginalMessage: loadErr.Message, LogStreamArn: s.logStreamARN(endpoint)}
	case errors.Is(err, mme.ErrNoMemory):
		code := http.StatusInsufficientStorage
		msg := apierr.RedactPaths(err.Error())
		return &apierr.Error{Status: http.StatusFailedDependency, Code: apierr.CodeModelError, Cause: err,
			Message: msg, OriginalStatusCode: &code, OriginalMessage: msg, LogStreamArn: s.logStreamARN(endpoint)}
	case errors.As(err, &mErr):
		code := mErr.OriginalStatusCode
		return &apierr.Error{
			Status: http.StatusFailedDependency, Code: apierr.CodeModelError, Message: mErr.Message,
			OriginalStatusCode: &code, OriginalMessage: mErr.OriginalMessage,
			LogStreamArn: s.logStreamARN(endpoint), Cause: err,
		}
	case errors.As(err, &vErr):
		return &apierr.Error{Status: http.StatusBadRequest, Code: apierr.CodeValidation, Message: vErr.Message, Cause: err}
	case errors.As(err, &uErr):
		return &apierr.Error{Status: http.StatusServiceUnavailable, Code: apierr.CodeServiceUnavail, Message: uErr.Message, Cause: err}
	case errors.As(err, &sErr):
		return &apierr.Error{Status: http.StatusBadRequest, Code: apierr.CodeValidation, Message: apierr.RedactPaths(sErr.Error()), Cause: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &apierr.Error{Status: http.StatusServiceUnavailable, Code: apierr.CodeServiceUnavail, Message: "The request timed out in mce.", Cause: err}
	}
	return s.internalError(reqID, err)
}

// internalError is the answer to a failure that is mce's, not the
// caller's: a generic message with the request ID, while the details (which
// may name host paths, addresses or internals) go to the log.
func (s *Server) internalError(reqID string, err error) *apierr.Error {
	s.log.Error().Err(err).Str("request_id", reqID).Msg("internal error")
	return &apierr.Error{Status: http.StatusInternalServerError, Code: apierr.CodeInternalFailure, Cause: err,
		Message: "An internal error occurred in mce (request ID " + reqID + "; the operator finds the details in mce's log)."}
}

// logStreamARN points at the endpoint's log group in SageMaker's form; in mce
// the logs are mce's own output, labelled with the endpoint.
func (s *Server) logStreamARN(endpoint string) string {
	return cloudwatchlogs.GroupARN(s.cfg.Region, s.cfg.Account, endpoint)
}
