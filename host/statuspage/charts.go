package statuspage

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

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
	// for the rate chart; for the latency chart, buckets with a latency,
	// summed over the variants): 0 means an empty chart.
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

// lineColour is the colour of the i-th of an endpoint's variants (in the
// order of windows: by name) in both charts and the per-variant table.
func lineColour(i int) string { return lineColours[i%len(lineColours)] }

// endpointCharts draws an endpoint's invocations per second (a line per
// variant, and one for errors) and its latency (per variant, a solid p50
// and a dashed p99 line in the variant's colour), and counts its
// invocations and errors in the window.
func endpointCharts(ws []*window) (rate, latency chart, invocations, errors int) {
	step := SeriesStep.Seconds()
	rate = chart{Title: "Invocations per second", Empty: "no invocations in the last 15 minutes"}
	latency = chart{Title: "Latency of successful invocations (ms)", Empty: "no successful invocations in the last 15 minutes"}
	var rateVals, latVals [][]float64
	var errVals = make([]float64, seriesSlots)
	for i, w := range ws {
		vals := make([]float64, seriesSlots)
		p50 := make([]float64, seriesSlots)
		p99 := make([]float64, seriesSlots)
		buckets := 0 // with a latency
		for j := range w.slots {
			sl := &w.slots[j]
			vals[j] = float64(sl.invocations) / step
			errVals[j] += float64(sl.errors) / step
			invocations += int(sl.invocations)
			errors += int(sl.errors)
			if sl.invocations > sl.errors {
				p50[j] = float64(sl.quantile(0.5)) / float64(time.Millisecond)
				p99[j] = float64(sl.quantile(0.99)) / float64(time.Millisecond)
				buckets++
			} else {
				p50[j], p99[j] = -1, -1 // no value: the line breaks
			}
		}
		name := variantLabel(w.key.variant)
		colour := lineColour(i)
		rateVals = append(rateVals, vals)
		rate.Lines = append(rate.Lines, chartLine{Label: name, Colour: colour})
		// A variant without a successful call in the window (all failed,
		// or failed before routing) has no latency to draw, nor a legend.
		if buckets > 0 {
			latVals = append(latVals, p50, p99)
			latency.Lines = append(latency.Lines,
				chartLine{Label: name + " p50", Colour: colour, Dots: []chartPoint{}},
				chartLine{Label: name + " p99", Colour: colour, Dashed: true}) // no dots: dashed reads as dashed
			latency.Total += buckets
		}
	}
	if errors > 0 {
		rateVals = append(rateVals, errVals)
		rate.Lines = append(rate.Lines, chartLine{Label: "errors", Colour: "#dc2626", Dashed: true})
	}
	rate.Total = invocations
	rate.plot(rateVals, func(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) + "/s" })
	latency.plot(latVals, func(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) + " ms" })
	return rate, latency, invocations, errors
}

// variantLabel names a variant on the page; "" is the invocations that
// failed before a variant was picked.
func variantLabel(v string) string {
	if v == "" {
		return "(failed before routing)"
	}
	return v
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
