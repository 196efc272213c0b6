package statuspage

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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

// A shadow variant is marked on the page, beside its production variant.
func TestPageMarksShadowVariants(t *testing.T) {
	p := New(Options{Inventory: func() inventory.Inventory {
		return inventory.Inventory{Taken: time.Now().UTC(), Endpoints: []inventory.Endpoint{{Name: "ab", Status: "InService",
			Variants: []inventory.Variant{{Name: "Prod", Weight: 1}, {Name: "Challenger", Weight: 0.5, Shadow: true}}}}}
	}})
	page := serve(t, p, "/status", true)
	if !strings.Contains(page, "<td>Challenger (shadow: gets copies, answers no caller)</td>") || !strings.Contains(page, "<td>Prod</td>") {
		t.Error("the page does not mark the shadow variant (and only it)")
	}
}
