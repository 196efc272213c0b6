package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/moby/moby/client"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/host"
	"github.com/mce-run/mce/internal/testenv"
)

// TestDockerMetrics runs a multi-container endpoint of probe containers and
// a multi-model endpoint on the real engine and checks, on real scrapes:
// the state metrics (a call in progress in mce_inflight_requests, a killed
// container's restart in mce_container_restarts_total and
// mce_container_ready); that the Grafana dashboard and the Prometheus
// configuration in docs/ use only metrics and labels mce serves, in PromQL
// that Prometheus' own promtool accepts; and that promtool's linter finds
// nothing to say about the metrics' names, types and help.
func TestDockerMetrics(t *testing.T) {
	cli := testenv.Docker(t)
	dir := testenv.MMEModels(t)
	testenv.Image(t, "modelserver")
	man := loadManifest(t, dir)
	root := testenv.RepoRoot(t)
	file := filepath.Join(t.TempDir(), "probes.yaml")
	os.WriteFile(file, []byte(`
Models:
  - ModelName: probes
    Containers:
      - {ContainerHostname: first, Image: mce-example/probe:latest}
      - {ContainerHostname: second, Image: mce-example/probe:latest}
    InferenceExecutionConfig: {Mode: Direct}
EndpointConfigs:
  - EndpointConfigName: probes
    ProductionVariants: [{VariantName: AllTraffic, ModelName: probes, InitialInstanceCount: 1, InstanceType: ml.c5.large}]
Endpoints:
  - {EndpointName: probes, EndpointConfigName: probes}
`), 0o644)
	h := dockerHostOn(t, 5*time.Second, file, mmeEndpointFile(t, dir, 20))
	c, url := h.RuntimeClient(), h.URL
	ctx := context.Background()
	call := func(host, attrs string) error {
		in := &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("probes"), TargetContainerHostname: aws.String(host),
			Body: []byte("hello")}
		if attrs != "" {
			in.CustomAttributes = aws.String(attrs)
		}
		_, err := invoke(t, c, in)
		return err
	}
	for _, h := range []string{"first", "second", "second"} {
		if err := call(h, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := call("first", "status=503"); err == nil {
		t.Fatal("status=503 answered 200")
	}
	for _, i := range []int{0, 1, 0} { // a miss, a miss, a hit
		m := man.Models[i]
		if _, err := invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("mme"), TargetModel: aws.String(m.TargetModel),
			ContentType: aws.String("application/json"), Body: m.Request}); err != nil {
			t.Fatal(err)
		}
	}
	// CPU use is a difference between two samples, taken at most every 5 s.
	var text string
	var fams map[string]*dto.MetricFamily
	eventually(t, 15*time.Second, "a CPU figure", func() bool {
		text = scrapeURL(t, url)
		fams = parseMetrics(t, text)
		return fams["mce_container_cpu_utilization_ratio"] != nil
	})
	for _, w := range []struct {
		name   string
		labels string
		want   float64
	}{
		{"mce_invocations_total", `endpoint="probes",variant="AllTraffic"`, 4},
		{"mce_invocation_5xx_errors_total", `endpoint="probes",variant="AllTraffic"`, 1},
		{"mce_container_invocations_total", `container="second",endpoint="probes",variant="AllTraffic"`, 2},
		{"mce_container_invocation_5xx_errors_total", `container="first",endpoint="probes",variant="AllTraffic"`, 1},
		{"mce_endpoint_status", `endpoint="probes",status="InService"`, 1},
		{"mce_endpoint_status", `endpoint="mme",status="Creating"`, 0},
		{"mce_container_ready", `container="first",endpoint="probes",variant="AllTraffic"`, 1},
		{"mce_container_restarts_total", `container="first",endpoint="probes",variant="AllTraffic"`, 0},
		{"mce_inflight_requests", `endpoint="probes",variant="AllTraffic"`, 0},
		{"mce_model_cache_requests_total", `endpoint="mme",variant="AllTraffic"`, 3},
		{"mce_model_cache_hits_total", `endpoint="mme",variant="AllTraffic"`, 1},
		{"mce_loaded_models", `container="modelserver",endpoint="mme",variant="AllTraffic"`, 2},
		{"mce_model_cache_models", `container="modelserver",endpoint="mme",variant="AllTraffic"`, 2},
		{"mce_model_loaded", `container="modelserver",endpoint="mme",model="` + man.Models[1].TargetModel + `",variant="AllTraffic"`, 1},
	} {
		if got, ok := sampleValue(fams, w.name, w.labels); !ok || got != w.want {
			t.Errorf("%s{%s} = %v (present: %v), want %v", w.name, w.labels, got, ok, w.want)
		}
	}
	if got, _ := sampleValue(fams, "mce_model_cache_bytes", `container="modelserver",endpoint="mme",variant="AllTraffic"`); got <= 0 {
		t.Errorf("mce_model_cache_bytes = %v with two models cached", got)
	}

	// One streamed call, so that the time-to-first-byte histogram shows
	// in the scrape the dashboard and docs are checked against.
	st, err := startStream(t, ctx, c, &sagemakerruntime.InvokeEndpointWithResponseStreamInput{EndpointName: aws.String("probes"),
		TargetContainerHostname: aws.String("first"), CustomAttributes: aws.String("stream=3"), Body: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	for st.next(t, 10*time.Second) {
	}
	if st.n == 0 {
		t.Fatal("nothing streamed")
	}
	fams = parseMetrics(t, scrapeURL(t, url))
	if _, ok := sampleValue(fams, "mce_time_to_first_byte_seconds", `endpoint="probes",variant="AllTraffic"`); !ok {
		t.Errorf("no mce_time_to_first_byte_seconds after a streamed call")
	}

	t.Run("dashboard", func(t *testing.T) { checkDashboard(t, root, fams) })
	t.Run("docs", func(t *testing.T) {
		// docs/metrics.md lists every mce metric a scrape shows, and no
		// other (the GPU metrics need a GPU to show).
		b, err := os.ReadFile(filepath.Join(root, "docs/metrics.md"))
		if err != nil {
			t.Fatal(err)
		}
		documented := map[string]bool{}
		for _, m := range regexp.MustCompile("(?m)^\\| `(mce_[a-z0-9_]+)` \\|").FindAllStringSubmatch(string(b), -1) {
			documented[m[1]] = true
		}
		for name := range fams {
			if strings.HasPrefix(name, "mce_") && !documented[name] {
				t.Errorf("docs/metrics.md has no row for %s", name)
			}
		}
		for name := range documented {
			// The GPU metrics need a GPU (a multi-model container's GPU
			// memory too: TestStatusPageFailedAndMultiModel serves those from a
			// stand-in report); the asynchronous ones an async endpoint (TestAsync*
			// scrape those); the drops of shadow variants' copies a
			// shadow at its bounds (TestShadowIsolation); the data capture
			// ones a capture writer, which this host has not, and sampled
			// calls (TestDataCaptureStoreDown checks them against this
			// document).
			if fams[name] == nil && !(strings.HasPrefix(name, "mce_gpu_") && slices.Contains(host.UsageMetricNames(), name)) &&
				!strings.HasPrefix(name, "mce_mme_gpu_") && !strings.HasPrefix(name, "mce_async_") && !strings.HasPrefix(name, "mce_inference_component_") &&
				name != "mce_shadow_copies_dropped_total" && !strings.HasPrefix(name, "mce_data_capture_") {
				t.Errorf("docs/metrics.md lists %s, which mce does not serve", name)
			}
		}
		if len(documented) < 30 {
			t.Errorf("docs/metrics.md has rows for %d metrics; its tables lost their shape", len(documented))
		}
	})
	t.Run("promtool", func(t *testing.T) {
		promtool := needPromtool(t)
		lint := exec.Command(promtool, "check", "metrics")
		lint.Stdin = strings.NewReader(text)
		if out, err := lint.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("promtool check metrics on a scrape: %v\n%s", err, out)
		}
		if out, err := exec.Command(promtool, "check", "config", filepath.Join(root, "docs/prometheus.yml")).CombinedOutput(); err != nil {
			t.Errorf("promtool check config docs/prometheus.yml: %v\n%s", err, out)
		}
		// Every dashboard and docs/metrics.md expression as a recording
		// rule: promtool parses them with Prometheus' own PromQL parser.
		rules := filepath.Join(t.TempDir(), "dashboard-rules.yml")
		writeDashboardRules(t, root, rules)
		if out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput(); err != nil {
			t.Errorf("promtool check rules on the dashboard's expressions: %v\n%s", err, out)
		}
	})

	// A call in progress is in flight, and is no longer once answered.
	inflight := func() float64 {
		v, _ := sampleValue(parseMetrics(t, scrapeURL(t, url)), "mce_inflight_requests", `endpoint="probes",variant="AllTraffic"`)
		return v
	}
	done := make(chan error, 1)
	go func() { done <- call("first", "sleep=3s") }()
	eventually(t, 2*time.Second, "mce_inflight_requests 1 during a 3 s call", func() bool { return inflight() == 1 })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := inflight(); n != 0 {
		t.Errorf("mce_inflight_requests = %v once the call is answered", n)
	}

	// kill -9 of the container's process: it is restarted, and counted.
	// This host's container only: other tests' hosts run probes/second too.
	f := client.Filters{}.Add("label", docker.LabelInstance+"="+h.Instance).
		Add("label", docker.LabelEndpoint+"=probes").Add("label", docker.LabelContainer+"=second")
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{Filters: f})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("containers of probes/second: %v, %d", err, len(list.Items))
	}
	if _, err := cli.ContainerKill(ctx, list.Items[0].ID, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	const lbl = `container="second",endpoint="probes",variant="AllTraffic"`
	eventually(t, 30*time.Second, "mce_container_restarts_total 1 and ready again after kill -9", func() bool {
		fams := parseMetrics(t, scrapeURL(t, url))
		restarts, _ := sampleValue(fams, "mce_container_restarts_total", lbl)
		ready, _ := sampleValue(fams, "mce_container_ready", lbl)
		return restarts == 1 && ready == 1
	})
	if err := call("second", ""); err != nil {
		t.Errorf("after the restart: %v", err)
	}
	if restarts, _ := sampleValue(parseMetrics(t, scrapeURL(t, url)), "mce_container_restarts_total", `container="first",endpoint="probes",variant="AllTraffic"`); restarts != 0 {
		t.Errorf("the container that was not killed counts %v restarts", restarts)
	}
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// needPromtool returns promtool's path, or skips the test when it is missing
// (fails when CI is set: scripts/deps.sh installs Debian's prometheus).
func needPromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but promtool is missing: %v (Debian package prometheus; scripts/deps.sh installs it)", err)
		}
		t.Skipf("SKIPPING promtool checks: promtool is missing (apt-get install prometheus, or scripts/deps.sh); CI never skips this")
	}
	return p
}

// parseMetrics parses Prometheus' text exposition format.
func parseMetrics(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parsing a scrape: %v", err)
	}
	return fams
}

// sampleValue is the value of the series of family name whose labels, sorted
// and written name="value" joined by commas, are exactly labels; a
// histogram's value is its count.
func sampleValue(fams map[string]*dto.MetricFamily, name, labels string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		var ls []string
		for _, lp := range m.GetLabel() {
			ls = append(ls, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
		}
		slices.Sort(ls)
		if strings.Join(ls, ",") != labels {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// dashboard is the part of a Grafana dashboard JSON model that holds queries.
type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

func loadDashboard(t *testing.T, root string) dashboard {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs/grafana/mce-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("docs/grafana/mce-dashboard.json: %v", err)
	}
	return d
}

// lblAny marks a metric whose labels cannot be checked: it has no sample.
const lblAny = "*"

var (
	// selectorRe finds metric names (every mce metric starts with mce_) and
	// their label matchers in PromQL and in Grafana's label_values().
	selectorRe = regexp.MustCompile(`\b(mce_[a-z0-9_]+)(\{[^}]*\})?`)
	matcherRe  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	byRe       = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	labelValRe = regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)
)

// checkDashboard: every metric a dashboard query names is in fams, with
// every label the query matches or groups by.
func checkDashboard(t *testing.T, root string, fams map[string]*dto.MetricFamily) {
	d := loadDashboard(t, root)
	labelsOf := func(name string) (map[string]bool, bool) {
		base := name
		f := fams[name]
		if f == nil {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(name, suffix); ok && fams[b] != nil && fams[b].GetType() == dto.MetricType_HISTOGRAM {
					base, f = b, fams[b]
				}
			}
		}
		if f == nil {
			if strings.HasPrefix(name, "mce_gpu_") && slices.Contains(host.UsageMetricNames(), name) {
				t.Logf("%s has no sample here (no GPU); mce declares it", name)
				return map[string]bool{lblAny: true}, true
			}
			return nil, false
		}
		ls := map[string]bool{}
		if base != name && strings.HasSuffix(name, "_bucket") {
			ls["le"] = true
		}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				ls[lp.GetName()] = true
			}
		}
		return ls, true
	}
	var queries []string
	check := func(where, q string, extra ...string) {
		queries = append(queries, q)
		sels := selectorRe.FindAllStringSubmatch(q, -1)
		if len(sels) == 0 {
			t.Errorf("%s: %q names no mce metric", where, q)
		}
		used := map[string]bool{}
		for _, l := range extra {
			used[l] = true
		}
		for _, g := range byRe.FindAllStringSubmatch(q, -1) {
			for _, l := range strings.Split(g[1], ",") {
				used[strings.TrimSpace(l)] = true
			}
		}
		for _, s := range sels {
			ls, ok := labelsOf(s[1])
			if !ok {
				t.Errorf("%s: %s is not in a scrape of mce", where, s[1])
				continue
			}
			for _, m := range matcherRe.FindAllStringSubmatch(s[2], -1) {
				if !ls[m[1]] && !ls[lblAny] {
					t.Errorf("%s: %s has no label %s", where, s[1], m[1])
				}
			}
			for l := range used {
				if l != "" && !ls[l] && !ls[lblAny] {
					t.Errorf("%s: %s has no label %s", where, s[1], l)
				}
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValRe.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(metric, label)", v.Name, v.Definition)
			continue
		}
		check("variable "+v.Name, m[1], m[2])
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			check("panel "+p.Title, tg.Expr)
		}
	}
	if len(queries) < 20 {
		t.Errorf("the dashboard has %d queries; it lost panels", len(queries))
	}
}

// writeDashboardRules writes the dashboard's panel expressions (Grafana's
// variables replaced by values) and docs/metrics.md's PromQL as a Prometheus
// rule file.
func writeDashboardRules(t *testing.T, root, path string) {
	d := loadDashboard(t, root)
	vars := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "15s", "$__range", "1h",
		"$endpoint", ".*", "$variant", ".*")
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	for i, p := range d.Panels {
		for j, tg := range p.Targets {
			rules = append(rules, rule{Record: fmt.Sprintf("dashboard:panel%d_%d", i, j), Expr: vars.Replace(tg.Expr)})
		}
	}
	// And the PromQL of docs/metrics.md: its table of CloudWatch statistics
	// and its promql block.
	b, err := os.ReadFile(filepath.Join(root, "docs/metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	var exprs []string
	for _, m := range regexp.MustCompile("(?m)^\\| [^|]+ \\| `([^`]+)` \\|$").FindAllStringSubmatch(doc, -1) {
		exprs = append(exprs, m[1])
	}
	if _, block, ok := strings.Cut(doc, "```promql\n"); ok {
		block, _, _ = strings.Cut(block, "```")
		var cur string
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "":
				if cur != "" {
					exprs, cur = append(exprs, cur), ""
				}
			default:
				cur += " " + strings.TrimSpace(line)
			}
		}
	}
	if len(exprs) < 12 {
		t.Errorf("found %d PromQL expressions in docs/metrics.md; the parsing or the document lost them", len(exprs))
	}
	for i, e := range exprs {
		rules = append(rules, rule{Record: fmt.Sprintf("docs:expr%d", i), Expr: e})
	}
	// JSON is YAML: promtool reads it as a rule file.
	b, err = json.Marshal(map[string]any{"groups": []any{map[string]any{"name": "mce-dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
