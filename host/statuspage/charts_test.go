package statuspage

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLatencyChartPerVariant: the latency chart has, per variant, a solid
// p50 and a dashed p99 line in the colour the rate chart gives that
// variant; each breaks where its variant had no successful call, and a
// slower variant's line is drawn higher.
func TestLatencyChartPerVariant(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := NewRecorder(t0, nil)
	for i := range 50 { // A: buckets 0 and 2, 2 ms
		r.recordAt("ep", "A", t0.Add(time.Second+time.Duration(i)*time.Millisecond), 2*time.Millisecond, true)
		r.recordAt("ep", "A", t0.Add(2*SeriesStep+time.Second), 2*time.Millisecond, true)
	}
	for range 40 { // B: bucket 1, 20 ms, and 10 errors
		r.recordAt("ep", "B", t0.Add(SeriesStep+time.Second), 20*time.Millisecond, true)
	}
	for range 10 {
		r.recordAt("ep", "B", t0.Add(SeriesStep+time.Second), time.Millisecond, false)
	}
	r.recordAt("ep", "", t0.Add(SeriesStep), time.Millisecond, false) // failed before routing: no latency
	rate, lat, inv, errs := endpointCharts(r.windows(t0.Add(4*SeriesStep), nil))
	if inv != 151 || errs != 11 {
		t.Errorf("%d invocations, %d errors; want 151, 11", inv, errs)
	}

	var labels []string
	for _, l := range lat.Lines {
		labels = append(labels, l.Label)
	}
	if got := strings.Join(labels, ","); got != "A p50,A p99,B p50,B p99" {
		t.Fatalf("latency lines %s, want a p50 and a p99 per variant with a successful call", got)
	}
	colour := map[string]string{}
	for _, l := range rate.Lines {
		colour[l.Label] = l.Colour
	}
	for i, want := range []struct {
		colour string
		dashed bool
		runs   int // A has no call in bucket 1: its lines break there
	}{{colour["A"], false, 2}, {colour["A"], true, 2}, {colour["B"], false, 1}, {colour["B"], true, 1}} {
		l := lat.Lines[i]
		if l.Colour != want.colour || l.Dashed != want.dashed || len(l.Runs) != want.runs {
			t.Errorf("%s: colour %s, dashed %v, %d runs; want %s, %v, %d", l.Label, l.Colour, l.Dashed, len(l.Runs), want.colour, want.dashed, want.runs)
		}
	}
	if colour["A"] == colour["B"] || colour["A"] == "" {
		t.Errorf("the variants' colours %v are not distinct", colour)
	}
	if lat.Total != 3 {
		t.Errorf("latency chart total %d, want 3 buckets with a latency", lat.Total)
	}
	// y grows downwards: B's 20 ms sit well above A's 2 ms.
	y := func(l chartLine) float64 {
		if len(l.Dots) == 0 {
			t.Fatalf("%s has no dots", l.Label)
		}
		v, _ := strconv.ParseFloat(l.Dots[0].Y, 64)
		return v
	}
	if a, b := y(lat.Lines[0]), y(lat.Lines[2]); b >= a-50 {
		t.Errorf("p50 of A at y=%v, of B at y=%v: want B's line far above A's", a, b)
	}
}
