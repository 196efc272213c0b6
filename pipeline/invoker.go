package pipeline

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/mce-run/mce/pipeline/httpc"
)

// Defaults for Options.
const (
	// DefaultTimeout is how long one container may take to answer: SageMaker
	// requires containers to respond within 60 s (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html, https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html).
	DefaultTimeout = 60 * time.Second
	// DefaultMaxPayload is the largest body accepted from a container, the
	// runtime's BodyBlob maximum of 6 MiB (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html).
	DefaultMaxPayload = 6291456
	// DefaultDialTimeout bounds connecting to a container; SageMaker expects
	// containers to accept connections within 250 ms (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html).
	DefaultDialTimeout = time.Second
)

// Observer receives one observation per container call, for ContainerLatency
// and per-container Invocations / Invocation4XXErrors / Invocation5XXErrors
// (https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html). status is the container's HTTP status, 0 when it gave
// none; err is nil for a successful call, else the error the call produced
// (a *ModelError, or the caller's context error). It is called synchronously
// on the invocation path, concurrently from many invocations: it must be safe
// for concurrent use and fast.
type Observer interface {
	ObserveContainer(endpoint, variant, container string, d time.Duration, status int, err error)
}

// Options configure an Invoker. The zero value is usable: every zero field
// takes its default.
type Options struct {
	// Timeout bounds each container call (connect, send, answer, body),
	// derived from the invocation's context. Default DefaultTimeout.
	Timeout time.Duration
	// MaxPayload caps every body read from a container, intermediate or
	// final, and the request body accepted. Default DefaultMaxPayload.
	MaxPayload int
	// DialTimeout bounds establishing a connection. Default
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// Observer, if not nil, is told about every container call.
	Observer Observer
}

// Request is one invocation as the host parsed it (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html). Body
// is not modified, and not referenced once Invoke returns.
type Request struct {
	Body                    []byte
	ContentType             string
	Accept                  string
	CustomAttributes        string
	TargetContainerHostname string
	TargetVariant           string
	InferenceID             string
	// TargetModel names the model a MultiModel container serves the call
	// with (X-Amzn-SageMaker-Target-Model); required when the chain has one.
	TargetModel string
	// Adapter names the adapter inference component the call is for: each
	// container receives it as X-Amzn-SageMaker-Adapter-Identifier (and
	// -Alias), as SageMaker's LoRA adapter API has it.
	Adapter string
	// SessionID is the stateful session the call belongs to
	// (X-Amzn-SageMaker-Session-Id: NEW_SESSION or an id), passed to
	// every container.
	SessionID string
	// SessionInstance, when not empty, pins the call to the instance whose
	// Key it is (the one that opened SessionID); the call then needs
	// TargetVariant set to that instance's variant. An instance no longer
	// there, or not ready, is a *SessionGoneError.
	SessionInstance string
	// PrefixAwareID is the PrefixAwareId routing hint, used by variants
	// whose strategy is PrefixAware.
	PrefixAwareID string
}

// Response is a successful invocation (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html). Body lives in a
// pooled buffer: call Release once Body is no longer needed (after writing
// it to the client), and do not touch Body afterwards. A Response is for one
// goroutine.
type Response struct {
	Body []byte
	// ContentType is the last container's response Content-Type ("" when it
	// set none).
	ContentType string
	// CustomAttributes is the last container's
	// X-Amzn-SageMaker-Custom-Attributes, "" when it set none.
	CustomAttributes string
	// NewSessionID and ClosedSessionID are the last container's
	// X-Amzn-SageMaker-New-Session-Id and -Closed-Session-Id, "" when it
	// set none.
	NewSessionID, ClosedSessionID string
	// Instance is the Key of the instance that served the call.
	Instance string
	// Variant is the production variant that served the call
	// (x-Amzn-Invoked-Production-Variant).
	Variant string
	// Container is the hostname of the container that produced Body: the
	// target of a Direct call, the last container of a Serial one.
	Container string
	// ModelLatency is the time spent inside container calls, summed over the
	// chain (ModelLatency, https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html).
	ModelLatency time.Duration

	buf  *buffer
	pool *sync.Pool
}

// Release returns Body's buffer to the pool. It is safe to call on a nil
// Response and more than once.
func (r *Response) Release() {
	if r == nil || r.buf == nil {
		return
	}
	r.pool.Put(r.buf)
	r.buf, r.Body = nil, nil
}

// Invoker sends invocations to containers, through an HTTP client
// (package httpc) that keeps a pool of keep-alive HTTP/1.1 connections per
// container base URL, and pools body buffers. It is safe for concurrent
// use; create one per process with NewInvoker.
type Invoker struct {
	timeout    time.Duration
	maxPayload int
	obs        Observer
	client     *httpc.Client
	bufs       sync.Pool
}

// NewInvoker returns an Invoker configured by o (zero fields take defaults).
func NewInvoker(o Options) *Invoker {
	iv := &Invoker{
		timeout:    o.Timeout,
		maxPayload: o.MaxPayload,
		obs:        o.Observer,
	}
	dialTimeout := o.DialTimeout
	if iv.timeout <= 0 {
		iv.timeout = DefaultTimeout
	}
	if dialTimeout <= 0 {
		dialTimeout = DefaultDialTimeout
	}
	if iv.maxPayload <= 0 {
		iv.maxPayload = DefaultMaxPayload
	}
	iv.client = httpc.New(httpc.Options{Timeout: iv.timeout, DialTimeout: dialTimeout, MaxBody: iv.maxPayload})
	iv.bufs.New = func() any { return &buffer{b: make([]byte, 0, minBuffer)} }
	return iv
}

// Forget drops the connection pool of the container at baseURL (it was
// stopped or replaced) and closes its idle connections. Calls in flight to
// it finish normally; their connections are closed afterwards. Safe for
// concurrent use.
func (iv *Invoker) Forget(baseURL string) { iv.client.Forget(baseURL) }

// Close closes the idle connections of every container and forgets them.
// Calls in flight finish normally, and the Invoker stays usable: later calls
// dial again. Safe for concurrent use.
func (iv *Invoker) Close() { iv.client.Close() }

// buffer is a pooled body buffer. Pools hold *buffer so that Get and Put do
// not allocate.
type buffer struct{ b []byte }

// minBuffer is the capacity a fresh pooled buffer starts with.
const minBuffer = 4 << 10

func (iv *Invoker) getBuffer() *buffer {
	b := iv.bufs.Get().(*buffer)
	b.b = b.b[:0]
	return b
}

func (iv *Invoker) putBuffer(b *buffer) {
	if b != nil {
		iv.bufs.Put(b)
	}
}

// Invoke routes req through r: it picks the variant and the instance, then
// calls the target container (Direct) or every container in order (Serial),
// as described in the package documentation. Errors are *ValidationError,
// *UnavailableError, *ModelError, or ctx's error (wrapped) when the caller
// went away. On success the caller must Release the Response. A Direct call
// to a variant that has no instances at all is an UnavailableError even when
// the hostname is unknown, since no container set is there to check it
// against.
func (iv *Invoker) Invoke(ctx context.Context, r *Route, req *Request) (*Response, error) {
	return iv.invoke(ctx, r, req, nil)
}

// invoke is Invoke, with the last container's answer streamed to sink when
// sink is not nil (InvokeStream).
func (iv *Invoker) invoke(ctx context.Context, r *Route, req *Request, sink Sink) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("pipeline: invoke endpoint %q: %w", r.Endpoint, err)
	}
	direct := r.Mode == Direct
	host := req.TargetContainerHostname
	switch {
	case direct && host == "":
		return nil, &ValidationError{Endpoint: r.Endpoint, Message: "Endpoint " + r.Endpoint +
			" is in Direct invocation mode; the request must name a container with TargetContainerHostname."}
	case !direct && host != "":
		return nil, &ValidationError{Endpoint: r.Endpoint, Message: "Endpoint " + r.Endpoint +
			" is not in Direct invocation mode; TargetContainerHostname is accepted only by endpoints whose InferenceExecutionConfig Mode is Direct."}
	case len(req.Body) > iv.maxPayload:
		return nil, &ValidationError{Endpoint: r.Endpoint, Message: "Request payload of " +
			strconv.Itoa(len(req.Body)) + " bytes exceeds the maximum of " + strconv.Itoa(iv.maxPayload) + " bytes."}
	}
	v, err := r.pickVariant(req.TargetVariant)
	if err != nil {
		return nil, err
	}
	return iv.callVariant(ctx, r, v, req, sink)
}

// callVariant is invoke once the variant is chosen: it picks v's instance
// and calls its containers. A shadow copy (shadow.go) comes in here.
func (iv *Invoker) callVariant(ctx context.Context, r *Route, v *Variant, req *Request, sink Sink) (*Response, error) {
	direct := r.Mode == Direct
	host := req.TargetContainerHostname
	insts := v.Instances()
	var inst *Instance
	var idx int
	var known bool
	switch {
	case req.SessionInstance != "":
		return iv.callPinned(ctx, r, v, insts, req, sink)
	case v.Strategy() == PrefixAware:
		inst, idx, known = v.choosePrefix(insts, direct, host, req)
	default:
		inst, idx, known = choose(insts, direct, host, nil, v.Strategy() == Random)
	}
	if inst == nil {
		if !known && len(insts) > 0 {
			return nil, &ValidationError{Endpoint: r.Endpoint, Message: "Container hostname " + host +
				" is not a container of endpoint " + r.Endpoint + " (variant " + v.name + ")."}
		}
		msg := "No instance of variant " + v.name + " of endpoint " + r.Endpoint + " is ready"
		if direct {
			msg += " to serve container " + host
		}
		return nil, &UnavailableError{Endpoint: r.Endpoint, Variant: v.name, Container: hostIf(direct, host), Message: msg + "."}
	}
	return iv.run(ctx, r, v, insts, inst, idx, req, sink)
}

// run calls the containers of inst: only idx for Direct (idx ≥ 0), all in
// order for Serial (idx < 0). With a sink, the last container's answer is
// streamed to it.
func (iv *Invoker) run(ctx context.Context, r *Route, v *Variant, insts []*Instance, inst *Instance, idx int, req *Request, sink Sink) (*Response, error) {
	direct := idx >= 0
	inst.outstanding.Add(1)
	defer func() { inst.outstanding.Add(-1) }() // inst may change on retry

	lo, hi := 0, len(inst.containers)-1
	if direct {
		lo, hi = idx, idx
	}
	in := req.Body
	var held *buffer // the buffer behind in, once in is a container's output
	h := hopHeaders{contentType: req.ContentType, customAttrs: req.CustomAttributes, inferenceID: req.InferenceID, targetModel: req.TargetModel, adapter: req.Adapter, session: req.SessionID}
	var latency time.Duration
	var last httpc.Result
	retried := false
	for k := lo; k <= hi; {
		c := inst.containers[k]
		h.accept = ""
		if k == hi {
			h.accept = req.Accept
		}
		out := iv.getBuffer()
		host := inst.hosts[k]
		var res httpc.Result
		var err error
		var ss *streamSink
		if sink != nil && k == hi {
			ss = &streamSink{sink: sink, head: StreamHead{Variant: v.name, Container: host}}
			res, err = iv.hopStream(ctx, c, in, h, out, ss)
		} else {
			res, err = iv.hop(ctx, c, in, h, out)
		}
		if err != nil { // a multi-model container could not get its model
			iv.putBuffer(out)
			iv.putBuffer(held)
			return nil, err // typed by the model manager; the host words it for the client
		}

		if (res.Outcome == httpc.DialFailed || res.Outcome == httpc.Broken) && (ss == nil || ss.werr == nil) {
			inst.suspect(time.Now())
		}
		if res.Outcome == httpc.DialFailed && !retried && req.SessionInstance == "" { // a session's call stays on its instance
			// Instances of one variant share a container set; the length
			// check only guards a chain against a malformed one.
			if alt, altIdx, _ := choose(insts, direct, host, inst, v.Strategy() == Random); alt != nil && (direct || len(alt.containers) == len(inst.containers)) {
				iv.observe(r, v, host, res, connectError(r.Endpoint, v.name, host, "could not connect to", res.Err))
				iv.putBuffer(out)
				retried = true
				alt.outstanding.Add(1)
				inst.outstanding.Add(-1)
				inst = alt
				if direct {
					k, hi = altIdx, altIdx
				}
				continue
			}
		}
		latency += res.Elapsed
		if res.Outcome != httpc.OK {
			iv.putBuffer(out)
			iv.putBuffer(held)
			next := ""
			if k < hi {
				next = inst.hosts[k+1]
			}
			var err error
			if ss.begun() {
				err = iv.streamError(r, v, host, res, ss)
			} else {
				err = iv.hopError(r, v, host, next, res)
			}
			iv.observe(r, v, host, res, err)
			if res.Outcome == httpc.Canceled {
				return nil, fmt.Errorf("pipeline: invoke endpoint %q, container %q: %w", r.Endpoint, host, err)
			}
			return nil, err
		}
		iv.observe(r, v, host, res, nil)
		iv.putBuffer(held) // nothing reads it once call returned
		held, in = out, out.b
		h.contentType = res.ContentType
		last = res
		k++
	}
	return &Response{
		Body:             held.b,
		ContentType:      last.ContentType,
		CustomAttributes: last.CustomAttributes,
		NewSessionID:     last.NewSessionID,
		ClosedSessionID:  last.ClosedSessionID,
		Instance:         inst.key,
		Variant:          v.name,
		Container:        inst.hosts[hi],
		ModelLatency:     latency,
		buf:              held,
		pool:             &iv.bufs,
	}, nil
}

// hopError turns a failed call of container host into the error Invoke
// returns; next is the following container of a chain, "" at the end.
func (iv *Invoker) hopError(r *Route, v *Variant, host, next string, res httpc.Result) error {
	switch res.Outcome {
	case httpc.Status:
		return receivedError(r.Endpoint, v.name, host, res.Status, res.ErrBody, nil)
	case httpc.TooBig:
		size := res.Length
		if size <= int64(iv.maxPayload) {
			size = -1
		}
		return oversizeError(r.Endpoint, v.name, host, next, res.Status, size, iv.maxPayload)
	case httpc.Timeout:
		return timeoutError(r.Endpoint, v.name, host, res.Err)
	case httpc.Canceled:
		return res.Err
	case httpc.DialFailed:
		return connectError(r.Endpoint, v.name, host, "could not connect to", res.Err)
	default:
		return connectError(r.Endpoint, v.name, host, "got no valid response from", res.Err)
	}
}

func (iv *Invoker) observe(r *Route, v *Variant, host string, res httpc.Result, err error) {
	if iv.obs != nil {
		iv.obs.ObserveContainer(r.Endpoint, v.name, host, res.Elapsed, res.Status, err)
	}
}

func hostIf(ok bool, host string) string {
	if ok {
		return host
	}
	return ""
}
