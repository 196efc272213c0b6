package capture

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mce-run/mce/host/spec"
)

// memStore is an in-memory Store; put, when set, decides each attempt
// first (an error fails it; it may block on ctx).
type memStore struct {
	mu       sync.Mutex
	objects  map[string][]byte
	types    map[string]string
	attempts int
	put      func(ctx context.Context, url string) error
}

func newMemStore() *memStore {
	return &memStore{objects: map[string][]byte{}, types: map[string]string{}}
}

func (s *memStore) PutObject(ctx context.Context, url string, body []byte, contentType string, _ map[string]string) error {
	s.mu.Lock()
	s.attempts++
	put := s.put
	s.mu.Unlock()
	if put != nil {
		if err := put(ctx, url); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[url] = bytes.Clone(body)
	s.types[url] = contentType
	return nil
}

var _ Store = (*memStore)(nil)

// urls lists the objects written, sorted.
func (s *memStore) urls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var u []string
	for k := range s.objects {
		u = append(u, k)
	}
	sort.Strings(u)
	return u
}

// records decodes every line of every object written, in URL order.
func (s *memStore) records(t *testing.T) []Record {
	t.Helper()
	var recs []Record
	for _, u := range s.urls() {
		s.mu.Lock()
		body := s.objects[u]
		s.mu.Unlock()
		recs = append(recs, decodeLines(t, body)...)
	}
	return recs
}

func decodeLines(t *testing.T, body []byte) []Record {
	t.Helper()
	var recs []Record
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r Record
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(body) > 0 && !bytes.HasSuffix(body, []byte("\n")) {
		t.Fatalf("object does not end with a newline: %q", body)
	}
	return recs
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newWriter starts a writer on store with test-friendly options (mutate
// adjusts them) and closes it at cleanup.
func newWriter(t testing.TB, store Store, mutate func(*Options)) *Writer {
	t.Helper()
	opts := Options{Store: store, RetryMin: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond, TickInterval: 5 * time.Millisecond}
	if mutate != nil {
		mutate(&opts)
	}
	w, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = w.Close(ctx)
	})
	return w
}

// config is a DataCaptureConfig with the SageMaker Python SDK's defaults:
// both modes, text/csv as CSV, application/json as JSON.
func config(pct int32, dest string) spec.DataCaptureConfig {
	return spec.DataCaptureConfig{
		EnableCapture: ptr(true), InitialSamplingPercentage: ptr(pct), DestinationS3URI: dest,
		CaptureOptions: []spec.CaptureOption{{CaptureMode: spec.CaptureInput}, {CaptureMode: spec.CaptureOutput}},
		CaptureContentTypeHeader: &spec.CaptureContentTypeHeader{
			CSVContentTypes: []string{"text/csv"}, JSONContentTypes: []string{"application/json"}},
	}
}

func ptr[T any](v T) *T { return &v }

func mustCapturer(t testing.TB, w *Writer, endpoint string, cfg spec.DataCaptureConfig) *Capturer {
	t.Helper()
	c, err := w.NewCapturer(endpoint, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func flush(t testing.TB, w *Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// dropped is mce_data_capture_records_dropped_total for one label set.
func dropped(w *Writer, endpoint, variant, reason string) float64 {
	return testutil.ToFloat64(w.metrics.dropped.WithLabelValues(endpoint, variant, reason))
}

// waitFor polls cond until it holds or 30 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
