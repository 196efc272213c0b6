// Package mme is the host side of a SageMaker multi-model endpoint
// (https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html): it turns a TargetModel into a model
// that a multi-model container (mce's modelserver example, NVIDIA Triton)
// has loaded, so that the invocation pipeline can send
// POST {base}/models/{id}/invoke with header X-Amzn-SageMaker-Target-Model.
//
// It owns two things, kept apart (STYLE habit 11):
//
//   - [Cache] (a [Store]): the model files on disk, one per MultiModel container
//     definition of a variant and shared by that variant's copies. The first
//     use of a TargetModel downloads <prefix><TargetModel> (s3:// through
//     [artifact.Fetcher]'s parallel ranged download, or file://) and extracts
//     it safely into <Dir>/<id>/model, atomically (a temporary folder under
//     Dir, then one rename). Dir is what the host mounts read-only at
//     /opt/ml/models in the container. Managers hold references on the
//     files of the models they load; with a Capacity, files that no manager
//     references are deleted least recently used first. A Cache owns its Dir:
//     NewCache removes what an earlier run left there.
//   - [Manager]: the models loaded in ONE running container, over the MME
//     container API (POST /models, DELETE /models/{id}, both with the
//     X-Amzn-SageMaker-Target-Model header). [Manager.Acquire] returns a
//     [Lease] that counts the request in flight; a model with a lease is
//     never unloaded. Idle loaded models are kept in an O(1) LRU and
//     unloaded, least recently released first, when the container answers
//     507 to a load, when [Lease.OutOfMemory] reports a 507 from an invoke,
//     ahead of a load when NVML shows the GPU would pass its threshold, after
//     IdleTTL without a call, or right after the last release when the model
//     cache is disabled (ModelCacheSetting Disabled). Concurrent first calls
//     for one model share one download and one load (singleflight); a load
//     that outlasts LoadTimeout answers [*NotReadyError]
//     (ModelNotReadyException) while it carries on in the background.
//     With a GPU it reads NVML around each load and unload (the
//     container's own processes where [ContainerGPUMemory] can tell) to
//     learn footprints and check what unloads free: a server that keeps
//     memory after unloads makes a load evict only what it needs and at
//     most two models that free nothing; the memory kept is reported
//     ([Manager.GPUMemory]) and, with RestartOnLeak, the engine is asked to
//     restart the container.
//
// Logs: each load, unload and eviction is a debug line; an info line per
// SummaryInterval counts them, and the first 507, the first load failure of
// each kind and the first leaky unload are info or warn lines.
//
// Model ids ([ModelID]) are the hex SHA-256 of the TargetModel: stable,
// 64 characters of [0-9a-f], inside Triton's [0-9A-Za-z._] (https://github.com/triton-inference-server/server/blob/main/src/sagemaker_server.cc).
//
// Errors are typed for the host to map in one place: [*NotReadyError] (429
// ModelNotReadyException), [*ModelNotFoundError] (artifact missing),
// [*LoadError] (the container refused a load), [*UnloadError] (an unload
// made to free memory failed), [ErrNoMemory],
// [ErrInvalidTargetModel], [ErrClosed], and artifact's
// [artifact.ErrUnsafeArchive], [artifact.ErrTooLarge] and
// [artifact.ErrInvalidArchive] wrapped. Durations and counts go to an
// [Observer] under SageMaker's MME metric names
// (https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-endpoint-cloudwatch-metrics.html).
//
// Concurrency: Cache and Manager are safe for concurrent use; a Lease is
// used by the one request that acquired it. The package does not talk to
// Docker, start or restart containers, invoke models, or map errors to
// HTTP; the caller tells a Manager when its container restarted
// ([Manager.Reset]) and closes it when the container is gone.
//
// Engines: nothing here is Docker's. What an engine must provide is a
// [Store] — model files that the container sees at
// /opt/ml/models/<id>/model, the path the load call names — and the
// container's HTTP address (ManagerOptions.BaseURL). The Docker engine
// gives a local [*Cache] whose folder it bind-mounts read-only
// (containers/multimodel.go, containers/create.go). The kubernetes engine
// runs the Cache in a sidecar of each pod (`mce agent`, package
// [github.com/mce-run/mce/containers/mme/agent]) on a volume shared with
// the container, and gives each pod's Manager an agent.Client as its Store
// (containers/kubernetes/multimodel.go).
package mme
