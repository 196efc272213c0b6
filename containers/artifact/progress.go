package artifact

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/docker/go-units"
	"github.com/rs/zerolog"
)

// Progress of long downloads, extractions and folder copies is logged at
// info to the logger of the context (zerolog.Ctx; the Docker engine puts
// the endpoint's and container's there): nothing for work done within
// ProgressOptions.Quiet, then a line at most every ProgressOptions.Every,
// and a last line when it ends. Fields: event (download, extract or stage),
// source, bytes and total (bytes; total 0 when unknown), files, elapsed or
// took (a duration with its unit), rate (bytes per second, human-readable).

// ProgressOptions set the cadence of progress lines; a context carries them
// (WithProgress). The zero value is what mce uses.
type ProgressOptions struct {
	// Quiet is how long work runs before its first line (work done sooner
	// logs nothing); 0 means 2 s, negative means none.
	Quiet time.Duration
	// Every is the least time between two lines of one piece of work; 0
	// means 3 s, negative means none.
	Every time.Duration
}

func (o ProgressOptions) withDefaults() ProgressOptions {
	if o.Quiet == 0 {
		o.Quiet = 2 * time.Second
	}
	if o.Every == 0 {
		o.Every = 3 * time.Second
	}
	return o
}

type progressKey struct{}

// WithProgress sets the cadence of the progress lines of work done under ctx.
func WithProgress(ctx context.Context, o ProgressOptions) context.Context {
	return context.WithValue(ctx, progressKey{}, o)
}

func progressOf(ctx context.Context) ProgressOptions {
	o, _ := ctx.Value(progressKey{}).(ProgressOptions)
	return o.withDefaults()
}

type progress struct {
	log    *zerolog.Logger
	opts   ProgressOptions
	event  string
	source string
	total  int64
	start  time.Time

	mu    sync.Mutex // downloads write from several goroutines
	next  time.Time
	bytes int64
	files int
	spoke bool
}

// newProgress starts reporting one piece of work; nil (which reports
// nothing) when ctx carries no logger that writes info.
func newProgress(ctx context.Context, event, source string, total int64) *progress {
	log := zerolog.Ctx(ctx)
	if log.GetLevel() > zerolog.InfoLevel || log.GetLevel() == zerolog.Disabled {
		return nil
	}
	now := time.Now()
	opts := progressOf(ctx)
	return &progress{log: log, opts: opts, event: event, source: source, total: total, start: now, next: now.Add(opts.Quiet)}
}

// add counts bytes and files done, and reports when it is time.
func (p *progress) add(bytes int64, files int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bytes += bytes
	p.files += files
	if now := time.Now(); !now.Before(p.next) {
		p.next = now.Add(p.opts.Every)
		p.spoke = true
		p.report(now, false)
	}
}

// done reports the end of work that was reported on, or took long.
func (p *progress) done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); p.spoke || now.Sub(p.start) >= p.opts.Quiet {
		p.report(now, true)
	}
}

func (p *progress) report(now time.Time, end bool) {
	elapsed := now.Sub(p.start)
	ev := p.log.Info().Str("event", p.event).Str("source", p.source).Int64("bytes", p.bytes).Int64("total", p.total)
	showFiles := p.event != "download" || p.files > 0
	if showFiles {
		ev = ev.Int("files", p.files)
	}
	rate := ""
	if s := elapsed.Seconds(); s > 0 {
		rate = units.HumanSize(float64(p.bytes)/s) + "/s"
		ev = ev.Str("rate", rate)
	}
	done := units.HumanSize(float64(p.bytes))
	if p.total > 0 {
		done += " of " + units.HumanSize(float64(p.total))
	}
	if showFiles {
		done += fmt.Sprintf(", %d files", p.files)
	}
	verb := progressVerbs[p.event]
	d := elapsed.Round(100 * time.Millisecond).String()
	if end {
		ev.Dur("took_ms", elapsed).Msgf("%s %s: %s in %s (%s)", verb[1], p.source, done, d, rate)
		return
	}
	ev.Dur("elapsed_ms", elapsed).Msgf("%s %s: %s, %s (%s)", verb[0], p.source, done, d, rate)
}

// progressVerbs are each event's verbs, in progress and at the end.
var progressVerbs = map[string][2]string{
	"download": {"downloading", "downloaded"},
	"extract":  {"extracting", "extracted"},
	"stage":    {"copying the model folder", "copied the model folder"},
}

type sourceKey struct{}

// withSource names the model data being prepared, for progress lines.
func withSource(ctx context.Context, modelDataURL string) context.Context {
	return context.WithValue(ctx, sourceKey{}, modelDataURL)
}

func sourceOf(ctx context.Context) string {
	s, _ := ctx.Value(sourceKey{}).(string)
	if s == "" {
		return "model data"
	}
	return s
}
