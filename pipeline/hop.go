package pipeline

import (
	"context"
	"net/http"
	"time"

	"github.com/mce-run/mce/internal/wire"
)

// Header names sent to containers, spelled as in the SageMaker API (header
// names are case-insensitive on the wire).
const (
	hdrContentType      = "Content-Type"
	hdrAccept           = "Accept"
	hdrCustomAttributes = wire.HeaderCustomAttributes
	hdrInferenceID      = wire.HeaderInferenceID
)

// errorBodyDrain bounds how much of an error body is read and thrown away so
// the connection can be reused; beyond it the connection is closed instead.
const errorBodyDrain = 64 << 10

// outcome classifies how one container call ended.
type outcome int

const (
	hopOK         outcome = iota
	hopStatus             // the container answered a status outside 2xx
	hopTooBig             // a 2xx body over the payload cap
	hopDialFailed         // no connection could be made: nothing was sent
	hopTimeout            // the per-hop timeout expired
	hopCanceled           // the caller's context is done
	hopBroken             // any other transport failure
)

// hopResult is what one container call produced. The 2xx body is in the
// buffer passed to call.
type hopResult struct {
	outcome     outcome
	status      int
	contentType string
	customAttrs string
	announced   int64  // Content-Length of the response, -1 when unknown
	errBody     string // the container's body for hopStatus, clipped
	elapsed     time.Duration
	err         error // the transport or context error
}

// hopHeaders are the client headers a call forwards.
type hopHeaders struct {
	contentType, accept, customAttrs, inferenceID, targetModel string
}

// MultiModel is implemented by containers in MultiModel mode: Acquire makes
// sure the target model is loaded (downloading and loading it, evicting
// others, as needed) and holds it loaded until the lease is released
// (https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html). Package host adapts the runtime's model manager to it.
type MultiModel interface {
	Acquire(ctx context.Context, targetModel string) (Lease, error)
}

// Lease keeps one model loaded for one call.
type Lease interface {
	// ModelID is the <id> of POST /models/<id>/invoke.
	ModelID() string
	// OutOfMemory is called when the container answered 507 to the invoke:
	// it frees memory by unloading another idle model (nil: try again), or
	// says nothing is left to free.
	OutOfMemory(ctx context.Context) error
	// Release ends the lease.
	Release()
}

// maxMemoryRetries bounds how often one call evicts and retries after 507.
const maxMemoryRetries = 8

// NotLoadedLease is a Lease whose manager can load its model again when the
// container answers 404 to the invoke of a model it had loaded (a container
// that lost its models without restarting): NotLoaded returns true when the
// model was loaded again and the call is to be retried, false when the 404
// is the model's own answer.
type NotLoadedLease interface {
	NotLoaded(ctx context.Context) (bool, error)
}

const hdrTargetModel = wire.HeaderTargetModel

// hop calls one container: /invocations, or for a multi-model container the
// target model's /models/<id>/invoke, retrying after a 507 once the lease
// has freed memory. A non-nil error is a failure to get the model (typed by
// the model manager); container answers are in the hopResult.
func (iv *Invoker) hop(ctx context.Context, c Container, body []byte, h hopHeaders, out *buffer) (hopResult, error) {
	mm, ok := c.(MultiModel)
	if !ok {
		return iv.call(ctx, c, body, h, out), nil
	}
	if h.targetModel == "" {
		return hopResult{}, &ValidationError{Message: "Container " + c.Hostname() + " is a multi-model container: the call needs a TargetModel."}
	}
	lease, err := mm.Acquire(ctx, h.targetModel)
	if err != nil {
		return hopResult{}, err
	}
	defer lease.Release()
	var buf [5]header
	hs := h.forward(buf[:0], true)
	path := "/models/" + lease.ModelID() + "/invoke"
	reloaded := false
	for attempt := 0; ; attempt++ {
		res := iv.exchange(ctx, c.BaseURL(), http.MethodPost, path, hs, body, out)
		if res.outcome == hopStatus && res.status == http.StatusNotFound && !reloaded {
			// Once per call: the container may have forgotten the model.
			nl, ok := lease.(NotLoadedLease)
			if !ok {
				return res, nil
			}
			reloaded = true
			retry, err := nl.NotLoaded(ctx)
			if err != nil {
				return hopResult{}, err
			}
			if !retry {
				return res, nil
			}
			continue
		}
		if res.outcome != hopStatus || res.status != http.StatusInsufficientStorage || attempt == maxMemoryRetries {
			return res, nil
		}
		if err := lease.OutOfMemory(ctx); err != nil {
			return hopResult{}, err
		}
	}
}

// call POSTs body to c's /invocations with h under the per-hop timeout and
// reads a 2xx response into out, capped at the payload limit. Headers the
// client did not set are not sent. Nothing reads body once it returns.
func (iv *Invoker) call(ctx context.Context, c Container, body []byte, h hopHeaders, out *buffer) hopResult {
	var buf [5]header
	return iv.exchange(ctx, c.BaseURL(), http.MethodPost, "/invocations", h.forward(buf[:0], false), body, out)
}

// forward appends the headers a container receives: those the client set,
// and for a multi-model invoke the Target-Model (https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html).
func (h hopHeaders) forward(dst []header, multiModel bool) []header {
	for _, f := range [...]header{
		{hdrContentType, h.contentType},
		{hdrAccept, h.accept},
		{hdrCustomAttributes, h.customAttrs},
		{hdrInferenceID, h.inferenceID},
	} {
		if f.value != "" {
			dst = append(dst, f)
		}
	}
	if multiModel && h.targetModel != "" {
		dst = append(dst, header{hdrTargetModel, h.targetModel})
	}
	return dst
}
