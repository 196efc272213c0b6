package pipeline

import (
	"strconv"
	"strings"

	"github.com/mce-run/mce/pipeline/httpc"
)

// maxOriginalMessage caps, in bytes, the container body kept in
// ModelError.OriginalMessage, so that Message stays within SageMaker's 2048
// characters (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html#API_runtime_InvokeEndpoint_Errors):
// the HTTP client keeps no more of an error body.
const maxOriginalMessage = httpc.MaxErrorBody

// ValidationError is a request the endpoint cannot accept as sent: an unknown
// TargetVariant, a missing or unknown TargetContainerHostname on a Direct
// endpoint, a hostname on a Serial endpoint. The host answers SageMaker's
// ValidationError (400, https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html#API_runtime_InvokeEndpoint_Errors) with Message.
type ValidationError struct {
	Endpoint string
	Message  string
}

func (e *ValidationError) Error() string { return e.Message }

// SessionGoneError means the instance (or inference component copy) that
// holds a stateful session is no longer among its variant's instances, or is
// not ready: the session's state went with it. It unwraps to a
// *ValidationError, the shape SageMaker's client sees.
type SessionGoneError struct {
	ValidationError
	Variant string
	Session string
}

func (e *SessionGoneError) Unwrap() error { return &e.ValidationError }

// UnavailableError means no instance can serve the call now (no instance, or
// none whose needed containers are ready, or no variant with a weight). The
// host answers ServiceUnavailable (503, https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html#API_runtime_InvokeEndpoint_Errors) with Message.
type UnavailableError struct {
	Endpoint string
	Variant  string // empty when no variant was picked
	// Container is the target container of a Direct call, else empty.
	Container string
	Message   string
}

func (e *UnavailableError) Error() string { return e.Message }

// ModelError is a failure of a container: a status outside 2xx, a timeout, a
// connection failure or an oversize payload. The host answers SageMaker's
// ModelError (424, https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html#API_runtime_InvokeEndpoint_Errors) with Message, OriginalStatusCode and
// OriginalMessage.
type ModelError struct {
	Endpoint string
	Variant  string
	// Container is the hostname of the container that failed.
	Container string
	// OriginalStatusCode is the container's HTTP status; 0 when it gave none
	// (timeout, connection failure).
	OriginalStatusCode int
	// OriginalMessage is the container's response body (at most 1024 bytes,
	// valid UTF-8), or mce's description of a failure without a response.
	OriginalMessage string
	// Message is SageMaker's wording, naming the container.
	Message string
	// Err is the underlying transport error, if any.
	Err error
}

func (e *ModelError) Error() string { return e.Message }

// Unwrap returns the underlying transport error, if any.
func (e *ModelError) Unwrap() error { return e.Err }

// receivedError builds the ModelError for a container that answered status
// (or 0 for no answer) with the message orig, in SageMaker's words
// (as the real service writes them, e.g. in
// https://github.com/aws/amazon-sagemaker-examples/issues/785).
func receivedError(endpoint, variant, container string, status int, orig string, err error) *ModelError {
	kind := "unexpected status" // 1xx, 2xx or 3xx where 2xx was needed
	switch {
	case status >= 400 && status < 500:
		kind = "client error"
	case status >= 500 || status == 0:
		kind = "server error"
	}
	var b strings.Builder
	b.Grow(len(orig) + len(container)*2 + len(endpoint) + 128)
	b.WriteString("Received ")
	b.WriteString(kind)
	b.WriteString(" (")
	b.WriteString(strconv.Itoa(status))
	b.WriteString(") from ")
	b.WriteString(container)
	b.WriteString(` with message "`)
	b.WriteString(orig)
	b.WriteString(`". See the mce log for endpoint "`)
	b.WriteString(endpoint)
	b.WriteString(`" (container "`)
	b.WriteString(container)
	b.WriteString(`") for more information.`)
	return &ModelError{
		Endpoint: endpoint, Variant: variant, Container: container,
		OriginalStatusCode: status, OriginalMessage: orig, Message: b.String(), Err: err,
	}
}

// timeoutError is the ModelError for a container that did not answer within
// the per-hop timeout: OriginalStatusCode 0 and SageMaker's text, pointing at
// mce's container latency metric instead of CloudWatch.
func timeoutError(endpoint, variant, container string, err error) *ModelError {
	orig := "Your invocation timed out while waiting for a response from container " + container +
		". Review the latency metrics for each container (mce_container_latency_seconds on mce's /metrics), resolve the issue, and try again."
	return receivedError(endpoint, variant, container, 0, orig, err)
}

// connectError is the ModelError for a container that could not be reached
// or whose connection failed before a response arrived. The transport error
// (container addresses, ports) stays in Err for the log, out of the message
// the caller reads.
func connectError(endpoint, variant, container, what string, err error) *ModelError {
	return receivedError(endpoint, variant, container, 0, "mce "+what+" container "+container+".", err)
}

// oversizeError is the ModelError for a container response over the payload
// cap: to is the next container of a chain, or empty for the final response.
// size is the announced length, or -1 when only "more than limit" is known.
func oversizeError(endpoint, variant, from, to string, status int, size int64, limit int) *ModelError {
	var b strings.Builder
	b.WriteString("Received response from ")
	b.WriteString(from)
	b.WriteString(" with status code ")
	b.WriteString(strconv.Itoa(status))
	b.WriteString(". However, the ")
	if to != "" {
		b.WriteString("request payload from ")
		b.WriteString(from)
		b.WriteString(" to ")
		b.WriteString(to)
	} else {
		b.WriteString("response payload from ")
		b.WriteString(from)
	}
	if size >= 0 {
		b.WriteString(" is ")
		b.WriteString(strconv.FormatInt(size, 10))
	} else {
		b.WriteString(" is more than ")
		b.WriteString(strconv.Itoa(limit))
	}
	b.WriteString(" bytes, which has exceeded the maximum limit of ")
	b.WriteString(formatLimit(limit))
	b.WriteString(".")
	return &ModelError{
		Endpoint: endpoint, Variant: variant, Container: from,
		OriginalStatusCode: status, Message: b.String(),
	}
}

// formatLimit writes a byte count as SageMaker does ("6 MiB"), falling back
// to bytes when it is not a whole number of MiB.
func formatLimit(n int) string {
	if n > 0 && n%(1<<20) == 0 {
		return strconv.Itoa(n>>20) + " MiB"
	}
	return strconv.Itoa(n) + " bytes"
}
