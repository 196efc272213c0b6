package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
)

func csvCall(variant string, at time.Time, body string) Call {
	return Call{Variant: variant, Time: at, Input: []byte(body), InputContentType: "text/csv", Output: []byte("0.5"), OutputContentType: "text/csv"}
}

// TestTimePartitioning: records go under the UTC hour of their
// inferenceTime, one file per endpoint, variant and hour, named by its
// first record's minute, second and millisecond.
func TestTimePartitioning(t *testing.T) {
	store := newMemStore()
	clock := &fakeClock{t: time.Date(2025, 12, 31, 23, 59, 59, 500e6, time.UTC)}
	ids := 0
	w := newWriter(t, store, func(o *Options) {
		o.Now = clock.Now
		o.NewID = func() string { ids++; return fmt.Sprintf("id-%d", ids) }
		o.FlushInterval = 1 << 40
	})
	c := mustCapturer(t, w, "ep", config(100, "s3://b/capture/"))
	c.Sample().Record(csvCall("A", time.Time{}, "1")) // Time zero: the clock's now
	clock.Add(600 * time.Millisecond)                 // into the next hour, the next day, the next year
	c.Sample().Record(csvCall("A", time.Time{}, "2"))
	c.Sample().Record(csvCall("B", time.Time{}, "3"))
	c.Sample().Record(csvCall("A", clock.Now().Add(time.Minute), "4"))
	flush(t, w)

	got := store.urls()
	want := []string{
		"s3://b/capture/ep/A/2025/12/31/23/59-59-500-id-",
		"s3://b/capture/ep/A/2026/01/01/00/00-00-100-id-",
		"s3://b/capture/ep/B/2026/01/01/00/00-00-100-id-",
	}
	if len(got) != len(want) {
		t.Fatalf("objects %q", got)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) || !strings.HasSuffix(got[i], ".jsonl") {
			t.Errorf("object %d: %s, want %s….jsonl", i, got[i], want[i])
		}
	}
	var bodies []string
	for _, u := range got {
		for _, r := range decodeLines(t, store.objects[u]) {
			bodies = append(bodies, r.CaptureData.EndpointInput.Data+"@"+r.EventMetadata.InferenceTime)
		}
	}
	if s := strings.Join(bodies, " "); s != "1@2025-12-31T23:59:59Z 2@2026-01-01T00:00:00Z 4@2026-01-01T00:01:00Z 3@2026-01-01T00:00:00Z" {
		t.Errorf("records in files: %s", s)
	}
}

// TestFlushByAge: a file is written FlushInterval after its first record
// was taken, without Flush.
func TestFlushByAge(t *testing.T) {
	store := newMemStore()
	clock := &fakeClock{t: time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)}
	w := newWriter(t, store, func(o *Options) { o.Now = clock.Now; o.FlushInterval = time.Minute; o.TickInterval = time.Millisecond })
	c := mustCapturer(t, w, "ep", config(100, "s3://b/c"))
	c.Sample().Record(csvCall("v", time.Time{}, "1"))
	waitFor(t, "the record to be taken", func() bool { return testutil.ToFloat64(w.metrics.captured.WithLabelValues("ep", "v")) == 1 })
	time.Sleep(20 * time.Millisecond) // many ticks, the clock still
	if n := len(store.urls()); n != 0 {
		t.Fatalf("%d files written before FlushInterval passed", n)
	}
	clock.Add(time.Minute)
	waitFor(t, "the file to be written", func() bool { return len(store.urls()) == 1 })
}

// TestFlushBySize: a file is written once its records reach FlushBytes.
func TestFlushBySize(t *testing.T) {
	store := newMemStore()
	w := newWriter(t, store, func(o *Options) { o.FlushBytes = 4096; o.FlushInterval = 1 << 40 })
	c := mustCapturer(t, w, "ep", config(100, "s3://b/c"))
	body := strings.Repeat("x", 1000)
	for range 12 { // ~1.3 KB each with the overhead: three files of three, the rest waiting
		c.Sample().Record(csvCall("v", time.Time{}, body))
	}
	waitFor(t, "three full files", func() bool { return len(store.urls()) == 3 })
	for _, u := range store.urls() {
		if n := len(decodeLines(t, store.objects[u])); n != 3 {
			t.Errorf("%s holds %d records, want 3", u, n)
		}
	}
	flush(t, w)
	if n := len(store.records(t)); n != 12 {
		t.Errorf("%d records written, want 12", n)
	}
}

// TestBufferFullNeverBlocks: with a store that never answers, the buffer
// fills and further sampled calls are dropped — counted, logged once per
// interval — while Record returns at once: 20,000 calls complete.
func TestBufferFullNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	store := newMemStore()
	store.put = func(ctx context.Context, _ string) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var logs lockedBuffer
	w := newWriter(t, store, func(o *Options) {
		o.MaxBufferBytes = 64 << 10
		o.FlushBytes = 8 << 10
		o.FlushInterval = 1 << 40
		o.UploadTimeout = time.Hour
		o.DropLogInterval = time.Hour // the first drops are logged; the rest wait an hour
		o.Log = zerolog.New(&logs)
	})
	t.Cleanup(func() { close(release) })
	c := mustCapturer(t, w, "ep", config(100, "s3://b/c"))
	body := strings.Repeat("y", 900)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20000 {
			c.Sample().Record(csvCall("v", time.Time{}, body))
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Record blocked on a full buffer")
	}
	if used := w.used.Load(); used > 64<<10 {
		t.Errorf("buffered %d bytes, more than the 64 KiB limit", used)
	}
	drops := dropped(w, "ep", "v", "buffer_full")
	if drops < 19900 {
		t.Errorf("%v records dropped as buffer_full, want nearly all of 20,000", drops)
	}
	waitFor(t, "the drop log line", func() bool { return strings.Contains(logs.String(), `"event":"data_capture_dropped"`) })
	// The buffered records are all counted: taken + dropped = offered,
	// once the queue is drained.
	waitFor(t, "the queue to drain", func() bool {
		return testutil.ToFloat64(w.metrics.captured.WithLabelValues("ep", "v"))+drops == 20000
	})
	if n := strings.Count(logs.String(), `"event":"data_capture_dropped"`); n != 1 {
		t.Errorf("%d drop lines for %v drops, want 1 (rate-limited):\n%s", n, drops, logs.String())
	}
}

// TestCloseWritesEverything: Close writes every buffered record.
func TestCloseWritesEverything(t *testing.T) {
	store := newMemStore()
	w, err := New(Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	c := mustCapturer(t, w, "ep", config(100, "s3://b/c"))
	for i := range 1000 {
		c.Sample().Record(csvCall(fmt.Sprintf("v%d", i%3), time.Time{}, fmt.Sprint(i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	seen := map[string]bool{}
	for _, r := range store.records(t) {
		seen[r.CaptureData.EndpointInput.Data] = true
	}
	if len(seen) != 1000 {
		t.Fatalf("%d distinct records written, want 1000", len(seen))
	}
	if w.used.Load() != 0 {
		t.Errorf("%d bytes still counted as buffered", w.used.Load())
	}
	// Closed: nothing is sampled, a ticket taken before is dropped as closed.
	if c.Sample().Active() || c.Status().CaptureStatus != CaptureStopped {
		t.Error("a closed writer still samples")
	}
	Ticket{c: c, p: c.pol.Load()}.Record(csvCall("v0", time.Time{}, "late"))
	if d := dropped(w, "ep", "v0", "closed"); d != 1 {
		t.Errorf("closed drops = %v, want 1", d)
	}
	if err := w.Flush(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close = %v", err)
	}
	if err := w.Close(ctx); err != nil {
		t.Errorf("a second Close = %v", err)
	}
}

// TestRetries: a store that fails gets the same file again, with backoff,
// until it takes it; no record is lost or written twice.
func TestRetries(t *testing.T) {
	store := newMemStore()
	var fails atomic.Int32
	fails.Store(3)
	store.put = func(context.Context, string) error {
		if fails.Add(-1) >= 0 {
			return errors.New("503 SlowDown")
		}
		return nil
	}
	var logs lockedBuffer
	w := newWriter(t, store, func(o *Options) { o.Log = zerolog.New(&logs); o.DropLogInterval = time.Millisecond })
	c := mustCapturer(t, w, "ep", config(100, "s3://b/c"))
	for i := range 10 {
		c.Sample().Record(csvCall("v", time.Time{}, fmt.Sprint(i)))
	}
	flush(t, w)
	if n := len(store.records(t)); n != 10 || len(store.urls()) != 1 {
		t.Errorf("%d records in %d files, want 10 in 1", n, len(store.urls()))
	}
	if store.attempts != 4 {
		t.Errorf("%d attempts, want 4", store.attempts)
	}
	if e := testutil.ToFloat64(w.metrics.uploadErrors.WithLabelValues("ep", "v")); e != 3 {
		t.Errorf("upload errors = %v, want 3", e)
	}
	if w := testutil.ToFloat64(w.metrics.written.WithLabelValues("ep", "v")); w != 10 {
		t.Errorf("records written = %v", w)
	}
	waitFor(t, "the failure log line", func() bool { return strings.Contains(logs.String(), "503 SlowDown") })
}

// TestCloseDeadline: with the store down, Close returns at its deadline;
// the records it could not write are counted and logged as lost.
func TestCloseDeadline(t *testing.T) {
	store := newMemStore()
	store.put = func(context.Context, string) error { return errors.New("connection refused") }
	var logs lockedBuffer
	w, err := New(Options{Store: store, RetryMin: 5 * time.Millisecond, Log: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	c := mustCapturer(t, w, "ep", config(100, "s3://b/c"))
	for i := range 25 {
		c.Sample().Record(csvCall("v", time.Time{}, fmt.Sprint(i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := w.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want the deadline", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Close took %v past a 300 ms deadline", d)
	}
	if d := dropped(w, "ep", "v", "shutdown"); d != 25 {
		t.Errorf("shutdown drops = %v, want 25", d)
	}
	if !strings.Contains(logs.String(), `"event":"data_capture_lost","records":25`) {
		t.Errorf("no loss line: %s", logs.String())
	}
	if store.attempts < 2 {
		t.Errorf("%d attempts in 300 ms: Close should retry at RetryMin", store.attempts)
	}
}

// TestTooLarge: a payload over MaxPayloadBytes is not captured.
func TestTooLarge(t *testing.T) {
	store := newMemStore()
	w := newWriter(t, store, func(o *Options) { o.MaxPayloadBytes = 1000 })
	c := mustCapturer(t, w, "ep", config(100, "s3://b/c"))
	c.Sample().Record(csvCall("v", time.Time{}, strings.Repeat("z", 1001)))
	c.Sample().Record(csvCall("v", time.Time{}, strings.Repeat("z", 1000)))
	flush(t, w)
	if n := len(store.records(t)); n != 1 {
		t.Errorf("%d records written, want 1", n)
	}
	if d := dropped(w, "ep", "v", "too_large"); d != 1 {
		t.Errorf("too_large drops = %v", d)
	}
}

// TestRecordCopies: Record copies the payloads; the caller may reuse its
// buffers at once.
func TestRecordCopies(t *testing.T) {
	store := newMemStore()
	w := newWriter(t, store, nil)
	c := mustCapturer(t, w, "ep", config(100, "s3://b/c"))
	in, out := []byte("1,2,3"), []byte("0.9")
	c.Sample().Record(Call{Variant: "v", Input: in, InputContentType: "text/csv", Output: out, OutputContentType: "text/csv"})
	copy(in, "9,9,9")
	copy(out, "0.1")
	flush(t, w)
	r := store.records(t)[0]
	if r.CaptureData.EndpointInput.Data != "1,2,3" || r.CaptureData.EndpointOutput.Data != "0.9" {
		t.Errorf("record follows the caller's buffers: %+v", r.CaptureData)
	}
}

// TestMetricsRegister: the writer registers as one collector, and its
// series are named as mce's others.
func TestMetricsRegister(t *testing.T) {
	w := newWriter(t, newMemStore(), nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(w)
	c := mustCapturer(t, w, "ep", config(100, "s3://b/c"))
	c.Sample().Record(csvCall("v", time.Time{}, "1"))
	flush(t, w)
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Errorf("%d series gathered", n)
	}
	want := `
# HELP mce_data_capture_records_written_total Captured records written to S3.
# TYPE mce_data_capture_records_written_total counter
mce_data_capture_records_written_total{endpoint="ep",variant="v"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mce_data_capture_records_written_total"); err != nil {
		t.Error(err)
	}
	w.ForgetEndpoint("ep")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(""), "mce_data_capture_records_written_total"); err != nil {
		t.Error(err)
	}
}

func TestOptionsRefused(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("New without a Store")
	}
	if _, err := New(Options{Store: newMemStore(), MaxBufferBytes: -1}); err == nil {
		t.Error("New with a negative limit")
	}
}

// lockedBuffer is a log buffer shared between the writer and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestNothingLostSilently: calls recording from many goroutines while the
// configuration changes and the writer closes; every record offered is
// either written or counted as dropped, and every record written is in a
// file exactly once.
func TestNothingLostSilently(t *testing.T) {
	store := newMemStore()
	w, err := New(Options{Store: store, MaxBufferBytes: 256 << 10, FlushBytes: 16 << 10, TickInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := mustCapturer(t, w, "ep", config(100, "s3://b/one"))
	var offered atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if tk := c.Sample(); tk.Active() {
					offered.Add(1)
					tk.Record(csvCall(fmt.Sprintf("v%d", g%2), time.Time{}, fmt.Sprintf("%d-%d", g, i)))
				}
			}
		}()
	}
	for i := range 20 {
		cfg := config(int32(50+i), fmt.Sprintf("s3://b/dest-%d", i%3))
		if err := c.Update(cfg); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil { // the calls go on while it closes
		t.Fatalf("Close: %v", err)
	}
	close(stop)
	wg.Wait()

	var written, drops float64
	for _, v := range []string{"v0", "v1"} {
		written += testutil.ToFloat64(w.metrics.written.WithLabelValues("ep", v))
		for _, r := range reasonNames {
			drops += dropped(w, "ep", v, r)
		}
	}
	if written+drops != float64(offered.Load()) || written == 0 {
		t.Errorf("offered %d, written %v, dropped %v", offered.Load(), written, drops)
	}
	seen := map[string]bool{}
	for _, r := range store.records(t) {
		if seen[r.CaptureData.EndpointInput.Data] {
			t.Errorf("record %s written twice", r.CaptureData.EndpointInput.Data)
		}
		seen[r.CaptureData.EndpointInput.Data] = true
	}
	if float64(len(seen)) != written {
		t.Errorf("%d records in files, %v counted written", len(seen), written)
	}
	if w.used.Load() != 0 {
		t.Errorf("%d bytes still counted as buffered", w.used.Load())
	}
}
