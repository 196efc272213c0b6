package containers

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"
)

// tailLines is how many output lines of each container mce keeps to quote in
// failure reasons.
const tailLines = 20

// maxLogLine caps one logged line; longer output is split.
const maxLogLine = 16 << 10

// lineRing keeps the last lines a container printed. Safe for concurrent use.
type lineRing struct {
	mu   sync.Mutex
	buf  []string
	next int
	full bool
}

func newLineRing(n int) *lineRing { return &lineRing{buf: make([]string, n)} }

func (r *lineRing) add(line string) {
	r.mu.Lock()
	r.buf[r.next] = line
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
	r.mu.Unlock()
}

func (r *lineRing) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]string(nil), r.buf[:r.next]...)
	}
	out := append([]string(nil), r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// lineWriter turns a byte stream into log events, one per line.
type lineWriter struct {
	log     zerolog.Logger
	stream  string
	tail    *lineRing
	partial []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.partial = append(w.partial, p...)
			for len(w.partial) >= maxLogLine {
				w.emit(w.partial[:maxLogLine])
				w.partial = append(w.partial[:0], w.partial[maxLogLine:]...)
			}
			break
		}
		if len(w.partial) > 0 {
			w.partial = append(w.partial, p[:i]...)
			w.emit(w.partial)
			w.partial = w.partial[:0]
		} else {
			w.emit(p[:i])
		}
		p = p[i+1:]
	}
	return n, nil
}

func (w *lineWriter) flush() {
	if len(w.partial) > 0 {
		w.emit(w.partial)
		w.partial = w.partial[:0]
	}
}

func (w *lineWriter) emit(b []byte) {
	line := strings.TrimRight(string(b), "\r")
	if w.tail != nil {
		w.tail.add(w.stream + ": " + line)
	}
	w.log.Info().Str("stream", w.stream).Msg(line)
}

// streamLogs copies the container's stdout and stderr into mce's log until the
// container's context ends. Docker ends a follow stream when the container
// stops; after a restart the stream is opened again from where it left off.
func (c *Container) streamLogs(since time.Time) {
	defer c.wg.Done()
	out := &lineWriter{log: c.log, stream: "stdout", tail: c.tail}
	errw := &lineWriter{log: c.log, stream: "stderr", tail: c.tail}
	for {
		rc, err := c.rt.engine.ContainerLogs(c.ctx, c.ID(), client.ContainerLogsOptions{
			ShowStdout: true, ShowStderr: true, Follow: true,
			Since: since.Format(time.RFC3339Nano),
		})
		if err == nil {
			_, err = stdcopy.StdCopy(out, errw, rc)
			rc.Close()
			out.flush()
			errw.flush()
		}
		since = time.Now()
		if c.ctx.Err() != nil {
			return
		}
		if err != nil && err != io.EOF && !gone(err) {
			c.log.Debug().Err(err).Msg("log stream interrupted")
		}
		// Wait a little before following again: the container is stopped
		// or restarting, and its supervisor will start it.
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}
