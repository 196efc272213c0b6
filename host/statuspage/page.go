package statuspage

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/host/inventory"
)

// The status page: GET /status (HTML, server-rendered, inline CSS and SVG,
// nothing fetched from elsewhere) and GET /status.json (the same data for
// scripts), served with the metrics to the operator.
//
// What it shows is what /metrics and `mce describe` show, plus the
// containers' recent output. Container output can hold secrets (a token a
// model server prints, a connection string in a stack trace), so log lines
// and container IDs are given only to requests that arrive on a loopback
// address: from this machine. Everything from the containers is hostile
// text: html/template escapes it, and log lines lose terminal escapes and
// control characters and are cut to MaxLogLineRunes.

//go:embed status.html
var statusHTML string

var statusTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"bytes":      humanBytes,
	"pct":        func(w float64) string { return strconv.FormatFloat(w, 'g', 4, 64) },
	"pageModels": pageModels,
	"shortID":    shortID,
}).Parse(statusHTML))

const (
	// MaxLogLineRunes cuts each log line shown.
	MaxLogLineRunes = 300
	// pageLogLines is how many of a container's last lines the page shows
	// (status.json has all the inventory keeps).
	pageLogLines = 8
	// pageLoadedModels is how many loaded models the page names per
	// container.
	pageLoadedModels = 20
	// statusCSP lets the page use its inline styles and inline SVG and
	// nothing else: no scripts, no fetches, no frames, no forms.
	statusCSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

// Options configure a Page. Every zero value is usable and means what its
// comment says.
type Options struct {
	// Inventory returns the endpoints and their containers now; nil: no
	// endpoints.
	Inventory func() inventory.Inventory
	// Exists reports whether an endpoint still exists, for one created
	// after the inventory was taken; the series of endpoints neither in the
	// inventory nor existing are dropped when the page is read. Nil: an
	// endpoint exists while the inventory lists it.
	Exists func(endpoint string) bool
	// Series is the recorder of invocations the charts are drawn from; nil:
	// an empty one (every endpoint's charts say it had no invocations).
	Series *Recorder
	// Alarms returns CloudWatch's metric alarms now; nil: the page has no
	// alarms section.
	Alarms func() []Alarm
	// Scaling returns Application Auto Scaling's scalable targets now,
	// each with its latest activities; nil: no autoscaling section.
	Scaling func() []ScalingTarget
	// Logger gets the page's own failures (a template that fails to
	// render); the zero Logger discards them.
	Logger zerolog.Logger
}

// Page serves the status page (ServePage) and its data (ServeJSON). Make
// one with New; it is safe for concurrent use.
type Page struct {
	o Options
}

// New makes a Page.
func New(o Options) *Page {
	if o.Series == nil {
		o.Series = NewRecorder(time.Now(), nil)
	}
	return &Page{o: o}
}

// ServeJSON serves GET /status.json: the report, as JSON.
func (p *Page) ServeJSON(w http.ResponseWriter, r *http.Request) {
	rep, _ := p.report(fromLoopback(r))
	b, err := json.Marshal(rep)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Security-Policy", "default-src 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.Write(b)
}

// ServePage serves GET /status: the report as a page, with charts.
func (p *Page) ServePage(w http.ResponseWriter, r *http.Request) {
	showLogs := fromLoopback(r)
	rep, ws := p.report(showLogs)
	var buf bytes.Buffer
	if err := statusTemplate.Execute(&buf, newStatusPage(rep, ws, showLogs)); err != nil {
		p.o.Logger.Error().Err(err).Msg("rendering the status page")
		http.Error(w, "rendering the status page failed", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", statusCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	w.Write(buf.Bytes())
}

// fromLoopback reports whether the request arrived on a loopback address of
// this machine (the listener's own address, not what the client claims).
func fromLoopback(r *http.Request) bool {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// statusPage is the template's data.
type statusPage struct {
	Report    Report
	ShowLogs  bool
	Refresh   int
	Endpoints []pageEndpoint
	// Alarms are the first pageAlarms of Report.Alarms; MoreAlarms how
	// many more status.json has.
	Alarms     []Alarm
	MoreAlarms int
}

type pageEndpoint struct {
	inventory.Endpoint
	Containers          int // running now, all variants
	Invocations, Errors int
	Rate, Latency       chart
	// Window is the per-variant table: nil when the endpoint had no
	// invocations in the window (the charts say so).
	Window []variantRow
}

// variantRow is one variant's line of the per-variant table, its figures
// as shown.
type variantRow struct {
	Name                         string
	Colour                       string // of its lines in the charts; "" when it has none
	Invocations, Errors          int
	ErrorPercent, TrafficPercent string
	P50, P99                     string // ms, or "—" without a successful invocation
}

// newStatusPage lays out the report: the endpoints with their charts.
func newStatusPage(rep Report, ws []*window, showLogs bool) statusPage {
	p := statusPage{Report: rep, ShowLogs: showLogs, Refresh: int(SeriesStep / time.Second), Alarms: rep.Alarms}
	if len(p.Alarms) > pageAlarms {
		p.Alarms, p.MoreAlarms = p.Alarms[:pageAlarms], len(p.Alarms)-pageAlarms
	}
	for _, e := range rep.Endpoints {
		pe := pageEndpoint{Endpoint: e}
		for i := range pe.Variants {
			for j := range pe.Variants[i].Copies {
				for k := range pe.Variants[i].Copies[j].Containers {
					pe.Containers++
					c := &pe.Variants[i].Copies[j].Containers[k]
					if n := len(c.LogTail); n > pageLogLines {
						c.LogTail = c.LogTail[n-pageLogLines:]
					}
				}
			}
		}
		var mine []*window
		colours := map[string]string{}
		for _, w := range ws {
			if w.key.endpoint == e.Name {
				colours[w.key.variant] = lineColour(len(mine))
				mine = append(mine, w)
			}
		}
		pe.Rate, pe.Latency, pe.Invocations, pe.Errors = endpointCharts(mine)
		for _, sum := range rep.Summaries {
			if sum.EndpointName != e.Name || sum.Invocations == 0 {
				continue
			}
			for _, v := range sum.Variants {
				row := variantRow{Name: variantLabel(v.VariantName), Colour: colours[v.VariantName],
					Invocations: v.Invocations, Errors: v.Errors,
					ErrorPercent: percent(v.ErrorPercent), TrafficPercent: percent(v.TrafficPercent),
					P50: millis(v.LatencyP50Seconds), P99: millis(v.LatencyP99Seconds)}
				if v.Shadow { // its invocations are copies of the callers'
					row.Name += " (shadow)"
					row.TrafficPercent += " copied"
				}
				pe.Window = append(pe.Window, row)
			}
		}
		p.Endpoints = append(p.Endpoints, pe)
	}
	return p
}

// percent shows a percentage with one decimal.
func percent(p float64) string { return strconv.FormatFloat(p, 'f', 1, 64) + " %" }

// millis shows a latency in seconds as milliseconds with three significant
// figures (but no exponent), or a dash for none.
func millis(s float64) string {
	if s <= 0 {
		return "—"
	}
	ms := s * 1000
	switch {
	case ms < 10:
		return strconv.FormatFloat(ms, 'f', 2, 64) + " ms"
	case ms < 100:
		return strconv.FormatFloat(ms, 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(ms, 'f', 0, 64) + " ms"
}

// ModelList is a short list of names and how many more there are.
type ModelList struct {
	Names []string
	More  int
}

// pageModels lists at most pageLoadedModels of the models a multi-model
// container has loaded.
func pageModels(c inventory.Container) ModelList {
	if c.MultiModel == nil {
		return ModelList{}
	}
	names := c.MultiModel.Loaded
	if len(names) > pageLoadedModels {
		return ModelList{names[:pageLoadedModels], len(names) - pageLoadedModels}
	}
	return ModelList{Names: names}
}

// shortID is the first 12 characters of a container ID, as docker ps
// shows it.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// humanBytes prints a byte count in binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
