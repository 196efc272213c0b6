// Package pipeline owns how one invocation travels from the host to the model
// containers of an endpoint and back: which production variant and which
// instance serve it, which containers are called and in what order, the
// per-hop timeout, payload caps, Content-Type chaining, and the typed errors
// (ValidationError, UnavailableError, ModelError) that the host maps onto
// SageMaker's error shapes (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html#API_runtime_InvokeEndpoint_Errors).
//
// It knows nothing of Docker or of any other mce package but internal/wire
// (header names) and its own HTTP client, pipeline/httpc. Containers are
// reached through the small Container interface (a hostname, a base URL and a
// readiness flag) that the containers package satisfies; the host parses and
// validates the client's request, reads its body under the 6 MiB cap, and
// calls Invoker.Invoke with a Route.
//
// # Routing contract
//
// Variant. Request.TargetVariant names the production variant; an unknown
// name is a ValidationError, and a variant of weight 0 can still be named.
// Without it a variant is drawn at random with probability weight/sum over
// the variants whose weight is above 0.
//
// Shadow variants (shadow.go). A Route's shadow variants (SetShadows) are
// never drawn by weight, and a TargetVariant that names one is a
// ValidationError. A Mirror (Invoker.NewMirror) gives each a copy of a
// share of the production variant's calls — its weight over the
// production variant's, at most 1 (ShadowShare) — when the host offers it
// a call that reached the production container (Mirror.Offer, after the
// answer). The copy's body is copied; it is sent on a goroutine of its own,
// through the same instance choice, hops, timeouts and caps as any call
// (streamed when the production call was); its outcome goes to a
// ShadowObserver, never to the caller. A shadow holds at most
// MirrorOptions.MaxInFlight copies and all copies at most
// MirrorOptions.MaxBytes of bodies; a copy beyond is dropped and reported.
//
// Instance. Among the variant's instances that are ready for this call (for
// Direct: the target container is ready; for Serial: every container is), the
// one with the fewest outstanding requests is chosen, ties broken at random.
// When none is ready the call fails at once with an UnavailableError (the host
// answers ServiceUnavailable, 503); it never waits for a container to come up.
//
// Direct mode (https://docs.aws.amazon.com/sagemaker/latest/dg/multi-container-direct.html). Request.TargetContainerHostname is
// required and must name a container of the variant, else ValidationError.
// Only that container is called.
//
// Serial mode (https://docs.aws.amazon.com/sagemaker/latest/dg/inference-pipelines.html). TargetContainerHostname must be empty
// (ValidationError otherwise). The body passes through the containers in
// order: container k+1 receives container k's response body, with container
// k's response Content-Type, verbatim, as its request Content-Type. Only the
// last container receives the client's Accept; every container receives
// X-Amzn-SageMaker-Custom-Attributes and X-Amzn-SageMaker-Inference-Id when
// the client set them. The response's Content-Type and custom attributes are
// the last container's (custom attributes only when it set them). An endpoint
// with a single container is Serial with one container.
//
// Errors from a container (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html#API_runtime_InvokeEndpoint_Errors). A status outside 2xx from
// container k stops the chain (later containers are never called) and becomes
// a ModelError carrying the container, its status and its body (truncated,
// valid UTF-8), with SageMaker's wording. A hop that exceeds Options.Timeout
// is a ModelError with OriginalStatusCode 0; a response body over
// Options.MaxPayload, intermediate or final, is a ModelError too. No body is
// ever read without a cap.
//
// Retries. A call is retried once, on another ready instance of the same
// variant (continuing a chain at the hop that failed), only when the
// connection to the container could not be established (dial errors:
// refused, unreachable, dial timeout). A request that may have reached a
// container is never retried, with one exception: a request sent on a
// reused keep-alive connection that fails before any byte of an answer came
// back (the container closed the idle connection as the request went out) is
// sent once more, on a new connection to the same container, as Go's
// transport does for this race. Connections idle for more than a second are
// checked before use, so that this is rare.
//
// Transport. Containers are called by the package's own small HTTP/1.1
// client (package httpc, one call per container request), which does the
// whole exchange on the calling goroutine: plain
// http only, no proxy, one write for the request line, headers and
// Content-Length-framed body (no chunked requests), and a response read
// under caps (64 KiB of status line and headers, values without control
// characters; Content-Length, chunked or until close; 1xx answers skipped;
// HTTP/1.0 answers). Each container has its own pool of at most 256 idle
// keep-alive connections, most recently used first, closed after 90 s idle
// or by Forget and Close; a connection goes back to the pool only when its
// answer was read whole and the container keeps it alive.
//
// Cancellation. The client going away (the context passed to Invoke is done)
// cancels the call in flight: its connection is cut at once, which the
// container sees as its request cancelled, and Invoke returns the context's
// error.
//
// Streaming (InvokeStream, https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointWithResponseStream.html). The chain runs as above,
// except that the last container's 2xx answer is not read into a buffer: it
// goes to the caller's Sink piece by piece as it comes off the connection
// (reads of at most 16 KiB), each Write finishing before the next read, so a
// slow sink slows the container down through TCP instead of filling memory.
// Its length has no cap; Options.Timeout bounds the last call from its start
// to the end of its answer. A failure before the answer began is what Invoke
// returns; after it, a StreamError (StreamBroken, or
// ModelInvocationTimeExceeded when the timeout expired) that unwraps to the
// ModelError Invoke would have returned. Multi-model containers are not
// streamed (there is no TargetModel).
//
// Latency. Response.ModelLatency is the sum of the time spent inside container
// calls; Observer.ObserveContainer is called once per container call,
// successful or not, for ContainerLatency and per-container metrics
// (https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html).
//
// # Concurrency
//
// Invoker, Route, Variant and Instance are safe for concurrent use. A Route's
// variants, a Variant's instances and weight can be replaced while
// invocations run, without locks on the invocation path; an invocation works
// on the snapshot it read when it started.
package pipeline
