package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"

	cw "github.com/mce-run/mce/host/cloudwatch"
	"github.com/mce-run/mce/internal/sdkhttp"
)

// fakeMce stands for mce's side of the calls: each call goes to a variant
// in turn and is recorded in a real CloudWatch store, as mce's publisher
// records it (Invocations 1 per call, 4XX/5XX 0 or 1, ModelLatency and
// OverheadLatency in microseconds for a call the model answered).
type fakeMce struct {
	t        *testing.T
	svc      *cw.Service
	endpoint string
	variants []string

	mu      sync.Mutex
	n       int
	series  map[string]*cw.Series       // variant/metric
	values  map[string][]float64        // variant/metric: every latency recorded
	counts  map[string]map[string]int   // variant: metric: Sum recorded
	outcome map[string]map[string]int   // variant: "ok" or the error code
	unit    map[string]string           // metric: unit
	dims    func(string) []cw.Dimension // variant's dimensions
}

func newFakeMce(t *testing.T, svc *cw.Service, endpoint string, variants ...string) *fakeMce {
	f := &fakeMce{t: t, svc: svc, endpoint: endpoint, variants: variants, series: map[string]*cw.Series{},
		values: map[string][]float64{}, counts: map[string]map[string]int{}, outcome: map[string]map[string]int{},
		unit: map[string]string{"Invocations": "None", "Invocation4XXErrors": "None", "Invocation5XXErrors": "None",
			"ModelLatency": "Microseconds", "OverheadLatency": "Microseconds"}}
	f.dims = func(v string) []cw.Dimension {
		return []cw.Dimension{{Name: "EndpointName", Value: endpoint}, {Name: "VariantName", Value: v}}
	}
	return f
}

func (f *fakeMce) observe(variant, metric string, v float64) {
	k := variant + "/" + metric
	s := f.series[k]
	if s == nil {
		var err error
		if s, err = f.svc.Series("AWS/SageMaker", metric, f.dims(variant), f.unit[metric], cw.Standard); err != nil {
			f.t.Error(err)
			return
		}
		f.series[k] = s
	}
	s.Observe(v)
	if f.unit[metric] == "Microseconds" {
		f.values[k] = append(f.values[k], v)
	}
	if f.counts[variant] == nil {
		f.counts[variant] = map[string]int{}
	}
	f.counts[variant][metric] += int(v)
}

// Invoke answers every 7th call of the second variant with the model's
// 404; the first variant's model takes about 2 ms, the second's about 9 ms
// (spread over a range, so the percentiles differ from the mean).
func (f *fakeMce) Invoke(ctx context.Context, c Call) Outcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := f.n
	f.n++
	v := f.variants[i%len(f.variants)]
	if f.outcome[v] == nil {
		f.outcome[v] = map[string]int{}
	}
	f.observe(v, "Invocations", 1)
	fail := v == f.variants[len(f.variants)-1] && i%7 == 0
	f.observe(v, "Invocation4XXErrors", map[bool]float64{true: 1}[fail])
	f.observe(v, "Invocation5XXErrors", 0)
	if fail {
		f.outcome[v]["ModelError:404"]++
		return Outcome{Code: "ModelError:404", Message: "not found"}
	}
	base := 2000.0
	if v != f.variants[0] {
		base = 9000
	}
	f.observe(v, "ModelLatency", base+float64(i%50)*40)
	f.observe(v, "OverheadLatency", 150+float64(i%10)*20)
	f.outcome[v]["ok"]++
	return Outcome{Variant: v}
}

// rankValue is the value CloudWatch's pNN stands for: the one at rank
// NN/100·(n−1) of the sorted values (the lower one).
func rankValue(vals []float64, pct float64) float64 {
	s := slices.Clone(vals)
	slices.Sort(s)
	return s[int(math.Floor(pct/100*float64(len(s)-1)))]
}

func mean(vals []float64) float64 {
	var s float64
	for _, v := range vals {
		s += v
	}
	return s / float64(len(vals))
}

func openCloudWatch(t *testing.T, o cw.Options) (*cw.Service, *httptest.Server, *CloudWatch) {
	t.Helper()
	o.Dir = filepath.Join(t.TempDir(), "cloudwatch")
	svc, err := cw.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	srv := httptest.NewServer(svc) // svc.ServeHTTP
	t.Cleanup(srv.Close)
	return svc, srv, cloudWatchClient(srv.URL, srv.Client())
}

func cloudWatchClient(url string, hc *http.Client) *CloudWatch {
	c := cloudwatch.New(cloudwatch.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), Credentials: aws.AnonymousCredentials{},
		HTTPClient: &sdkhttp.Client{Next: hc}, RetryMaxAttempts: 1})
	return &CloudWatch{Client: c, URL: url, Timeout: 5 * time.Second}
}

func runAgainst(t *testing.T, inv Invoker, c *CloudWatch) *Report {
	t.Helper()
	p := mustPlan(t, Plan{Stages: []Stage{{Name: "two users", Users: 2, Duration: dur(400 * time.Millisecond)}}})
	rep, err := Run(context.Background(), p, InvokerFunc(func(ctx context.Context, call Call) Outcome {
		time.Sleep(time.Millisecond)
		return inv.Invoke(ctx, call)
	}), Options{Endpoint: "ab", CloudWatch: c})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestCloudWatchPerVariant: after a run, the report holds each variant's
// figures as mce's CloudWatch API answers them (a real store served over
// HTTP, read with aws-sdk-go-v2's client): Invocations and the 4XX errors
// as recorded, ModelLatency and OverheadLatency p50/p99 within the 1 % of
// the store's sketches and their exact average, beside the calls this tool
// saw each variant answer; another endpoint's variants stay out. The text,
// JSON and HTML reports show them, and the chart is drawn.
func TestCloudWatchPerVariant(t *testing.T) {
	svc, _, c := openCloudWatch(t, cw.Options{})
	other := newFakeMce(t, svc, "other", "X")
	other.Invoke(context.Background(), Call{}) // another endpoint's traffic in the same minutes
	fake := newFakeMce(t, svc, "ab", "VariantA", "VariantB")
	rep := runAgainst(t, fake, c)

	if cr := rep.CloudWatch; cr == nil || cr.Error != "" || cr.URL != c.URL || cr.PeriodS%60 != 0 || cr.Start.Second() != 0 ||
		cr.Start.After(rep.Started) || !cr.End.After(rep.Ended) || cr.End.Sub(cr.Start) != time.Duration(cr.PeriodS)*time.Second {
		t.Fatalf("cloudwatch %+v for a run from %v to %v", rep.CloudWatch, rep.Started, rep.Ended)
	}
	if len(rep.Variants) != 2 || rep.Variants[0].Variant != "VariantA" || rep.Variants[1].Variant != "VariantB" {
		t.Fatalf("variants %+v", rep.Variants)
	}
	var answered int64
	for _, v := range rep.Variants {
		name := v.Variant
		m := v.Mce
		if m == nil {
			t.Fatalf("%s: no mce figures", name)
		}
		rec := fake.counts[name]
		if m.Invocations != float64(rec["Invocations"]) || m.Invocations == 0 {
			t.Errorf("%s: Invocations %v, recorded %d", name, m.Invocations, rec["Invocations"])
		}
		if m.Errors4XX != float64(rec["Invocation4XXErrors"]) || m.Errors5XX != 0 {
			t.Errorf("%s: 4XX %v 5XX %v, recorded %d and 0", name, m.Errors4XX, m.Errors5XX, rec["Invocation4XXErrors"])
		}
		if v.Answered != int64(fake.outcome[name]["ok"]) || v.Latency == nil || v.Latency.Count != v.Answered {
			t.Errorf("%s: answered %d (latency %+v), the fake answered %d", name, v.Answered, v.Latency, fake.outcome[name]["ok"])
		}
		answered += v.Answered
		for metric, l := range map[string]*ServerLatency{"ModelLatency": m.ModelLatency, "OverheadLatency": m.OverheadLatency} {
			vals := fake.values[name+"/"+metric]
			if l == nil {
				t.Errorf("%s %s: none", name, metric)
				continue
			}
			if l.Count != int64(len(vals)) {
				t.Errorf("%s %s: count %d, recorded %d", name, metric, l.Count, len(vals))
			}
			for _, q := range []struct {
				name     string
				got, pct float64
			}{{"p50", l.P50, 50}, {"p99", l.P99, 99}} {
				want := rankValue(vals, q.pct) / 1000
				if math.Abs(q.got-want) > 0.01*want {
					t.Errorf("%s %s %s = %.4f ms, recorded %.4f ms: beyond the sketch's 1 %%", name, metric, q.name, q.got, want)
				}
			}
			if want := mean(vals) / 1000; math.Abs(l.Mean-want) > 1e-9*want {
				t.Errorf("%s %s average = %v ms, recorded %v ms", name, metric, l.Mean, want)
			}
		}
	}
	if a, b := rep.Variants[0].Mce.ModelLatency.P50, rep.Variants[1].Mce.ModelLatency.P50; a >= b {
		t.Errorf("ModelLatency p50: VariantA %.2f ms, VariantB %.2f ms; the fake's B is the slower", a, b)
	}
	if s := rep.Stages[0]; s.Completed-s.Errors != answered || s.Errors != int64(fake.outcome["VariantB"]["ModelError:404"]) {
		t.Errorf("stage %d calls, %d errors; variants answered %d", s.Completed, s.Errors, answered)
	}

	var sum bytes.Buffer
	rep.Summary(&sum)
	for _, want := range []string{"per variant", "mce's own server-side figures, from its CloudWatch API", "client p50", "model p50", "ovhd p99",
		"VariantA", "VariantB"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
	dir := t.TempDir()
	if _, err := rep.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	back := readReportJSON(t, filepath.Join(dir, FileJSON))
	if len(back.Variants) != 2 || back.Variants[1].Mce == nil || back.Variants[1].Mce.Invocations != rep.Variants[1].Mce.Invocations ||
		back.CloudWatch == nil || back.CloudWatch.PeriodS != rep.CloudWatch.PeriodS {
		t.Errorf("report.json: variants %+v, cloudwatch %+v", back.Variants, back.CloudWatch)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, FileJSON))
	for _, key := range []string{`"variants"`, `"mce_cloudwatch"`, `"invocation_4xx_errors"`, `"model_latency"`, `"overhead_latency"`, `"client_latency"`, `"answered"`} {
		if !bytes.Contains(raw, []byte(key)) {
			t.Errorf("report.json lacks %s", key)
		}
	}
	html, _ := os.ReadFile(filepath.Join(dir, FileHTML))
	for _, want := range []string{`<table id="variants">`, "server side (mce's CloudWatch API)", "<td class=\"l\">VariantB</td>", `id="chart-variants"`} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("report.html lacks %s", want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "variants.png")); err != nil {
		t.Error(err)
	}
}

// TestCloudWatchSpelling: mce labels its metrics with the endpoint's own
// spelling and names match case-insensitively, so a run against "AB" finds
// the variants of "ab"; a variant only mce saw (a shadow variant answers
// no client) is listed too.
func TestCloudWatchSpelling(t *testing.T) {
	svc, _, c := openCloudWatch(t, cw.Options{})
	fake := newFakeMce(t, svc, "ab", "VariantA")
	shadow := newFakeMce(t, svc, "ab", "Shadow")
	rep := runAgainst(t, InvokerFunc(func(ctx context.Context, call Call) Outcome {
		shadow.Invoke(ctx, call)
		return fake.Invoke(ctx, call)
	}), nil)
	rep.Endpoint = "AB"
	c.fill(context.Background(), rep)
	if rep.CloudWatch.Error != "" || len(rep.Variants) != 2 {
		t.Fatalf("%+v, variants %+v", rep.CloudWatch, rep.Variants)
	}
	if v := rep.Variants[1]; v.Variant != "VariantA" || v.Mce == nil || v.Mce.Invocations != float64(fake.counts["VariantA"]["Invocations"]) {
		t.Errorf("VariantA %+v", v)
	}
	if v := rep.Variants[0]; v.Variant != "Shadow" || v.Answered != 0 || v.Latency != nil || v.Mce == nil || v.Mce.Invocations != float64(shadow.n) {
		t.Errorf("Shadow %+v (mce %+v), %d calls", v, v.Mce, shadow.n)
	}
}

// TestCloudWatchUnavailable: an API that cannot be reached, or refuses the
// call, leaves the run and its client-side figures whole and says why in
// the report.
func TestCloudWatchUnavailable(t *testing.T) {
	_, srv, _ := openCloudWatch(t, cw.Options{})
	down := cloudWatchClient(srv.URL, srv.Client())
	srv.Close()
	_, _, refusing := openCloudWatch(t, cw.Options{Authorize: func(ctx context.Context, r *http.Request, action string) error {
		return errors.New("not you")
	}})
	for _, tc := range []struct {
		name string
		c    *CloudWatch
		want string
	}{
		{"down", down, "could not be reached"},
		{"refused", refusing, "answered AccessDenied: not you"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := runAgainst(t, InvokerFunc(func(ctx context.Context, call Call) Outcome { return Outcome{Variant: "AllTraffic"} }), tc.c)
			if rep.Stages[0].Completed == 0 || rep.CloudWatch == nil || !strings.Contains(rep.CloudWatch.Error, tc.want) ||
				!strings.Contains(rep.CloudWatch.Error, tc.c.URL) {
				t.Fatalf("stage %+v, cloudwatch %+v", rep.Stages[0], rep.CloudWatch)
			}
			if len(rep.Variants) != 1 || rep.Variants[0].Answered != rep.Stages[0].Completed || rep.Variants[0].Mce != nil {
				t.Errorf("variants %+v", rep.Variants)
			}
			var sum bytes.Buffer
			rep.Summary(&sum)
			if !strings.Contains(sum.String(), "per variant: no server-side figures: mce's CloudWatch API at "+tc.c.URL) {
				t.Errorf("summary:\n%s", sum.String())
			}
			var html bytes.Buffer
			if err := rep.WriteHTML(&html, nil); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(html.String(), `id="cloudwatch-error"`) {
				t.Error("the HTML report does not say why mce's figures are missing")
			}
		})
	}
}

// TestCloudWatchWindow: whole minutes from the minute the run started, one
// period that ends after the run.
func TestCloudWatchWindow(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		start, end, from string
		period           int32
	}{
		{"2026-11-28T10:04:31.5Z", "2026-11-28T10:04:45Z", "2026-11-28T10:04:00Z", 60},
		{"2026-11-28T10:04:31.5Z", "2026-11-28T10:05:00Z", "2026-11-28T10:04:00Z", 120},
		{"2026-11-28T10:04:00Z", "2026-11-28T10:04:59.999Z", "2026-11-28T10:04:00Z", 60},
		{"2026-11-28T10:04:59Z", "2026-11-28T11:04:59.1Z", "2026-11-28T10:04:00Z", 3660},
		{"2026-11-28T12:04:31+02:00", "2026-11-28T12:06:01+02:00", "2026-11-28T10:04:00Z", 180},
	} {
		from, to, period := CloudWatchWindow(at(tc.start), at(tc.end))
		if !from.Equal(at(tc.from)) || period != tc.period || !to.Equal(from.Add(time.Duration(period)*time.Second)) || !to.After(at(tc.end)) {
			t.Errorf("%s to %s: %v, %v, %d; want %s, period %d", tc.start, tc.end, from, to, period, tc.from, tc.period)
		}
	}
}

func readReportJSON(t *testing.T, path string) *Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// TestVariantsWithoutCloudWatch: with mce's figures not asked for
// (--cloudwatch=false, or SageMaker), two variants still get a table of
// what this tool measured, without the server-side columns.
func TestVariantsWithoutCloudWatch(t *testing.T) {
	var mu sync.Mutex
	n := 0
	rep := runAgainst(t, InvokerFunc(func(ctx context.Context, call Call) Outcome {
		mu.Lock()
		defer mu.Unlock()
		n++
		return Outcome{Variant: []string{"blue", "green"}[n%2]}
	}), nil)
	if rep.CloudWatch != nil || len(rep.Variants) != 2 || rep.Variants[0].Answered+rep.Variants[1].Answered != rep.Stages[0].Completed {
		t.Fatalf("cloudwatch %+v, variants %+v", rep.CloudWatch, rep.Variants)
	}
	var sum bytes.Buffer
	rep.Summary(&sum)
	if s := sum.String(); !strings.Contains(s, "client p99") || !strings.Contains(s, "green") || strings.Contains(s, "invocations") {
		t.Errorf("summary:\n%s", s)
	}
	var html bytes.Buffer
	if err := rep.WriteHTML(&html, nil); err != nil {
		t.Fatal(err)
	}
	if h := html.String(); !strings.Contains(h, `<td class="l">green</td>`) || strings.Contains(h, "server side (mce") {
		t.Errorf("the HTML report's variants: %s", h[strings.Index(h, `<table id="variants">`):])
	}
}

// TestCloudWatchOnCompressedClock: against an mce whose AWS time runs ahead
// (mce serve --time-compression), the run's minutes are asked for on mce's
// clock, shifted by the mce_aws_clock_offset_seconds the scrapes read; the
// wall-clock window finds nothing there.
func TestCloudWatchOnCompressedClock(t *testing.T) {
	const ahead = 7 * time.Hour
	svc, _, c := openCloudWatch(t, cw.Options{Now: func() time.Time { return time.Now().Add(ahead) }})
	fake := newFakeMce(t, svc, "ab", "VariantA", "VariantB")
	rep := runAgainst(t, fake, c)
	for _, v := range rep.Variants {
		if v.Mce != nil && v.Mce.Invocations > 0 {
			t.Fatalf("the wall-clock window found %v invocations of %s on a clock 7 h ahead", v.Mce.Invocations, v.Variant)
		}
	}
	off := ahead.Seconds()
	rep.Metrics = &Metrics{ClockOffsetFirst: &off, ClockOffsetLast: &off}
	c.fill(context.Background(), rep)
	if cr := rep.CloudWatch; cr == nil || cr.Error != "" || cr.ClockOffsetS != off || cr.Start.Before(rep.Started.Add(ahead-time.Minute)) {
		t.Fatalf("cloudwatch %+v", rep.CloudWatch)
	}
	var got float64
	for _, v := range rep.Variants {
		if v.Mce != nil {
			got += v.Mce.Invocations
		}
	}
	if want := float64(fake.counts["VariantA"]["Invocations"] + fake.counts["VariantB"]["Invocations"]); got != want || got == 0 {
		t.Fatalf("invocations on mce's clock: %v, recorded %v", got, want)
	}
	if !strings.Contains(rep.CloudWatch.Minutes(), "compressed clock") {
		t.Errorf("Minutes() = %q does not say the window is on mce's clock", rep.CloudWatch.Minutes())
	}
}
