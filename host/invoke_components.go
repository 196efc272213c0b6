package host

import (
	"net/http"
	"regexp"

	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/pipeline"
)

// Invoking inference components: InvokeEndpoint and
// InvokeEndpointWithResponseStream with X-Amzn-SageMaker-Inference-Component
// (InferenceComponentName) go to that component's copies, chosen by the
// variant's RoutingConfig.RoutingStrategy (least outstanding requests by
// default).

var componentHeaderRe = regexp.MustCompile(`^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?$`)

// componentRoute is the route an invocation of e takes: e's own, or for an
// endpoint that hosts inference components, the named component's; and
// the adapter component the call names, if it names one.
func (s *Server) componentRoute(e *Endpoint, route *pipeline.Route, h http.Header) (*pipeline.Route, string, *apierr.Error) {
	name := header(h, hdrInferenceComp)
	if !e.record().Plan.HostsComponents() {
		if name != "" {
			return nil, "", apierr.Validation("Inference Component Name header is not allowed for endpoints to which you dont plan to deploy inference components. Please remove the Inference Component Name header and try again.")
		}
		return route, "", nil
	}
	if name == "" {
		api := apierr.Validation("Inference Component Name header is required for endpoints to which you plan to deploy inference components. Please include Inference Component Name header or consider using SageMaker models.")
		api.ErrorCode = "INFERENCE_COMPONENT_NAME_MISSING" // as SageMaker's body carries it
		return nil, "", api
	}
	if len(name) > 63 || !componentHeaderRe.MatchString(name) {
		return nil, "", apierr.Validation("1 validation error detected: Value '%s' at 'inferenceComponentName' failed to satisfy constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9]([\\-a-zA-Z0-9]*[a-zA-Z0-9])?$", name)
	}
	c := s.ics.get(name)
	if c == nil || c.endpoint != e.name {
		return nil, "", apierr.Validation("Inference Component %s of endpoint %s of account %s not found.", name, e.name, s.cfg.Account)
	}
	if rec := c.record(); rec.isAdapter() {
		if c.deleting.Load() {
			return nil, "", apierr.Validation("Inference Component %s of endpoint %s of account %s is being deleted.", name, e.name, s.cfg.Account)
		}
		r, api := s.adapterRoute(rec) // its base's copies, with the adapter's headers (adapters.go)
		return r, c.name, api
	}
	r := c.route.Load()
	if r == nil || c.deleting.Load() || c.currentCopies() == 0 {
		return nil, "", apierr.Validation("Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress (if configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API.")
	}
	return r, "", nil
}
