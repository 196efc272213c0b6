package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/mce-run/mce/internal/loadtest"
	"github.com/mce-run/mce/internal/sdkhttp"
)

type loadtestFlags struct {
	endpointURL    string
	region         string
	planFile       string
	users          string
	rates          string
	duration       time.Duration
	spawnRate      float64
	thinkTime      time.Duration
	payload        string
	models         int
	modelPattern   string
	firstModel     int
	shape          string
	topK           int
	share          float64
	target         string
	stopErrorRate  float64
	stopOnMiss     bool
	maxRequests    int64
	maxDuration    time.Duration
	maxInFlight    int
	seed           int64
	out            string
	metricsURL     string
	scrapeInterval time.Duration
	cloudWatch     bool
	quiet          bool
	req            loadtest.Request
	timeout        time.Duration
}

func newLoadtestCmd() *cobra.Command {
	var f loadtestFlags
	cmd := &cobra.Command{
		Use:   "loadtest ENDPOINT",
		Short: "Load-test an endpoint in stages through the SageMaker Runtime API and report latency, throughput and errors with charts",
		Long: `loadtest drives an endpoint (on mce with --endpoint-url, or on SageMaker itself without it)
through aws-sdk-go-v2's SageMaker Runtime client, in stages as SageMaker's load-testing
guidance does, and writes a report: per stage and per second, requests/s, p50/p90/p99/max
latency and errors by SageMaker error code; the highest-throughput stage within a latency
target; cold (first call to a model) against warm latency; and, when the target is mce,
its own metrics scraped meanwhile (model latency vs overhead, models loaded, cache hits,
model loading wait, CPU/memory/GPU), with the most models resident, and after the run
mce's own figures per variant from its CloudWatch API (Invocations, 4XX/5XX errors,
ModelLatency and OverheadLatency p50/p99/average; --cloudwatch=false for none) beside
the calls each variant answered and their latency as measured here.

Stages come from flags for simple cases or from a plan file (YAML or JSON, --plan; flags
given as well override it):
  --users 1,5,10     one stage per value: that many concurrent users (closed model), each
                     sending, waiting for the answer and --think-time, then sending again;
                     new users start at --spawn-rate a second
  --rate 50,100      one stage per value: that many requests a second (open model), sent on
                     schedule whatever the latency; latency counts from the scheduled time,
                     so a generator or endpoint that falls behind cannot hide it
  --duration         each stage's length (default 30s)

Traffic for multi-model endpoints: --models N names TargetModel from --model-pattern
({i} is the model's number, {i:03} the same zero-padded; numbers run from --first-model) with --shape uniform (default), top-k (--top-k models take --share of the
calls) or hot (model 1 takes --share). --inference-component NAME sends every call to that
inference component of the endpoint. The body is --payload: a file, a folder of samples
(one picked at random per call) or - for standard input; its content type is
--content-type, or guessed from the files' extension. --stream calls
InvokeEndpointWithResponseStream and reports the time to the first part too.

The run stops at the end of its stages, at --max-requests or --max-duration, after a stage
past --stop-error-rate or, with --stop-on-target-miss, the first stage that missed
--target; Ctrl-C stops it with a partial report. Progress goes to standard error; the
report to --out (report.json, stages.csv, seconds.csv, metrics.csv, report.html with its
charts inline, and the charts as PNG), a summary to standard output.

The SDK makes each call once (no retries), so every failure is counted. Credentials are
the usual AWS ones; against mce with none set the calls go unsigned. The report records
the generator's own CPU time and achieved send rate, to show when it was the limit.`,
		Example: `  mce loadtest my-endpoint --endpoint-url http://127.0.0.1:8080 --users 1,4,16 --duration 20s --target p90=50ms
  mce loadtest mme --endpoint-url http://127.0.0.1:8080 --rate 20,50,100 --models 200 --first-model 0 --model-pattern 'model-{i:03}.tar.gz' --shape top-k --top-k 10 --share 0.9 --payload sample.json
  mce loadtest shared --endpoint-url http://127.0.0.1:8080 --inference-component cancer --users 1,4 --duration 10s --payload build/models/framework/cancer-sample.csv
  mce loadtest ab-test --endpoint-url http://127.0.0.1:8080 --plan docs/loadtest-plan.yaml --payload - --out build/loadtest`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runLoadtest(ctx, cmd, f, args[0], cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.endpointURL, "endpoint-url", os.Getenv("MCE_ENDPOINT_URL"), "URL of the mce host (env MCE_ENDPOINT_URL); empty: SageMaker in --region")
	fl.StringVar(&f.region, "region", envOr("AWS_REGION", "us-east-1"), "region to sign for")
	fl.StringVar(&f.planFile, "plan", "", "plan file (YAML or JSON) with stages, traffic, request, target, stop and limits")
	fl.StringVar(&f.users, "users", "", "concurrent users, one stage per comma-separated value (e.g. 1,5,10)")
	fl.StringVar(&f.rates, "rate", "", "requests per second, one stage per comma-separated value (e.g. 50,100,200)")
	fl.DurationVar(&f.duration, "duration", 30*time.Second, "length of each --users or --rate stage")
	fl.Float64Var(&f.spawnRate, "spawn-rate", 0, "users started per second (0: all at once)")
	fl.DurationVar(&f.thinkTime, "think-time", 0, "each user's pause after an answer")
	fl.StringVar(&f.payload, "payload", "", "request body: a file, a folder of samples, or - for standard input (default: empty)")
	fl.StringVar(&f.req.ContentType, "content-type", "", "ContentType (default: from the payload's extension)")
	fl.StringVar(&f.req.Accept, "accept", "", "Accept")
	fl.StringVar(&f.req.CustomAttributes, "custom-attributes", "", "CustomAttributes")
	fl.StringVar(&f.req.TargetContainer, "target-container", "", "TargetContainerHostname (Direct mode)")
	fl.StringVar(&f.req.TargetVariant, "target-variant", "", "TargetVariant")
	fl.StringVar(&f.req.InferenceComponent, "inference-component", "", "InferenceComponentName (endpoints that host inference components)")
	fl.BoolVar(&f.req.Stream, "stream", false, "call InvokeEndpointWithResponseStream and measure the time to first byte")
	fl.DurationVar(&f.timeout, "timeout", 70*time.Second, "time limit of one call")
	fl.IntVar(&f.models, "models", 0, "number of models for TargetModel (multi-model endpoints); 0: none")
	fl.StringVar(&f.modelPattern, "model-pattern", "model-{i}.tar.gz", "TargetModel name: {i} is the model's number, {i:03} zero-padded")
	fl.IntVar(&f.firstModel, "first-model", 1, "number of the first model (the most popular in top-k and hot)")
	fl.StringVar(&f.shape, "shape", "uniform", "traffic over models: uniform, top-k or hot")
	fl.IntVar(&f.topK, "top-k", 0, "popular models for --shape top-k")
	fl.Float64Var(&f.share, "share", 0.9, "share of calls to the popular models (top-k) or the hot one")
	fl.StringVar(&f.target, "target", "", "latency target, e.g. p90=200ms or p50=20ms,p99=500ms")
	fl.Float64Var(&f.stopErrorRate, "stop-error-rate", 0, "stop after a stage whose error rate is above this (0 to 1; 0: never)")
	fl.BoolVar(&f.stopOnMiss, "stop-on-target-miss", false, "stop after the first stage that missed --target")
	fl.Int64Var(&f.maxRequests, "max-requests", 0, "stop after sending this many requests (0: no bound)")
	fl.DurationVar(&f.maxDuration, "max-duration", time.Hour, "stop after this long whatever the stages say")
	fl.IntVar(&f.maxInFlight, "max-inflight", 1000, "most requests in flight in a --rate stage")
	fl.Int64Var(&f.seed, "seed", 0, "seed for the choice of models and samples (0: a new one each run)")
	fl.StringVar(&f.out, "out", "", "folder for the report (default loadtest-ENDPOINT-TIME)")
	fl.StringVar(&f.metricsURL, "metrics-url", "", "mce's /metrics to scrape during the run (default: found from --endpoint-url; off: none)")
	fl.DurationVar(&f.scrapeInterval, "scrape-interval", time.Second, "how often to scrape mce's metrics")
	fl.BoolVar(&f.cloudWatch, "cloudwatch", true, "against mce, ask its CloudWatch API after the run for each variant's server-side figures (--cloudwatch=false: don't)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on standard error")
	return cmd
}

// loadtestPlan builds the plan from --plan and the flags given.
func loadtestPlan(cmd *cobra.Command, f loadtestFlags) (*loadtest.Plan, error) {
	changed := cmd.Flags().Changed
	p := &loadtest.Plan{}
	if f.planFile != "" {
		fh, err := os.Open(f.planFile)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		if p, err = loadtest.ReadPlan(fh); err != nil {
			return nil, fmt.Errorf("%s: %w", f.planFile, err)
		}
	}
	if f.users != "" && f.rates != "" {
		return nil, errors.New("give --users or --rate, not both (a plan file can mix stages)")
	}
	if f.users != "" || f.rates != "" {
		p.Stages = nil
		list, isRate := f.users, false
		if f.rates != "" {
			list, isRate = f.rates, true
		}
		for _, v := range strings.Split(list, ",") {
			v = strings.TrimSpace(v)
			s := loadtest.Stage{Duration: loadtest.Duration(f.duration)}
			if isRate {
				r, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return nil, fmt.Errorf("--rate: %q is not a number", v)
				}
				s.Rate, s.Name = r, fmt.Sprintf("%s/s", v)
			} else {
				u, err := strconv.Atoi(v)
				if err != nil {
					return nil, fmt.Errorf("--users: %q is not a whole number", v)
				}
				s.Users, s.SpawnRate, s.Name = u, f.spawnRate, fmt.Sprintf("%d users", u)
			}
			p.Stages = append(p.Stages, s)
		}
	} else if f.planFile == "" {
		return nil, errors.New("give --users or --rate (with --duration), or a --plan file")
	}
	set := func(name string, apply func()) {
		if f.planFile == "" || changed(name) {
			apply()
		}
	}
	set("think-time", func() { p.ThinkTime = loadtest.Duration(f.thinkTime) })
	set("models", func() { p.Traffic.Models = f.models })
	set("model-pattern", func() { p.Traffic.ModelPattern = f.modelPattern })
	set("first-model", func() { p.Traffic.FirstModel = &f.firstModel })
	set("shape", func() { p.Traffic.Shape = f.shape })
	set("top-k", func() { p.Traffic.TopK = f.topK })
	set("share", func() { p.Traffic.Share = f.share })
	set("target", func() { p.Target = f.target })
	set("stop-error-rate", func() { p.Stop.ErrorRate = f.stopErrorRate })
	set("stop-on-target-miss", func() { p.Stop.OnTargetMiss = f.stopOnMiss })
	set("max-requests", func() { p.Limits.MaxRequests = f.maxRequests })
	set("max-duration", func() { p.Limits.MaxDuration = loadtest.Duration(f.maxDuration) })
	set("max-inflight", func() { p.Limits.MaxInFlight = f.maxInFlight })
	set("seed", func() { p.Seed = f.seed })
	set("timeout", func() { p.Request.Timeout = loadtest.Duration(f.timeout) })
	set("stream", func() { p.Request.Stream = f.req.Stream })
	for name, dst := range map[string]*string{"content-type": &p.Request.ContentType, "accept": &p.Request.Accept,
		"custom-attributes": &p.Request.CustomAttributes, "target-container": &p.Request.TargetContainer, "target-variant": &p.Request.TargetVariant,
		"inference-component": &p.Request.InferenceComponent} {
		v := map[string]string{"content-type": f.req.ContentType, "accept": f.req.Accept, "custom-attributes": f.req.CustomAttributes,
			"target-container": f.req.TargetContainer, "target-variant": f.req.TargetVariant, "inference-component": f.req.InferenceComponent}[name]
		set(name, func() { *dst = v })
	}
	if p.Seed == 0 {
		p.Seed = time.Now().UnixNano()
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

func runLoadtest(ctx context.Context, cmd *cobra.Command, f loadtestFlags, endpoint string, stdin io.Reader, stdout, stderr io.Writer) error {
	p, err := loadtestPlan(cmd, f)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	payloads, err := loadtest.ReadPayloads(f.payload, stdin)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	if p.Request.ContentType == "" && f.payload != "" && f.payload != "-" {
		if p.Request.ContentType, err = payloads.InferContentType(); err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
	}
	if p.Request.ContentType == "" && f.payload == "-" {
		return &exitError{code: 2, msg: "cannot tell the content type of standard input: pass --content-type"}
	}
	newClient, err := newLoadtestClient(ctx, f.endpointURL, f.region, p)
	if err != nil {
		return err
	}
	o := loadtest.Options{Endpoint: endpoint, Payloads: payloads}
	if !f.quiet {
		o.Progress = stderr
		if fh, ok := stderr.(*os.File); ok && isatty.IsTerminal(fh.Fd()) {
			o.ProgressTTY = true
		}
	}
	target := "SageMaker in " + f.region
	if f.endpointURL != "" {
		target = f.endpointURL
	}
	if mu := metricsURLFor(ctx, f.metricsURL, f.endpointURL); mu != "" {
		o.Scraper = loadtest.NewScraper(mu, endpoint, f.scrapeInterval)
		target += ", scraping " + mu
	}
	if f.cloudWatch && f.endpointURL != "" {
		if o.CloudWatch, err = newLoadtestCloudWatch(ctx, f.endpointURL, f.region); err != nil {
			return err
		}
		target += ", then its CloudWatch API"
	}
	if !f.quiet {
		fmt.Fprintf(stderr, "load test of %s at %s: %d stages, %s at most\n", endpoint, target, len(p.Stages), p.PlannedDuration())
	}
	rep, err := loadtest.Run(ctx, p, &loadtest.SDK{Client: newClient(), NewClient: newClient, Endpoint: endpoint, Request: p.Request}, o)
	if err != nil {
		return err
	}
	out := f.out
	if out == "" {
		out = fmt.Sprintf("loadtest-%s-%s", safeName(endpoint), rep.Started.UTC().Format("20060102-150405"))
	}
	rep.Summary(newTermWriter(stdout)) // it quotes the endpoint's error messages
	if _, err := rep.WriteDir(out); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	fmt.Fprintf(stdout, "report: %s\n", out+string(os.PathSeparator)+loadtest.FileHTML)
	if rep.Interrupted {
		return &exitError{code: 130, msg: "interrupted: the report is partial"}
	}
	return nil
}

// safeName keeps letters, digits, '-' and '.' of an endpoint name for a
// folder name.
func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}

// metricsURLFor picks mce's metrics to scrape: flag "off" none; a flag URL
// as given; otherwise, against mce, /metrics on the API listener (served
// there in local use) or on the default metrics listener (port 9464).
func metricsURLFor(ctx context.Context, flag, endpointURL string) string {
	switch {
	case flag == "off":
		return ""
	case flag != "":
		return flag
	case endpointURL == "":
		return "" // SageMaker: CloudWatch has its metrics
	}
	u, err := url.Parse(endpointURL)
	if err != nil || u.Host == "" {
		return ""
	}
	candidates := []string{strings.TrimSuffix(endpointURL, "/") + "/metrics"}
	if h := u.Hostname(); h != "" {
		candidates = append(candidates, "http://"+joinHostPort(h, "9464")+"/metrics")
	}
	for _, c := range candidates {
		if loadtest.ProbeMetrics(ctx, c) == nil {
			return c
		}
	}
	return ""
}

func joinHostPort(h, port string) string {
	if strings.Contains(h, ":") {
		return "[" + h + "]:" + port
	}
	return h + ":" + port
}

// newLoadtestCloudWatch returns what asks mce's CloudWatch API for the
// variants' figures after a run: aws-sdk-go-v2's CloudWatch client on the
// same URL, with the credentials and region of the load test's SageMaker
// Runtime clients (signed for "monitoring" when there are credentials,
// unsigned in mce's anonymous local mode otherwise).
func newLoadtestCloudWatch(ctx context.Context, endpointURL, region string) (*loadtest.CloudWatch, error) {
	cfg, err := loadSDKConfig(ctx, region)
	if err != nil {
		return nil, err
	}
	c := cloudwatch.NewFromConfig(cfg, func(o *cloudwatch.Options) {
		o.BaseEndpoint = aws.String(endpointURL)
		o.HTTPClient = sdkhttp.New()
	})
	return &loadtest.CloudWatch{Client: c, URL: endpointURL, Timeout: loadtest.DefaultCloudWatchTimeout}, nil
}

// newLoadtestClient returns a maker of the SageMaker Runtime clients of a
// load test, which share one HTTP client: each call made once (a retry would
// hide a failure and count a call twice), idle connections enough for every
// user, and sdkhttp's body copy as `mce invoke` has. With no endpoint URL
// they talk to SageMaker with the usual credentials.
func newLoadtestClient(ctx context.Context, endpointURL, region string, p *loadtest.Plan) (func() *sagemakerruntime.Client, error) {
	var cfg aws.Config
	var err error
	if endpointURL != "" {
		cfg, err = loadSDKConfig(ctx, region)
	} else {
		// SageMaker: the whole default chain, the EC2 instance's role too
		cfg, err = config.LoadDefaultConfig(ctx, config.WithRegion(region))
	}
	if err != nil {
		return nil, err
	}
	if endpointURL == "" {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := cfg.Credentials.Retrieve(cctx); err != nil {
			return nil, &exitError{code: 2, msg: fmt.Sprintf("no AWS credentials to call SageMaker in %s (%v): give --endpoint-url (e.g. http://127.0.0.1:8080) to load-test mce", region, err)}
		}
	}
	conns := p.Limits.MaxInFlight
	for _, s := range p.Stages {
		conns = max(conns, s.Users)
	}
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = conns
		t.MaxIdleConnsPerHost = conns
	})
	return func() *sagemakerruntime.Client {
		return sagemakerruntime.NewFromConfig(cfg, func(o *sagemakerruntime.Options) {
			if endpointURL != "" {
				o.BaseEndpoint = aws.String(endpointURL)
			}
			o.RetryMaxAttempts = 1
			o.HTTPClient = &sdkhttp.Client{Next: hc}
		})
	}, nil
}
