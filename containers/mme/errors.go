package mme

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors; match them with [errors.Is].
var (
	// ErrNoMemory: the container answered 507 (out of memory) and no other
	// loaded model could be unloaded to make room: none is loaded, or all
	// stayed busy for ManagerOptions.EvictWait.
	ErrNoMemory = errors.New("the container is out of memory (507) and no idle model is left to unload")
	// ErrInvalidTargetModel: the TargetModel is not a relative path that
	// [ValidTargetModel] accepts.
	ErrInvalidTargetModel = errors.New("invalid TargetModel")
	// ErrClosed: the Manager was closed.
	ErrClosed = errors.New("multi-model manager closed")
)

// NotReadyError says that a model is still being downloaded or loaded after
// ManagerOptions.LoadTimeout; the load carries on and a later call finds it
// loaded. The host answers SageMaker's ModelNotReadyException (429).
type NotReadyError struct {
	// TargetModel names the model.
	TargetModel string
	// Waited is how long the request waited.
	Waited time.Duration
	// Err is the caller's context error when its deadline ended the wait.
	Err error
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("model %q is not ready yet: it is still loading after %s; retry the request later",
		e.TargetModel, e.Waited.Round(time.Millisecond))
}

// Unwrap returns the context error, if any.
func (e *NotReadyError) Unwrap() error { return e.Err }

// ModelNotFoundError says that no artifact exists at <prefix><TargetModel>.
// It matches [artifact.ErrNotFound] through Unwrap.
type ModelNotFoundError struct {
	// TargetModel names the model.
	TargetModel string
	// URL is the artifact's URL.
	URL string
	// Err is the artifact package's error.
	Err error
}

func (e *ModelNotFoundError) Error() string {
	if strings.HasPrefix(e.URL, "file://") { // a host path: not for callers
		return fmt.Sprintf("model %q not found: no artifact of that name under the endpoint's model data prefix", e.TargetModel)
	}
	return fmt.Sprintf("model %q not found: no artifact at %s", e.TargetModel, e.URL)
}

func (e *ModelNotFoundError) Unwrap() error { return e.Err }

// LoadError says that the container refused to load a model with a status
// other than 200, 409 and 507.
type LoadError struct {
	// TargetModel names the model.
	TargetModel string
	// Status is the container's HTTP status.
	Status int
	// Message is the container's error message (its {"error": …} field, or
	// the start of its body), at most 1 KiB.
	Message string
}

func (e *LoadError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("the container refused to load model %q: status %d", e.TargetModel, e.Status)
	}
	return fmt.Sprintf("the container refused to load model %q: status %d: %s", e.TargetModel, e.Status, e.Message)
}

// UnloadError says that the container failed to unload a model; the model
// is still counted as loaded.
type UnloadError struct {
	// TargetModel names the model.
	TargetModel string
	// Status is the container's HTTP status, 0 when no answer came.
	Status int
	// Message is the container's message or the transport error.
	Message string
}

func (e *UnloadError) Error() string {
	return fmt.Sprintf("the container failed to unload model %q: status %d: %s", e.TargetModel, e.Status, e.Message)
}

func noMemory(target, why string) error {
	return fmt.Errorf("loading model %q: %w: %s", target, ErrNoMemory, why)
}
