package statuspage

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mce-run/mce/host/inventory"
)

// serve answers one GET through the page's handlers as the host mounts
// them, on a loopback address or not.
func serve(t *testing.T, p *Page, path string, loopback bool) string {
	t.Helper()
	ip := net.ParseIP("192.0.2.10")
	if loopback {
		ip = net.IPv6loopback
	}
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: ip, Port: 9464}))
	w := httptest.NewRecorder()
	h := p.ServePage
	if strings.HasSuffix(path, ".json") {
		h = p.ServeJSON
	}
	h(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
	}
	b, _ := io.ReadAll(w.Result().Body)
	return string(b)
}

// TestPageZeroOptions: a Page of zero Options serves an empty page and an
// empty report (no inventory, no recorder, no logger given).
func TestPageZeroOptions(t *testing.T) {
	p := New(Options{})
	if page := serve(t, p, "/status", true); !strings.Contains(page, "<html") {
		t.Errorf("the page: %s", page)
	}
	var rep Report
	if err := json.Unmarshal([]byte(serve(t, p, "/status.json", true)), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Endpoints == nil || len(rep.Endpoints) != 0 || rep.Series == nil || len(rep.Series) != 0 || rep.Taken.IsZero() || rep.StepSeconds != 5 {
		t.Errorf("report %+v", rep)
	}
}

// TestPageOnItsOptions: the page shows the inventory its func returns,
// logs cleaned on loopback and hidden elsewhere, and charts the Recorder's
// series of the endpoints that are listed or that Exists says exist; the
// series of others are dropped.
func TestPageOnItsOptions(t *testing.T) {
	exists := map[string]bool{"ab": true, "new": true} // "new" was created after the inventory was taken
	series := NewRecorder(time.Now(), nil)
	for _, e := range []string{"ab", "new", "gone"} {
		series.Record(e, "A", time.Now().Add(-time.Millisecond), true)
	}
	p := New(Options{
		Inventory: func() inventory.Inventory {
			return inventory.Inventory{Taken: time.Now().UTC(), Endpoints: []inventory.Endpoint{{Name: "ab", Status: "InService",
				Variants: []inventory.Variant{{Name: "A", Copies: []inventory.Copy{{Containers: []inventory.Container{{
					Hostname: "english", ID: "0123456789abcdef", Ready: true, LogTail: []string{"<script>x</script>", "\x1b[31mred\x1b[0m"}}}}}}}}}}
		},
		Exists: func(e string) bool { return exists[e] },
		Series: series,
	})

	page := serve(t, p, "/status", true)
	for _, want := range []string{`<span class="name">ab</span>`, ">english<", "0123456789ab", "&lt;script&gt;x&lt;/script&gt;", "red", `data-total="1"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, "\x1b") {
		t.Error("the page holds raw markup or a terminal escape")
	}
	var rep Report
	if err := json.Unmarshal([]byte(serve(t, p, "/status.json", true)), &rep); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range rep.Series {
		names = append(names, s.EndpointName)
	}
	if strings.Join(names, ",") != "ab,new" || series.Len() != 2 {
		t.Errorf("series %v (%d recorded), want ab,new", names, series.Len())
	}
	if got := rep.Endpoints[0].Variants[0].Copies[0].Containers[0].LogTail; len(got) != 2 || got[1] != "red" {
		t.Errorf("log lines on loopback %q", got)
	}

	page = serve(t, p, "/status", false)
	if strings.Contains(page, "script") || strings.Contains(page, "0123456789ab") || !strings.Contains(page, ">english<") {
		t.Error("beyond loopback the page shows log lines or container IDs, or not the container")
	}
	if rep := p.Report(false); rep.LogLines == "shown" || rep.Endpoints[0].Variants[0].Copies[0].Containers[0].ID != "" {
		t.Errorf("report beyond loopback %+v", rep)
	}
}

// A shadow variant is marked on the page, beside its production variant;
// in the per-variant table its share is that of the calls copied to it.
func TestPageMarksShadowVariants(t *testing.T) {
	series := NewRecorder(time.Now(), nil)
	for i := range 4 {
		series.recordAt("ab", "Prod", time.Now(), time.Millisecond, true)
		if i%2 == 0 {
			series.recordAt("ab", "Challenger", time.Now(), time.Millisecond, true)
		}
	}
	p := New(Options{Inventory: func() inventory.Inventory {
		return inventory.Inventory{Taken: time.Now().UTC(), Endpoints: []inventory.Endpoint{{Name: "ab", Status: "InService",
			Variants: []inventory.Variant{{Name: "Prod", Weight: 1}, {Name: "Challenger", Weight: 0.5, Shadow: true}}}}}
	}, Series: series})
	page := serve(t, p, "/status", true)
	if !strings.Contains(page, "<td>Challenger (shadow: gets copies, answers no caller)</td>") || !strings.Contains(page, "<td>Prod</td>") {
		t.Error("the page does not mark the shadow variant (and only it)")
	}
	if !regexp.MustCompile(`<span class="variant">Challenger \(shadow\)</span></td><td class="num">2</td>.*<td class="num">50.0 % copied</td></tr>`).MatchString(page) ||
		!regexp.MustCompile(`<span class="variant">Prod</span></td><td class="num">4</td>.*<td class="num">100.0 %</td></tr>`).MatchString(page) {
		t.Error("the per-variant table does not give the shadow the share of calls copied to it, and Prod all of them")
	}
}

// TestPageComparesVariants: for an A/B test the page draws each variant's
// latency in its own colour and tables each variant's figures over the
// window, as /status.json's Summaries give them; a production variant
// without invocations has a row of zeros, a shadow variant none.
func TestPageComparesVariants(t *testing.T) {
	series := NewRecorder(time.Now(), nil)
	for range 100 {
		series.recordAt("ab", "VariantA", time.Now(), 2*time.Millisecond, true)
	}
	for range 50 {
		series.recordAt("ab", "VariantB", time.Now(), 20*time.Millisecond, true)
	}
	p := New(Options{
		Inventory: func() inventory.Inventory {
			return inventory.Inventory{Taken: time.Now().UTC(), Endpoints: []inventory.Endpoint{{Name: "ab", Status: "InService",
				Variants: []inventory.Variant{{Name: "VariantA", Weight: 2}, {Name: "VariantB", Weight: 1}, {Name: "VariantC"}, {Name: "Shadow", Shadow: true}}}}}
		},
		Series: series,
	})
	var rep Report
	if err := json.Unmarshal([]byte(serve(t, p, "/status.json", false)), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Summaries) != 1 || len(rep.Summaries[0].Variants) != 3 {
		t.Fatalf("summaries %+v, want ab's VariantA, VariantB and VariantC", rep.Summaries)
	}
	s := rep.Summaries[0]
	a, b, c := s.Variants[0], s.Variants[1], s.Variants[2]
	if s.Invocations != 150 || a.VariantName != "VariantA" || a.Invocations != 100 || b.Invocations != 50 ||
		c.VariantName != "VariantC" || c.Invocations != 0 || c.TrafficPercent != 0 || c.LatencyP50Seconds != 0 {
		t.Errorf("summary %+v", s)
	}
	if math.Abs(a.TrafficPercent-200.0/3) > 1e-9 || b.LatencyP50Seconds > 0.02 || b.LatencyP50Seconds < 0.02/math.Sqrt2 {
		t.Errorf("VariantA's share %v, VariantB's p50 %v s", a.TrafficPercent, b.LatencyP50Seconds)
	}

	page := serve(t, p, "/status", false)
	// The rate chart's legend gives each variant its colour.
	colour := map[string]string{}
	for _, m := range regexp.MustCompile(`<i style="background:(#[0-9a-f]{6})"></i>(Variant[A-Z])\b`).FindAllStringSubmatch(page, -1) {
		colour[m[2]] = m[1]
	}
	if len(colour) != 2 || colour["VariantA"] == colour["VariantB"] {
		t.Fatalf("legend colours %v", colour)
	}
	// The latency chart: a solid p50 and a dashed p99 per variant, in its colour.
	for _, v := range []string{"VariantA", "VariantB"} {
		p50 := regexp.MustCompile(`<polyline class="series" fill="none" stroke="` + colour[v] + `" stroke-width="1.5" points="[^"]+"><title>` + v + ` p50</title>`)
		p99 := regexp.MustCompile(`<polyline class="series" fill="none" stroke="` + colour[v] + `" stroke-width="1.5" stroke-dasharray="4 3" points="[^"]+"><title>` + v + ` p99</title>`)
		if !p50.MatchString(page) || !p99.MatchString(page) {
			t.Errorf("no solid p50 and dashed p99 line of %s in %s", v, colour[v])
		}
		if !strings.Contains(page, `<i class="dashed" style="border-top-color:`+colour[v]+`"></i>`+v+` p99`) {
			t.Errorf("the legend lacks %s p99, dashed", v)
		}
	}
	// The table: a row per production variant, as the summary says.
	rows := regexp.MustCompile(`<tr class="variant-window">(.*)</tr>`).FindAllStringSubmatch(page, -1)
	want := []string{
		`<td><i class="swatch" style="background:` + colour["VariantA"] + `"></i><span class="variant">VariantA</span></td><td class="num">100</td><td class="num">0</td><td class="num">0.0 %</td><td class="num">` + millis(a.LatencyP50Seconds) + `</td><td class="num">` + millis(a.LatencyP99Seconds) + `</td><td class="num">66.7 %</td>`,
		`<td><i class="swatch" style="background:` + colour["VariantB"] + `"></i><span class="variant">VariantB</span></td><td class="num">50</td><td class="num">0</td><td class="num">0.0 %</td><td class="num">` + millis(b.LatencyP50Seconds) + `</td><td class="num">` + millis(b.LatencyP99Seconds) + `</td><td class="num">33.3 %</td>`,
		`<td><span class="variant">VariantC</span></td><td class="num">0</td><td class="num">0</td><td class="num">0.0 %</td><td class="num">—</td><td class="num">—</td><td class="num">0.0 %</td>`,
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows in the per-variant table, want %d", len(rows), len(want))
	}
	for i := range want {
		if rows[i][1] != want[i] {
			t.Errorf("row %d:\n%s\nwant\n%s", i, rows[i][1], want[i])
		}
	}
	if strings.Contains(page, "<script") {
		t.Error("the page holds a script")
	}
}
