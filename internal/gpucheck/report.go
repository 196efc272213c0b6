package gpucheck

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Write prints the report, one measurement a line.
func (r *Report) Write(w io.Writer) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("device            %s", r.Device)
	p("workload          %d models of %s, %d calls from %d clients, 2/3 of them to the first third of the models", r.Models, bytesText(uint64(r.Bytes)), r.Calls, r.Clients)
	fit := "?"
	if r.Fit > 0 {
		fit = fmt.Sprint(r.Fit)
	}
	p("residency         %.1f models resident on average (peak %.0f) / %s that fit", r.MeanResident, r.PeakResident, fit)
	p("evictions         %d", r.Evictions)
	p("hits              %d  p50 %s  p99 %s", r.Hits, ms(r.HitP50), ms(r.HitP99))
	p("misses            %d  p50 %s  p99 %s", r.Misses, ms(r.MissP50), ms(r.MissP99))
	if r.Failed == 0 {
		p("failed calls      0")
	} else {
		p("failed calls      %d:", r.Failed)
		for _, why := range slices.Sorted(maps.Keys(r.FailedWhy)) {
			p("                    %d× %s", r.FailedWhy[why], why)
		}
	}
	if r.HaveGPU {
		delta := int64(r.MemAfterUnload) - int64(r.MemStart)
		p("memory            %s used after unloading everything vs %s at start (%+.2f GiB) of %s", bytesText(r.MemAfterUnload), bytesText(r.MemStart),
			float64(delta)/(1<<30), bytesText(r.MemTotal))
	} else {
		p("memory            n/a (no GPU memory to read)")
	}
	var oom []string
	for _, st := range slices.Sorted(maps.Keys(r.OOMStatuses)) {
		oom = append(oom, fmt.Sprintf("%d ×%d", st, r.OOMStatuses[st]))
	}
	if len(oom) == 0 {
		p("load OOM status   none: all %d models loaded with GPU accounting off (%d loads)", r.Models, r.LoadsOff)
	} else {
		p("load OOM status   %s (GPU accounting off; %d loads answered 200, %d calls failed)", strings.Join(oom, ", "), r.LoadsOff, r.OOMFailed)
	}
	p("warm-call p50     Manager %s vs direct %s (overhead %s)", ms(r.WarmManager), ms(r.WarmDirect), ms(r.WarmManager-r.WarmDirect))
	p("took              %s", r.Took.Round(100*time.Millisecond))
	_, err := io.WriteString(w, b.String())
	return err
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

func bytesText(b uint64) string {
	if b < 1<<30 {
		return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}
