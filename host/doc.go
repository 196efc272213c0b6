// Package host is mce's HTTP front. It owns, in this package:
//
//   - the SageMaker Runtime API (restJson1): InvokeEndpoint (invoke.go),
//     InvokeEndpointWithResponseStream answered as an AWS event stream
//     (stream.go) and InvokeEndpointAsync's handler (async_handler.go),
//     with request parsing and validation against InvokeEndpoint's limits
//     (validate.go, body.go: bounded bodies);
//   - the SageMaker control plane (awsJson1_1, POST / with X-Amz-Target),
//     one job per file: control.go (dispatch: the one operation table,
//     decoding once, authorizing the decoded resource, mapping errors),
//     control_list.go (filtering, sorting and NextToken paging of every
//     List* operation), control_models.go, control_configs.go,
//     control_endpoints.go and control_components.go (one resource family
//     each; the inference components' operations are thin adapters over
//     host/components), tags.go, and apply.go (endpoint files made the
//     state through the same operations);
//   - the endpoint registry and lifecycle state machine (Creating →
//     InService | Failed → Deleting): endpoints.go (launch, update, scale,
//     delete in the background), endpoints_registry.go, endpoints_store.go
//     (durable records, recovery after a restart), records.go;
//   - authorization of each call: auth.go and preauth.go (gate: SigV4
//     identity and policy decisions with resource tags), s3reads.go (the
//     caller's S3 permissions on what a call makes mce read),
//     authz_targets.go (what mce authorizes on which ARN, for mce policy
//     check);
//   - errors: every error a client sees is an *apierr.Error written in one
//     place (apierr.Write) — SageMaker's code, HTTP status,
//     X-Amzn-ErrorType and a JSON body with __type and Message; layers below
//     return typed errors and errormap.go maps them;
//   - the wiring of its rooms (server.go: New, Handler, Close; datacapture.go:
//     each endpoint's Capturer of host/capture), the
//     operator's listener (operator.go: /metrics and the status page) and
//     the access and failure logs (accesslog.go, faillog.go).
//
// What grows beside the front lives in rooms of its own, each a package
// built from narrow dependencies (an Options struct) and reached through
// host's routes; none imports host:
//
//	host/apierr          SageMaker's error shape
//	host/spec            SageMaker's shapes, validation, plans built from them
//	host/store           durable state
//	host/components      inference components (records, copies, reconcile, adapters, recovery)
//	host/async           the InvokeEndpointAsync queue (dispatch, S3 input and output, recovery)
//	host/cloudwatchlogs  containers' output as CloudWatch Logs (mce logs, FilterLogEvents, …)
//	host/cloudwatch      the CloudWatch metrics API (JSON, CBOR, query) and its durable datapoint store
//	host/sagemakermetrics SageMaker's CloudWatch metrics, published from what host observes
//	host/listing         the List* operations' filters, sorting and paging
//	host/metrics         the Prometheus series host feeds and serves
//	host/inventory       the shapes of what runs now (status page, GET /mce/endpoints, state metrics)
//	host/statuspage      the operator's status page and the recorder behind its charts
//	host/capture         data capture of invocations to S3
//	host/shadow          what becomes of shadow variants' copies (series, status page, capture, drops)
//
// A new AWS API surface (Application Auto Scaling, …) is a new room: a package under host named after the service it serves,
// with its own protocol decoding and error shapes, given what it needs in
// Options; host only routes its requests to it (after authentication and
// the body's bounds) and authorizes them (docs/layout.md says how). It is
// never more methods on Server.
//
// Contexts: exported calls take the caller's context first and honour it;
// work that must outlive a request (a launch, an update, a scale, a
// deletion, a reconcile) runs in the server's background group
// (internal/background: one lifetime, panics recovered and reported on
// what they hit), and a comment says so where it starts. Close cancels
// that lifetime, then closes every endpoint's generation at once through
// internal/parallel.Each.
//
// host reaches containers only through pipeline (routing) and the engine
// contract of package containers (containers.Engine, in Config.Backend,
// brings endpoints up and down); it imports no engine and never calls
// Docker or Kubernetes itself. The engines are docker.Engine and
// kubernetes.Engine, which `mce serve` builds and passes in Config.Backend.
// What an engine offers beyond containers.Engine is found by type
// assertion on that interface value, never on a concrete type: Preflighter
// (checks before a launch), UsageSource (CPU, memory, disk and GPU use for
// the metrics), MultiModelObservable (multi-model events for the metrics),
// CopyPlacer (where inference-component copies go: packed on the machine
// by the Docker engine, left to the cluster's scheduler by the Kubernetes
// engine), AdapterStore, and, on the containers a Launched returns,
// ContainerDetail and MultiModelDetail (the status page and GET
// /mce/endpoints).
package host
