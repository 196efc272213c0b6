package loadtest

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Report is what a run measured. It is written as report.json; the CSV
// files, charts and HTML page are views of it.
type Report struct {
	Endpoint    string        `json:"endpoint"`
	Started     time.Time     `json:"started"`
	Ended       time.Time     `json:"ended"`
	WallMS      float64       `json:"wall_ms"`
	Interrupted bool          `json:"interrupted"`
	StopReason  string        `json:"stop_reason,omitempty"`
	Targets     []string      `json:"latency_target,omitempty"`
	Answers     Answers       `json:"answers"`
	Stages      []StageReport `json:"stages"`
	// ErrorSamples holds the first message seen for each error code.
	ErrorSamples map[string]string `json:"error_samples,omitempty"`
	Cold         Latency           `json:"cold_latency"`
	Warm         Latency           `json:"warm_latency"`
	Generator    Generator         `json:"generator"`
	Seconds      []Second          `json:"seconds"`
	Metrics      *Metrics          `json:"mce_metrics,omitempty"`
	// Variants are the endpoint's variants that answered calls of the run
	// (client side) and, against mce, mce's own figures of each, read from
	// its CloudWatch API after the run (server side).
	Variants []VariantReport `json:"variants,omitempty"`
	// CloudWatch says where and over which minutes mce's figures were
	// read, or why they are missing; nil when they were not asked for.
	CloudWatch *CloudWatchReport `json:"mce_cloudwatch,omitempty"`
	Plan       *Plan             `json:"plan"`
}

// StageReport is one stage's figures. Latency counts from the intended send
// time, successful calls only; failures are counted by code.
type StageReport struct {
	Index       int              `json:"stage"`
	Name        string           `json:"name"`
	Users       int              `json:"users,omitempty"`
	SpawnRate   float64          `json:"spawn_rate,omitempty"`
	Rate        float64          `json:"intended_rate,omitempty"`
	ThinkTimeMS float64          `json:"think_time_ms,omitempty"`
	PlannedMS   float64          `json:"planned_ms"`
	Started     time.Time        `json:"started"`
	Ended       time.Time        `json:"ended"`
	WallMS      float64          `json:"wall_ms"`
	Intended    int64            `json:"intended_sends,omitempty"`
	Sent        int64            `json:"sent"`
	Unsent      int64            `json:"unsent,omitempty"`
	Completed   int64            `json:"completed"`
	Errors      int64            `json:"errors"`
	ErrorRate   float64          `json:"error_rate"`
	Codes       map[string]int64 `json:"errors_by_code,omitempty"`
	RPS         float64          `json:"rps"`
	SendRate    float64          `json:"achieved_send_rate"`
	Latency
	TTFB           *Latency      `json:"time_to_first_byte,omitempty"`
	SendLag        Latency       `json:"send_lag"`
	MetTarget      *bool         `json:"met_target,omitempty"`
	GeneratorCPUMS float64       `json:"generator_cpu_ms"`
	Mce            *StageMetrics `json:"mce,omitempty"`

	cpu time.Duration
}

// Answers are what SageMaker's load-testing guidance asks of a run.
type Answers struct {
	// BestStage is the stage (from 1) with the highest throughput among
	// those that met the latency target (and the error-rate bound); 0 when
	// none did or there is no target.
	BestStage     int     `json:"best_stage,omitempty"`
	BestStageName string  `json:"best_stage_name,omitempty"`
	BestRPS       float64 `json:"best_stage_rps,omitempty"`
	// MostModelsResident is the most models mce held loaded at once
	// (scraped); absent without metrics.
	MostModelsResident *float64 `json:"most_models_resident,omitempty"`
	// ColdP50/WarmP50: median latency of the first call to each model and
	// of later calls.
	ColdP50 float64 `json:"cold_p50_ms,omitempty"`
	WarmP50 float64 `json:"warm_p50_ms,omitempty"`
}

// Generator is the load generator's own use of the machine.
type Generator struct {
	CPUUserMS    float64  `json:"cpu_user_ms"`
	CPUSystemMS  float64  `json:"cpu_system_ms"`
	CPUCores     float64  `json:"cpu_cores_used"`
	NumCPU       int      `json:"num_cpu"`
	GOMAXPROCS   int      `json:"gomaxprocs"`
	PeakInFlight int64    `json:"peak_inflight"`
	MaxInFlight  int      `json:"max_inflight"`
	Saturated    bool     `json:"saturated"`
	Notes        []string `json:"notes,omitempty"`
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func targetStrings(ts []Target) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.String())
	}
	return out
}

func joinTargets(ts []Target) string { return strings.Join(targetStrings(ts), ", ") }

// stageReport fills sr's figures from stage i's accumulator.
func (r *runner) stageReport(i int, sr StageReport) StageReport {
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	a := r.rec.stages[i]
	sr.Sent, sr.Completed, sr.Errors = a.sent, a.completed, a.errors
	if sr.Intended > 0 && sr.Intended > sr.Sent {
		sr.Unsent = sr.Intended - sr.Sent
	}
	sr.Codes = nil
	if len(a.codes) > 0 {
		sr.Codes = map[string]int64{}
		for k, v := range a.codes {
			sr.Codes[k] = v
		}
	}
	if a.completed > 0 {
		sr.ErrorRate = float64(a.errors) / float64(a.completed)
	}
	if w := sr.WallMS / 1000; w > 0 {
		sr.RPS = float64(a.completed) / w
		sr.SendRate = float64(a.sent) / w
	}
	sr.Latency = summarise(a.lat)
	sr.SendLag = summarise(a.lag)
	sr.TTFB = nil
	if a.ttfb.TotalCount() > 0 {
		t := summarise(a.ttfb)
		sr.TTFB = &t
	}
	sr.GeneratorCPUMS = msOf(sr.cpu)
	if len(r.plan.targets) > 0 {
		met := a.lat.TotalCount() > 0
		for _, t := range r.plan.targets {
			if usToMS(a.lat.ValueAtQuantile(t.Percentile)) > msOf(t.Limit) {
				met = false
			}
		}
		if lim := r.plan.Stop.ErrorRate; lim > 0 && sr.ErrorRate > lim {
			met = false
		}
		sr.MetTarget = &met
	}
	return sr
}

func (r *runner) finishStages(rep *Report) {
	for i := range rep.Stages {
		rep.Stages[i] = r.stageReport(i, rep.Stages[i])
	}
}

// answer fills the answers from the stages and metrics.
func (rep *Report) answer() {
	a := Answers{ColdP50: rep.Cold.P50, WarmP50: rep.Warm.P50}
	for _, s := range rep.Stages {
		if s.MetTarget != nil && *s.MetTarget && s.RPS > a.BestRPS {
			a.BestStage, a.BestStageName, a.BestRPS = s.Index, s.Name, s.RPS
		}
	}
	if m := rep.Metrics; m != nil && len(m.Samples) > 0 {
		var most float64
		for _, s := range m.Samples {
			most = max(most, s.LoadedModels)
		}
		a.MostModelsResident = &most
		for i := range rep.Stages {
			rep.Stages[i].Mce = m.stage(rep.Started, rep.Stages[i].Started, rep.Stages[i].Ended)
		}
	}
	rep.Answers = a
}

func generatorReport(cpu0, cpu1 cpuUse, wall time.Duration, peak int64, maxInFlight int, semFull bool) Generator {
	g := Generator{
		CPUUserMS: msOf(cpu1.user - cpu0.user), CPUSystemMS: msOf(cpu1.sys - cpu0.sys),
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), PeakInFlight: peak, MaxInFlight: maxInFlight,
	}
	if wall > 0 {
		g.CPUCores = (g.CPUUserMS + g.CPUSystemMS) / msOf(wall)
	}
	if !cpu1.ok {
		g.Notes = append(g.Notes, "this system gives no CPU time (getrusage) for the generator")
	}
	if g.CPUCores > 0.8*float64(g.GOMAXPROCS) {
		g.Saturated = true
		g.Notes = append(g.Notes, fmt.Sprintf("the generator used %.2f of its %d cores: it may be what limits the run", g.CPUCores, g.GOMAXPROCS))
	}
	if semFull {
		g.Saturated = true
		g.Notes = append(g.Notes, fmt.Sprintf("a rate stage had all %d requests in flight (max_inflight): later sends waited, and their wait counts in their latency", maxInFlight))
	}
	return g
}

// LateSendMS is the send lag (p99) past which a rate stage counts as sent
// late: the generator did not keep to its schedule.
const LateSendMS = 10

// saturation adds notes for rate stages that sent less than intended or
// late.
func (rep *Report) saturation() {
	for _, s := range rep.Stages {
		if s.Rate <= 0 {
			continue
		}
		if s.Intended > 0 && float64(s.Sent) < 0.95*float64(s.Intended) && !rep.Interrupted {
			rep.Generator.Saturated = true
			rep.Generator.Notes = append(rep.Generator.Notes, fmt.Sprintf("%s sent %d of %d intended requests (%.1f of %g/s)", s.Name, s.Sent, s.Intended, s.SendRate, s.Rate))
		}
		if s.SendLag.P99 > LateSendMS {
			rep.Generator.Saturated = true
			rep.Generator.Notes = append(rep.Generator.Notes, fmt.Sprintf("%s sent late: p99 %.1f ms behind schedule (the generator was short of CPU, or every max_inflight slot was taken); the lateness counts in its latency", s.Name, s.SendLag.P99))
		}
	}
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

func codesString(m map[string]int64) string {
	var parts []string
	for _, k := range sortedCodes(m) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, ";")
}

// StagesCSVHeader is the header of stages.csv.
var StagesCSVHeader = []string{"stage", "name", "users", "intended_rate", "wall_ms", "sent", "completed", "errors", "error_rate", "rps",
	"p50_ms", "p90_ms", "p99_ms", "max_ms", "mean_ms", "ttfb_p50_ms", "ttfb_p90_ms", "send_lag_p99_ms", "unsent", "met_target",
	"generator_cpu_ms", "mce_model_latency_ms", "mce_overhead_latency_ms", "mce_loaded_models_max", "mce_cache_hit_ratio", "errors_by_code"}

// WriteStagesCSV writes one row per stage.
func (rep *Report) WriteStagesCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(StagesCSVHeader)
	for _, s := range rep.Stages {
		met := ""
		if s.MetTarget != nil {
			met = strconv.FormatBool(*s.MetTarget)
		}
		var t50, t90 string
		if s.TTFB != nil {
			t50, t90 = f3(s.TTFB.P50), f3(s.TTFB.P90)
		}
		var ml, ol, lm, ch string
		if m := s.Mce; m != nil {
			ml, ol, lm, ch = f3(m.ModelLatencyMS), f3(m.OverheadLatencyMS), f3(m.LoadedModelsMax), f3(m.CacheHitRatio)
		}
		cw.Write([]string{strconv.Itoa(s.Index), s.Name, strconv.Itoa(s.Users), f3(s.Rate), f3(s.WallMS),
			strconv.FormatInt(s.Sent, 10), strconv.FormatInt(s.Completed, 10), strconv.FormatInt(s.Errors, 10), f3(s.ErrorRate), f3(s.RPS),
			f3(s.P50), f3(s.P90), f3(s.P99), f3(s.Max), f3(s.Mean), t50, t90, f3(s.SendLag.P99), strconv.FormatInt(s.Unsent, 10), met,
			f3(s.GeneratorCPUMS), ml, ol, lm, ch, codesString(s.Codes)})
	}
	cw.Flush()
	return cw.Error()
}

// SecondsCSVHeader is the header of seconds.csv.
var SecondsCSVHeader = []string{"t_s", "span_s", "stage", "users", "completed", "rps", "errors", "p50_ms", "p90_ms", "p99_ms", "max_ms", "errors_by_code"}

// WriteSecondsCSV writes one row per second of the run.
func (rep *Report) WriteSecondsCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(SecondsCSVHeader)
	for _, s := range rep.Seconds {
		cw.Write([]string{strconv.Itoa(s.T), f3(s.Span), strconv.Itoa(s.Stage), strconv.Itoa(s.Users), strconv.FormatInt(s.Completed, 10),
			f3(s.RPS), strconv.FormatInt(s.Errors, 10), f3(s.P50), f3(s.P90), f3(s.P99), f3(s.Max), codesString(s.Codes)})
	}
	cw.Flush()
	return cw.Error()
}

// Files written by WriteDir.
const (
	FileJSON       = "report.json"
	FileStagesCSV  = "stages.csv"
	FileSecondsCSV = "seconds.csv"
	FileMetricsCSV = "metrics.csv"
	FileHTML       = "report.html"
)

// WriteDir writes every output into dir (created if missing) and returns
// the files' paths.
func (rep *Report) WriteDir(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	write := func(name string, f func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		out, err := os.Create(p)
		if err != nil {
			return err
		}
		if err := f(out); err != nil {
			out.Close()
			return fmt.Errorf("writing %s: %w", p, err)
		}
		if err := out.Close(); err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	}
	if err := write(FileJSON, rep.WriteJSON); err != nil {
		return paths, err
	}
	if err := write(FileStagesCSV, rep.WriteStagesCSV); err != nil {
		return paths, err
	}
	if err := write(FileSecondsCSV, rep.WriteSecondsCSV); err != nil {
		return paths, err
	}
	if rep.Metrics != nil {
		if err := write(FileMetricsCSV, rep.Metrics.WriteCSV); err != nil {
			return paths, err
		}
	}
	charts, err := rep.Charts()
	if err != nil {
		return paths, err
	}
	for _, c := range charts {
		png := c.PNG
		if err := write(c.Name+".png", func(w io.Writer) error { _, err := w.Write(png); return err }); err != nil {
			return paths, err
		}
	}
	if err := write(FileHTML, func(w io.Writer) error { return rep.WriteHTML(w, charts) }); err != nil {
		return paths, err
	}
	return paths, nil
}

// Summary writes a few lines for the terminal.
func (rep *Report) Summary(w io.Writer) {
	fmt.Fprintf(w, "%-14s %6s %9s %8s %9s %9s %9s %9s %7s  %s\n", "stage", "load", "requests", "req/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "errors", "target")
	for _, s := range rep.Stages {
		load := strconv.Itoa(s.Users) + "u"
		if s.Rate > 0 {
			load = strconv.FormatFloat(s.Rate, 'g', 4, 64) + "/s"
		}
		met := ""
		if s.MetTarget != nil {
			met = map[bool]string{true: "met", false: "missed"}[*s.MetTarget]
		}
		fmt.Fprintf(w, "%-14s %6s %9d %8.1f %9.2f %9.2f %9.2f %9.2f %7d  %s\n", trunc(s.Name, 14), load, s.Completed, s.RPS, s.P50, s.P90, s.P99, s.Max, s.Errors, met)
		if len(s.Codes) > 0 {
			fmt.Fprintf(w, "%14s errors: %s\n", "", codesString(s.Codes))
		}
	}
	a := rep.Answers
	if len(rep.Targets) > 0 {
		if a.BestStage > 0 {
			fmt.Fprintf(w, "highest throughput within %s: %s, %.1f req/s\n", strings.Join(rep.Targets, ", "), a.BestStageName, a.BestRPS)
		} else {
			fmt.Fprintf(w, "no stage met %s\n", strings.Join(rep.Targets, ", "))
		}
	}
	if rep.Cold.Count > 0 {
		fmt.Fprintf(w, "cold (first call to a model, %d): p50 %.2f ms, p99 %.2f ms; warm (%d): p50 %.2f ms, p99 %.2f ms\n",
			rep.Cold.Count, rep.Cold.P50, rep.Cold.P99, rep.Warm.Count, rep.Warm.P50, rep.Warm.P99)
	}
	for _, c := range sortedCodes(countsOf(rep.ErrorSamples)) {
		fmt.Fprintf(w, "%s, e.g.: %s\n", c, rep.ErrorSamples[c])
	}
	if a.MostModelsResident != nil && (*a.MostModelsResident > 0 || rep.Plan.Traffic.Models > 0) {
		fmt.Fprintf(w, "most models resident: %.0f\n", *a.MostModelsResident)
	}
	rep.variantsSummary(w)
	g := rep.Generator
	fmt.Fprintf(w, "generator: %.2f of %d cores (user %.0f ms, system %.0f ms), at most %d calls in flight\n", g.CPUCores, g.GOMAXPROCS, g.CPUUserMS, g.CPUSystemMS, g.PeakInFlight)
	for _, n := range g.Notes {
		fmt.Fprintf(w, "generator: %s\n", n)
	}
	if rep.StopReason != "" {
		fmt.Fprintf(w, "stopped: %s\n", rep.StopReason)
	}
}

// ShowVariants says whether the report has per-variant figures worth a
// table: mce's were asked for, or more than one variant answered.
func (rep *Report) ShowVariants() bool {
	return rep.CloudWatch != nil || len(rep.Variants) > 1
}

// Minutes words the window of mce's figures, e.g.
// "10:04–10:06 UTC" (whole minutes, the end excluded).
func (c *CloudWatchReport) Minutes() string {
	layout := "15:04"
	if c.Start.UTC().YearDay() != c.End.UTC().YearDay() || c.Start.UTC().Year() != c.End.UTC().Year() {
		layout = "2006-01-02 15:04"
	}
	out := c.Start.UTC().Format(layout) + "–" + c.End.UTC().Format(layout) + " UTC"
	if c.ClockOffsetS != 0 {
		out += " on mce's compressed clock"
	}
	return out
}

// variantsSummary writes the per-variant table: this tool's figures of the
// calls each variant answered beside mce's own, server-side ones.
func (rep *Report) variantsSummary(w io.Writer) {
	if !rep.ShowVariants() {
		return
	}
	cw := rep.CloudWatch
	switch {
	case cw == nil:
		fmt.Fprintln(w, "per variant, latencies in ms (client side: the calls each variant answered, as this tool measured them):")
	case cw.Error != "":
		fmt.Fprintf(w, "per variant: no server-side figures: %s\n", cw.Error)
	default:
		fmt.Fprintln(w, "per variant, latencies in ms; answered, client p50/p99: this tool's figures of the calls each variant answered;")
		fmt.Fprintf(w, "invocations to ovhd avg: mce's own server-side figures, from its CloudWatch API over %s:\n", cw.Minutes())
	}
	if len(rep.Variants) == 0 {
		if cw != nil && cw.Error == "" {
			fmt.Fprintf(w, "  mce's CloudWatch API has no Invocations of %s in those minutes\n", rep.Endpoint)
		}
		return
	}
	client := "%-14s %9v %10s %10s"
	server := " %11s %6s %6s %9s %9s %9s %9s %9s %9s"
	format := client
	if cw != nil {
		format += server
	}
	format += "\n"
	head := []any{"variant", "answered", "client p50", "client p99"}
	if cw != nil {
		head = append(head, "invocations", "4xx", "5xx", "model p50", "model p99", "model avg", "ovhd p50", "ovhd p99", "ovhd avg")
	}
	fmt.Fprintf(w, format, head...)
	ms := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	for _, v := range rep.Variants {
		cells := []any{trunc(v.Variant, 14), v.Answered, "-", "-"}
		if v.Latency != nil && v.Latency.Count > 0 {
			cells[2], cells[3] = ms(v.Latency.P50), ms(v.Latency.P99)
		}
		if cw != nil {
			lat := func(l *ServerLatency) []any {
				if l == nil {
					return []any{"-", "-", "-"}
				}
				return []any{ms(l.P50), ms(l.P99), ms(l.Mean)}
			}
			if m := v.Mce; m != nil {
				cells = append(cells, fmt.Sprintf("%.0f", m.Invocations), fmt.Sprintf("%.0f", m.Errors4XX), fmt.Sprintf("%.0f", m.Errors5XX))
				cells = append(append(cells, lat(m.ModelLatency)...), lat(m.OverheadLatency)...)
			} else {
				cells = append(append(append(cells, "-", "-", "-"), lat(nil)...), lat(nil)...)
			}
		}
		fmt.Fprintf(w, format, cells...)
	}
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func countsOf(m map[string]string) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k := range m {
		out[k] = 1
	}
	return out
}
