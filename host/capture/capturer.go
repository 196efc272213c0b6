package capture

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/mce-run/mce/host/spec"
)

// Capturer samples and records one endpoint's calls by its current
// DataCaptureConfig. It is safe for concurrent use; a nil *Capturer samples
// nothing.
type Capturer struct {
	w        *Writer
	endpoint string
	pol      atomic.Pointer[policy]
	drops    sync.Map // variant → *dropCounters, looked up once per variant
}

// NewCapturer builds the capturer of endpoint (a SageMaker endpoint name)
// with cfg, which spec.CreateEndpointConfigInput's Validate has accepted.
// The error is a *ConfigError when cfg cannot be carried out (a destination
// outside Options.Allowed included).
func (w *Writer) NewCapturer(endpoint string, cfg spec.DataCaptureConfig) (*Capturer, error) {
	p, err := compile(cfg, w.opts.Allowed)
	if err != nil {
		return nil, err
	}
	c := &Capturer{w: w, endpoint: endpoint}
	c.pol.Store(p)
	return c, nil
}

// Update replaces the configuration of a live capturer, as UpdateEndpoint
// with a new endpoint configuration does (the SageMaker Python SDK's
// update_data_capture_config, enable_data_capture and disable_data_capture):
// calls sampled from now on follow cfg; records already buffered, and calls
// sampled before, keep the configuration they were sampled under (their
// destination and encodings) and are written as usual. On an error the
// configuration is unchanged.
func (c *Capturer) Update(cfg spec.DataCaptureConfig) error {
	p, err := compile(cfg, c.w.opts.Allowed)
	if err != nil {
		return err
	}
	c.pol.Store(p)
	return nil
}

// Ticket is one call's sampling decision: the zero Ticket captures nothing.
// It keeps the configuration the call was sampled under.
type Ticket struct {
	c *Capturer
	p *policy
}

// Sample decides whether this call is captured, without locks or
// allocation: it draws from a per-thread random source (math/rand/v2's
// runtime generator, unless Options.RandN replaces it) against the current
// sampling percentage.
func (c *Capturer) Sample() Ticket {
	if c == nil {
		return Ticket{}
	}
	p := c.pol.Load()
	if !p.enabled || p.pct == 0 || c.w.closed.Load() {
		return Ticket{}
	}
	if p.pct < 100 && c.w.randN(100) >= p.pct {
		return Ticket{}
	}
	return Ticket{c: c, p: p}
}

// Active reports whether the call is captured.
func (t Ticket) Active() bool { return t.c != nil }

// Input reports whether the request's body is captured (kept by the
// caller until Record).
func (t Ticket) Input() bool { return t.c != nil && t.p.input }

// Output reports whether the answer's body is captured.
func (t Ticket) Output() bool { return t.c != nil && t.p.output }

// Call is what a captured call hands to Record. The slices are copied:
// the caller may reuse them when Record returns.
type Call struct {
	// Variant is the production variant that answered.
	Variant string
	// InferenceID is the caller's X-Amzn-SageMaker-Inference-Id, if any.
	InferenceID string
	// Time is when the call arrived; zero means now.
	Time time.Time
	// Input and InputContentType are the request's body and Content-Type.
	Input            []byte
	InputContentType string
	// Output and OutputContentType are the answer's body and Content-Type.
	Output            []byte
	OutputContentType string
}

// pending is a record accepted into the buffer, not yet written.
type pending struct {
	pol                 *policy
	endpoint, variant   string
	inferenceID         string
	at                  time.Time
	hasInput, hasOutput bool
	input, output       []byte
	inType, outType     string
	size                int64 // bytes counted against Options.MaxBufferBytes
}

// recordOverhead is what a record costs beyond its payloads and strings:
// the pending value, the line's fixed text, its event ID.
const recordOverhead = 256

// Record hands a sampled call to the writer and returns at once: it copies
// the captured payloads into the buffer, or drops the record — counted in
// mce_data_capture_records_dropped_total and logged at most once per
// Options.DropLogInterval — when the buffer is full
// (Options.MaxBufferBytes), a payload is larger than
// Options.MaxPayloadBytes, or the writer is closing. It never blocks and
// never fails the call. A zero Ticket records nothing.
func (t Ticket) Record(call Call) {
	c, p := t.c, t.p
	if c == nil {
		return
	}
	w := c.w
	r := pending{pol: p, endpoint: c.endpoint, variant: call.Variant, inferenceID: call.InferenceID, at: call.Time,
		hasInput: p.input, hasOutput: p.output}
	var in, out []byte
	if p.input {
		in, r.inType = call.Input, call.InputContentType
	}
	if p.output {
		out, r.outType = call.Output, call.OutputContentType
	}
	if int64(len(in)) > w.opts.MaxPayloadBytes || int64(len(out)) > w.opts.MaxPayloadBytes {
		c.drop(call.Variant, reasonTooLarge)
		return
	}
	r.size = int64(len(in)+len(out)+len(r.inType)+len(r.outType)+len(r.variant)+len(r.inferenceID)) + recordOverhead

	w.senders.Add(1)
	defer w.senders.Add(-1)
	if w.closed.Load() {
		c.drop(call.Variant, reasonClosed)
		return
	}
	if w.used.Add(r.size) > w.opts.MaxBufferBytes {
		w.used.Add(-r.size)
		c.drop(call.Variant, reasonBufferFull)
		return
	}
	if r.at.IsZero() {
		r.at = w.opts.Now()
	}
	// One allocation for both payloads, not zeroed before the copy.
	var buf []byte
	if len(in)+len(out) > 0 {
		buf = append(append(make([]byte, 0, len(in)+len(out)), in...), out...)
	}
	r.input, r.output = buf[:len(in):len(in)], buf[len(in):]
	rp := new(pending)
	*rp = r
	ok, wake := w.queue.put(rp, w.opts.MaxQueuedRecords)
	if !ok {
		w.used.Add(-r.size)
		c.drop(call.Variant, reasonBufferFull)
		return
	}
	if wake {
		select {
		case w.signal <- struct{}{}:
		default: // the loop has been told already
		}
	}
}

// drop counts one record dropped on the call path.
func (c *Capturer) drop(variant string, reason dropReason) {
	d, ok := c.drops.Load(variant)
	if !ok {
		d, _ = c.drops.LoadOrStore(variant, c.w.metrics.dropCounters(c.endpoint, variant))
	}
	d.(*dropCounters)[reason].Inc()
	c.w.dropsSinceLog[reason].Add(1)
}

// Status is DescribeEndpoint's DataCaptureConfig
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DataCaptureConfigSummary.html).
type Status struct {
	EnableCapture bool `json:"EnableCapture"`
	// CaptureStatus is "Started" while calls are being captured: capture
	// is enabled and the writer is not closed; "Stopped" otherwise.
	CaptureStatus             string `json:"CaptureStatus"`
	CurrentSamplingPercentage int32  `json:"CurrentSamplingPercentage"`
	DestinationS3URI          string `json:"DestinationS3Uri"`
	KMSKeyID                  string `json:"KmsKeyId,omitempty"`
}

// CaptureStatus values.
const (
	CaptureStarted = "Started"
	CaptureStopped = "Stopped"
)

// Status is the capturer's configuration as DescribeEndpoint shows it.
func (c *Capturer) Status() Status {
	p := c.pol.Load()
	st := Status{EnableCapture: p.enabled, CaptureStatus: CaptureStopped, CurrentSamplingPercentage: int32(p.pct),
		DestinationS3URI: p.cfg.DestinationS3URI, KMSKeyID: p.cfg.KMSKeyID}
	if p.enabled && !c.w.closed.Load() {
		st.CaptureStatus = CaptureStarted
	}
	return st
}

// Config is a copy of the configuration the capturer follows now.
func (c *Capturer) Config() spec.DataCaptureConfig { return clone(c.pol.Load().cfg) }

// Check reports whether cfg could be carried out (NewCapturer would
// accept it), without building a capturer: host asks at
// CreateEndpointConfig, CreateEndpoint and UpdateEndpoint, so that a
// destination outside Options.Allowed is refused when it is named.
func (w *Writer) Check(cfg spec.DataCaptureConfig) error {
	_, err := compile(cfg, w.opts.Allowed)
	return err
}

// StatusOf is how DescribeEndpoint shows a configuration no capturer
// carries out (one mce could not build after a restart): as configured,
// with CaptureStatus Stopped.
func StatusOf(cfg spec.DataCaptureConfig) Status {
	st := Status{EnableCapture: cfg.EnableCapture == nil || *cfg.EnableCapture, CaptureStatus: CaptureStopped,
		DestinationS3URI: cfg.DestinationS3URI, KMSKeyID: cfg.KMSKeyID}
	if cfg.InitialSamplingPercentage != nil {
		st.CurrentSamplingPercentage = *cfg.InitialSamplingPercentage
	}
	return st
}
