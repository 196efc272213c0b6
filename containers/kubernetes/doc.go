// Package kubernetes is mce's Kubernetes engine: it runs an endpoint on a
// cluster, a variant as a Deployment and each instance (a copy of the
// variant's container set) as one pod, and takes it down again leaving
// nothing behind. Engine is the engine as host drives it (containers.Engine,
// beside docker.Engine): it translates a resolved SageMaker endpoint
// (containers.EndpointPlan) into objects, watches their pods, and offers
// containers.MultiModelObservable. `mce serve --engine kubernetes` builds it
// and hands it to host.New.
//
// What it owns: the objects of this mce instance in its namespace (an owner
// ConfigMap per endpoint generation, which owns its Deployments, so deleting
// it removes everything), each pod's init container that fetches model data
// with mce's own image, the SageMaker container environment in the pod spec
// (from package containers), startup, readiness and liveness probes on
// GET /ping, the model cache sidecar of multi-model pods (containers/mme/agent),
// the instance claim (a coordination.k8s.io Lease: one live mce per instance
// name, the counterpart of the Docker engine's lease container), adoption of
// what a previous mce left running, and removal of what no generation owns.
//
// What it must not touch: HTTP routing of invocations (package pipeline
// reaches a pod's container only through its Hostname, BaseURL and Ready
// methods), anything of the SageMaker API (package host, which it never
// imports), and the Docker engine (it links no Docker client).
//
// One job per file: engine.go (Engine, New, Launch, Adopt, Reconcile and
// Launched), manifest.go (the objects generated from a plan, and their
// labels), pods.go (a copy's Container and why a pod is not ready),
// probes.go (what the kubelet's events say of a container's probes),
// multimodel.go (multi-model containers: the model manager and its agent
// client), claim.go (the instance claim), copies.go (inference-component
// copies: placed by the scheduler within the variant's nodes, the
// scheduler's refusal, the pre-flight against the nodes' allocatable).
package kubernetes
