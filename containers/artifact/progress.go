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
// info to the logger of the context (zerolog.Ctx; the containers package
// puts the endpoint's and container's there): nothing for work done within
// progressQuiet, then a line at most every progressEvery, and a last line
// when it ends. Fields: event (download, extract or stage), source, bytes
// and total (bytes; total 0 when unknown), files, elapsed or took (a
// duration with its unit), rate (bytes per second, human-readable).
var (
	progressQuiet = 2 * time.Second
	progressEvery = 3 * time.Second
)

type progress struct {
	log    *zerolog.Logger
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
	return &progress{log: log, event: event, source: source, total: total, start: now, next: now.Add(progressQuiet)}
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
		p.next = now.Add(progressEvery)
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
	if now := time.Now(); p.spoke || now.Sub(p.start) >= progressQuiet {
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
