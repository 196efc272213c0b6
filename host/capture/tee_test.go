package capture

import (
	"errors"
	"strings"
	"testing"

	"github.com/mce-run/mce/host/spec"
)

// TestTee: a streamed answer is captured as the parts the caller got, put
// together; one past the payload limit is dropped as too_large (and its
// parts are not kept); an input-only configuration keeps no part; an
// unsampled call's Tee is nil and does nothing.
func TestTee(t *testing.T) {
	store := newMemStore()
	w := newWriter(t, store, func(o *Options) { o.MaxPayloadBytes = 10 })
	c := mustCapturer(t, w, "ep", config(100, "s3://b/c"))

	x := c.Sample().Tee()
	for _, p := range []string{"ab", "cde", "fghij"} {
		x.Write([]byte(p))
	}
	x.Record(Call{Variant: "v", Input: []byte("in"), InputContentType: "text/csv", OutputContentType: "text/csv"})

	big := c.Sample().Tee()
	big.Write([]byte("0123456789"))
	big.Write([]byte("a"))
	if big.buf != nil {
		t.Errorf("a Tee past the limit keeps %d bytes", len(big.buf))
	}
	big.Write([]byte("b"))
	big.Record(Call{Variant: "v", Input: []byte("in")})

	in := config(100, "s3://b/c")
	in.CaptureOptions = []spec.CaptureOption{{CaptureMode: spec.CaptureInput}}
	ci := mustCapturer(t, w, "ep-in", in)
	xi := ci.Sample().Tee()
	xi.Write([]byte("answer"))
	if xi.buf != nil {
		t.Errorf("an input-only Tee kept %q", xi.buf)
	}
	xi.Record(Call{Variant: "v", Input: []byte("q"), InputContentType: "text/csv"})

	var none *Capturer
	var nx *Tee = none.Sample().Tee()
	if nx != nil {
		t.Fatal("an unsampled call has a Tee")
	}
	nx.Write([]byte("x"))
	nx.Record(Call{})

	flush(t, w)
	recs := store.records(t)
	if len(recs) != 2 {
		t.Fatalf("%d records written, want 2: %+v", len(recs), recs)
	}
	var gotOut, gotIn bool
	for _, r := range recs {
		switch {
		case r.CaptureData.EndpointOutput != nil:
			gotOut = r.CaptureData.EndpointOutput.Data == "abcdefghij" && r.CaptureData.EndpointInput.Data == "in"
		default:
			gotIn = r.CaptureData.EndpointInput != nil && r.CaptureData.EndpointInput.Data == "q"
		}
	}
	if !gotOut || !gotIn {
		t.Errorf("records %+v: want the streamed answer put together, and the input-only call", recs)
	}
	if n := dropped(w, "ep", "v", "too_large"); n != 1 {
		t.Errorf("too_large drops = %v, want 1", n)
	}
}

// TestCheckAndStatusOf: Check refuses what NewCapturer refuses (a
// destination outside Allowed) and accepts the rest; StatusOf shows a
// configuration as DescribeEndpoint would, Stopped.
func TestCheckAndStatusOf(t *testing.T) {
	w := newWriter(t, newMemStore(), func(o *Options) {
		o.Allowed = func(u string) bool { return strings.HasPrefix(u, "s3://ok/") }
	})
	if err := w.Check(config(20, "s3://ok/capture")); err != nil {
		t.Errorf("Check(inside) = %v", err)
	}
	var ce *ConfigError
	if err := w.Check(config(20, "s3://other/capture")); !errors.As(err, &ce) || !strings.Contains(ce.Message, "outside") {
		t.Errorf("Check(outside) = %v, want a *ConfigError saying it is outside", err)
	}
	cfg := config(35, "s3://ok/capture")
	cfg.EnableCapture, cfg.KMSKeyID = nil, "alias/k"
	want := Status{EnableCapture: true, CaptureStatus: CaptureStopped, CurrentSamplingPercentage: 35, DestinationS3URI: "s3://ok/capture", KMSKeyID: "alias/k"}
	if got := StatusOf(cfg); got != want {
		t.Errorf("StatusOf = %+v, want %+v", got, want)
	}
	cfg.EnableCapture = ptr(false)
	if got := StatusOf(cfg); got.EnableCapture {
		t.Errorf("StatusOf(disabled) = %+v", got)
	}
}
