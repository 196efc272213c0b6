// Package agent is the model cache of a multi-model container when mce does
// not share a file system with it: on the kubernetes engine a sidecar in the
// container's pod (`mce agent`, mce's own image) owns an [mme.Cache] on a
// volume that the model container mounts read-only at /opt/ml/models, and
// mce's [mme.Manager] in mce's own process reaches it over the pod network
// through [Client], an [mme.Store]. Downloads keep artifact's safety limits
// (they run in the agent); the LRU of loaded models, 507 handling and the
// container's load calls stay in mce's Manager, as on Docker.
//
// The API, on [Port] of the pod's IP, JSON bodies of at most [MaxRequestBytes]:
//
//	GET  /ping        200 {"Status":"Healthy"}: the readiness probe
//	POST /v1/acquire  {"TargetModel":"a/b.tar.gz"} → 200 {"ModelId","Bytes","CacheBytes","CacheModels","DownloadMs"}:
//	                  files present at <dir>/<ModelId>/model and one reference taken; 507 CacheFull
//	                  when new files do not fit in --disk-capacity beside those of models in use,
//	                  409 TooManyReferences past [MaxReferencesPerModel] on one model
//	POST /v1/release  {"TargetModel":"…","Drop":false} → 200 {"CacheBytes","CacheModels"}: one reference
//	                  given back (Drop: delete the files when it was the last); 404 NotHeld when none is held
//	POST /v1/reset    → 200 {"Released":n,…}: every reference given back (mce attaching to the pod anew)
//	GET  /v1/usage    → 200 {"CacheBytes","CacheModels"}
//
// Errors are {"Code","Message"} with a status per Code: 400 InvalidTargetModel
// and InvalidRequest, 404 ModelNotFound (with the artifact's "URL") and
// NotHeld and UnknownRoute, 405 MethodNotAllowed, 413 RequestTooLarge (the
// body) and ModelTooLarge (the artifact), 415 UnsupportedMediaType, 403
// OutsideModelRoots, 422 UnsafeArchive and InvalidArchive, 401 NoCredentials,
// 409 TooManyReferences, 507 CacheFull, 503 ShuttingDown, 500 InternalFailure. [Client] turns them back into mme's
// and artifact's typed errors, so that the host answers as on Docker.
//
// Who can call it: anything that reaches the pod's IP on [Port] — the pod's
// own containers and, unless a NetworkPolicy restricts it, every pod of the
// cluster. The agent takes no URL, path or credential from a caller: it
// fetches only <prefix><TargetModel> under the prefix it was started with
// (a TargetModel is a relative path without '.' or '..' segments), with the
// artifact limits and disk capacity it was started with, into its own
// folder; it answers nothing but the routes above. A caller could make it
// download models of that prefix, or give back references (files then may be
// deleted early; models already loaded stay loaded). Restrict ingress to
// Port to mce's pod with a NetworkPolicy where other tenants share the
// cluster (https://kubernetes.io/docs/concepts/services-networking/network-policies/).
package agent

import (
	"github.com/mce-run/mce/containers/mme"
)

// Port is the agent's TCP port in the pod: outside 8080..8094, which the
// model containers' SAGEMAKER_BIND_TO_PORT take.
const Port = 9400

// ModelsDir is where the agent's volume is mounted, in the agent read-write
// and in the model container read-only: the load call names
// ModelsDir/<id>/model.
const ModelsDir = "/opt/ml/models"

// Limits of the wire.
const (
	// MaxRequestBytes bounds a request body: a TargetModel is at most
	// mme.MaxTargetModelLength bytes, which JSON may escape to six each.
	MaxRequestBytes = 8 << 10
	// maxResponseBytes bounds what the client reads of an answer.
	maxResponseBytes = 64 << 10
)

// Error codes of the API.
const (
	CodeInvalidTargetModel   = "InvalidTargetModel"
	CodeInvalidRequest       = "InvalidRequest"
	CodeModelNotFound        = "ModelNotFound"
	CodeNotHeld              = "NotHeld"
	CodeUnknownRoute         = "UnknownRoute"
	CodeMethodNotAllowed     = "MethodNotAllowed"
	CodeRequestTooLarge      = "RequestTooLarge"
	CodeModelTooLarge        = "ModelTooLarge"
	CodeUnsupportedMediaType = "UnsupportedMediaType"
	CodeOutsideModelRoots    = "OutsideModelRoots"
	CodeUnsafeArchive        = "UnsafeArchive"
	CodeInvalidArchive       = "InvalidArchive"
	CodeNoCredentials        = "NoCredentials"
	CodeShuttingDown         = "ShuttingDown"
	CodeInternalFailure      = "InternalFailure"
	CodeCacheFull            = "CacheFull"
	CodeTooManyReferences    = "TooManyReferences"
)

// MaxReferencesPerModel bounds the references the agent holds on one
// model: mce takes one per model its container has loaded (a few more while
// loads and unloads overlap), so a caller past it is refused (409
// TooManyReferences) instead of growing the agent's memory without bound.
const MaxReferencesPerModel = 64

type acquireRequest struct {
	TargetModel string
}

type releaseRequest struct {
	TargetModel string
	Drop        bool
}

// usage is in every answer but errors, so that the client knows the
// cache's size without asking.
type usage struct {
	CacheBytes  int64
	CacheModels int
}

type acquireResponse struct {
	ModelId string //nolint:revive // the wire's spelling, as SageMaker's
	Bytes   int64
	usage
	// DownloadMs is set when the files were not on disk when the call came:
	// how long the call took (the download and extraction).
	DownloadMs int64 `json:",omitempty"`
}

type resetResponse struct {
	Released int
	usage
}

type errorResponse struct {
	Code    string
	Message string
	URL     string `json:",omitempty"` // ModelNotFound: the artifact's URL
}

var _ mme.Store = (*Client)(nil)
