// Package containers is what every engine shares: the contract between mce
// and the containers it runs, and the seam between host and an engine. The
// engines themselves are its sub-packages.
//
//	containers/            the shared contract (this package; links no engine client)
//	├── docker/            the Docker engine: containers on this machine's Docker (or a remote DOCKER_HOST)
//	├── kubernetes/        the Kubernetes engine: a variant is a Deployment, an instance a pod
//	├── mme/               multi-model loading: the model cache and manager behind TargetModel (engine-neutral)
//	│   └── agent/         the model cache sidecar of a multi-model pod, and its client
//	├── artifact/          ModelDataUrl download and safe extraction into a local folder
//	├── gpu/               NVML inventory, GPU requests and their CDI names, the GPU pre-flight (no Docker types)
//	└── check/             `mce check IMAGE`: does an image honour the SageMaker container contract
//
// What this package holds, one job per file:
//   - plan.go: the seam's vocabulary, what an engine is asked to run:
//     EndpointPlan → VariantPlan → ContainerPlan (with Resources and the
//     GPU request), AsyncPlan; package host/spec builds plans from
//     SageMaker's shapes, the engines read them.
//   - engine.go: the seam. Engine (launch, adopt, reconcile), Launched (one
//     generation of an endpoint's containers), Problem, and the optional
//     capabilities an engine may offer (Preflighter, UsageSource,
//     MultiModelObservable; CopyPlacer and AdapterStore in capacity.go)
//     and its containers may (ContainerDetail,
//     MultiModelDetail, MultiModelGPUDetail). host drives engines through
//     these and imports no engine; engines implement them without
//     importing host.
//   - contract.go: the SageMaker container environment: each container's
//     port (ContainerPort, SAGEMAKER_BIND_TO_PORT), its safe port range, and
//     the variables SageMaker sets (SageMakerEnv).
//   - code.go: inference code named by SAGEMAKER_SUBMIT_DIRECTORY
//     (RemoteSubmitDir, CodeDir, WithCodeDir).
//   - process.go: a process's identity on this machine (ProcessStart,
//     ProcessRuns, ProcessGone), with which the engines tell whether the mce
//     that claimed an instance still runs.
//   - logline.go: a line a container printed (LogLine) and how many lines of
//     history a call may ask for (MaxLogTail).
//   - usage.go: a container's resource use as SageMaker's instance metrics
//     count it (Usage).
//   - capacity.go: what inference-component copies ask of an engine:
//     CopyPlacer (where copies go: the Docker engine packs them on its
//     machine, the Kubernetes engine's scheduler decides at launch, as
//     LaunchPlacer places), the copy's needs and the scheduler's refusal
//     (UnschedulableError), and AdapterStore (folders of adapters).
//
// What it must not hold: anything that links an engine's client (moby,
// Docker, any k8s.io package) or a host package. A test in
// internal/layering keeps host, pipeline, authz and this package free of
// engine clients and engine packages, everything under containers free of
// host packages, each engine free of the other, and the Kubernetes engine
// free of Docker's client.
package containers
