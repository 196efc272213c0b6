// Package accesslog is the writer behind mce serve --access-log: one JSON
// line per request, handed over without ever making a request wait (lines
// are dropped and counted when the writer falls behind). host builds the
// lines (host/accesslog.go); this package only carries them.
package accesslog

import (
	"encoding/json"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Writer writes one JSON line per request to the API listener (mce serve
// --access-log). Requests never wait for the writer: lines go through a
// buffer of Buffer lines to a goroutine that writes them, and when
// the buffer is full (the disk or the reader of stdout is slower than the
// requests) lines are dropped and counted; the next line written after
// drops is {"time":…,"dropped":N}.
//
// A line:
//
//	{"time":"2026-11-24T05:02:04.123456Z","request_id":"…","remote":"127.0.0.1:51234",
//	 "method":"POST","path":"/endpoints/ab-test/invocations","operation":"InvokeEndpoint",
//	 "endpoint":"ab-test","status":200,"bytes_in":17,"bytes_out":17,"duration_ms":2.481}
//
// operation is the control-plane target (e.g. "SageMaker.CreateEndpoint"),
// "InvokeEndpoint" (or its async and streaming siblings), or
// "logs:FilterLogEvents" (mce logs), else empty; endpoint is the
// endpoint of a runtime or logs call; resource the ARN a control-plane call
// acted on (when it got that far); time is when the request arrived.
type Writer struct {
	lines   chan []byte
	w       io.Writer
	dropped atomic.Int64
	done    chan struct{}
	mu      sync.RWMutex // held for reading while a line is handed over
	closed  bool
}

// Buffer is how many lines wait for the writer before lines are
// dropped.
const Buffer = 4096

// New starts writing access lines to w. Close it to flush.
func New(w io.Writer) *Writer {
	l := &Writer{lines: make(chan []byte, Buffer), w: w, done: make(chan struct{})}
	go l.run()
	return l
}

func (l *Writer) run() {
	defer close(l.done)
	for line := range l.lines {
		l.reportDropped()
		l.w.Write(line)
	}
	l.reportDropped() // drops at the very end are told too
}

// reportDropped writes {"time":…,"dropped":N} when lines were dropped since
// the last report.
func (l *Writer) reportDropped() {
	if n := l.dropped.Swap(0); n > 0 {
		b, _ := json.Marshal(struct {
			Time    time.Time `json:"time"`
			Dropped int64     `json:"dropped"`
		}{time.Now().UTC(), n})
		l.w.Write(append(b, '\n'))
	}
}

// Dropped is how many lines were dropped (and not yet reported in the log).
func (l *Writer) Dropped() int64 { return l.dropped.Load() }

// Close writes the lines buffered and stops the writer; later requests are
// not logged. It does not close the underlying writer.
func (l *Writer) Close() {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.lines)
	}
	l.mu.Unlock()
	<-l.done
}

// Add hands a line (ending in a newline) to the writer without waiting.
func (l *Writer) Add(line []byte) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return
	}
	select {
	case l.lines <- line:
	default:
		l.dropped.Add(1)
	}
}
