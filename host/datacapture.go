package host

import (
	"cmp"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/async"
	"github.com/mce-run/mce/host/capture"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// captures wires data capture (host/capture, docs/data-capture.md) into
// the endpoints: each endpoint with a DataCaptureConfig holds a Capturer
// of Config.Capture (Endpoint.capturer), built when it is created or comes
// back after a restart, updated by UpdateEndpoint once the new
// configuration serves, dropped when it is deleted. The invocation paths
// ask it for a Ticket and record what they answered; the asynchronous
// queue hands its answers over (asyncPeer.Answered).
type captures struct {
	w   *capture.Writer // nil: DataCaptureConfig is refused
	log zerolog.Logger
}

// check refuses, as a ValidationException, a DataCaptureConfig mce cannot
// carry out: any, without a writer; one whose destination lies outside
// the S3 prefixes mce writes to (mce serve --async-output-prefix).
func (c captures) check(cfg *spec.DataCaptureConfig) error {
	switch {
	case cfg == nil:
		return nil
	case c.w == nil:
		return apierr.ValidationException("DataCaptureConfig is not supported by this mce: it has no S3 store to write captured data to.")
	}
	if err := c.w.Check(*cfg); err != nil {
		return apierr.ValidationException("%s", err.Error())
	}
	return nil
}

// attach makes e capture by cfg from its next call on (nil: not at all).
// Records already taken are written where their configuration said.
func (c captures) attach(e *Endpoint, cfg *spec.DataCaptureConfig) {
	cur := e.capturer.Load()
	if cfg == nil || c.w == nil {
		e.capturer.Store(nil)
		return
	}
	var err error
	if cur != nil {
		err = cur.Update(*cfg)
	} else if cur, err = c.w.NewCapturer(e.name, *cfg); err == nil {
		e.capturer.Store(cur)
	}
	if err != nil { // checked when named; here only after a restart with narrower prefixes
		c.log.Error().Str("endpoint", e.name).Err(err).Msg("data capture stopped: its configuration cannot be carried out")
		e.capturer.Store(nil)
	}
}

// status is DescribeEndpoint's DataCaptureConfig for e running cfg.
func (c captures) status(e *Endpoint, cfg *spec.DataCaptureConfig) *capture.Status {
	if cfg == nil {
		return nil
	}
	st := capture.StatusOf(*cfg)
	if cp := e.capturer.Load(); cp != nil {
		st = cp.Status()
	}
	return &st
}

// drop ends e's capture when it is deleted; what it buffered is written.
func (c captures) drop(e *Endpoint) {
	e.capturer.Store(nil)
	if c.w != nil {
		c.w.ForgetEndpoint(e.name)
	}
}

// Answered records an asynchronous request that answered, if its endpoint
// samples it: at the time it was accepted, with the InferenceId
// InvokeEndpointAsync returned.
func (p asyncPeer) Answered(rec async.Record, input []byte, inputType string, resp *pipeline.Response) {
	if e := p.s.reg.get(rec.Endpoint); e != nil {
		e.capturer.Load().Sample().Record(capture.Call{Variant: resp.Variant, InferenceID: rec.InferenceID, Time: rec.Accepted,
			Input: input, InputContentType: inputType, Output: resp.Body, OutputContentType: cmp.Or(resp.ContentType, defaultContentType)})
	}
}

// captured records a synchronous call that answered, when t sampled it.
func captured(t capture.Ticket, variant, inferenceID string, start time.Time, req *pipeline.Request, out []byte, outType string) {
	if t.Active() {
		t.Record(capture.Call{Variant: variant, InferenceID: inferenceID, Time: start, Input: req.Body, InputContentType: req.ContentType,
			Output: out, OutputContentType: cmp.Or(outType, defaultContentType)})
	}
}

// captureShadow records a shadow variant's answered copy to e under the
// shadow's VariantName, when its endpoint samples it, as SageMaker captures
// shadow variants beside production ones. A streamed copy's answer was
// read and dropped as it came, so it is not captured.
func captureShadow(e *Endpoint, c *pipeline.ShadowCall) {
	if e == nil || c.Streamed || c.Response == nil {
		return
	}
	captured(e.capturer.Load().Sample(), c.Variant, c.Request.InferenceID, c.Start, c.Request, c.Response.Body, c.Response.ContentType)
}
