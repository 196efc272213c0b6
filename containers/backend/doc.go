// Package backend is the Docker engine seen from host: it implements
// host.Backend over a containers.Runtime, translating a resolved SageMaker
// endpoint (spec.EndpointPlan) into what the runtime launches
// (containers.EndpointSpec), and offers host's optional capabilities
// (host.Preflighter, host.UsageSource, host.MultiModelObservable).
//
// host imports no engine; `mce serve` builds this backend and hands it to
// host.New as a host.Backend. Another engine is a sibling of this package.
package backend
