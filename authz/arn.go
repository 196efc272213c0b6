package authz

import (
	"net/http"
	"strings"

	"github.com/mce-run/mce/internal/wire"
)

// IAM action names the host asks about. Runtime calls are authorized as
// sagemaker:InvokeEndpoint (and its async/streaming siblings) on the
// endpoint's ARN; control-plane calls as sagemaker:<Operation> on the ARN of
// the resource the operation names.
const (
	ActionInvokeEndpoint                   = "sagemaker:InvokeEndpoint"
	ActionInvokeEndpointAsync              = "sagemaker:InvokeEndpointAsync"
	ActionInvokeEndpointWithResponseStream = "sagemaker:InvokeEndpointWithResponseStream"
	ActionCreateModel                      = "sagemaker:CreateModel"
	ActionDescribeModel                    = "sagemaker:DescribeModel"
	ActionDeleteModel                      = "sagemaker:DeleteModel"
	ActionListModels                       = "sagemaker:ListModels"
	ActionCreateEndpointConfig             = "sagemaker:CreateEndpointConfig"
	ActionDescribeEndpointConfig           = "sagemaker:DescribeEndpointConfig"
	ActionDeleteEndpointConfig             = "sagemaker:DeleteEndpointConfig"
	ActionListEndpointConfigs              = "sagemaker:ListEndpointConfigs"
	ActionCreateEndpoint                   = "sagemaker:CreateEndpoint"
	ActionDescribeEndpoint                 = "sagemaker:DescribeEndpoint"
	ActionDeleteEndpoint                   = "sagemaker:DeleteEndpoint"
	ActionUpdateEndpoint                   = "sagemaker:UpdateEndpoint"
	ActionListEndpoints                    = "sagemaker:ListEndpoints"
	ActionUpdateEndpointWeightsAndCapacity = "sagemaker:UpdateEndpointWeightsAndCapacities"
	// The tag operations are authorized on their ResourceArn (a model,
	// endpoint configuration or endpoint).
	ActionAddTags    = "sagemaker:AddTags"
	ActionListTags   = "sagemaker:ListTags"
	ActionDeleteTags = "sagemaker:DeleteTags"
)

// Condition keys mce fills in. Keys are case-insensitive (IAM rules); the
// spellings here are the documented ones.
const (
	KeyTargetContainerHostname = "sagemaker:TargetContainerHostname"
	KeyTargetModel             = "sagemaker:TargetModel"
	KeyTargetVariant           = "sagemaker:TargetVariant"
	KeyUsername                = "aws:username"
	KeySourceIP                = "aws:SourceIp"
	KeyCurrentTime             = "aws:CurrentTime"
	KeyEpochTime               = "aws:EpochTime"
	KeyPrincipalArn            = "aws:PrincipalArn"
	KeyPrincipalAccount        = "aws:PrincipalAccount"
)

// ControlPlaneAction is the IAM action of an awsJson1_1 call whose
// X-Amz-Target header is target ("SageMaker.CreateEndpoint" →
// "sagemaker:CreateEndpoint"). ok is false when target is not of that form.
func ControlPlaneAction(target string) (action string, ok bool) {
	op, found := strings.CutPrefix(target, "SageMaker.")
	if !found || op == "" || len(op) > 128 {
		return "", false
	}
	for i := 0; i < len(op); i++ {
		c := op[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return "", false
		}
	}
	return "sagemaker:" + op, true
}

// ResourceARN is the ARN of a SageMaker resource of the given type
// ("endpoint", "endpoint-config", "model", …) in region and account. SageMaker
// lower-cases the name in ARNs while the *Name fields keep the caller's case,
// and IAM matches Resource ARNs case-sensitively, so policies must name
// endpoints in lower case.
func ResourceARN(resourceType, region, account, name string) string {
	return "arn:aws:sagemaker:" + region + ":" + account + ":" + resourceType + "/" + strings.ToLower(name)
}

// EndpointARN is ResourceARN("endpoint", …), the resource of InvokeEndpoint.
func EndpointARN(region, account, name string) string {
	return ResourceARN("endpoint", region, account, name)
}

// EndpointConfigARN is ResourceARN("endpoint-config", …).
func EndpointConfigARN(region, account, name string) string {
	return ResourceARN("endpoint-config", region, account, name)
}

// ModelARN is ResourceARN("model", …).
func ModelARN(region, account, name string) string {
	return ResourceARN("model", region, account, name)
}

// InvokeContext returns the sagemaker:* condition keys of an InvokeEndpoint
// call from its request headers; headers that are absent or empty give no
// key, so IAM's missing-key rules apply. Without any it is nil: it
// allocates only for the keys a call carries.
func InvokeContext(h http.Header) map[string]string {
	var m map[string]string
	for _, k := range invokeKeys {
		if v := h[k.header]; len(v) > 0 && v[0] != "" {
			if m == nil {
				m = make(map[string]string, len(invokeKeys))
			}
			m[k.key] = v[0]
		}
	}
	return m
}

// invokeKeys are the headers InvokeContext reads, in Go's canonical form:
// h.Get would canonicalize SageMaker's spelling ("X-Amzn-SageMaker-…") into
// a new string on every call.
var invokeKeys = [...]struct{ header, key string }{
	{http.CanonicalHeaderKey(wire.HeaderTargetModel), KeyTargetModel},
	{http.CanonicalHeaderKey(wire.HeaderTargetVariant), KeyTargetVariant},
	{http.CanonicalHeaderKey(wire.HeaderTargetContainer), KeyTargetContainerHostname},
}

// PrincipalFromARN is the principal an ARN names, without credentials.
// Username (aws:username) is set for IAM users only: the last path segment
// of "arn:aws:iam::ACCOUNT:user/path/NAME", as AWS does.
func PrincipalFromARN(arn string) Principal {
	return Principal{ARN: arn, Username: usernameFromARN(arn)}
}

func usernameFromARN(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "iam" {
		return ""
	}
	res, ok := strings.CutPrefix(parts[5], "user/")
	if !ok {
		return ""
	}
	if i := strings.LastIndexByte(res, '/'); i >= 0 {
		res = res[i+1:]
	}
	return res
}

// accountFromARN is the account field of an ARN, or "".
func accountFromARN(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" {
		return ""
	}
	return parts[4]
}
