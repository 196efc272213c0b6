package components

import (
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/pipeline"
)

// Invoking inference components: InvokeEndpoint and
// InvokeEndpointWithResponseStream with X-Amzn-SageMaker-Inference-Component
// (InferenceComponentName) go to that component's copies, chosen by the
// variant's RoutingConfig.RoutingStrategy (least outstanding requests by
// default). The header is read and checked by host.

// Route is the route of an invocation of endpoint (its name as created)
// that names component name: the component's copies, or for an adapter its
// base's copies (adapter true: the call carries the adapter's name to
// them); with the component's name in its own spelling (the caller's may
// differ in case); or the ValidationError a caller gets when the
// component is not there or takes no calls.
func (m *Manager) Route(endpoint, name string) (r *pipeline.Route, component string, adapter bool, api *apierr.Error) {
	c := m.Get(name)
	if c == nil || c.endpoint != endpoint {
		return nil, "", false, apierr.Validation("Inference Component %s of endpoint %s of account %s not found.", name, endpoint, m.account)
	}
	if rec := c.Record(); rec.IsAdapter() {
		if c.deleting.Load() {
			return nil, "", false, apierr.Validation("Inference Component %s of endpoint %s of account %s is being deleted.", name, endpoint, m.account)
		}
		r, api = m.adapterRoute(rec) // its base's copies, with the adapter's headers (adapters.go)
		return r, c.name, true, api
	}
	r = c.route.Load()
	if r == nil || c.deleting.Load() || c.CurrentCopies() == 0 {
		if f := m.noCapacity; f != nil && !c.deleting.Load() {
			f(c.name)
		}
		return nil, "", false, apierr.Validation("Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress (if configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API.")
	}
	return r, c.name, false, nil
}
