package host

import (
	"context"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/cloudwatchlogs"
)

// The fake container keeps what print gives it as its output, so the logs
// calls (GET /mce/endpoints/NAME/logs, CloudWatch Logs) run without Docker.

var _ cloudwatchlogs.Source = (*fakeContainer)(nil)

// print adds lines to the container's output, stamped at.
func (f *fakeContainer) print(at time.Time, texts ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range texts {
		f.output = append(f.output, containers.LogLine{Stream: "stdout", Text: t, Time: at})
	}
}

func (f *fakeContainer) lines() []containers.LogLine {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]containers.LogLine(nil), f.output...)
}

func (f *fakeContainer) Follow(buffer int) (<-chan containers.LogLine, <-chan struct{}, func()) {
	return make(chan containers.LogLine, buffer), make(chan struct{}), func() {}
}

func (f *fakeContainer) Logs(ctx context.Context, n int, fn func(containers.LogLine) error) error {
	out := f.lines()
	if len(out) > n {
		out = out[len(out)-n:]
	}
	for _, l := range out {
		l.Time = time.Time{}
		if err := fn(l); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (f *fakeContainer) LogsBetween(ctx context.Context, since, until time.Time, fn func(containers.LogLine) error) error {
	for _, l := range f.lines() {
		if l.Time.Before(since) || !until.IsZero() && !l.Time.Before(until) {
			continue
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	return ctx.Err()
}
