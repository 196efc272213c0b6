package docker

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
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

// logSubs fans a container's output out to its followers. A follower that
// does not keep up misses lines (counted, and told with the next line it
// gets): the container's log reader never waits for one.
type logSubs struct {
	mu   sync.Mutex
	subs map[*logSub]struct{}
}

type logSub struct {
	ch      chan containers.LogLine
	dropped int // guarded by logSubs.mu
}

func (s *logSubs) add(buffer int) *logSub {
	sub := &logSub{ch: make(chan containers.LogLine, max(buffer, 1))}
	s.mu.Lock()
	if s.subs == nil {
		s.subs = map[*logSub]struct{}{}
	}
	s.subs[sub] = struct{}{}
	s.mu.Unlock()
	return sub
}

func (s *logSubs) remove(sub *logSub) {
	s.mu.Lock()
	delete(s.subs, sub)
	s.mu.Unlock()
}

func (s *logSubs) publish(stream, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs {
		select {
		case sub.ch <- containers.LogLine{Stream: stream, Text: text, Dropped: sub.dropped}:
			sub.dropped = 0
		default:
			sub.dropped++
		}
	}
}

// Follow delivers each line the container prints from now on, until stop is
// called (which the follower must do). done is closed when the container is
// removed: nothing more will come. At most buffer lines wait for the
// follower; beyond that lines are dropped and counted in the next
// LogLine.Dropped. Lines of a restarted container keep coming.
func (c *Container) Follow(buffer int) (lines <-chan containers.LogLine, done <-chan struct{}, stop func()) {
	sub := c.subs.add(buffer)
	return sub.ch, c.ctx.Done(), func() { c.subs.remove(sub) }
}

// Logs calls fn with the last n lines (at most MaxLogTail) the container
// printed, oldest first, from the engine's log (the container's current
// incarnation: a recreated container's earlier output is gone). It stops at
// fn's first error.
func (c *Container) Logs(ctx context.Context, n int, fn func(containers.LogLine) error) error {
	n = min(max(n, 0), containers.MaxLogTail)
	if n == 0 {
		return nil
	}
	return c.readLogs(ctx, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(n)}, fn)
}

// LogsBetween calls fn with each line the container printed from since
// until until (either zero for no bound), oldest first, with the engine's
// timestamps, from the engine's log of the container's current incarnation.
// It stops at fn's first error, which it returns.
func (c *Container) LogsBetween(ctx context.Context, since, until time.Time, fn func(containers.LogLine) error) error {
	opts := client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Timestamps: true}
	if !since.IsZero() {
		opts.Since = since.UTC().Format(time.RFC3339Nano)
	}
	if !until.IsZero() {
		opts.Until = until.UTC().Format(time.RFC3339Nano)
	}
	return c.readLogs(ctx, opts, fn)
}

// readLogs reads the engine's log of the container with opts and calls fn
// with each line, stopping at fn's first error, which it returns. With
// opts.Timestamps each line's engine timestamp goes to LogLine.Time.
func (c *Container) readLogs(ctx context.Context, opts client.ContainerLogsOptions, fn func(containers.LogLine) error) error {
	rc, err := c.rt.engine.ContainerLogs(ctx, c.ID(), opts)
	if err != nil {
		return classify("logs of container "+c.name, err)
	}
	defer rc.Close()
	var ferr error
	sink := func(stream, text string) {
		if ferr != nil {
			return
		}
		l := containers.LogLine{Stream: stream, Text: text}
		if opts.Timestamps {
			// "2026-11-24T05:15:18.123456789Z message"; a line split for
			// length carries no timestamp of its own.
			if ts, rest, ok := strings.Cut(text, " "); ok {
				if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
					l.Time, l.Text = t, rest
				}
			}
		}
		ferr = fn(l)
	}
	out := &lineWriter{stream: "stdout", sink: sink}
	errw := &lineWriter{stream: "stderr", sink: sink}
	_, err = stdcopy.StdCopy(out, errw, &stopReader{r: rc, err: &ferr})
	out.flush()
	errw.flush()
	if ferr != nil {
		return ferr
	}
	if err != nil && err != io.EOF {
		return classify("logs of container "+c.name, err)
	}
	return nil
}

// stopReader ends a copy once *err is set (the consumer gave up).
type stopReader struct {
	r   io.Reader
	err *error
}

func (s *stopReader) Read(p []byte) (int, error) {
	if *s.err != nil {
		return 0, *s.err
	}
	return s.r.Read(p)
}

// lineWriter turns a byte stream into log events, one per line: into mce's
// log (when log is set), the tail ring, the followers, and sink.
type lineWriter struct {
	log     *zerolog.Logger
	stream  string
	tail    *lineRing
	subs    *logSubs
	sink    func(stream, line string)
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
	if w.subs != nil {
		w.subs.publish(w.stream, line)
	}
	if w.sink != nil {
		w.sink(w.stream, line)
	}
	if w.log != nil {
		w.log.Info().Str("stream", w.stream).Msg(line)
	}
}

// streamLogs copies the container's stdout and stderr into mce's log until the
// container's context ends. Docker ends a follow stream when the container
// stops; after a restart the stream is opened again from where it left off.
func (c *Container) streamLogs(since time.Time) {
	defer c.wg.Done()
	out := &lineWriter{log: &c.log, stream: "stdout", tail: c.tail, subs: &c.subs}
	errw := &lineWriter{log: &c.log, stream: "stderr", tail: c.tail, subs: &c.subs}
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
