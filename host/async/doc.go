// Package async is mce's asynchronous inference queue, what stands behind
// InvokeEndpointAsync
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointAsync.html):
// a Queue per server that keeps every accepted request durable in the state
// store until its answer or failure is in S3, runs requests as their
// endpoints have room (MaxConcurrentInvocationsPerInstance per running
// instance, by variant weight), bounds the memory inputs and answers hold
// and the backlog all endpoints share, and re-queues after a restart what
// the store still holds.
//
// One job per file: queue.go (acceptance, the per-endpoint queues and their
// dispatch loops, running a request, memory leases, the backlog), s3.go
// (the ObjectStore it reads inputs from and writes answers and failures to,
// the input and output prefix rules, NormalizeS3Prefix), recover.go
// (marking requests done, re-queueing after a restart, finding an answer
// written before a crash), metrics.go (its Prometheus series, named after
// SageMaker's CloudWatch metrics of asynchronous endpoints).
//
// It owns the queue and nothing else. The HTTP call — header validation,
// authorization of the caller and of its s3:GetObject on the input, the
// object names — is host's (async_handler.go), which then calls Reserve and
// Accept. The queue reaches the rest of mce only through its Options: the
// endpoints by name (Endpoints: a route and an async plan, never host's
// records), host's metrics and error mapping (Outcomes), S3 (ObjectStore),
// the state store, and the background group whose context is its
// lifetime. It imports no engine and does not import host.
package async
