// Package artifact turns a container definition's ModelDataUrl into a local
// directory that the Docker adapter bind-mounts read-only at /opt/ml/model
// (reference/sagemaker-contracts.md §2.2 ModelDataUrl, §3.1 "Model
// artifacts"), and that the multi-model manager reuses for
// <prefix>/<TargetModel> artifacts (§4.1).
//
// It owns three things:
//
//   - URL handling: s3://bucket/key (downloaded with aws-sdk-go-v2 in
//     parallel byte ranges, S3-compatible stores through an endpoint
//     override) and file:// paths (absolute, or relative to the endpoint
//     file's folder). A local directory is returned as is; an archive is
//     extracted into a fresh directory under a caller-chosen work directory.
//   - Safe extraction of tar and tar.gz archives ([Extract]): every file
//     operation goes through an [os.Root], names and link targets are
//     validated, links may not lead outside the extraction root, special
//     files are refused, and byte and entry caps are enforced while
//     streaming.
//   - Typed errors ([ErrNotFound], [ErrUnsupportedURL], [ErrUnsafeArchive],
//     [ErrTooLarge], [ErrInvalidArchive], with [*UnsafeEntryError] and
//     [*LimitError] for details) whose messages are meant for users.
//
// It does not talk to Docker, decide where directories are mounted, or
// cache artifacts between calls; directories it creates belong to the caller,
// who removes them when the container is gone.
package artifact
