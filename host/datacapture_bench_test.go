package host

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/host/capture"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// discardStore takes every capture file at once.
type discardStore struct{}

func (discardStore) PutObject(context.Context, string, []byte, string, map[string]string) error {
	return nil
}

// benchCapture is a DataCaptureConfig sampling pct % of the calls, both
// modes, text/plain as CSV (so the writer's work is the text's, not
// base64's); nil for an endpoint without capture.
func benchCapture(pct int32) *spec.DataCaptureConfig {
	if pct < 0 {
		return nil
	}
	on := true
	return &spec.DataCaptureConfig{EnableCapture: &on, InitialSamplingPercentage: &pct, DestinationS3URI: "s3://bench/capture",
		CaptureOptions:           []spec.CaptureOption{{CaptureMode: spec.CaptureInputAndOutput}},
		CaptureContentTypeHeader: &spec.CaptureContentTypeHeader{CSVContentTypes: []string{"text/plain"}}}
}

var benchCaptures = []struct {
	name string
	pct  int32
}{{"capture=none", -1}, {"capture=0%", 0}, {"capture=20%", 20}, {"capture=100%", 100}}

// BenchmarkInvokeCapture is BenchmarkInvoke (the whole InvokeEndpoint path
// against an echo container on loopback, 1 KiB each way) on an endpoint
// without data capture, and with capture sampling 0 %, 20 % and 100 % of
// the calls to a store that takes every file at once. The writer's own
// goroutine (JSON, files) shares the machine's cores with the calls, as it
// does in mce.
//
//	go test -run '^$' -bench 'InvokeCapture|CapturePath' -benchmem -count 5 ./host/
func BenchmarkInvokeCapture(b *testing.B) {
	echoSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.Copy(w, r.Body)
	}))
	defer echoSrv.Close()
	for _, bc := range benchCaptures {
		b.Run(bc.name, func(b *testing.B) {
			w, err := capture.New(capture.Options{Store: discardStore{}, Log: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close(context.Background())
			s := New(Config{Backend: benchBackend{echoSrv.URL}, Store: openStore(b), Logger: zerolog.Nop(), Capture: w})
			defer s.Close(context.Background())
			p := plan("bench", "Serial", map[string][]string{"AllTraffic": {"echo:e"}})
			if _, err := s.startEndpoint(p, benchCapture(bc.pct), p.ConfigName, nil); err != nil {
				b.Fatal(err)
			}
			if err := s.WaitEndpoint(context.Background(), "bench"); err != nil {
				b.Fatal(err)
			}
			h := s.Handler()
			payload := bytes.Repeat([]byte("x"), 1024)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := httptest.NewRequest(http.MethodPost, "/endpoints/bench/invocations", bytes.NewReader(payload))
					req.Header.Set("Content-Type", "text/plain")
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code != 200 {
						b.Fatalf("status %d: %s", rec.Code, rec.Body)
					}
				}
			})
		})
	}
}

// BenchmarkCapturePath is what data capture adds to one InvokeEndpoint,
// alone: the endpoint's capturer loaded and asked at admission, and the
// answered call handed over (1 KiB each way) when sampled — the two lines
// invoke.go runs. Every 1,024 calls the timer stops while the writer
// writes what it holds, so that the calls measured are taken into the
// buffer, not dropped because this loop outruns the writer (which real
// calls, tens of microseconds each, do not); dropped/op says so.
func BenchmarkCapturePath(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1024)
	for _, bc := range benchCaptures {
		b.Run(bc.name, func(b *testing.B) {
			w, err := capture.New(capture.Options{Store: discardStore{}, Log: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close(context.Background())
			reg := prometheus.NewRegistry()
			reg.MustRegister(w)
			s := &Server{captures: captures{w: w, log: zerolog.Nop()}}
			e := &Endpoint{name: "bench"}
			s.captures.attach(e, benchCapture(bc.pct))
			req := pipeline.Request{Body: body, ContentType: "text/plain"}
			start := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if bc.pct > 0 && i%1024 == 1023 {
					b.StopTimer()
					if err := w.Flush(context.Background()); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				tk := e.capturer.Load().Sample()
				captured(tk, "AllTraffic", "", start, &req, body, "text/plain")
			}
			b.StopTimer()
			dropped := 0.0
			mfs, err := reg.Gather()
			if err != nil {
				b.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() == "mce_data_capture_records_dropped_total" {
					for _, m := range mf.GetMetric() {
						dropped += m.GetCounter().GetValue()
					}
				}
			}
			b.ReportMetric(dropped/float64(b.N), "dropped/op")
		})
	}
}
