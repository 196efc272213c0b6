// Package docker is mce's Docker engine: it turns an endpoint's container
// definitions into running, reachable, observed containers on a Docker engine
// and takes them down again leaving nothing behind. Engine is the engine as
// host drives it (containers.Engine, beside kubernetes.Engine): it
// translates a resolved SageMaker endpoint (containers.EndpointPlan) into an
// EndpointSpec (SpecOf) that the Runtime launches, and offers host's
// optional capabilities (containers.Preflighter, UsageSource,
// MultiModelObservable). `mce serve --engine docker` builds it and hands it
// to host.New.
//
// What it owns: images (checked, never pulled unless asked), the endpoint's own
// bridge network, container create/start/stop/remove, the SageMaker container
// environment (SAGEMAKER_BIND_TO_PORT, SAGEMAKER_SAFE_PORT_RANGE, hostnames,
// /opt/ml/model mounted read-only from the model artifact), GPU device requests,
// readiness and liveness (GET /ping), log streaming into mce's log, crash
// restarts with backoff, recreation of containers that disappeared or cannot
// start, hardening (no-new-privileges, a PIDs limit, an internal network for
// EnableNetworkIsolation), the engine-wide instance lease (lease.go: one live
// mce per instance name), and removal of what an earlier run of the same mce
// instance left behind (everything mce creates carries the labels in labels.go).
//
// What it must not touch: HTTP routing of invocations (package pipeline reaches
// a running container only through its Hostname, BaseURL and Ready methods),
// anything of the SageMaker API (package host, which it never imports), and
// what every engine shares (the SageMaker container environment, process
// identity, log lines and usage figures live in package containers).
//
// One job per file: engine.go (Engine: the plan translated and launched, and
// the containers host sees), engine_preflight.go (pre-flight problems told in
// the plan's words), client.go (the Docker API Client mce uses and its error
// classes), runtime.go (Options, New and the Runtime), netmode.go (how mce reaches
// its containers: the network mode and its probing), statelock.go (the
// state folder's instance lock), tracking.go (containers by Docker ID, for
// events), gpus.go (GPU checks and device requests), deploy.go (Deploy,
// the Deployment and the parallel launch of copies), create.go (a
// container's configuration and start), network.go (the endpoint's
// networks), artifacts.go (model data staged for /opt/ml/model),
// multimodel.go (a variant's multi-model cache), scale.go, address.go (a
// container's address on its network), teardown.go (Close and container
// removal, in parallel through internal/parallel), adopt.go, reconcile.go,
// health.go, supervise.go (restarts), logs.go, stats.go, image.go, pull.go and
// registry.go, preflight.go, lease.go, join.go (mce in a container joining
// its endpoints' networks), labels.go.
package docker
