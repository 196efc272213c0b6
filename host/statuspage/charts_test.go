package statuspage

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mce-run/mce/host/inventory"
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

// TestVariantSummaries: the window's figures per variant add up what was
// recorded: invocations, errors, shares of the endpoint's traffic and the
// percentiles of the successful calls (within a bin of the truth).
func TestVariantSummaries(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := NewRecorder(t0, nil)
	for i := range 100 { // spread over several buckets
		r.recordAt("ep", "A", t0.Add(time.Duration(i)*time.Second), 2*time.Millisecond, true)
	}
	for i := range 50 {
		r.recordAt("ep", "B", t0.Add(time.Duration(i)*time.Second), 20*time.Millisecond, i%5 != 0)
	}
	sums := summaries(nil, r.windows(t0.Add(2*time.Minute), nil))
	if len(sums) != 1 || sums[0].EndpointName != "ep" || sums[0].Invocations != 150 || sums[0].Errors != 10 || len(sums[0].Variants) != 2 {
		t.Fatalf("summaries %+v", sums)
	}
	a, b := sums[0].Variants[0], sums[0].Variants[1]
	near := func(name string, got, want, tol float64) {
		t.Helper()
		if got < want-tol || got > want+tol {
			t.Errorf("%s = %v, want %v ± %v", name, got, want, tol)
		}
	}
	if a.VariantName != "A" || a.Invocations != 100 || a.Errors != 0 || a.ErrorPercent != 0 {
		t.Errorf("A: %+v", a)
	}
	near("A's share", a.TrafficPercent, 66.67, 0.01)
	near("B's share", b.TrafficPercent, 33.33, 0.01)
	if b.VariantName != "B" || b.Invocations != 50 || b.Errors != 10 || b.ErrorPercent != 20 {
		t.Errorf("B: %+v", b)
	}
	// A bin is √2 wide and a percentile never exceeds the maximum.
	within := func(name string, got float64, d time.Duration) {
		t.Helper()
		if s := d.Seconds(); got > s || got < s/1.4143 {
			t.Errorf("%s = %v s, want within a bin below %v", name, got, d)
		}
	}
	within("A's p50", a.LatencyP50Seconds, 2*time.Millisecond)
	within("A's p99", a.LatencyP99Seconds, 2*time.Millisecond)
	within("B's p50", b.LatencyP50Seconds, 20*time.Millisecond)
	within("B's p99", b.LatencyP99Seconds, 20*time.Millisecond)
	if a.LatencyMaxSeconds != 0.002 || b.LatencyMeanSeconds != 0.02 {
		t.Errorf("A's max %v, B's mean %v", a.LatencyMaxSeconds, b.LatencyMeanSeconds)
	}
}

// TestVariantSummariesWithShadow: a shadow variant's copies are not the
// callers' calls: the production variants' shares add up to 100 % without
// them, and the shadow's share is that of the calls copied to it.
func TestVariantSummariesWithShadow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := NewRecorder(t0, nil)
	for i := range 100 {
		r.recordAt("ep", "Prod", t0.Add(time.Duration(i)*time.Second), 2*time.Millisecond, true)
		if i%2 == 0 {
			r.recordAt("ep", "Challenger", t0.Add(time.Duration(i)*time.Second), 3*time.Millisecond, true)
		}
	}
	eps := []inventory.Endpoint{{Name: "ep", Variants: []inventory.Variant{{Name: "Prod"}, {Name: "Challenger", Shadow: true}}}}
	sums := summaries(eps, r.windows(t0.Add(2*time.Minute), nil))
	if len(sums) != 1 || sums[0].Invocations != 100 || len(sums[0].Variants) != 2 {
		t.Fatalf("summaries %+v", sums)
	}
	c, p := sums[0].Variants[0], sums[0].Variants[1]
	if c.VariantName != "Challenger" || !c.Shadow || c.Invocations != 50 || c.TrafficPercent != 50 ||
		p.VariantName != "Prod" || p.Shadow || p.TrafficPercent != 100 {
		t.Errorf("variants %+v", sums[0].Variants)
	}
}
