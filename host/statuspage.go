package host

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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
// control characters and are cut to maxLogLineRunes.

//go:embed status.html
var statusHTML string

var statusTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"bytes":      humanBytes,
	"pct":        func(w float64) string { return strconv.FormatFloat(w, 'g', 4, 64) },
	"pageModels": pageModels,
	"shortID":    shortID,
}).Parse(statusHTML))

const (
	// maxLogLineRunes cuts each log line shown.
	maxLogLineRunes = 300
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

// StatusReport is what GET /status.json answers: the inventory and the
// charts' series.
type StatusReport struct {
	Taken         time.Time `json:"Taken"`
	StepSeconds   int       `json:"StepSeconds"`
	WindowSeconds int       `json:"WindowSeconds"`
	// LogLines says whether the containers' log lines (and IDs) are given:
	// "shown" on loopback, else why not.
	LogLines      string               `json:"LogLines"`
	Endpoints     []inventory.Endpoint `json:"Endpoints"`
	Series        []Series             `json:"Series"`
	SeriesDropped int64                `json:"SeriesDropped"`
}

const logLinesHidden = "hidden: container output can hold secrets, so it is shown only to requests that reach mce on a loopback address"

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
	Series *seriesRecorder
	// Logger gets the page's own failures (a template that fails to
	// render); the zero Logger discards them.
	Logger zerolog.Logger
}

// Page serves the status page (ServePage) and its data (ServeJSON). Make
// one with newPage; it is safe for concurrent use.
type Page struct {
	o Options
}

// newPage makes a Page.
func newPage(o Options) *Page {
	if o.Series == nil {
		o.Series = newSeriesRecorder(time.Now(), nil)
	}
	return &Page{o: o}
}

// Report is what GET /status.json answers for a request that arrives on a
// loopback address (showLogs) or elsewhere.
func (p *Page) Report(showLogs bool) StatusReport {
	rep, _ := p.report(showLogs)
	return rep
}

// report builds the report, and the windows its series come from; log
// lines and container IDs only when showLogs.
func (p *Page) report(showLogs bool) (StatusReport, []*window) {
	inv := inventory.Inventory{Taken: time.Now().UTC(), Endpoints: []inventory.Endpoint{}}
	if p.o.Inventory != nil {
		inv = p.o.Inventory()
	}
	known := map[string]bool{}
	for i := range inv.Endpoints {
		e := &inv.Endpoints[i]
		known[e.Name] = true
		for j := range e.Variants {
			for k := range e.Variants[j].Copies {
				cs := e.Variants[j].Copies[k].Containers
				for n := range cs {
					c := &cs[n]
					if !showLogs {
						c.LogTail, c.ID = nil, ""
						continue
					}
					c.LogTail = cleanLogLines(c.LogTail)
				}
			}
		}
	}
	ws := p.o.Series.windows(inv.Taken, func(e string) bool { return known[e] || (p.o.Exists != nil && p.o.Exists(e)) })
	rep := StatusReport{
		Taken: inv.Taken, StepSeconds: int(SeriesStep / time.Second), WindowSeconds: int(SeriesWindow / time.Second),
		LogLines: "shown", Endpoints: inv.Endpoints, Series: make([]Series, 0, len(ws)), SeriesDropped: p.o.Series.dropped.Load(),
	}
	if !showLogs {
		rep.LogLines = logLinesHidden
	}
	for _, w := range ws {
		pts := w.points()
		if pts == nil {
			pts = []SeriesPoint{}
		}
		rep.Series = append(rep.Series, Series{EndpointName: w.key.endpoint, VariantName: w.key.variant, Points: pts})
	}
	return rep, ws
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

// ansiEscape matches terminal control sequences (colours, cursor moves).
var ansiEscape = regexp.MustCompile(`\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])`)

// cleanLogLines makes container output safe to show as text: valid UTF-8,
// no terminal escapes, no control or bidirectional-override characters
// (which could make a line read as something else), at most maxLogLineRunes
// runes each.
func cleanLogLines(lines []string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, cleanLogLine(l))
	}
	return out
}

func cleanLogLine(l string) string {
	l = strings.ToValidUTF8(l, "\uFFFD")
	l = ansiEscape.ReplaceAllString(l, "")
	l = strings.Map(func(r rune) rune {
		switch {
		case r == '\t':
			return ' '
		case unicode.IsControl(r), unicode.Is(unicode.Bidi_Control, r):
			return '\uFFFD'
		}
		return r
	}, l)
	if utf8.RuneCountInString(l) > maxLogLineRunes {
		l = string([]rune(l)[:maxLogLineRunes]) + "…"
	}
	return l
}

// statusPage is the template's data.
type statusPage struct {
	Report    StatusReport
	ShowLogs  bool
	Refresh   int
	Endpoints []pageEndpoint
}

type pageEndpoint struct {
	inventory.Endpoint
	Containers          int // running now, all variants
	Invocations, Errors int
	Rate, Latency       chart
}

// newStatusPage lays out the report: the endpoints with their charts.
func newStatusPage(rep StatusReport, ws []*window, showLogs bool) statusPage {
	p := statusPage{Report: rep, ShowLogs: showLogs, Refresh: int(SeriesStep / time.Second)}
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
		for _, w := range ws {
			if w.key.endpoint == e.Name {
				mine = append(mine, w)
			}
		}
		pe.Rate, pe.Latency, pe.Invocations, pe.Errors = endpointCharts(mine)
		p.Endpoints = append(p.Endpoints, pe)
	}
	return p
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

// chart is one inline SVG line chart over the window.
type chart struct {
	Title  string
	Width  int
	Height int
	Left   int // x of the plot's left edge
	Right  int // x of its right edge
	Top    int
	Bottom int // y of the plot's bottom edge
	YMax   string
	Grid   []gridLine
	Lines  []chartLine
	// Total is the sum of what the chart plots per bucket (invocations
	// for the rate chart, buckets with latency for the other): 0 means an
	// empty chart.
	Total int
	Empty string
}

type chartLine struct {
	Label  string
	Colour string
	Dashed bool
	// Runs are the polylines' points attributes: a line breaks where a
	// bucket has no value.
	Runs []string
	// Dots mark each bucket's value (for lines with gaps).
	Dots []chartPoint
}

type chartPoint struct{ X, Y string }

// gridLine is a vertical mark at a time in the window.
type gridLine struct {
	X     string
	Label string
}

var lineColours = []string{"#2563eb", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d"}

const (
	chartWidth, chartHeight = 560, 150
	chartLeft, chartRight   = 56, 552
	chartTop, chartBottom   = 10, 128
)

// endpointCharts draws an endpoint's invocations per second (a line per
// variant, and one for errors) and its latency (p50 and p99 of all
// variants together), and counts its invocations and errors in the window.
func endpointCharts(ws []*window) (rate, latency chart, invocations, errors int) {
	step := SeriesStep.Seconds()
	rate = chart{Title: "Invocations per second", Empty: "no invocations in the last 15 minutes"}
	latency = chart{Title: "Latency of successful invocations (ms)", Empty: "no successful invocations in the last 15 minutes"}
	var rateVals [][]float64
	var errVals = make([]float64, seriesSlots)
	var all window
	for i, w := range ws {
		vals := make([]float64, seriesSlots)
		for j, sl := range w.slots {
			vals[j] = float64(sl.invocations) / step
			errVals[j] += float64(sl.errors) / step
			invocations += int(sl.invocations)
			errors += int(sl.errors)
		}
		name := w.key.variant
		if name == "" {
			name = "(failed before routing)"
		}
		rateVals = append(rateVals, vals)
		rate.Lines = append(rate.Lines, chartLine{Label: name, Colour: lineColours[i%len(lineColours)]})
		if i == 0 {
			all.first = w.first
		}
		all.merge(w)
	}
	if errors > 0 {
		rateVals = append(rateVals, errVals)
		rate.Lines = append(rate.Lines, chartLine{Label: "errors", Colour: "#dc2626", Dashed: true})
	}
	rate.Total = invocations
	rate.plot(rateVals, func(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) + "/s" })

	p50 := make([]float64, seriesSlots)
	p99 := make([]float64, seriesSlots)
	for j := range all.slots {
		sl := &all.slots[j]
		if sl.invocations > sl.errors {
			p50[j] = float64(sl.quantile(0.5)) / float64(time.Millisecond)
			p99[j] = float64(sl.quantile(0.99)) / float64(time.Millisecond)
			latency.Total++
		} else {
			p50[j], p99[j] = -1, -1 // no value: the line breaks
		}
	}
	latency.Lines = []chartLine{{Label: "p50", Colour: "#2563eb", Dots: []chartPoint{}}, {Label: "p99", Colour: "#ea580c", Dots: []chartPoint{}}}
	latency.plot([][]float64{p50, p99}, func(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) + " ms" })
	return rate, latency, invocations, errors
}

// plot fills the chart's geometry and each line's runs from its values, one
// per bucket, oldest first; a negative value is a gap.
func (c *chart) plot(vals [][]float64, label func(float64) string) {
	c.Width, c.Height = chartWidth, chartHeight
	c.Left, c.Right, c.Top, c.Bottom = chartLeft, chartRight, chartTop, chartBottom
	var top float64
	for _, vs := range vals {
		for _, v := range vs {
			top = max(top, v)
		}
	}
	if top <= 0 {
		top = 1
	}
	top *= 1.1
	c.YMax = label(top)
	dx := float64(c.Right-c.Left) / float64(seriesSlots-1)
	for _, m := range []int{10, 5} {
		x := float64(c.Left) + float64(seriesSlots-1-m*60/int(SeriesStep/time.Second))*dx
		c.Grid = append(c.Grid, gridLine{X: fmt.Sprintf("%.1f", x), Label: fmt.Sprintf("−%d min", m)})
	}
	for i, vs := range vals {
		var runs, pts []string
		var lastX, lastY float64
		flush := func() {
			if len(pts) == 1 { // a lone bucket: a short dash, so that it shows
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", lastX+3, lastY))
			}
			if len(pts) > 0 {
				runs = append(runs, strings.Join(pts, " "))
			}
			pts = pts[:0]
		}
		for j, v := range vs {
			if v < 0 {
				flush()
				continue
			}
			lastX = float64(c.Left) + float64(j)*dx
			lastY = float64(c.Bottom) - v/top*float64(c.Bottom-c.Top)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", lastX, lastY))
			if c.Lines[i].Dots != nil {
				c.Lines[i].Dots = append(c.Lines[i].Dots, chartPoint{fmt.Sprintf("%.1f", lastX), fmt.Sprintf("%.1f", lastY)})
			}
		}
		flush()
		c.Lines[i].Runs = runs
	}
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
