// Package statuspage is the operator's status page: GET /status (HTML
// rendered on the server, inline CSS and SVG charts, nothing fetched from
// elsewhere) and GET /status.json (the same report, for scripts), and the
// bounded recorder of invocations its charts are drawn from.
//
// It owns what the page shows and how, one job per file: the Page, its
// Options and handlers, the template's layout (page.go, status.html), the
// report /status.json answers with its per-variant Summaries over the
// window (report.go), the charts' maths (charts.go: a line per variant),
// the cleaning of what containers print (logtext.go) and the Recorder
// (series.go: per endpoint and variant, a ring of SeriesStep buckets over
// SeriesWindow with a latency histogram each; at most maxSeries series, and
// recording allocates nothing). A Page is built by New from Options — the
// inventory as a func, which endpoints still exist, the Recorder, a logger
// — and reaches nothing else: it imports no engine and does not import
// host, and endpoints reach it only as inventory.Inventory snapshots.
//
// The host keeps the routes (OperatorHandler on the operator's listener,
// and the API listener under Config.MetricsOnAPI while no policy is
// enforced), records each invocation where it ends (Recorder.Record) and
// drops a deleted endpoint's series (Recorder.Drop). The page
// authenticates nobody; its one rule of access is its own: containers' log
// lines and IDs go only to requests that arrive on a loopback address of
// this machine (the listener's address, not what the client says).
// Everything from containers is hostile text: html/template escapes it,
// and log lines lose terminal escapes and control characters and are cut to
// MaxLogLineRunes. The page's Content-Security-Policy allows no script.
//
// A new chart (say, figures from CloudWatch-style metrics)
// comes as one more source in Options — a narrow func or interface whose
// nil means "no such chart" — read in report.go into new fields of Report
// (added only, so that scripts reading /status.json keep working), drawn
// by charts.go's chart.plot like the others, and placed in status.html.
package statuspage
