package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/host"
	"github.com/mce-run/mce/host/accesslog"
	"github.com/mce-run/mce/host/applicationautoscaling"
	"github.com/mce-run/mce/host/async"
	"github.com/mce-run/mce/host/capture"
	"github.com/mce-run/mce/host/cloudwatch"
	"github.com/mce-run/mce/host/dataplane"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/awsclock"
)

type serveFlags struct {
	files            []string
	listen           string
	region           string
	account          string
	instance         string
	stateDir         string
	networkMode      string
	pull             string
	ecrEndpoint      string
	containerTimeout time.Duration
	stopGrace        time.Duration
	pidsLimit        int64
	drain            time.Duration
	s3Endpoint       string
	s3PathStyle      bool
	modelRoots       []string
	maxArtifactBytes int64
	maxArtifactRatio int64
	diskBudget       int64
	mmeRestartOnLeak float64
	maxContainers    int
	credentials      string
	policies         string
	rego             []string
	insecure         bool
	debugListen      string
	invokeLoop       bool
	metricsListen    string
	metricsDefault   bool // --metrics-listen was not given: a busy port only warns
	bodyTimeout      time.Duration
	bodyMemory       byteSize
	accessLog        string
	asyncMaxPayload  byteSize
	asyncMemory      byteSize
	asyncMaxBacklog  int
	asyncInPrefixes  []string
	asyncOutPrefixes []string
	captureBuffer    byteSize
	captureInterval  time.Duration
	timeCompression  float64
	bidiListen       string
	bidiTLSCert      string
	bidiTLSKey       string
	log              logFlags
	logTo            io.Writer // where mce's log goes; nil for stderr (tests set it)
	kube             kubeFlags
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve [-f endpoint.yaml ...]",
		Short: "Start the host, deploy the endpoints in the files, serve until SIGINT/SIGTERM",
		Long: `serve starts the SageMaker Runtime API and control-plane API on --listen, brings back
the endpoints kept in its state folder (adopting their containers if they still run,
relaunching them otherwise), applies the -f files (SageMaker's CreateModel,
CreateEndpointConfig and CreateEndpoint request shapes, in YAML or JSON, through the same
operations as the API) and serves until SIGINT or SIGTERM. A file gives an endpoint's
initial configuration: restarted with the same file, serve keeps what the API changed
since (weights, instance counts, UpdateEndpoint); once the file's definition of the
endpoint changes, the file wins and the endpoint is updated to it. Then it stops taking
requests, drains those in flight, and removes every container, network and extracted
artifact it created; the endpoints stay in the state for the next start. On the
kubernetes engine the endpoints' pods keep running by default, for the next start to
adopt (--on-exit keep; --on-exit remove deletes them).

If an endpoint from the files fails to start, serve removes everything and exits 1,
naming the container and the cause.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.metricsDefault = !cmd.Flags().Changed("metrics-listen")
			return serve(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "file", "f", nil, "endpoint file (YAML or JSON); repeatable")
	f.kube.register(fl)
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to serve the SageMaker API on")
	fl.StringVar(&f.bidiListen, "bidi-listen", "", "address to serve SageMaker's HTTP/2 runtime (InvokeEndpointWithBidirectionalStream) on, h2c unless --bidi-tls-cert; empty: off")
	fl.StringVar(&f.bidiTLSCert, "bidi-tls-cert", "", "certificate (PEM) of --bidi-listen's TLS; with --bidi-tls-key")
	fl.StringVar(&f.bidiTLSKey, "bidi-tls-key", "", "private key (PEM) of --bidi-listen's TLS")
	fl.StringVar(&f.region, "region", "us-east-1", "region shown in ARNs and messages")
	fl.StringVar(&f.account, "account", "123456789012", "account ID shown in ARNs and messages")
	fl.StringVar(&f.instance, "instance", "default", "name of this mce instance, claimed on the Docker engine (a second mce with the same name refuses to start); its containers carry it in a label, and a restarted instance removes what it left behind")
	fl.StringVar(&f.stateDir, "state-dir", "", "folder for the instance lock and extracted model artifacts (default $XDG_STATE_HOME/mce or ~/.local/state/mce)")
	fl.StringVar(&f.networkMode, "network-mode", "auto", "how mce reaches containers: address (their address on the endpoint network), published (a port on 127.0.0.1), or auto")
	fl.StringVar(&f.pull, "pull", "never", "when to pull images: never, if-missing (what a bare --pull means) or always (write --pull=always); credentials as the docker CLI's (config.json, credential helpers), ECR tokens from the AWS credentials")
	fl.Lookup("pull").NoOptDefVal = "if-missing"
	fl.StringVar(&f.ecrEndpoint, "ecr-endpoint", "", "endpoint URL of ECR's API for registry tokens (default: the region's own)")
	fl.DurationVar(&f.containerTimeout, "container-timeout", 60*time.Second, "time limit of one container call")
	fl.DurationVar(&f.stopGrace, "stop-grace", 30*time.Second, "time between SIGTERM and SIGKILL when containers are stopped")
	fl.Int64Var(&f.pidsLimit, "pids-limit", 0, "the most processes and threads each model container may run; 0 for 4096 or 64 per CPU core, whichever is more; -1 for no limit")
	fl.DurationVar(&f.drain, "drain", 30*time.Second, "how long shutdown waits for requests in flight")
	fl.StringVar(&f.s3Endpoint, "s3-endpoint", "", "endpoint URL of an S3-compatible store for s3:// model data (e.g. http://127.0.0.1:9000)")
	fl.IntVar(&f.maxContainers, "max-containers", 200, "the most containers all endpoints and inference component copies (one container each) may run together (ResourceLimitExceeded beyond); 0 for no limit")
	fl.StringVar(&f.credentials, "credentials", "", "credentials file: access keys -> principals and their IAM policies (SigV4 is verified when set)")
	fl.StringVar(&f.policies, "policies", "", "policies file: named IAM policies and their attachments")
	fl.StringArrayVar(&f.rego, "rego", nil, "custom Rego module file or folder (package mce.custom); repeatable")
	fl.BoolVar(&f.invokeLoop, "invoke-loop", true, "answer InvokeEndpoint on mce's own loop per connection, with net/http's parser and the same bytes on the wire (docs/performance.md); false: every call through net/http's server")
	fl.StringVar(&f.debugListen, "debug-listen", "", "serve Go's pprof profiles on this address, which must be loopback (e.g. 127.0.0.1:6060); off when empty")
	fl.StringVar(&f.metricsListen, "metrics-listen", defaultMetricsListen, "serve Prometheus metrics (/metrics) and the status page (/status, /status.json) unauthenticated on this address; \"\" or \"off\" for none. With no policies and a loopback --listen, they are on --listen too")
	fl.DurationVar(&f.bodyTimeout, "body-timeout", host.DefaultBodyTimeout, "time limit for receiving a request's body (RequestTimeout beyond); 0 for the default")
	f.bodyMemory = host.DefaultBodyMemory
	fl.Var(&f.bodyMemory, "max-body-memory", "the most bytes of request bodies held in memory at once, all requests together (ServiceUnavailable beyond), e.g. 256MiB")
	fl.StringVar(&f.accessLog, "access-log", "", "write one JSON line per API request (time, request_id, remote, operation, endpoint, status, bytes_in, bytes_out, duration_ms) to this file (created 0640, appended to), or - for stdout; off when empty")
	f.asyncMaxPayload, f.asyncMemory = async.DefaultPayload, async.DefaultMemory
	fl.Var(&f.asyncMaxPayload, "async-max-payload", "the largest InvokeEndpointAsync input (and answer) mce handles, each held in memory while it runs; at most 1GiB, SageMaker's limit")
	fl.Var(&f.asyncMemory, "async-memory", "the most bytes of InvokeEndpointAsync inputs and answers held in memory at once, all requests together: each running request reserves its input's size plus --async-max-payload for its answer (at least twice --async-max-payload)")
	fl.StringArrayVar(&f.asyncInPrefixes, "async-input-prefix", nil, "S3 location (s3://bucket or s3://bucket/prefix) InvokeEndpointAsync may read InputLocation from; repeatable; none: any location the caller may s3:GetObject")
	fl.StringArrayVar(&f.asyncOutPrefixes, "async-output-prefix", nil, "S3 location (s3://bucket or s3://bucket/prefix) asynchronous answers and failures may be written to (the endpoints' S3OutputPath and S3FailurePath); repeatable; none: anywhere mce's S3 credentials reach")
	f.captureBuffer = capture.DefaultMaxBufferBytes
	fl.Var(&f.captureBuffer, "capture-buffer", "the most bytes of captured requests and answers (data capture) held in memory until they are written to S3; a sampled call beyond it is not captured (mce_data_capture_records_dropped_total, reason buffer_full)")
	fl.DurationVar(&f.captureInterval, "capture-interval", capture.DefaultFlushInterval, "how long a data capture file gathers calls before it is written to S3 (sooner once it holds 8 MiB, and at shutdown)")
	fl.IntVar(&f.asyncMaxBacklog, "async-max-backlog", async.DefaultBacklog, "the most InvokeEndpointAsync requests queued or running, all endpoints together (ServiceUnavailable beyond)")
	fl.Float64Var(&f.timeCompression, "time-compression", 1, "make AWS's timings pass this many times faster than the wall clock, for tests and demos: CloudWatch periods and alarm evaluation, deployment guardrails' waits, Application Auto Scaling's cooldowns (1 to 120; 60: a minute lasts a second); the timestamps of CloudWatch and Application Auto Scaling are on that clock, SageMaker's own (CreationTime, …) stay on the wall clock")
	fl.BoolVar(&f.insecure, "insecure", false, "allow listening beyond loopback without any policy (every caller may do everything)")
	fl.BoolVar(&f.s3PathStyle, "s3-path-style", false, "use path-style S3 addressing (MinIO and most S3-compatible stores need it)")
	fl.StringArrayVar(&f.modelRoots, "model-root", nil, "folder that file:// model data may come from, besides the folders of the -f files; repeatable (/ and system folders are refused)")
	fl.Int64Var(&f.maxArtifactBytes, "max-artifact-bytes", artifact.DefaultMaxExtractedBytes, "the most bytes of files one model artifact may extract or stage (sparse files count at their full size)")
	fl.Int64Var(&f.diskBudget, "artifact-disk-budget", artifact.DefaultDiskBudget, "the most bytes extracted model artifacts and multi-model caches may hold on disk together; unused multi-model files are deleted, least recently used first, to make room (0: no limit)")
	fl.Float64Var(&f.mmeRestartOnLeak, "mme-restart-on-leak", 0, "restart a multi-model container with GPUs once the GPU memory its server keeps after unloading models passes this share of its GPUs' memory, e.g. 0.5 (its models then load again on demand); 0 never restarts (Docker engine)")
	fl.Int64Var(&f.maxArtifactRatio, "max-artifact-ratio", artifact.DefaultMaxRatio, "the most an archive may expand, as a multiple of its own size, past its first 64 MiB")
	f.log.register(cmd)
	return cmd
}

// newFetcher builds the artifact fetcher from the flags. The model roots are
// the folders of the -f files, the file:// data the files name (a folder
// itself, an archive's folder), and the --model-root folders: what the
// operator wrote is trusted, and API callers reach nothing beyond it.
func newFetcher(f serveFlags, bundle *spec.Bundle, log zerolog.Logger) (*artifact.Fetcher, error) {
	if f.maxArtifactBytes < 0 || f.maxArtifactRatio < 0 || f.diskBudget < 0 {
		return nil, errors.New("--max-artifact-bytes, --max-artifact-ratio and --artifact-disk-budget must not be negative")
	}
	if f.mmeRestartOnLeak < 0 || f.mmeRestartOnLeak > 1 {
		return nil, fmt.Errorf("--mme-restart-on-leak %v: want a share of GPU memory in [0, 1]", f.mmeRestartOnLeak)
	}
	var roots []string
	for _, file := range f.files {
		abs, err := filepath.Abs(file)
		if err != nil {
			return nil, err
		}
		dir := filepath.Dir(abs)
		if err := artifact.ValidModelRoot(dir); err != nil {
			// An endpoint file kept in /etc/mce is fine; its folder just
			// cannot serve file:// model data.
			log.Warn().Str("file", file).Msg("the folder of this endpoint file cannot be a model root, so file:// data is not read from it: " + err.Error())
			continue
		}
		roots = append(roots, dir)
	}
	named, missing, err := namedDataRoots(bundle)
	if err != nil {
		return nil, err
	}
	roots = append(roots, named...)
	roots = append(roots, f.modelRoots...)
	return artifact.NewFetcher(artifact.Options{
		S3:                artifact.S3Options{Endpoint: f.s3Endpoint, UsePathStyle: f.s3PathStyle},
		ModelRoots:        roots,
		NamedData:         missing,
		MaxExtractedBytes: f.maxArtifactBytes,
		MaxRatio:          f.maxArtifactRatio,
	})
}

// namedDataRoots lists the folders of the file:// model data the endpoint
// files name: a folder (or multi-model prefix) itself, or an archive's
// folder. Data that does not exist yet names no root: it is listed in
// missing (artifact.Options.NamedData), so that it is reported missing
// rather than outside the roots, and its folder becomes a root once it
// exists. A system folder is refused, naming the file.
func namedDataRoots(bundle *spec.Bundle) (roots, missing []string, err error) {
	if bundle == nil {
		return nil, nil, nil
	}
	add := func(src spec.Source, u string) error {
		p, ok := strings.CutPrefix(u, "file://")
		if !ok || p == "" {
			return nil
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(src.Dir, p)
		}
		p = filepath.Clean(p)
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			missing = append(missing, p)
			return nil
		case !fi.IsDir():
			p = filepath.Dir(p)
		}
		if err := artifact.ValidModelRoot(p); err != nil {
			return fmt.Errorf("%s (%s): model data %q: %w", src.File, src.Path, u, err)
		}
		roots = append(roots, p)
		return nil
	}
	for _, m := range bundle.Models {
		defs := m.Containers
		if m.PrimaryContainer != nil {
			defs = append([]spec.ContainerDefinition{*m.PrimaryContainer}, defs...)
		}
		for _, d := range defs {
			if err := add(m.Source, d.ModelData()); err != nil {
				return nil, nil, err
			}
		}
	}
	// A component's Container.ArtifactUrl is named data as well.
	for _, ic := range bundle.InferenceComponents {
		if sp := ic.Specification; sp != nil && sp.Container != nil {
			if err := add(ic.Source, sp.Container.ArtifactURL); err != nil {
				return nil, nil, err
			}
		}
	}
	return roots, missing, nil
}

// serve runs mce serve. It starts the steps below in order, then serves
// until it is stopped: a signal (ctx done), an endpoint of the files that
// fails, the API server failing, or the engine lost. A step that fails ends
// serve with its error. Whatever the way out, what the steps started is
// stopped in reverse order once runUntilStopped's own shutdown is done.
func serve(ctx context.Context, f serveFlags) error {
	s := &serving{f: f}
	// Each step returns how to stop what it started (nil: nothing to stop).
	steps := []func(context.Context) (stop func(), err error){
		s.openLog,
		s.makeClock,
		s.loadFiles, // validated before anything touches Docker
		s.makeFetcher,
		s.checkPrefixes,
		s.startCapture, // before the API listens: it stops after the host, writing what it buffered
		s.resolveStateDir,
		s.loadPolicies, // before anything listens; reloaded on SIGHUP (stop: no more SIGHUP)
		s.listenAPI,    // stop: close the listener
		s.checkBodyLimits,
		s.startPprof,     // --debug-listen (stop: close it)
		s.startEngine,    // stop: close the engine
		s.openStore,      // stop: close the state store
		s.openCloudWatch, // stop (after the host's): write the open periods and close
		s.openAutoScaling,
		s.startAccessLog, // stop: flush and close it
		s.newHost,
		s.startMetrics, // --metrics-listen (stop: close it)
		s.preflight,    // every endpoint of the files, before anything starts
		s.recoverState, // the state's endpoints: adopted or relaunched
		s.startAPI,     // serving from here on; runUntilStopped drains it
		s.startBidi,    // --bidi-listen (stop: drain it, then cut what is left)
		s.applyFiles,   // the files' definitions, as API calls
	}
	var stops []func()
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}()
	for _, start := range steps {
		stop, err := start(ctx)
		if err != nil {
			return err
		}
		if stop != nil {
			stops = append(stops, stop)
		}
	}
	return s.runUntilStopped(ctx)
}

// serving is what serve's steps set up, each step using what the ones
// before it made.
type serving struct {
	f            serveFlags
	log          zerolog.Logger
	bundle       *spec.Bundle
	plans        []containers.EndpointPlan // the files' endpoints, for the pre-flight
	fetcher      *artifact.Fetcher
	prefixes     [2][]string // --async-input-prefix and --async-output-prefix, normalized
	capture      *capture.Writer
	az           *authz.Authorizer
	loopbackOnly bool // the API listens on loopback only
	ln           net.Listener
	eng          *engine
	st           *store.Store
	cw           *cloudwatch.Service
	autoScaling  *applicationautoscaling.Service
	clock        *awsclock.Clock // AWS time (--time-compression)
	accessLog    *accesslog.Writer
	srv          *host.Server
	hs           *dataplane.Server
	serveErr     chan error // the API server's end
	failed       chan error // the first endpoint of the files that failed
}

// makeClock makes the clock of AWS's timings: the wall clock, or one
// --time-compression times as fast.
func (s *serving) makeClock(context.Context) (func(), error) {
	if s.f.timeCompression == 1 || s.f.timeCompression == 0 { // 0: the flag's zero value, none given
		return nil, nil
	}
	c, err := awsclock.New(s.f.timeCompression)
	if err != nil || s.f.timeCompression > awsclock.MaxServeFactor {
		return nil, &exitError{code: 2, msg: fmt.Sprintf("--time-compression %v: want a factor from 1 to %d", s.f.timeCompression, awsclock.MaxServeFactor)}
	}
	s.clock = c
	s.log.Warn().Float64("factor", c.Factor()).Msg("AWS's timings are compressed (--time-compression): periods, alarms, rollouts and cooldowns run faster than the wall clock")
	return nil, nil
}

func (s *serving) openLog(context.Context) (func(), error) {
	var logTo io.Writer = os.Stderr
	if s.f.logTo != nil {
		logTo = s.f.logTo
	}
	log, err := s.f.log.logger(logTo)
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	s.log = log
	return nil, nil
}

// loadFiles reads and validates the -f files.
func (s *serving) loadFiles(context.Context) (func(), error) {
	if len(s.f.files) == 0 {
		return nil, nil
	}
	bundle, err := spec.LoadFiles(s.f.files...)
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	// Cross-file checks (names, references) before anything starts; the
	// warnings are logged once, when Apply creates the definitions.
	plans, _, err := bundle.Plans(s.f.region, s.f.account)
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	s.bundle, s.plans = bundle, plans
	return nil, nil
}

func (s *serving) makeFetcher(context.Context) (func(), error) {
	fetcher, err := newFetcher(s.f, s.bundle, s.log)
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	s.fetcher = fetcher
	return nil, nil
}

// checkPrefixes normalizes --async-input-prefix and --async-output-prefix.
func (s *serving) checkPrefixes(context.Context) (func(), error) {
	for i, list := range [][]string{s.f.asyncInPrefixes, s.f.asyncOutPrefixes} {
		for _, p := range list {
			n, err := async.NormalizeS3Prefix(p)
			if err != nil {
				return nil, &exitError{code: 2, msg: "--async-" + [2]string{"input", "output"}[i] + "-prefix: " + err.Error()}
			}
			s.prefixes[i] = append(s.prefixes[i], n)
		}
	}
	return nil, nil
}

// startCapture starts the data capture writer (host/capture) on the S3
// client, writing only under --async-output-prefix when it is given. It
// stops after the host (steps stop in reverse order), when no call is left
// to capture: it writes what it buffered, within --drain.
func (s *serving) startCapture(context.Context) (func(), error) {
	outs := s.prefixes[1]
	if s.f.captureInterval < 0 {
		return nil, &exitError{code: 2, msg: "--capture-interval must not be negative"}
	}
	w, err := capture.New(capture.Options{Store: s.fetcher, Log: s.log, MaxBufferBytes: int64(s.f.captureBuffer),
		FlushInterval: s.f.captureInterval,
		Allowed: func(url string) bool {
			return len(outs) == 0 || slices.ContainsFunc(outs, func(p string) bool { return strings.HasPrefix(url, p) })
		}})
	if err != nil {
		return nil, err
	}
	s.capture = w
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.f.drain)
		defer cancel()
		_ = w.Close(ctx) // logs what it could not write
	}, nil
}

func (s *serving) resolveStateDir(context.Context) (func(), error) {
	if s.f.stateDir != "" {
		return nil, nil
	}
	dir, err := docker.DefaultStateDir()
	if err != nil {
		return nil, err
	}
	s.f.stateDir = dir
	return nil, nil
}

// loadPolicies loads the policies before anything listens: a policy that
// does not parse or compile stops mce here, naming file and line. Without
// policies, mce listens beyond loopback only with --insecure. The policies
// are watched and reloaded on SIGHUP while ctx lasts.
func (s *serving) loadPolicies(ctx context.Context) (func(), error) {
	f, log := s.f, s.log
	az, err := authz.Load(ctx, authz.Config{
		CredentialsFile: f.credentials, PoliciesFile: f.policies, RegoPaths: f.rego,
		Region: f.region, Logger: log,
		// A statement that can never apply is logged as a warning.
		Targets: host.AuthzTargets(f.region, f.account),
	})
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	loopbackOnly, err := isLoopback(f.listen)
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	switch {
	case az.Enabled():
		log.Info().Msg("authorization: SigV4 identities and IAM/Rego policies are enforced on every request")
	case loopbackOnly:
		log.Warn().Msg("authorization: no policies configured, so every request is allowed (local development on loopback)")
	case f.insecure:
		log.Warn().Str("listen", f.listen).Msg("authorization: no policies and listening beyond loopback with --insecure: anyone who can reach mce may do anything")
	default:
		return nil, &exitError{code: 2, msg: "refusing to listen on " + f.listen + " (beyond loopback) without policies: give --credentials/--policies/--rego, or --insecure to accept that anyone may do anything"}
	}
	s.az, s.loopbackOnly = az, loopbackOnly
	go az.Watch(ctx)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				// Reload logs its outcome; it never switches policies off,
				// so the listener check above holds until the next start.
				_ = az.Reload(ctx)
			}
		}
	}()
	return func() { signal.Stop(hup) }, nil
}

func (s *serving) listenAPI(context.Context) (func(), error) {
	ln, err := net.Listen("tcp", s.f.listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", s.f.listen, err)
	}
	s.ln = ln
	return func() { ln.Close() }, nil
}

func (s *serving) checkBodyLimits(context.Context) (func(), error) {
	f := s.f
	if f.bodyTimeout < 0 || f.bodyMemory < 0 || f.bodyMemory > 0 && f.bodyMemory < host.MaxPayload {
		return nil, &exitError{code: 2, msg: fmt.Sprintf("--body-timeout must not be negative, and --max-body-memory must hold at least one 6 MiB body (%d bytes)", host.MaxPayload)}
	}
	return nil, nil
}

func (s *serving) startPprof(context.Context) (func(), error) {
	if s.f.debugListen == "" {
		return nil, nil
	}
	stop, err := servePprof(s.f.debugListen)
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	s.log.Info().Str("listen", s.f.debugListen).Msg("pprof profiles on /debug/pprof/")
	return stop, nil
}

func (s *serving) startEngine(ctx context.Context) (func(), error) {
	eng, err := openEngine(ctx, s.f, s.fetcher, s.log)
	if err != nil {
		return nil, err
	}
	s.eng = eng
	return eng.close, nil
}

func (s *serving) openStore(context.Context) (func(), error) {
	st, err := store.OpenWith(filepath.Join(s.eng.instanceDir, "state.db"), store.Options{Logger: s.log})
	if err != nil {
		return nil, err
	}
	s.st = st
	return func() { st.Close() }, nil
}

// openCloudWatch opens the CloudWatch metrics store in the instance's
// state folder (<state>/cloudwatch): the host answers the metrics API from
// it and publishes SageMaker's metrics to it. It closes after the host, so
// the last calls' datapoints are written.
func (s *serving) openCloudWatch(context.Context) (func(), error) {
	cw, err := cloudwatch.Open(cloudwatch.Options{Dir: filepath.Join(s.eng.instanceDir, "cloudwatch"), Logger: s.log,
		Region: s.f.region, Account: s.f.account, Clock: s.clock})
	if err != nil {
		return nil, err
	}
	s.cw = cw
	return func() {
		if err := cw.Close(); err != nil {
			s.log.Warn().Err(err).Msg("closing the CloudWatch metrics store")
		}
	}, nil
}

// openAutoScaling opens Application Auto Scaling in the instance's state
// folder (<state>/applicationautoscaling), on the CloudWatch service (its
// alarms); the host runs it.
func (s *serving) openAutoScaling(context.Context) (func(), error) {
	as, err := applicationautoscaling.Open(applicationautoscaling.Options{Dir: filepath.Join(s.eng.instanceDir, "applicationautoscaling"),
		CloudWatch: s.cw, Clock: s.clock, Region: s.f.region, Account: s.f.account, Logger: s.log})
	if err != nil {
		return nil, err
	}
	s.autoScaling = as
	return func() { as.Close() }, nil
}

func (s *serving) startAccessLog(context.Context) (func(), error) {
	accessLog, closeAccessLog, err := openAccessLog(s.f.accessLog)
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	s.accessLog = accessLog
	return closeAccessLog, nil
}

// newHost builds the host (the SageMaker API) on the engine, the store and
// the policies, and has the engine tell it of containers' new addresses.
func (s *serving) newHost(context.Context) (func(), error) {
	f, fetcher, eng := s.f, s.fetcher, s.eng
	cwd, _ := os.Getwd()
	var modelData host.ModelDataChecker = fetcher
	if eng.modelData != nil {
		modelData = eng.modelData // the engine reads file:// data elsewhere (the kubernetes engine: in the pod)
	}
	s.srv = host.New(host.Config{
		AccessLog: s.accessLog,
		Region:    f.region, Account: f.account, ContainerTimeout: f.containerTimeout,
		Backend: eng.backend, Store: s.st, BaseDir: cwd, ModelData: modelData,
		MaxContainers: f.maxContainers, Authz: s.az, Logger: s.log, Version: version,
		BodyTimeout: f.bodyTimeout, BodyMemory: int64(f.bodyMemory),
		AsyncObjects: fetcher, AsyncMaxPayload: int64(f.asyncMaxPayload), AsyncMemory: int64(f.asyncMemory),
		AsyncMaxBacklog: f.asyncMaxBacklog, AsyncInputPrefixes: s.prefixes[0], AsyncOutputPrefixes: s.prefixes[1],
		Capture:     s.capture,
		CloudWatch:  s.cw,
		AutoScaling: s.autoScaling,
		Clock:       s.clock,
		// Unsigned scrapers keep /metrics on the API listener only in local
		// development: loopback and no policies (the host also checks the
		// policies on every scrape).
		MetricsOnAPI: s.loopbackOnly && !s.az.Enabled(),
	})
	eng.onAddressChange(s.srv.ForgetAddress)
	return nil, nil
}

// startMetrics serves the operator's handler on --metrics-listen; a busy
// default address only warns.
func (s *serving) startMetrics(context.Context) (func(), error) {
	stop, err := serveMetrics(s.f.metricsListen, s.srv.OperatorHandler(), s.log)
	if err != nil {
		if !s.f.metricsDefault {
			return nil, &exitError{code: 2, msg: err.Error()}
		}
		s.log.Warn().Err(err).Msg("no metrics listener (give --metrics-listen another address, or off)")
		return nil, nil
	}
	return stop, nil
}

// preflight checks every endpoint of the files before anything starts; all
// their problems are told together.
func (s *serving) preflight(ctx context.Context) (func(), error) {
	if s.bundle != nil {
		if msg := preflightFiles(ctx, s.srv, s.plans); msg != "" {
			return nil, &exitError{code: 1, msg: msg}
		}
	}
	return nil, nil
}

// recoverState brings back the endpoints of the durable state first:
// adopted if their containers still run, relaunched otherwise.
func (s *serving) recoverState(ctx context.Context) (func(), error) {
	return nil, s.srv.Recover(ctx)
}

// startAPI serves the SageMaker API on the listener. It stops in
// runUntilStopped, which drains it.
func (s *serving) startAPI(context.Context) (func(), error) {
	// Headers must arrive within ReadHeaderTimeout; the body's own deadline
	// is set per request (--body-timeout), so no ReadTimeout or
	// WriteTimeout cuts a long invocation.
	hs := &http.Server{
		Handler:           s.srv.Handler(),
		ConnContext:       host.ConnContext, // a cut response stream drops its connection at once
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	hs.RegisterOnShutdown(s.srv.EndStreams) // followers of logs do not hold up the drain
	// InvokeEndpoint's calls are answered on a loop per connection, every
	// other call by net/http (host/dataplane: the hot path without net/http's
	// per-request machinery, with the same bytes on the wire).
	// The loop bounds an unread body as host's middleware does, which then
	// stands aside (host.UnreadBodyGrace).
	dp := &dataplane.Server{HTTP: hs, Fast: dataplane.InvokeEndpointLine, UnreadBodyGrace: host.UnreadBodyGrace}
	if !s.f.invokeLoop {
		dp.Fast = func([]byte) bool { return false } // every connection to net/http at its first request
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- dp.Serve(s.ln) }()
	s.hs, s.serveErr = dp, serveErr
	s.log.Info().Str("listen", s.ln.Addr().String()).Str("instance", s.f.instance).Msg("mce is serving the SageMaker API")
	return nil, nil
}

// applyFiles puts the files' definitions through the same operations as API
// calls; the first endpoint that fails ends serve.
func (s *serving) applyFiles(ctx context.Context) (func(), error) {
	failed := make(chan error, 1)
	s.failed = failed
	if s.bundle == nil {
		return nil, nil
	}
	names, err := s.srv.Apply(ctx, s.bundle)
	if err != nil {
		failed <- err
	}
	for _, name := range names {
		go func() {
			if err := s.srv.WaitEndpoint(ctx, name); err != nil && ctx.Err() == nil {
				select {
				case failed <- err:
				default:
				}
			}
		}()
	}
	return nil, nil
}

// runUntilStopped waits for the end of serving, then shuts down in order:
// the API server drains (--drain), what runs is kept (--on-exit keep after
// a signal) or the host tears the endpoints down, and a last sweep removes
// what no deployment owns. A lost engine stops at once instead, leaving
// everything to the mce that holds the instance now.
func (s *serving) runUntilStopped(ctx context.Context) error {
	f, log, eng, hs := s.f, s.log, s.eng, s.hs
	var runErr error
	// --on-exit keep applies to a stop by signal; after a failure serve
	// removes everything, as its help says.
	keep := false
	select {
	case <-ctx.Done():
		keep = eng.keep != nil
		log.Info().Msg("shutting down: draining requests in flight")
	case runErr = <-s.failed:
	case err := <-s.serveErr:
		runErr = fmt.Errorf("serving: %w", err)
	case err := <-eng.lost:
		// Another mce may own the endpoints' objects now: stop serving and
		// leave them alone (no drain, no teardown, no sweep).
		hs.Close()
		log.Error().Err(err).Msg("stopping at once; endpoints left running for the mce that holds the instance now")
		return err
	}

	dctx, cancel := context.WithTimeout(context.Background(), f.drain)
	if err := hs.Shutdown(dctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn().Err(err).Msg("requests still in flight after the drain period")
	}
	cancel()
	tctx, cancel := context.WithTimeout(context.Background(), f.stopGrace+time.Minute)
	defer cancel()
	if keep {
		eng.keep() // --on-exit keep: what runs stays for the next start to adopt
	}
	if err := s.srv.Close(tctx); err != nil {
		log.Error().Err(err).Msg("teardown")
		if runErr == nil {
			runErr = err
		}
	}
	// A last sweep: anything of this instance that no deployment owns any more.
	if err := eng.backend.Reconcile(tctx); err != nil {
		log.Error().Err(err).Msg("final clean-up")
	}
	if keep {
		log.Info().Msg("mce stopped; the endpoints' pods keep running and the next start adopts them (--on-exit keep)")
	} else {
		log.Info().Msg("mce stopped; containers, networks and artifacts removed (endpoints are kept in the state and come back on the next start)")
	}
	return runErr
}

// preflightFiles runs the pre-flight on every endpoint of the files (their
// plans, as validated at start-up) at once and lists every problem of every
// endpoint; "" when there is none.
func preflightFiles(ctx context.Context, srv *host.Server, plans []containers.EndpointPlan) string {
	found := make([][]containers.Problem, len(plans))
	var wg sync.WaitGroup
	for i, p := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[i] = srv.Preflight(ctx, p)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return "" // stopped meanwhile: serve ends on its own
	}
	var b strings.Builder
	n, eps := 0, 0
	for i, p := range plans {
		if len(found[i]) == 0 {
			continue
		}
		eps++
		fmt.Fprintf(&b, "\nendpoint %q:", p.Name)
		for _, pr := range found[i] {
			n++
			fmt.Fprintf(&b, "\n  %d. %s", n, pr.Headline())
			if pr.Fix != "" {
				fmt.Fprintf(&b, "\n     fix: %s", pr.Fix)
			}
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("the pre-flight found %d problem%s in %d endpoint%s of the files; nothing was started:%s",
		n, plural(n), eps, plural(eps), b.String())
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// openAccessLog opens --access-log: "" for none, "-" for stdout, else a
// file appended to (created with mode 0640). The returned func flushes and
// closes it; call it after the HTTP server stopped.
func openAccessLog(path string) (*accesslog.Writer, func(), error) {
	switch path {
	case "":
		return nil, func() {}, nil
	case "-":
		l := accesslog.New(os.Stdout)
		return l, l.Close, nil
	}
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, nil, fmt.Errorf("--access-log: %w", err)
	}
	l := accesslog.New(file)
	return l, func() {
		l.Close()
		file.Close()
	}, nil
}

// isLoopback reports whether a listen address binds loopback only.
func isLoopback(listen string) (bool, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false, fmt.Errorf("--listen %q: %w", listen, err)
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// servePprof serves Go's profiles on a loopback address only: they reveal
// internals and cost CPU, so they are never exposed beyond the machine.
func servePprof(addr string) (stop func(), err error) {
	if ok, err := isLoopback(addr); err != nil || !ok {
		return nil, fmt.Errorf("--debug-listen %q must be a loopback address (pprof is never served beyond the machine)", addr)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	// "localhost" is a name: check what was bound.
	if a, ok := ln.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("--debug-listen %q bound %s, which is not loopback", addr, ln.Addr())
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout}
	go srv.Serve(ln)
	return func() { srv.Close() }, nil
}

const (
	// readHeaderTimeout bounds the time a request's headers take to arrive
	// on every listener.
	readHeaderTimeout = 10 * time.Second
	// defaultMetricsListen is --metrics-listen's default: loopback, on the
	// port the OpenTelemetry Prometheus exporter uses by convention (9090 is
	// Prometheus' own).
	defaultMetricsListen = "127.0.0.1:9464"
)

// serveMetrics serves the operator's handler on addr ("" or "off":
// nowhere): Prometheus metrics at /metrics and the status page at /status.
// Scrapers do not sign requests, so this listener is for the operator:
// loopback by default; an address beyond loopback is allowed (a Prometheus
// on another machine) with a warning, and the status page then leaves out
// container output for requests from beyond loopback.
func serveMetrics(addr string, h http.Handler, log zerolog.Logger) (stop func(), err error) {
	if addr == "" || addr == "off" {
		return func() {}, nil
	}
	loopback, err := isLoopback(addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen %q: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	if !loopback {
		log.Warn().Str("listen", addr).Msg("metrics are served beyond loopback without authentication: they name every endpoint, variant and container")
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: 10 * time.Second, WriteTimeout: time.Minute}
	go srv.Serve(ln)
	log.Info().Str("listen", ln.Addr().String()).Msg("Prometheus metrics on /metrics, status page on /status")
	return func() { srv.Close() }, nil
}
