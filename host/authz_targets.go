package host

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/cloudwatch"
	"github.com/mce-run/mce/host/cloudwatchlogs"
	"github.com/mce-run/mce/host/spec"
)

// What mce authorizes, on which resources (authz.Targets: mce serve and
// mce policy check warn about a policy statement that can never apply).
// The control plane's part comes from the operations themselves: the
// resource the input of each names (op.resource, probed with an input
// that names nothing) and the second resources it authorizes
// (alsoAuthorized, which the check of a second resource refuses to go
// beyond). The calls outside the control plane are listed in
// otherTargets, beside the code that authorizes them; a test keeps that
// list and the decisions mce makes in step.

// target is an action and the kind of resource it is authorized on.
type target struct {
	action string // "" is the operation's own
	kind   spec.Kind
}

// alsoAuthorized are the second, existing resources each operation
// authorizes (alsoAuthorize, alsoAuthorizeAs). A check of a resource not
// declared here is refused as mce's own failure (InternalFailure).
var alsoAuthorized = map[string][]target{
	// The endpoint configuration it is made from (SageMaker's
	// authorization reference lists endpoint-config for both).
	"CreateEndpoint": {{"", spec.KindEndpointConfig}},
	"UpdateEndpoint": {{"", spec.KindEndpointConfig}},
	// Its inference components, which go with it.
	"DeleteEndpoint": {{actionDeleteComponent, spec.KindInferenceComponent}},
	// The endpoint the component is placed on (SageMaker's reference lists
	// endpoint), and an adapter's base (mce's rule, as its updates and
	// deletions).
	"CreateInferenceComponent": {{"", spec.KindEndpoint}, {"", spec.KindInferenceComponent}},
	"UpdateInferenceComponent": {{"", spec.KindInferenceComponent}},
	"DeleteInferenceComponent": {{"", spec.KindInferenceComponent}},
}

// declaresAlso reports whether operation op declares a check of action
// ("" its own) on resource.
func (s *Server) declaresAlso(op, action, resource string) bool {
	kind, _, ok := s.parseResourceARN(resource)
	return ok && slices.Contains(alsoAuthorized[op], target{action, kind})
}

// errUndeclaredCheck is the answer to a check alsoAuthorized does not
// declare: a mistake of mce's, refused rather than decided.
func errUndeclaredCheck(op, action, resource string) error {
	return fmt.Errorf("operation %s authorizes %q on %s, a check alsoAuthorized does not declare", op, action, resource)
}

// otherTargets are the calls authorized outside the control plane's
// operations: runtime calls (admitInvocation, the asynchronous handler
// and its input's s3:GetObject), the logs APIs and the endpoint list.
func (s *Server) otherTargets() authz.Targets {
	endpoint := s.arn(spec.KindEndpoint, "") + "*"
	logs := s.logStreamARN("*") + ":**" // the log group (…:*) and its streams (…:log-stream:NAME)
	t := authz.Targets{
		authz.ActionInvokeEndpoint:                   {endpoint},
		authz.ActionInvokeEndpointWithResponseStream: {endpoint},
		authz.ActionInvokeEndpointAsync:              {endpoint},
		actionS3GetObject:                            {s3ObjectARN("s3://**")},
		actionS3ListBucket:                           {"arn:aws:s3:::*"},       // a folder of model data (s3reads.go)
		actionS3PutObject:                            {s3ObjectARN("s3://**")}, // under a data capture destination
		cloudwatchlogs.ActionLogs:                    {logs},
		"sagemaker:ListEndpoints":                    {authz.ResourceNone},       // GET /mce/endpoints
		"iam:GetRole":                                {"arn:aws:iam::*:role/**"}, // identity_handler.go
		"iam:SimulatePrincipalPolicy":                {"arn:aws:iam::*:**"},      // a user's or a role's ARN
	}
	for _, op := range cloudwatchlogs.Operations() {
		t["logs:"+op] = []string{logs}
	}
	for _, op := range cloudwatch.Operations() { // CloudWatch metrics (cloudwatch_handler.go)
		t["cloudwatch:"+op] = []string{authz.ResourceNone}
	}
	return t
}

// AuthzTargets is every action mce authorizes and the resources it
// authorizes it on (authz.Config.Targets), for a host of region and
// account; "" stands for any.
func AuthzTargets(region, account string) authz.Targets {
	probe := &Server{cfg: Config{Region: cmp.Or(region, "*"), Account: cmp.Or(account, "*")}}
	t := authz.Targets{}
	add := func(action, pattern string) {
		if region == "" { // any partition
			for _, p := range []string{"arn:aws:", "arn:aws-cn:", "arn:aws-us-gov:"} {
				if rest, ok := strings.CutPrefix(pattern, p); ok {
					pattern = "arn:*:" + rest
					break
				}
			}
		}
		if !slices.Contains(t[action], pattern) {
			t[action] = append(t[action], pattern)
		}
	}
	for name, o := range operations {
		action, _ := authz.ControlPlaneAction("SageMaker." + name)
		switch res := o.resourceOf(probe); res {
		case "*":
			add(action, authz.ResourceNone)
		case "": // a tag operation: its ResourceArn names any resource mce tags
			for _, k := range taggableKinds {
				add(action, probe.arn(k, "")+"*")
			}
		default:
			add(action, res+"*")
		}
		for _, a := range alsoAuthorized[name] {
			add(cmp.Or(a.action, action), probe.arn(a.kind, "")+"*")
		}
	}
	for action, patterns := range probe.otherTargets() {
		for _, p := range patterns {
			add(action, p)
		}
	}
	for _, p := range t {
		slices.Sort(p)
	}
	return t
}
