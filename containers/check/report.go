package check

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Status is the outcome of one check.
type Status string

// The outcomes. Only [Fail] makes a report fail; [Warn] marks behaviour
// SageMaker tolerates but a user should know about; [Skip] says why a check
// could not run (no sample input, an earlier failure, an engine on another
// machine) rather than guessing.
const (
	Pass Status = "pass"
	Fail Status = "fail"
	Warn Status = "warn"
	Skip Status = "skip"
)

// Result is one line of the report.
type Result struct {
	Name       string  `json:"name"`
	Status     Status  `json:"status"`
	Detail     string  `json:"detail,omitempty"`
	DurationMS float64 `json:"duration_ms"`
}

// Duration is the result's duration as a time.Duration.
func (r Result) Duration() time.Duration {
	return time.Duration(r.DurationMS * float64(time.Millisecond))
}

// Report is what [Checker.Run] found.
type Report struct {
	Image string `json:"image"`
	// Mode is "single-model" or "multi-model": how the image was started.
	Mode   string   `json:"mode"`
	Passed bool     `json:"passed"`
	Checks []Result `json:"checks"`
	// DurationMS is the whole run, set-up and clean-up included.
	DurationMS float64 `json:"duration_ms"`
}

// Failed returns the names of the failed checks.
func (r *Report) Failed() []string {
	var out []string
	for _, c := range r.Checks {
		if c.Status == Fail {
			out = append(out, c.Name)
		}
	}
	return out
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// nameWidth aligns the human-readable lines; longer names just push the rest.
const nameWidth = 44

// FormatResult is one human-readable report line, such as
// "PASS  ping within 120s  (0.4 s)"; a detail of several lines continues
// indented below.
func FormatResult(r Result) string {
	first, rest, _ := strings.Cut(r.Detail, "\n")
	dur := ""
	if r.DurationMS > 0 {
		dur = "(" + formatDuration(r.Duration()) + ")"
	}
	line := fmt.Sprintf("%-4s  %-*s  %10s  %s", strings.ToUpper(string(r.Status)), nameWidth, r.Name, dur, first)
	var b strings.Builder
	b.WriteString(strings.TrimRight(line, " ") + "\n")
	if rest != "" {
		for l := range strings.SplitSeq(rest, "\n") {
			b.WriteString("      | " + l + "\n")
		}
	}
	return b.String()
}

// WriteText writes every line as [FormatResult] does, then a summary line.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, c := range r.Checks {
		b.WriteString(FormatResult(c))
	}
	b.WriteString(r.Summary() + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// Summary is the closing line of the human-readable report.
func (r *Report) Summary() string {
	n := map[Status]int{}
	for _, c := range r.Checks {
		n[c.Status]++
	}
	verdict := "OK"
	if !r.Passed {
		verdict = "FAILED"
	}
	return fmt.Sprintf("%s: %s (%s): %d passed, %d failed, %d warnings, %d skipped in %s",
		r.Image, verdict, r.Mode, n[Pass], n[Fail], n[Warn], n[Skip],
		formatDuration(time.Duration(r.DurationMS*float64(time.Millisecond))))
}

func formatDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
}

func millis(d time.Duration) float64 {
	return float64(d.Round(10*time.Microsecond)) / float64(time.Millisecond)
}
