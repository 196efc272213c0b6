// Package host is mce's HTTP front: the SageMaker Runtime API (restJson1,
// POST /endpoints/{name}/invocations, and .../invocations-response-stream
// answered as an AWS event stream, stream.go) on one listener, request parsing and
// validation against InvokeEndpoint's limits
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html), the endpoint
// registry and its lifecycle (Creating → InService | Failed → Deleting),
// SageMaker's error shapes, the Prometheus metrics endpoint, and the
// operator's status page (package host/statuspage, built and mounted by
// operator.go), and asynchronous inference (InvokeEndpointAsync in
// async_handler.go: its headers, authorization and object names; the
// durable queue, its dispatch, S3 input and output, recovery and metrics
// are package host/async, which async_handler.go builds from the server's
// configuration and reaches the server through asyncPeer). What containers
// print is read by package host/cloudwatchlogs (mce logs and the CloudWatch
// Logs operations); logs_handler.go keeps its routes, lets each call in and
// shows it the endpoints through logGroups.
//
// Every error a client sees is written in exactly one place (writeError): an
// *APIError with SageMaker's code, HTTP status, X-Amzn-ErrorType header and a
// JSON body holding __type and Message — never an empty or HTML body. Layers
// below return typed errors (pipeline.ModelError, pipeline.ValidationError,
// spec.ValidationError …) and toAPIError maps them.
//
// The SageMaker control plane (awsJson1_1, POST / with X-Amz-Target), one
// job per file: control.go (dispatch: decoding once, authorizing the decoded
// resource, mapping errors to SageMaker's shapes), control_list.go (the
// filtering, sorting and NextToken paging of every List* operation),
// control_models.go, control_configs.go and control_endpoints.go (one
// resource family each), tags.go, and apply.go (endpoint files made the
// state through the same operations). The endpoints' lifecycle in the
// background is endpoints.go, their registry endpoints_registry.go, their
// durable records and their recovery after a restart endpoints_store.go.
// Inference components (an endpoint whose variants name no model hosts
// them) are package host/components (its Manager: records, copies,
// reconcile, adapters, recovery, the component route); host keeps their
// six operations as thin adapters (control_components.go: decode, the
// second authorization, one Manager call, the answer's shape), the
// Manager's wiring and the endpoint it sees (endpoints_components.go),
// the header of an invocation (componentRoute in invoke.go); their
// metrics are host/metrics' ComponentCollector, fed the Manager's Gauges.
//
// The Prometheus series are package host/metrics: host observes each call
// (ObserveInvocation in invoke.go, stream.go and async_handler.go; the
// pipeline's per-container hops through its Observer), shows it its state
// at scrape time through metrics_sources.go, registers its collectors in
// New and serves the registry (MetricsHandler).
//
// Contexts: exported calls take the caller's context first and honour it;
// work that must outlive a request (a launch, an update, a scale, a
// deletion) runs under the server's lifetime on purpose, and a comment says
// so where it starts. Close cancels that lifetime, then closes every
// endpoint's generation at once through internal/parallel.Each, the one
// helper for parallel teardown.
//
// host reaches containers only through pipeline (routing) and the engine
// contract of package containers (containers.Engine, in Config.Backend,
// brings endpoints up and down; host uses the contract's own names); it
// imports no engine and never calls Docker or Kubernetes
// itself. The engines are docker.Engine and kubernetes.Engine (under
// containers/), which `mce serve` builds and passes in Config.Backend. What an engine offers beyond containers.Engine is found by type
// assertion on that interface value, never on a concrete type: Preflighter
// (checks before a launch), UsageSource (CPU, memory, disk and GPU use for
// the metrics), MultiModelObservable (multi-model events for the metrics),
// CopyPlacer (where inference-component copies go: packed on the
// machine by the Docker engine, left to the cluster's scheduler by the
// Kubernetes engine, with the pre-flight of a specification),
// and, on the containers a Launched returns, ContainerDetail and
// MultiModelDetail (the status page and GET /mce/endpoints).
package host
