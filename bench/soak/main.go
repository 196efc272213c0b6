// Command soak drives a long, concurrent load through mce's runtime API with
// the real aws-sdk-go-v2 client and reports whether any call failed and how
// mce's resident memory moved meanwhile. scripts/soak.sh (make soak) starts
// mce with the endpoints it expects; see bench/README.md.
//
// Every client is a goroutine that alternates between the targets it is given
// (a Direct call with TargetContainerHostname, a Serial chain) and checks every
// answer's body: a 200 with the wrong body counts as a failure too. SDK
// retries are off, so a failed call is counted, never hidden by a retry.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"

	"github.com/mce-run/mce/internal/sdkhttp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// target is one kind of call the clients make.
type target struct {
	name     string // shown in the report
	endpoint string
	host     string // TargetContainerHostname, Direct only
	suffix   string // what the endpoint appends to the body (Serial probe chains)
}

// parseTarget reads NAME=ENDPOINT[,host=H][,suffix=S].
func parseTarget(s string) (target, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" || rest == "" {
		return target{}, fmt.Errorf("target %q: want NAME=ENDPOINT[,host=H][,suffix=S]", s)
	}
	parts := strings.Split(rest, ",")
	t := target{name: name, endpoint: parts[0]}
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		switch k {
		case "host":
			t.host = v
		case "suffix":
			t.suffix = v
		default:
			return target{}, fmt.Errorf("target %q: unknown option %q", s, k)
		}
	}
	return t, nil
}

type targetFlags []target

func (f *targetFlags) String() string { return fmt.Sprint(len(*f)) }
func (f *targetFlags) Set(s string) error {
	t, err := parseTarget(s)
	if err == nil {
		*f = append(*f, t)
	}
	return err
}

// tally is one target's counts and latencies; safe for concurrent use.
type tally struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	lat        []time.Duration
	errs       map[string]int
}

func (t *tally) record(d time.Duration, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.failed.Add(1)
		if t.errs == nil {
			t.errs = map[string]int{}
		}
		t.errs[errorKind(err)]++
		return
	}
	t.ok.Add(1)
	t.lat = append(t.lat, d)
}

// errorKind groups failures for the report: the SageMaker error code, or the
// first words of anything else.
func errorKind(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	s := err.Error()
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// percentile of sorted durations, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// memory is a process's resident memory, in KiB, from /proc/PID/status:
// all of it (VmRSS), and its two parts that matter apart. Anon is the
// process's own (Go's heap, stacks, the runtime's): what grows if mce leaks.
// File is mostly the pages of its executable that are mapped in; how many
// depends on the kernel's page cache (a freshly built binary, large folios
// mapped whole) more than on mce, so that a start of 73 or 115 MiB says
// nothing of a leak.
type memory struct{ RSS, Anon, File int64 }

func readMemory(pid int) (memory, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return memory{}, err
	}
	return parseMemory(b)
}

// parseMemory reads VmRSS, RssAnon and RssFile (Linux 4.5 and later) from
// the text of /proc/PID/status.
func parseMemory(status []byte) (memory, error) {
	var m memory
	fields := map[string]*int64{"VmRSS:": &m.RSS, "RssAnon:": &m.Anon, "RssFile:": &m.File}
	seen := 0
	for _, line := range strings.Split(string(status), "\n") {
		for name, dst := range fields {
			v, ok := strings.CutPrefix(line, name)
			if !ok {
				continue
			}
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return memory{}, fmt.Errorf("unexpected %s line %q", strings.TrimSuffix(name, ":"), line)
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return memory{}, fmt.Errorf("unexpected %s line %q", strings.TrimSuffix(name, ":"), line)
			}
			*dst = n
			seen++
		}
	}
	if seen != len(fields) {
		return memory{}, errors.New("no VmRSS, RssAnon and RssFile lines")
	}
	return m, nil
}

// report is what soak prints as JSON at the end (and a summary before it).
type report struct {
	Clients     int            `json:"clients"`
	DurationS   float64        `json:"duration_s"`
	Targets     []targetReport `json:"targets"`
	RSSSamples  []rssSample    `json:"rss_samples"`
	RSSStartMiB float64        `json:"rss_start_mib"`
	RSSMaxMiB   float64        `json:"rss_max_mib"`
	RSSEndMiB   float64        `json:"rss_end_mib"`
	// AnonStartMiB… are the same for mce's anonymous memory alone (see
	// memory); AnonGrowthMiB is its last sample less its first after the
	// warm-up (the first tenth of the run): what a leak would show.
	AnonStartMiB  float64        `json:"anon_start_mib"`
	AnonMaxMiB    float64        `json:"anon_max_mib"`
	AnonEndMiB    float64        `json:"anon_end_mib"`
	AnonGrowthMiB float64        `json:"anon_growth_mib"`
	Failed        int64          `json:"failed"`
	Requests      int64          `json:"requests"`
	ErrorsByKind  map[string]int `json:"errors_by_kind,omitempty"`
	Verdict       string         `json:"verdict"`
}

type targetReport struct {
	Name   string  `json:"name"`
	OK     int64   `json:"ok"`
	Failed int64   `json:"failed"`
	RPS    float64 `json:"rps"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

type rssSample struct {
	AtS     float64 `json:"at_s"`
	RSSMiB  float64 `json:"rss_mib"`
	AnonMiB float64 `json:"anon_mib"` // mce's own: heap, stacks
	FileMiB float64 `json:"file_mib"` // mapped files, mostly its executable
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// summarizeMemory fills r's memory figures from r.RSSSamples: start, max and
// end of the whole and of the anonymous part, and the anonymous part's
// growth from the first sample past a tenth of the run to the last.
func summarizeMemory(r *report, duration time.Duration) {
	samples := r.RSSSamples
	if len(samples) == 0 {
		return
	}
	first, last := samples[0], samples[len(samples)-1]
	r.RSSStartMiB, r.RSSEndMiB = first.RSSMiB, last.RSSMiB
	r.AnonStartMiB, r.AnonEndMiB = first.AnonMiB, last.AnonMiB
	warm := first
	for _, s := range samples {
		r.RSSMaxMiB = max(r.RSSMaxMiB, s.RSSMiB)
		r.AnonMaxMiB = max(r.AnonMaxMiB, s.AnonMiB)
		if warm == first && s.AtS >= duration.Seconds()/10 {
			warm = s
		}
	}
	r.AnonGrowthMiB = last.AnonMiB - warm.AnonMiB
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	var (
		targets  targetFlags
		url      = fs.String("endpoint-url", "", "mce's API URL, e.g. http://127.0.0.1:8080 (required)")
		clients  = fs.Int("clients", 200, "concurrent clients")
		duration = fs.Duration("duration", 10*time.Minute, "how long the load runs")
		sample   = fs.Duration("sample", 10*time.Second, "RSS sampling interval")
		pid      = fs.Int("pid", 0, "mce's process id, for RSS sampling (required)")
		size     = fs.Int("body", 64, "bytes per request body")
		timeout  = fs.Duration("timeout", 30*time.Second, "time limit of one call")
		jsonOut  = fs.String("json", "", "write the report as JSON to this file")
	)
	fs.Var(&targets, "target", "NAME=ENDPOINT[,host=H][,suffix=S]; repeat (clients alternate between targets)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *url == "" || *pid <= 0 || len(targets) == 0:
		return errors.New("-endpoint-url, -pid and at least one -target are required")
	case *clients < 1 || *duration <= 0 || *sample <= 0 || *size < 1:
		return errors.New("-clients, -duration, -sample and -body must be positive")
	}
	if _, err := readMemory(*pid); err != nil {
		return fmt.Errorf("cannot read the RSS of process %d: %w", *pid, err)
	}

	cli := newClient(*url, *clients)
	tallies := make([]*tally, len(targets))
	for i := range tallies {
		tallies[i] = &tally{}
	}
	body := bytes.Repeat([]byte("0123456789abcdef"), (*size+15)/16)[:*size]

	start := time.Now()
	loadCtx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()

	var samples []rssSample
	var sampleErr error
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(*sample)
		defer t.Stop()
		take := func() {
			m, err := readMemory(*pid)
			if err != nil {
				sampleErr = fmt.Errorf("mce (pid %d) is gone: %w", *pid, err)
				cancel()
				return
			}
			s := rssSample{AtS: time.Since(start).Seconds(), RSSMiB: mib(m.RSS), AnonMiB: mib(m.Anon), FileMiB: mib(m.File)}
			samples = append(samples, s)
			var ok, failed int64
			for _, tl := range tallies {
				ok += tl.ok.Load()
				failed += tl.failed.Load()
			}
			fmt.Fprintf(stdout, "soak: %5.0f s  rss %7.1f MiB (anonymous %6.1f)  calls %d  failed %d\n", s.AtS, s.RSSMiB, s.AnonMiB, ok+failed, failed)
		}
		take()
		for {
			select {
			case <-loadCtx.Done():
				take()
				return
			case <-t.C:
				take()
			}
		}
	}()

	var wg sync.WaitGroup
	for c := range *clients {
		wg.Go(func() {
			for i := c; loadCtx.Err() == nil; i++ {
				k := i % len(targets)
				tg := targets[k]
				callCtx, done := context.WithTimeout(loadCtx, *timeout)
				t0 := time.Now()
				err := call(callCtx, cli, tg, body)
				d := time.Since(t0)
				done()
				if loadCtx.Err() != nil && err != nil {
					return // cut by the end of the run, not a failure
				}
				tallies[k].record(d, err)
			}
		})
	}
	wg.Wait()
	<-sampled
	if sampleErr != nil {
		return sampleErr
	}
	elapsed := time.Since(start)

	r := report{Clients: *clients, DurationS: elapsed.Seconds(), RSSSamples: samples, ErrorsByKind: map[string]int{}}
	for k, tl := range tallies {
		sort.Slice(tl.lat, func(i, j int) bool { return tl.lat[i] < tl.lat[j] })
		tr := targetReport{Name: targets[k].name, OK: tl.ok.Load(), Failed: tl.failed.Load(),
			RPS:   float64(tl.ok.Load()) / elapsed.Seconds(),
			P50ms: ms(percentile(tl.lat, 50)), P99ms: ms(percentile(tl.lat, 99)), MaxMs: ms(percentile(tl.lat, 100))}
		r.Targets = append(r.Targets, tr)
		r.Failed += tr.Failed
		r.Requests += tr.OK + tr.Failed
		for e, n := range tl.errs {
			r.ErrorsByKind[e] += n
		}
	}
	summarizeMemory(&r, *duration)
	r.Verdict = "PASS"
	if r.Failed > 0 || r.Requests == 0 {
		r.Verdict = "FAIL"
	}

	fmt.Fprintf(stdout, "\nsoak: %d clients for %.0f s against %s\n", r.Clients, r.DurationS, *url)
	fmt.Fprintf(stdout, "| target | ok | failed | rps | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|---|---|\n")
	for _, t := range r.Targets {
		fmt.Fprintf(stdout, "| %s | %d | %d | %.0f | %.2f | %.2f | %.1f |\n", t.Name, t.OK, t.Failed, t.RPS, t.P50ms, t.P99ms, t.MaxMs)
	}
	fmt.Fprintf(stdout, "mce RSS (MiB), sampled every %s: start %.1f, max %.1f, end %.1f\n", *sample, r.RSSStartMiB, r.RSSMaxMiB, r.RSSEndMiB)
	fmt.Fprintf(stdout, "of it anonymous, mce's own (MiB): start %.1f, max %.1f, end %.1f; growth after the first tenth of the run %+.1f\n",
		r.AnonStartMiB, r.AnonMaxMiB, r.AnonEndMiB, r.AnonGrowthMiB)
	for e, n := range r.ErrorsByKind {
		fmt.Fprintf(stdout, "  failures: %d × %s\n", n, e)
	}
	fmt.Fprintf(stdout, "soak: %s (%d calls, %d failed)\n", r.Verdict, r.Requests, r.Failed)
	if *jsonOut != "" {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if r.Verdict != "PASS" {
		return fmt.Errorf("%d of %d calls failed", r.Failed, r.Requests)
	}
	return nil
}

// newClient is the SageMaker Runtime client every goroutine shares: the
// credentials of the environment (scripts/soak.sh sets an access key that
// mce's policies know), a connection pool sized for the clients, no retries.
func newClient(url string, clients int) *sagemakerruntime.Client {
	creds := aws.CredentialsProvider(aws.AnonymousCredentials{})
	if id := os.Getenv("AWS_ACCESS_KEY_ID"); id != "" {
		creds = credentials.NewStaticCredentialsProvider(id, os.Getenv("AWS_SECRET_ACCESS_KEY"), "")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = clients * 2
	tr.MaxIdleConnsPerHost = clients * 2
	return sagemakerruntime.New(sagemakerruntime.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  creds,
		HTTPClient:   &sdkhttp.Client{Next: &http.Client{Transport: tr}}, // see internal/sdkhttp
		Retryer:      aws.NopRetryer{},
	})
}

// call makes one InvokeEndpoint call and checks the answer.
func call(ctx context.Context, cli *sagemakerruntime.Client, t target, body []byte) error {
	in := &sagemakerruntime.InvokeEndpointInput{
		EndpointName: aws.String(t.endpoint),
		Body:         body,
		ContentType:  aws.String("application/octet-stream"),
	}
	if t.host != "" {
		in.TargetContainerHostname = aws.String(t.host)
	}
	out, err := cli.InvokeEndpoint(ctx, in)
	if err != nil {
		return err
	}
	want := string(body) + t.suffix
	if string(out.Body) != want {
		return fmt.Errorf("wrong body: %d bytes, want %d", len(out.Body), len(want))
	}
	return nil
}
