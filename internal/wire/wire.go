// Package wire declares, once for all of mce, the names that SageMaker's wire
// contract fixes and that several packages use: HTTP header names, the
// pattern of endpoint, variant, model and container names, and the S3 keys
// mce refuses (S3KeyRefused). It is a leaf:
// it imports nothing of mce, so every package may import it.
//
// Header names are spelled as the SageMaker and AWS documentation spell them
// (header names are case-insensitive on the wire). Code that indexes an
// http.Header map directly needs Go's canonical form:
// http.CanonicalHeaderKey(wire.HeaderTargetModel) is
// "X-Amzn-Sagemaker-Target-Model".
package wire

// Headers of the SageMaker Runtime API
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html,
// https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointWithResponseStream.html),
// and those mce passes on to containers
// (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html).
const (
	HeaderCustomAttributes   = "X-Amzn-SageMaker-Custom-Attributes"
	HeaderTargetModel        = "X-Amzn-SageMaker-Target-Model"
	HeaderTargetVariant      = "X-Amzn-SageMaker-Target-Variant"
	HeaderTargetContainer    = "X-Amzn-SageMaker-Target-Container-Hostname"
	HeaderInferenceID        = "X-Amzn-SageMaker-Inference-Id"
	HeaderEnableExplanations = "X-Amzn-SageMaker-Enable-Explanations"
	HeaderInferenceComponent = "X-Amzn-SageMaker-Inference-Component"
	HeaderSessionID          = "X-Amzn-SageMaker-Session-Id"
	// Stateful sessions (https://docs.aws.amazon.com/sagemaker/latest/dg/stateful-sessions.html):
	// the container answers a NEW_SESSION request with "<id>; Expires=<RFC 3339 Z>" and names a
	// session it closed; SageMaker relays both as NewSessionId and ClosedSessionId.
	HeaderNewSessionID    = "X-Amzn-SageMaker-New-Session-Id"
	HeaderClosedSessionID = "X-Amzn-SageMaker-Closed-Session-Id"
	// PrefixAwareId, the routing hint of RoutingStrategy PREFIX_AWARE.
	HeaderPrefixAwareID = "X-Amzn-SageMaker-Prefix-Aware-Id"
	// The adapter an invocation of an adapter inference component names, as
	// SageMaker tells a container that implements its LoRA adapter API
	// (https://github.com/aws/model-hosting-container-standards, SageMakerLoRAApiHeader).
	HeaderAdapterIdentifier = "X-Amzn-SageMaker-Adapter-Identifier"
	HeaderAdapterAlias      = "X-Amzn-SageMaker-Adapter-Alias"
	HeaderInvokedVariant    = "X-Amzn-Invoked-Production-Variant"
	// InvokeEndpointWithBidirectionalStream's own (host/bidistream).
	HeaderModelInvocationPath = "X-Amzn-SageMaker-Model-Invocation-Path"
	HeaderModelQueryString    = "X-Amzn-SageMaker-Model-Query-String"
	HeaderStreamAccept        = "X-Amzn-SageMaker-Accept"       // InvokeEndpointWithResponseStream: the model's Accept
	HeaderStreamContentType   = "X-Amzn-SageMaker-Content-Type" // InvokeEndpointWithResponseStream: the model's Content-Type
	HeaderRequestID           = "X-Amzn-RequestId"
	HeaderErrorType           = "X-Amzn-ErrorType"
	HeaderAmzTarget           = "X-Amz-Target" // the operation of an AWS JSON protocol call
	HeaderAmzDate             = "X-Amz-Date"
	HeaderAmzSecurityToken    = "X-Amz-Security-Token"
	HeaderAmzContentSHA256    = "X-Amz-Content-Sha256"

	// InvokeEndpointAsync's own headers (its Content-Type and Accept are
	// HeaderStreamContentType and HeaderStreamAccept).
	HeaderAsyncInputLocation  = "X-Amzn-SageMaker-InputLocation"
	HeaderAsyncOutputPathExt  = "X-Amzn-SageMaker-S3OutputPathExtension"
	HeaderAsyncFilename       = "X-Amzn-SageMaker-Filename"
	HeaderAsyncRequestTTL     = "X-Amzn-SageMaker-RequestTTLSeconds"
	HeaderAsyncInvocationTime = "X-Amzn-SageMaker-InvocationTimeoutSeconds"
	HeaderAsyncOutputLocation = "X-Amzn-SageMaker-OutputLocation"
	HeaderAsyncFailure        = "X-Amzn-SageMaker-FailureLocation"

	// The error code of a JSON or CBOR answer of an awsQueryCompatible
	// service (CloudWatch) as its query protocol names it: "Code;Sender".
	HeaderQueryError = "X-Amzn-Query-Error"
)

// Name patterns of the SageMaker API: NamePattern is ModelName's as
// SageMaker's messages show it (unanchored at the end) and the language of
// every name (EndpointName, EndpointConfigName, VariantName,
// ContainerHostname, ModelName); EntityNamePattern is the service model's
// pattern of the first four (at most 63 letters and digits; the limit of 63
// characters is a separate rule).
const (
	NamePattern       = `^[a-zA-Z0-9](-*[a-zA-Z0-9])*`
	EntityNamePattern = `[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}`
)

// Patterns of other members that several packages check, as the service
// model states them
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ContainerDefinition.html,
// https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointAsync.html).
const (
	// S3URIPattern is the pattern of S3 locations: ModelDataUrl's S3 form,
	// S3DataSource.S3Uri, InvokeEndpointAsync's InputLocation and the
	// asynchronous output paths.
	S3URIPattern = `^(https|s3)://([^/]+)/?(.*)$`
	// EnvironmentKeyPattern is the pattern of a container's Environment
	// keys, unanchored as SageMaker's messages show it.
	EnvironmentKeyPattern = `[a-zA-Z_][a-zA-Z0-9_]*`
)

// ValidName reports whether s matches NamePattern completely, without a
// regexp (it runs on every invocation): ASCII letters, digits and dashes,
// starting and ending with a letter or digit. It does not check the length.
func ValidName(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
