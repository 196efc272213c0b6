package loadtest

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"time"
)

// The HTML report is one file: styles inline, charts as inline SVG drawn by
// gonum/plot, no script and nothing fetched.
var htmlTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"ms":    func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"f1":    func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"pct":   func(v float64) string { return fmt.Sprintf("%.2f%%", v*100) },
	"time":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"codes": codesString,
	"deref": func(p *float64) float64 { return *p },
	"met": func(b *bool) string {
		if b == nil {
			return ""
		}
		if *b {
			return "met"
		}
		return "missed"
	},
	"svg": func(s string) template.HTML { return template.HTML(s) }, // drawn by gonum/plot from numbers, no outside text
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>mce loadtest: {{.R.Endpoint}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 70em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f0f0f0; }
td.l, th.l { text-align: left; }
.met { color: #1a7f37; font-weight: bold; } .missed { color: #b42318; font-weight: bold; }
figure { margin: 1.5em 0; } figure svg { max-width: 100%; height: auto; }
.answers { background: #f6f8fa; border: 1px solid #d0d7de; padding: 0.5em 1.2em; }
pre { background: #f6f8fa; padding: 1em; overflow: auto; font-size: 0.85em; }
</style>
</head>
<body>
<h1>Load test of <code>{{.R.Endpoint}}</code></h1>
<p>From {{time .R.Started}} to {{time .R.Ended}} ({{f1 .WallS}} s).{{if .R.Interrupted}} <strong>Interrupted: a partial report.</strong>{{end}}{{if .R.StopReason}} Stopped: {{.R.StopReason}}.{{end}}</p>
<div class="answers" id="answers">
<h2>Answers</h2>
<ul>
{{- if .R.Targets}}
<li>Latency target: {{range $i, $t := .R.Targets}}{{if $i}}, {{end}}{{$t}}{{end}}.
{{- if .R.Answers.BestStage}} Highest throughput within it: <strong>{{.R.Answers.BestStageName}}, {{f1 .R.Answers.BestRPS}} requests/s</strong>.{{else}} <strong>No stage met it.</strong>{{end}}</li>
{{- end}}
{{- if .ShowModels}}
<li>Most models resident at once: <strong>{{printf "%.0f" (deref .R.Answers.MostModelsResident)}}</strong>.</li>
{{- end}}
{{- if .R.Cold.Count}}
<li>Cold (first call to each of {{.R.Cold.Count}} models): p50 {{ms .R.Cold.P50}} ms, p99 {{ms .R.Cold.P99}} ms; warm ({{.R.Warm.Count}} calls): p50 {{ms .R.Warm.P50}} ms, p99 {{ms .R.Warm.P99}} ms.</li>
{{- end}}
<li>Load generator: {{printf "%.2f" .R.Generator.CPUCores}} of {{.R.Generator.GOMAXPROCS}} cores, at most {{.R.Generator.PeakInFlight}} calls in flight{{if .R.Generator.Saturated}} — <strong class="missed">saturated</strong>{{end}}.{{range .R.Generator.Notes}} {{.}}.{{end}}</li>
</ul>
</div>
<h2>Stages</h2>
<table id="stages">
<tr><th class="l">stage</th><th>load</th><th>requests</th><th>req/s</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>max ms</th><th>errors</th><th>send lag p99 ms</th><th>unsent</th><th>generator CPU ms</th><th class="l">target</th><th class="l">errors by code</th></tr>
{{- range .R.Stages}}
<tr><td class="l">{{.Name}}</td><td>{{if .Rate}}{{.Rate}}/s{{else}}{{.Users}} users{{end}}</td><td>{{.Completed}}</td><td>{{f1 .RPS}}</td><td>{{ms .P50}}</td><td>{{ms .P90}}</td><td>{{ms .P99}}</td><td>{{ms .Max}}</td><td>{{.Errors}} ({{pct .ErrorRate}})</td><td>{{ms .SendLag.P99}}</td><td>{{.Unsent}}</td><td>{{printf "%.0f" .GeneratorCPUMS}}</td><td class="l {{met .MetTarget}}">{{met .MetTarget}}</td><td class="l">{{codes .Codes}}</td></tr>
{{- end}}
</table>
{{- if .HasTTFB}}
<h3>Time to first byte (streaming)</h3>
<table><tr><th class="l">stage</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>max ms</th></tr>
{{- range .R.Stages}}{{if .TTFB}}<tr><td class="l">{{.Name}}</td><td>{{ms .TTFB.P50}}</td><td>{{ms .TTFB.P90}}</td><td>{{ms .TTFB.P99}}</td><td>{{ms .TTFB.Max}}</td></tr>{{end}}{{end}}
</table>
{{- end}}
{{- if .R.Metrics}}
<h3>mce's own metrics per stage (scraped from {{.R.Metrics.URL}}, {{.R.Metrics.Scrapes}} scrapes, {{.R.Metrics.Failures}} failed)</h3>
<table id="mce"><tr><th class="l">stage</th><th>invocations</th><th>model latency ms</th><th>overhead ms</th><th>models loaded (max)</th><th>cache hit ratio</th><th>model loading wait ms</th><th>CPU cores (max)</th><th>memory (max)</th><th>GPU (max)</th></tr>
{{- range .R.Stages}}{{with .Mce}}<tr><td class="l">{{$.Name .}}</td><td>{{printf "%.0f" .Invocations}}</td><td>{{ms .ModelLatencyMS}}</td><td>{{ms .OverheadLatencyMS}}</td><td>{{printf "%.0f" .LoadedModelsMax}}</td><td>{{ms .CacheHitRatio}}</td><td>{{ms .ModelLoadingWait}}</td><td>{{ms .CPUMax}}</td><td>{{ms .MemoryMax}}</td><td>{{ms .GPUMax}}</td></tr>{{end}}{{end}}
</table>
{{- end}}
{{- if .R.ShowVariants}}
<h3 id="variants-heading">Per variant: client side and mce's server side</h3>
{{- with .R.CloudWatch}}
{{- if .Error}}
<p class="missed" id="cloudwatch-error">No server-side figures: {{.Error}}</p>
{{- else}}
<p>Server side: mce's own figures of each variant (namespace AWS/SageMaker), read from its CloudWatch API at {{.URL}} after the run, over {{time .Start}} to {{time .End}} (one period of {{.PeriodS}} s; these whole minutes may hold calls made just before or after the run). Client side: the latency this tool measured of the successful calls each variant answered (InvokedProductionVariant), from their intended send time.</p>
{{- end}}
{{- end}}
<table id="variants">
<tr><th class="l" rowspan="2">variant</th><th colspan="3">client side (this tool)</th>{{if .R.CloudWatch}}<th colspan="9">server side (mce's CloudWatch API)</th>{{end}}</tr>
<tr><th>answered</th><th>p50 ms</th><th>p99 ms</th>{{if .R.CloudWatch}}<th>Invocations</th><th>4XX errors</th><th>5XX errors</th><th>ModelLatency p50 ms</th><th>p99 ms</th><th>avg ms</th><th>OverheadLatency p50 ms</th><th>p99 ms</th><th>avg ms</th>{{end}}</tr>
{{- range .R.Variants}}
<tr><td class="l">{{.Variant}}</td><td>{{.Answered}}</td>{{with .Latency}}<td>{{ms .P50}}</td><td>{{ms .P99}}</td>{{else}}<td></td><td></td>{{end}}
{{- if $.R.CloudWatch}}{{with .Mce}}<td>{{printf "%.0f" .Invocations}}</td><td>{{printf "%.0f" .Errors4XX}}</td><td>{{printf "%.0f" .Errors5XX}}</td>
{{- with .ModelLatency}}<td>{{ms .P50}}</td><td>{{ms .P99}}</td><td>{{ms .Mean}}</td>{{else}}<td></td><td></td><td></td>{{end}}
{{- with .OverheadLatency}}<td>{{ms .P50}}</td><td>{{ms .P99}}</td><td>{{ms .Mean}}</td>{{else}}<td></td><td></td><td></td>{{end}}
{{- else}}<td></td><td></td><td></td><td></td><td></td><td></td><td></td><td></td><td></td>{{end}}{{end}}</tr>
{{- end}}
</table>
{{- end}}
<h2>Charts</h2>
{{- range .Charts}}
<figure id="chart-{{.Name}}" class="chart">
{{svg .SVG}}
<figcaption>{{.Title}} ({{.Name}}.png)</figcaption>
</figure>
{{- end}}
<h2>Plan</h2>
<pre>{{.PlanJSON}}</pre>
<p>Latency counts from each request's intended send time (successful calls only; failures are counted by code). Written by <code>mce loadtest</code>; report.json holds every figure.</p>
</body>
</html>
`))

type htmlData struct {
	R       *Report
	Charts  []Chart
	WallS   float64
	HasTTFB bool
	// ShowModels: the run named models or mce held some
	ShowModels bool
	PlanJSON   string
	names      map[*StageMetrics]string
}

// Name returns the name of the stage m belongs to.
func (d htmlData) Name(m *StageMetrics) string { return d.names[m] }

// WriteHTML writes the self-contained HTML report with charts (from
// Charts).
func (rep *Report) WriteHTML(w io.Writer, charts []Chart) error {
	d := htmlData{R: rep, Charts: charts, WallS: rep.WallMS / 1000, names: map[*StageMetrics]string{}}
	for _, s := range rep.Stages {
		if s.TTFB != nil {
			d.HasTTFB = true
		}
		if s.Mce != nil {
			d.names[s.Mce] = s.Name
		}
	}
	if m := rep.Answers.MostModelsResident; m != nil && (*m > 0 || rep.Plan.Traffic.Models > 0) {
		d.ShowModels = true
	}
	b, err := json.MarshalIndent(rep.Plan, "", "  ")
	if err != nil {
		return err
	}
	d.PlanJSON = string(b)
	return htmlTemplate.Execute(w, d)
}
