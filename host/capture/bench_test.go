package capture

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// discard is a Store that takes every file at once.
type discard struct{}

func (discard) PutObject(context.Context, string, []byte, string, map[string]string) error {
	return nil
}

// BenchmarkSample is what every call of an endpoint with data capture pays
// to learn it is not sampled: no lock, no allocation.
//
//	go test -run '^$' -bench 'Sample|Record' -benchmem ./host/capture
func BenchmarkSample(b *testing.B) {
	for _, tt := range []struct {
		name string
		pct  int32
	}{{"pct=0", 0}, {"pct=20", 20}, {"disabled", -1}} {
		b.Run(tt.name, func(b *testing.B) {
			w := newWriter(b, discard{}, nil)
			cfg := config(max(tt.pct, 0), "s3://b/c")
			if tt.pct < 0 {
				cfg.EnableCapture = ptr(false)
			}
			c := mustCapturer(b, w, "ep", cfg)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				n := 0
				for pb.Next() {
					if c.Sample().Active() {
						n++
					}
				}
				_ = n
			})
		})
	}
}

// BenchmarkRecord is what a sampled call pays: the decision, the copy of
// its payloads (the same size each way) and the hand-over to the writer.
// The writer's own work (JSON, uploads) runs on its goroutine, not the
// call's; here a goroutine stands in for it that takes the records as the
// writer does (at each tick, or when queueWake wait) and frees their bytes,
// so that every call is accepted (none takes the cheaper drop path).
// BenchmarkWriter measures the writer.
func BenchmarkRecord(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(byteSize(size), func(b *testing.B) {
			w, err := build(Options{Store: discard{}, MaxBufferBytes: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			done, stop := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				var spare []*pending
				tick := time.NewTicker(w.opts.TickInterval)
				defer tick.Stop()
				for {
					select {
					case <-w.signal:
					case <-tick.C:
					case <-stop:
						return
					}
					spare = w.queue.take(spare)
					for i, r := range spare {
						w.used.Add(-r.size)
						spare[i] = nil
					}
				}
			}()
			c := mustCapturer(b, w, "ep", config(100, "s3://b/c"))
			payload := []byte(strings.Repeat("1,", size/2))
			call := Call{Variant: "AllTraffic", InferenceID: "id-1", Time: time.Now(),
				Input: payload, InputContentType: "text/csv", Output: payload, OutputContentType: "text/csv"}
			b.ReportAllocs()
			b.SetBytes(int64(2 * size))
			for b.Loop() {
				c.Sample().Record(call)
			}
			b.StopTimer()
			close(stop)
			<-done
			if d := dropped(w, "ep", "AllTraffic", "buffer_full"); d > 0 {
				b.Fatalf("%v records dropped: the figure is not the accepted path's", d)
			}
		})
	}
}

// BenchmarkWriter is the writer's throughput: records of 1 KiB each way
// taken, written as JSON Lines (CSV text) and handed to a store that takes
// everything, per second. Beyond it, a sustained sampled rate fills the
// buffer and records are dropped.
func BenchmarkWriter(b *testing.B) {
	for _, enc := range []string{"text/csv", "application/octet-stream"} {
		b.Run(enc, func(b *testing.B) {
			w := newWriter(b, discard{}, func(o *Options) { o.MaxBufferBytes = 1 << 30 })
			c := mustCapturer(b, w, "ep", config(100, "s3://b/c"))
			payload := []byte(strings.Repeat("1,", 512))
			call := Call{Variant: "AllTraffic", Input: payload, InputContentType: enc, Output: payload, OutputContentType: enc}
			b.ReportAllocs()
			for b.Loop() {
				for w.used.Load() > 256<<20 || queued(w) > w.opts.MaxQueuedRecords/2 { // keep the buffer from filling: wait for the writer
					time.Sleep(time.Millisecond)
				}
				c.Sample().Record(call)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := w.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if d := dropped(w, "ep", "AllTraffic", "buffer_full"); d > 0 {
				b.Fatalf("%v records dropped", d)
			}
		})
	}
}

// BenchmarkRecordBufferFull is a sampled call's cost when the buffer is
// full and the record is dropped.
func BenchmarkRecordBufferFull(b *testing.B) {
	w := newWriter(b, discard{}, func(o *Options) { o.MaxBufferBytes = 1 })
	c := mustCapturer(b, w, "ep", config(100, "s3://b/c"))
	call := Call{Variant: "AllTraffic", Input: make([]byte, 1024), InputContentType: "text/csv", Output: make([]byte, 1024), OutputContentType: "text/csv"}
	b.ReportAllocs()
	for b.Loop() {
		c.Sample().Record(call)
	}
}

func byteSize(n int) string {
	if n >= 1<<10 {
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

func queued(w *Writer) int {
	w.queue.mu.Lock()
	defer w.queue.mu.Unlock()
	return len(w.queue.recs)
}
