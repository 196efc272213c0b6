// Package metrics is host's Prometheus metrics: the mce_* series that GET
// /metrics serves (on the operator's listener, mce serve --metrics-listen),
// each standing for one of SageMaker's CloudWatch metrics where one exists
// (docs/metrics.md lists them with their CloudWatch counterparts and the
// PromQL of CloudWatch's statistics; metrics.go has the naming and label
// rules).
//
// One job per file: metrics.go (Metrics: the registry and the per-call
// series, fed by ObserveInvocation per call and ObserveContainer, a
// pipeline.Observer, per container hop; Forget for a deleted endpoint),
// stream.go (a streamed call's time to first byte), mme.go (multi-model
// loads, unloads, cache hits and evictions: MultiModelObserver is what an
// engine that is a containers.MultiModelObservable is given), usage.go
// (UsageCollector: containers' CPU, memory, disk and GPU use from a
// containers.UsageSource, sampled in the background by Run so that a
// scrape never waits for the engine), state.go (StateCollector: endpoint
// statuses, desired instances, ready containers, restarts, calls in flight
// and multi-model caches, read at scrape time from a StateSource; the
// build info), components.go (ComponentCollector: inference components'
// copies and GPUs from the components Manager's gauges).
//
// The per-call path allocates nothing once a variant's and a container's
// label children exist (bench_test.go): they are looked up once and kept.
// ObserveInvocation is where every invocation's figures arrive
// (InvokeEndpoint, the response stream and the asynchronous queue alike):
// a further consumer of those figures belongs behind it, beside the
// per-variant children it looks up, not as another call in host's
// invocation path. What the host runs now is read at scrape time,
// so its series go with a deleted endpoint; Forget drops the per-call ones.
//
// It owns the series and their registry and nothing else. It sees the host
// only through what host hands it — a StateSource of funcs (the inventory,
// the calls in flight, the statuses host reports), the Manager's gauges, an
// engine's UsageSource — never host's records or routes, and it never
// decides when a call counts or where the registry is served: host does
// (invoke.go, stream.go, async_handler.go; server.go). It imports no
// engine and does not import host. Everything here is safe for concurrent
// use.
package metrics
