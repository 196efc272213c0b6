package capture

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/mce-run/mce/host/spec"
)

// seeded is a deterministic RandN for tests, safe for concurrent use.
func seeded(seed uint64) func(uint32) uint32 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func(n uint32) uint32 {
		mu.Lock()
		defer mu.Unlock()
		return r.Uint32N(n)
	}
}

// TestSamplingStatistics: of 10,000 calls, the share sampled is the
// configured percentage, within 4.5 standard deviations of the binomial
// (±180 at 20 %, ±225 at 50 %). The random source is seeded, so the counts
// are the same on every run; the bounds say what any good source gives.
func TestSamplingStatistics(t *testing.T) {
	const n = 10000
	for _, tt := range []struct {
		pct    int32
		lo, hi int
	}{
		{0, 0, 0}, {1, 55, 145}, {20, 1820, 2180}, {50, 4775, 5225}, {99, 9855, 9945}, {100, n, n},
	} {
		w := newWriter(t, newMemStore(), func(o *Options) { o.RandN = seeded(uint64(tt.pct) + 1) })
		c := mustCapturer(t, w, "ep", config(tt.pct, "s3://b/c"))
		got := 0
		for range n {
			if c.Sample().Active() {
				got++
			}
		}
		if got < tt.lo || got > tt.hi {
			t.Errorf("%d%%: %d of %d calls sampled, want %d–%d", tt.pct, got, n, tt.lo, tt.hi)
		}
	}
}

// TestSamplingDefaultSource: the default source (math/rand/v2's per-thread
// generator) samples 50 % of 10,000 calls within 6 standard deviations
// (±300): a failure is a one-in-a-billion event, not a flake.
func TestSamplingDefaultSource(t *testing.T) {
	w := newWriter(t, newMemStore(), nil)
	c := mustCapturer(t, w, "ep", config(50, "s3://b/c"))
	got := 0
	for range 10000 {
		if c.Sample().Active() {
			got++
		}
	}
	if got < 4700 || got > 5300 {
		t.Errorf("%d of 10000 calls sampled at 50%%", got)
	}
}

func TestNilCapturerSamplesNothing(t *testing.T) {
	var c *Capturer
	tk := c.Sample()
	if tk.Active() || tk.Input() || tk.Output() {
		t.Fatal("a nil capturer sampled a call")
	}
	tk.Record(Call{Input: []byte("x")}) // a no-op, not a panic
}

// TestUpdateLiveCapturer: the SDK's update_data_capture_config,
// disable_data_capture and enable_data_capture replace the configuration
// of a running endpoint. Records buffered before the change are written
// where their configuration said; calls after it follow the new one;
// Status follows.
func TestUpdateLiveCapturer(t *testing.T) {
	store := newMemStore()
	w := newWriter(t, store, func(o *Options) { o.FlushInterval = 1 << 40 }) // nothing written before Flush
	c := mustCapturer(t, w, "ep", config(100, "s3://b/first"))
	call := Call{Variant: "v", Input: []byte("1"), InputContentType: "text/csv", Output: []byte("2"), OutputContentType: "text/csv"}

	if st := c.Status(); st != (Status{EnableCapture: true, CaptureStatus: CaptureStarted, CurrentSamplingPercentage: 100, DestinationS3URI: "s3://b/first"}) {
		t.Errorf("Status = %+v", st)
	}
	c.Sample().Record(call)
	sampledBefore := c.Sample() // a call in flight across the update

	// The SDK's disable_data_capture: EnableCapture false, its defaults otherwise.
	off := config(20, "s3://sagemaker-us-east-1-123456789012/model-monitor/data-capture")
	off.EnableCapture = ptr(false)
	off.KMSKeyID = "alias/capture"
	if err := c.Update(off); err != nil {
		t.Fatal(err)
	}
	if st := c.Status(); st != (Status{EnableCapture: false, CaptureStatus: CaptureStopped, CurrentSamplingPercentage: 20,
		DestinationS3URI: "s3://sagemaker-us-east-1-123456789012/model-monitor/data-capture", KMSKeyID: "alias/capture"}) {
		t.Errorf("Status after disable = %+v", st)
	}
	for range 1000 {
		if c.Sample().Active() {
			t.Fatal("a call was sampled with capture disabled")
		}
	}
	sampledBefore.Record(call)

	on := config(100, "s3://b/second/")
	on.CaptureOptions = []spec.CaptureOption{{CaptureMode: spec.CaptureOutput}}
	if err := c.Update(on); err != nil {
		t.Fatal(err)
	}
	c.Sample().Record(call)
	// A configuration the capturer cannot carry out leaves the last one.
	bad := config(100, "s3://b/x/../y")
	if err := c.Update(bad); err == nil {
		t.Fatal("Update accepted a destination with a .. segment")
	} else if ce := (*ConfigError)(nil); !errors.As(err, &ce) {
		t.Fatalf("Update: %T %v, want a *ConfigError", err, err)
	}
	if st := c.Status(); st.DestinationS3URI != "s3://b/second/" || st.CaptureStatus != CaptureStarted {
		t.Errorf("Status after a refused update = %+v", st)
	}
	flush(t, w)

	var first, second int
	for _, u := range store.urls() {
		recs := decodeLines(t, store.objects[u])
		switch {
		case strings.HasPrefix(u, "s3://b/first/ep/v/"):
			first += len(recs)
			for _, r := range recs {
				if r.CaptureData.EndpointInput == nil || r.CaptureData.EndpointOutput == nil {
					t.Errorf("%s: the first configuration captured both sides", u)
				}
			}
		case strings.HasPrefix(u, "s3://b/second/ep/v/"):
			second += len(recs)
			if recs[0].CaptureData.EndpointInput != nil {
				t.Errorf("%s: the second configuration captures Output only", u)
			}
		default:
			t.Errorf("object %s", u)
		}
	}
	if first != 2 || second != 1 {
		t.Errorf("records: %d under the first destination, %d under the second; want 2 and 1", first, second)
	}
}

// TestNewCapturerRefuses: what the capturer cannot carry out is a
// *ConfigError, whatever the configuration's origin.
func TestNewCapturerRefuses(t *testing.T) {
	w := newWriter(t, newMemStore(), func(o *Options) {
		o.Allowed = func(u string) bool { return strings.HasPrefix(u, "s3://allowed/") }
	})
	good := config(10, "s3://allowed/capture")
	if _, err := w.NewCapturer("ep", good); err != nil {
		t.Fatalf("allowed destination: %v", err)
	}
	for name, mutate := range map[string]func(*spec.DataCaptureConfig){
		"no sampling percentage": func(c *spec.DataCaptureConfig) { c.InitialSamplingPercentage = nil },
		"101 %":                  func(c *spec.DataCaptureConfig) { c.InitialSamplingPercentage = ptr[int32](101) },
		"no capture options":     func(c *spec.DataCaptureConfig) { c.CaptureOptions = nil },
		"unknown mode":           func(c *spec.DataCaptureConfig) { c.CaptureOptions[0].CaptureMode = "REQUEST" },
		"https destination":      func(c *spec.DataCaptureConfig) { c.DestinationS3URI = "https://allowed.s3.amazonaws.com/c" },
		"not a URI":              func(c *spec.DataCaptureConfig) { c.DestinationS3URI = "allowed/capture" },
		"empty key segment":      func(c *spec.DataCaptureConfig) { c.DestinationS3URI = "s3://allowed//capture" },
		"outside the prefixes":   func(c *spec.DataCaptureConfig) { c.DestinationS3URI = "s3://allowed-not/capture" },
	} {
		cfg := config(10, "s3://allowed/capture")
		mutate(&cfg)
		var ce *ConfigError
		if _, err := w.NewCapturer("ep", cfg); !errors.As(err, &ce) {
			t.Errorf("%s: NewCapturer = %v, want a *ConfigError", name, err)
		}
	}
}

// TestConfigIsCopied: the capturer keeps its own copy of the
// configuration; Config returns another.
func TestConfigIsCopied(t *testing.T) {
	w := newWriter(t, newMemStore(), nil)
	cfg := config(10, "s3://b/c")
	c := mustCapturer(t, w, "ep", cfg)
	*cfg.InitialSamplingPercentage = 90
	cfg.CaptureContentTypeHeader.CSVContentTypes[0] = "text/plain"
	got := c.Config()
	if *got.InitialSamplingPercentage != 10 || got.CaptureContentTypeHeader.CSVContentTypes[0] != "text/csv" || c.Status().CurrentSamplingPercentage != 10 {
		t.Fatalf("the capturer follows its caller's later changes: %+v", got)
	}
	*got.InitialSamplingPercentage = 50
	if c.Status().CurrentSamplingPercentage != 10 {
		t.Fatal("Config returned the capturer's own copy")
	}
}
