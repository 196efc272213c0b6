package loadtest

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Chart is one chart, drawn as PNG (for READMEs) and SVG (inlined in the
// HTML report) from the same plot.
type Chart struct {
	Name  string // file name without extension
	Title string
	PNG   []byte
	SVG   string // an <svg> element, without the XML prologue
}

var (
	colP50    = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colP90    = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	colP99    = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colOK     = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	colTarget = color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}
	colExtra  = color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
)

const chartW, chartH = 8 * vg.Inch, 3.6 * vg.Inch

// Charts draws the report's charts: latency and throughput over time,
// latency against throughput per stage, and, with mce's metrics, model
// latency against overhead and the models resident.
func (rep *Report) Charts() ([]Chart, error) {
	var out []Chart
	add := func(name, title string, p *plot.Plot) error {
		c, err := render(name, title, p)
		if err != nil {
			return fmt.Errorf("chart %s: %w", name, err)
		}
		out = append(out, c)
		return nil
	}
	secs := rep.Seconds
	okOnly := func(f func(Second) float64) plotter.XYs {
		var pts plotter.XYs
		for _, s := range secs {
			if s.Count > 0 {
				pts = append(pts, plotter.XY{X: float64(s.T), Y: f(s)})
			}
		}
		return pts
	}

	p := newPlot("Latency per second (from the intended send)", "seconds", "ms")
	addLine(p, "p50", okOnly(func(s Second) float64 { return s.P50 }), colP50, false)
	addLine(p, "p90", okOnly(func(s Second) float64 { return s.P90 }), colP90, false)
	addLine(p, "p99", okOnly(func(s Second) float64 { return s.P99 }), colP99, false)
	rep.targetLines(p, 0, float64(len(secs)))
	rep.stageMarks(p)
	if err := add("latency", "Latency over time", p); err != nil {
		return nil, err
	}

	p = newPlot("Requests per second", "seconds", "requests/s")
	// a last second under half a second long would be scaled up from a
	// few calls: left out of the chart (it is in seconds.csv)
	whole := func(f func(Second) float64) plotter.XYs {
		var pts plotter.XYs
		for _, s := range secs {
			if s.Span >= 0.5 {
				pts = append(pts, plotter.XY{X: float64(s.T), Y: f(s) / s.Span})
			}
		}
		return pts
	}
	addLine(p, "successful", whole(func(s Second) float64 { return float64(s.Completed - s.Errors) }), colOK, false)
	addLine(p, "errors", whole(func(s Second) float64 { return float64(s.Errors) }), colP99, false)
	rep.stageMarks(p)
	if err := add("throughput", "Throughput over time", p); err != nil {
		return nil, err
	}

	p = newPlot("Latency against throughput, per stage", "requests/s", "ms")
	var s50, s90, s99 plotter.XYs
	var maxRPS float64
	for _, s := range rep.Stages {
		if s.Count == 0 {
			continue
		}
		s50 = append(s50, plotter.XY{X: s.RPS, Y: s.P50})
		s90 = append(s90, plotter.XY{X: s.RPS, Y: s.P90})
		s99 = append(s99, plotter.XY{X: s.RPS, Y: s.P99})
		maxRPS = max(maxRPS, s.RPS)
	}
	addLine(p, "p50", s50, colP50, true)
	addLine(p, "p90", s90, colP90, true)
	addLine(p, "p99", s99, colP99, true)
	rep.targetLines(p, 0, maxRPS)
	if err := add("stages", "Stages", p); err != nil {
		return nil, err
	}

	if m := rep.Metrics; m != nil && len(m.Samples) > 0 {
		opt := func(f func(MetricSample) *float64) plotter.XYs {
			var pts plotter.XYs
			for _, s := range m.Samples {
				if v := f(s); v != nil {
					pts = append(pts, plotter.XY{X: s.T, Y: *v})
				}
			}
			return pts
		}
		p = newPlot("mce: model latency and overhead (mean per scrape)", "seconds", "ms")
		addLine(p, "model latency", opt(func(s MetricSample) *float64 { return s.ModelLatencyMS }), colP50, false)
		addLine(p, "overhead latency", opt(func(s MetricSample) *float64 { return s.OverheadLatencyMS }), colP90, false)
		addLine(p, "model loading wait", opt(func(s MetricSample) *float64 { return s.ModelLoadingWait }), colP99, false)
		rep.stageMarks(p)
		if err := add("mce_latency", "mce: model latency vs overhead", p); err != nil {
			return nil, err
		}
		var loaded, cpu plotter.XYs
		for _, s := range m.Samples {
			loaded = append(loaded, plotter.XY{X: s.T, Y: s.LoadedModels})
			cpu = append(cpu, plotter.XY{X: s.T, Y: s.CPU})
		}
		p = newPlot("mce: models loaded and container CPU", "seconds", "models / cores")
		addLine(p, "models loaded", loaded, colExtra, false)
		addLine(p, "CPU (cores)", cpu, colOK, false)
		rep.stageMarks(p)
		if err := add("mce_models", "mce: models resident", p); err != nil {
			return nil, err
		}
		if p := capacityPlot(m.Samples); p != nil {
			rep.stageMarks(p)
			if err := add("capacity", "mce: capacity beside the load (autoscaling)", p); err != nil {
				return nil, err
			}
		}
	}
	if p := rep.variantsPlot(); p != nil {
		if err := add("variants", "Per variant: client-side latency beside mce's model and overhead latency", p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// variantsPlot draws, per variant, this tool's latency beside mce's
// ModelLatency and OverheadLatency (p50 and p99 of each, side by side); nil
// when mce's figures have no latency.
func (rep *Report) variantsPlot() *plot.Plot {
	vs := rep.Variants
	has := false
	for _, v := range vs {
		if v.Mce != nil && (v.Mce.ModelLatency != nil || v.Mce.OverheadLatency != nil) {
			has = true
		}
	}
	if !has {
		return nil
	}
	type series struct {
		name string
		col  color.Color
		val  func(VariantReport) float64
	}
	// the p99 bars: the p50 colour halfway to white
	light := func(c color.RGBA) color.RGBA {
		return color.RGBA{R: c.R/2 + 0x80, G: c.G/2 + 0x80, B: c.B/2 + 0x80, A: 0xff}
	}
	client := func(f func(*Latency) float64) func(VariantReport) float64 {
		return func(v VariantReport) float64 {
			if v.Latency == nil {
				return 0
			}
			return f(v.Latency)
		}
	}
	server := func(model bool, f func(*ServerLatency) float64) func(VariantReport) float64 {
		return func(v VariantReport) float64 {
			if v.Mce == nil {
				return 0
			}
			l := v.Mce.OverheadLatency
			if model {
				l = v.Mce.ModelLatency
			}
			if l == nil {
				return 0
			}
			return f(l)
		}
	}
	p50 := func(l *ServerLatency) float64 { return l.P50 }
	p99 := func(l *ServerLatency) float64 { return l.P99 }
	all := []series{
		{"client p50", colP50, client(func(l *Latency) float64 { return l.P50 })},
		{"client p99", light(colP50), client(func(l *Latency) float64 { return l.P99 })},
		{"mce ModelLatency p50", colP90, server(true, p50)},
		{"mce ModelLatency p99", light(colP90), server(true, p99)},
		{"mce OverheadLatency p50", colOK, server(false, p50)},
		{"mce OverheadLatency p99", light(colOK), server(false, p99)},
	}
	p := newPlot("Latency per variant: this tool (client) and mce (server side)", "variant", "ms")
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Variant
	}
	p.NominalX(names...)
	// six bars a variant in at most about 6.5 inches
	w := min(vg.Points(14), 6.5*vg.Inch/vg.Length(len(vs))*0.8/vg.Length(len(all)))
	var top float64
	for k, s := range all {
		vals := make(plotter.Values, len(vs))
		for i, v := range vs {
			vals[i] = s.val(v)
			top = max(top, vals[i])
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			continue
		}
		b.Color = s.col
		b.LineStyle.Width = 0
		b.Offset = (vg.Length(k) - vg.Length(len(all)-1)/2) * w
		p.Add(b)
		p.Legend.Add(s.name, b)
	}
	if top > 0 {
		p.Y.Max = top * 1.6 // room for the six legend entries above the bars
	}
	// half a slot either side, so the first and last groups sit clear of
	// the axes as the middle ones do
	p.X.Min, p.X.Max = -0.5, float64(len(vs))-0.5
	return p
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Y.Min = 0
	p.X.Min = 0
	// top left, text after the swatches: a browser that draws the SVG in a
	// wider fallback font lets the text run into the plot, not off its edge
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(12)
	p.Add(plotter.NewGrid())
	return p
}

func addLine(p *plot.Plot, name string, pts plotter.XYs, c color.Color, points bool) {
	if len(pts) == 0 {
		return
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return // NaN or Inf: nothing to draw
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	p.Add(l) // widens p.Y.Max to the data
	p.Legend.Add(name, l)
	if points {
		s, err := plotter.NewScatter(pts)
		if err == nil {
			s.GlyphStyle.Color = c
			s.GlyphStyle.Shape = draw.CircleGlyph{}
			p.Add(s)
		}
	}
}

// targetLines draws the latency target as dashed horizontal lines.
func (rep *Report) targetLines(p *plot.Plot, x0, x1 float64) {
	if x1 <= x0 {
		x1 = x0 + 1
	}
	for _, t := range rep.Plan.targets {
		y := msOf(t.Limit)
		l, err := plotter.NewLine(plotter.XYs{{X: x0, Y: y}, {X: x1, Y: y}})
		if err != nil {
			continue
		}
		l.Color = colTarget
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l) // widens p.Y.Max to the target
		p.Legend.Add("target "+t.String(), l)
	}
}

// stageMarks draws a dotted vertical line where each stage after the first
// starts.
func (rep *Report) stageMarks(p *plot.Plot) {
	for _, s := range rep.Stages[min(1, len(rep.Stages)):] {
		x := s.Started.Sub(rep.Started).Seconds()
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: 0}})
		if err != nil {
			continue
		}
		// a vertical line as tall as the data, found once the plot is drawn
		v := &vline{x: x, style: l.LineStyle}
		v.style.Color = colTarget
		v.style.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
		p.Add(v)
	}
}

// vline draws a vertical line across the data area.
type vline struct {
	x     float64
	style draw.LineStyle
}

func (v *vline) Plot(c draw.Canvas, p *plot.Plot) {
	tx, _ := p.Transforms(&c)
	x := tx(v.x)
	if x < c.Min.X || x > c.Max.X {
		return
	}
	c.StrokeLine2(v.style, x, c.Min.Y, x, c.Max.Y)
}

// headroom raises the Y axis above the data so the legend (top right)
// does not cover it.
func headroom(p *plot.Plot) {
	top := p.Y.Max
	if math.IsInf(top, 0) || math.IsNaN(top) || top <= 0 {
		top = 1
	}
	p.Y.Max = top * 1.35
}

func render(name, title string, p *plot.Plot) (Chart, error) {
	headroom(p)
	c := Chart{Name: name, Title: title}
	var buf bytes.Buffer
	wt, err := p.WriterTo(chartW, chartH, "png")
	if err != nil {
		return c, err
	}
	if _, err := wt.WriteTo(&buf); err != nil {
		return c, err
	}
	c.PNG = append([]byte(nil), buf.Bytes()...)
	buf.Reset()
	wt, err = p.WriterTo(chartW, chartH, "svg")
	if err != nil {
		return c, err
	}
	if _, err := wt.WriteTo(&buf); err != nil {
		return c, err
	}
	svg := buf.String()
	if i := strings.Index(svg, "<svg"); i >= 0 {
		svg = svg[i:]
	}
	c.SVG = svg
	return c, nil
}

// capacityPlot draws the endpoint's instances (wanted and ready) or its
// inference components' copies (wanted and running) over the run, beside
// the calls mce had in flight — the load a scaling policy reacts to; nil
// when the endpoint had neither.
func capacityPlot(samples []MetricSample) *plot.Plot {
	var desired, ready, desiredCopies, copies, inflight plotter.XYs
	var anyInstances, anyCopies bool
	for _, s := range samples {
		desired = append(desired, plotter.XY{X: s.T, Y: s.DesiredInstances})
		ready = append(ready, plotter.XY{X: s.T, Y: s.Instances})
		desiredCopies = append(desiredCopies, plotter.XY{X: s.T, Y: s.DesiredCopies})
		copies = append(copies, plotter.XY{X: s.T, Y: s.Copies})
		inflight = append(inflight, plotter.XY{X: s.T, Y: s.InFlight})
		anyInstances = anyInstances || s.DesiredInstances > 0 || s.Instances > 0
		anyCopies = anyCopies || s.DesiredCopies > 0 || s.Copies > 0
	}
	if !anyInstances && !anyCopies {
		return nil
	}
	p := newPlot("mce: capacity and calls in flight", "seconds", "instances / copies / calls")
	if anyCopies {
		addLine(p, "copies wanted", desiredCopies, colP90, false)
		addLine(p, "copies running", copies, colOK, false)
	} else {
		addLine(p, "instances wanted", desired, colP90, false)
		addLine(p, "instances ready", ready, colOK, false)
	}
	addLine(p, "calls in flight", inflight, colExtra, false)
	headroom(p)
	return p
}
