package pipeline

import (
	"context"
	"net/http"

	"github.com/mce-run/mce/internal/wire"
	"github.com/mce-run/mce/pipeline/httpc"
)

// Header names sent to containers, spelled as in the SageMaker API (header
// names are case-insensitive on the wire).
const (
	hdrContentType      = "Content-Type"
	hdrAccept           = "Accept"
	hdrCustomAttributes = wire.HeaderCustomAttributes
	hdrInferenceID      = wire.HeaderInferenceID
)

// hopHeaders are the client headers a call forwards.
type hopHeaders struct {
	contentType, accept, customAttrs, inferenceID, targetModel string
	adapter                                                    string // an adapter inference component's name
	session                                                    string // X-Amzn-SageMaker-Session-Id
}

// MultiModel is implemented by containers in MultiModel mode: Acquire makes
// sure the target model is loaded (downloading and loading it, evicting
// others, as needed) and holds it loaded until the lease is released
// (https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html). The engines (containers/docker,
// containers/kubernetes) adapt their containers' model managers to it.
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
// has freed memory. A 2xx body is read into out. A non-nil error is a
// failure to get the model (typed by the model manager); container answers
// are in the Result.
func (iv *Invoker) hop(ctx context.Context, c Container, body []byte, h hopHeaders, out *buffer) (httpc.Result, error) {
	mm, ok := c.(MultiModel)
	if !ok {
		return iv.call(ctx, c, body, h, out), nil
	}
	if h.targetModel == "" {
		return httpc.Result{}, &ValidationError{Message: "Container " + c.Hostname() + " is a multi-model container: the call needs a TargetModel."}
	}
	lease, err := mm.Acquire(ctx, h.targetModel)
	if err != nil {
		return httpc.Result{}, err
	}
	defer lease.Release()
	req := httpc.Request{BaseURL: c.BaseURL(), Method: http.MethodPost, Path: "/models/" + lease.ModelID() + "/invoke", Body: body}
	h.forward(&req.Header, true)
	reloaded := false
	// evictions counts the 507s answered by freeing memory; the one reload
	// of a forgotten model does not take one of them.
	for evictions := 0; ; {
		res := iv.do(ctx, &req, out)
		if res.Outcome == httpc.Status && res.Status == http.StatusNotFound && !reloaded {
			// Once per call: the container may have forgotten the model.
			nl, ok := lease.(NotLoadedLease)
			if !ok {
				return res, nil
			}
			reloaded = true
			retry, err := nl.NotLoaded(ctx)
			if err != nil {
				return httpc.Result{}, err
			}
			if !retry {
				return res, nil
			}
			continue
		}
		if res.Outcome != httpc.Status || res.Status != http.StatusInsufficientStorage || evictions == maxMemoryRetries {
			return res, nil
		}
		if err := lease.OutOfMemory(ctx); err != nil {
			return httpc.Result{}, err
		}
		evictions++
	}
}

// call POSTs body to c's /invocations with h under the per-hop timeout and
// reads a 2xx response into out, capped at the payload limit. Headers the
// client did not set are not sent. Nothing reads body once it returns.
func (iv *Invoker) call(ctx context.Context, c Container, body []byte, h hopHeaders, out *buffer) httpc.Result {
	req := httpc.Request{BaseURL: c.BaseURL(), Method: http.MethodPost, Path: "/invocations", Body: body}
	h.forward(&req.Header, false)
	return iv.do(ctx, &req, out)
}

// do is the one call into the HTTP client: req's 2xx body lands in out.
func (iv *Invoker) do(ctx context.Context, req *httpc.Request, out *buffer) httpc.Result {
	res := iv.client.Do(ctx, req, out.b[:0])
	out.b = res.Body
	return res
}

// forward sets the headers a container receives: those the client set,
// and for a multi-model invoke the Target-Model (https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html).
func (h hopHeaders) forward(dst *[httpc.MaxHeaders]httpc.Header, multiModel bool) {
	n := 0
	for _, f := range [...]httpc.Header{
		{Name: hdrContentType, Value: h.contentType},
		{Name: hdrAccept, Value: h.accept},
		{Name: hdrCustomAttributes, Value: h.customAttrs},
		{Name: hdrInferenceID, Value: h.inferenceID},
		{Name: wire.HeaderAdapterIdentifier, Value: h.adapter},
		{Name: wire.HeaderAdapterAlias, Value: h.adapter},
		{Name: wire.HeaderSessionID, Value: h.session},
	} {
		if f.Value != "" {
			dst[n] = f
			n++
		}
	}
	if multiModel && h.targetModel != "" {
		dst[n] = httpc.Header{Name: hdrTargetModel, Value: h.targetModel}
	}
}
