// Package artifact turns a container definition's ModelDataUrl into a local
// directory that the Docker engine bind-mounts read-only at /opt/ml/model
// (ModelDataUrl: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ContainerDefinition.html;
// model artifacts: https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html),
// and that the multi-model manager reuses for <prefix>/<TargetModel>
// artifacts (https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html).
//
// It owns four things:
//
//   - URL handling: s3://bucket/key (downloaded with aws-sdk-go-v2 in
//     parallel byte ranges, S3-compatible stores through an endpoint
//     override; credentials are looked up once, with the EC2
//     instance-metadata lookup bounded in time and switched off by
//     AWS_EC2_METADATA_DISABLED, and their absence is a clear
//     [ErrNoCredentials]) and file:// paths (absolute, or relative to the
//     endpoint file's folder), which must resolve, links included, inside
//     the operator's model roots ([Options.ModelRoots],
//     [ErrOutsideModelRoots], whether anything is there or not; missing
//     data inside them, or named by the operator's files
//     ([Options.NamedData]), is [ErrNotFound], with the command that
//     builds it for mce's own example models, [ExampleBuild]).
//   - What a container may see: an archive is extracted and a folder is
//     staged (copied) into a fresh directory under a caller-chosen work
//     directory, in both cases keeping only regular files, folders and
//     relative symbolic links that stay inside; sockets, devices, FIFOs and
//     links leading out are refused. Every file operation goes through an
//     [os.Root].
//   - Bounds: bytes per artifact (sparse entries at their logical size),
//     expansion ratio, entries, name depth and lengths ([Limits]), and a
//     disk [Budget] shared by every extracted artifact and multi-model
//     cache of a process, which deletes unused multi-model files least
//     recently used first.
//   - Typed errors ([ErrNotFound], [ErrUnsupportedURL], [ErrUnsafeArchive],
//     [ErrTooLarge], [ErrInvalidArchive], [ErrOutsideModelRoots],
//     [ErrNoCredentials], with [*UnsafeEntryError] and [*LimitError] for
//     details) whose messages are meant for users: they name the URL as
//     written, the limit and the mce serve flag that sets it, and never a
//     host path the caller did not write.
//
// It does not talk to Docker or decide where directories are mounted;
// directories it creates belong to the caller, who removes them when the
// container is gone.
package artifact
