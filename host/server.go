package host

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"golang.org/x/sync/semaphore"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/accesslog"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/applicationautoscaling"
	"github.com/mce-run/mce/host/async"
	"github.com/mce-run/mce/host/capture"
	"github.com/mce-run/mce/host/cloudwatch"
	"github.com/mce-run/mce/host/cloudwatchlogs"
	"github.com/mce-run/mce/host/components"
	"github.com/mce-run/mce/host/metrics"
	"github.com/mce-run/mce/host/sagemakermetrics"
	"github.com/mce-run/mce/host/shadow"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/statuspage"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/awsclock"
	"github.com/mce-run/mce/internal/background"
	"github.com/mce-run/mce/internal/parallel"
	"github.com/mce-run/mce/pipeline"
	"github.com/mce-run/mce/pipeline/sessions"
)

// MaxPayload is SageMaker's 6 MiB limit on request and response bodies
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html).
const MaxPayload = 6 << 20

// Config configures a Server. Zero values are defaults.
type Config struct {
	Region  string // default us-east-1
	Account string // default 123456789012
	// ContainerTimeout bounds each container call; default 60 s, SageMaker's
	// limit (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html).
	ContainerTimeout time.Duration
	Backend          containers.Engine
	// Store holds models, endpoint configs and endpoints durably. Required.
	Store *store.Store
	// BaseDir is where relative file:// model data URLs of models created
	// through the API resolve; default the working directory.
	BaseDir string
	// ModelData checks the ModelDataUrl of CreateModel (file:// URLs must
	// lie inside the model roots) so that a caller hears of a refused path
	// at once; nil skips the check. *artifact.Fetcher implements it, and
	// enforces the same rule again when the files are read.
	ModelData ModelDataChecker
	// MaxContainers caps the containers of all endpoints and inference
	// component copies (one container each) together
	// (ResourceLimitExceeded beyond it); 0 means no cap.
	MaxContainers int
	// Authz authenticates callers and applies policies; nil allows all.
	Authz *authz.Authorizer
	// BodyTimeout bounds the time a request's body takes to arrive, from
	// the end of its headers; default DefaultBodyTimeout (60 s, SageMaker's
	// limit on a call). The answer may take longer: only reading is bounded.
	BodyTimeout time.Duration
	// BodyMemory is the most bytes of request bodies held in memory by all
	// requests together; a request beyond it is refused with 503
	// ServiceUnavailable. Default DefaultBodyMemory (256 MiB).
	BodyMemory int64
	// MetricsOnAPI also serves GET /metrics and the status page (GET /,
	// /status, /status.json) on Handler, unsigned, for as long as no policy
	// is enforced (never while Authz is enabled: metrics name every
	// endpoint and their traffic). MetricsHandler and OperatorHandler serve
	// them regardless, for a listener of the operator's.
	MetricsOnAPI bool
	// Version labels mce_build_info; empty means the module version Go
	// embedded in the binary.
	Version string
	// AccessLog, when set, gets one line per request (mce serve
	// --access-log); the caller closes it after the HTTP server stopped.
	AccessLog *accesslog.Writer
	Logger    zerolog.Logger
	// AsyncObjects reads the inputs and writes the answers of
	// InvokeEndpointAsync; nil refuses it (ServiceUnavailable).
	AsyncObjects async.ObjectStore
	// CloudWatch is the CloudWatch metrics API and its store (mce serve
	// opens it in <state>/cloudwatch): the server answers its calls and
	// publishes SageMaker's metrics to it. Nil answers none and publishes
	// nothing. The caller closes it after the server.
	CloudWatch *cloudwatch.Service
	// AutoScaling is Application Auto Scaling (mce serve opens it in
	// <state>/applicationautoscaling, on CloudWatch): the server answers its
	// calls and runs it on the endpoints and components until Close. Nil
	// answers none. The caller closes it after the server.
	AutoScaling *applicationautoscaling.Service
	// Clock is the clock of AWS's timings (deployment guardrails' waits);
	// nil: the wall clock.
	Clock *awsclock.Clock
	// AsyncMaxPayload caps an asynchronous input and its answer, each held
	// in memory while the request runs; default async.DefaultPayload, at
	// most async.PayloadLimit.
	AsyncMaxPayload int64
	// AsyncMemory is the most bytes of asynchronous inputs and answers held
	// in memory together: a request reserves its input's size plus
	// AsyncMaxPayload for its answer (twice that in a chain of containers)
	// before it runs, and keeps only its answer's size once the answer is
	// in. Default async.DefaultMemory, and never less than twice
	// AsyncMaxPayload (one input and its answer at the cap).
	AsyncMemory int64
	// AsyncInputPrefixes, when not empty, are the only S3 locations
	// (s3://bucket/ or s3://bucket/prefix, see async.NormalizeS3Prefix) an
	// InputLocation may name; others are refused with AccessDeniedException.
	AsyncInputPrefixes []string
	// AsyncOutputPrefixes, when not empty, are the only S3 locations
	// asynchronous answers and failures are written to; a request whose
	// endpoint's S3OutputPath or S3FailurePath lies elsewhere is refused
	// with ValidationError.
	AsyncOutputPrefixes []string
	// AsyncMaxBacklog is the most asynchronous requests queued or running,
	// all endpoints together; beyond it InvokeEndpointAsync answers 503
	// ServiceUnavailable. Default async.DefaultBacklog.
	AsyncMaxBacklog int
	// Capture writes the data capture of every endpoint with a
	// DataCaptureConfig (docs/data-capture.md); nil refuses
	// DataCaptureConfig. The server registers its metrics; its owner
	// closes it after Close, which writes what it buffered.
	Capture *capture.Writer
	// UsageInterval is how often a Backend that is a UsageSource is asked
	// for its containers' resource use, in the background (scrapes read
	// the last figures); default metrics.DefaultUsageInterval.
	UsageInterval time.Duration
}

// ModelDataChecker checks a model data URL, relative file:// URLs starting
// at baseDir; its errors are the caller's mistakes.
type ModelDataChecker interface {
	CheckModelDataURL(modelDataURL, baseDir string) error
}

// Server is the HTTP front. Create it with New; it is safe for concurrent use.
type Server struct {
	cfg     Config
	log     zerolog.Logger
	echo    *echo.Echo
	invoker *pipeline.Invoker
	// mirror sends sampled copies of production calls to shadow
	// variants (host/shadow says what becomes of them).
	mirror *pipeline.Mirror
	// sessions maps stateful sessions to the instance that opened them
	// (pipeline/sessions); calls without a session never touch it.
	sessions *sessions.Table
	metrics  *metrics.Metrics
	reg      registry
	ics      *components.Manager // inference components (endpoints_components.go)
	gate     *gate               // authentication and decisions (auth.go)
	store    *store.Store
	ids      *requestIDs
	failLog  failLimiter // rate of the info lines of failed invocations
	// bodyBudget holds Config.BodyMemory bytes; request bodies take from it
	// as they arrive.
	bodyBudget *semaphore.Weighted
	// series feeds the status page's charts; status is the page.
	series *statuspage.Recorder
	status *statuspage.Page
	// async is the InvokeEndpointAsync queues.
	async *async.Queue
	// published feeds SageMaker's CloudWatch metrics (nil without
	// Config.CloudWatch; cloudwatch_handler.go).
	published *sagemakermetrics.Publisher

	// bg runs the work that outlives requests (launches, updates,
	// reconciles, dispatch loops); Close stops it. ctx is its lifetime,
	// cancelled by Close: it aborts launches in progress.
	bg  *background.Group
	ctx context.Context
	// streams is cancelled by EndStreams (and Close): it ends the
	// followers of container logs.
	streams    context.Context
	endStreams context.CancelFunc
	// logs answers the calls that read containers' output.
	logs *cloudwatchlogs.Service
	// captures is the endpoints' data capture (datacapture.go).
	captures captures
	// identity answers STS's and IAM's calls (identity_handler.go).
	identity identity
}

// New builds the server and its routes.
func New(cfg Config) *Server {
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Account == "" {
		cfg.Account = "123456789012"
	}
	if cfg.ContainerTimeout <= 0 {
		cfg.ContainerTimeout = 60 * time.Second
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.BodyMemory <= 0 {
		cfg.BodyMemory = DefaultBodyMemory
	}
	s := &Server{cfg: cfg, log: cfg.Logger, metrics: metrics.New(), ids: newRequestIDs(), store: cfg.Store,
		bodyBudget: semaphore.NewWeighted(cfg.BodyMemory)}
	s.bg = background.New(context.Background(), cfg.Logger)
	s.captures = captures{w: cfg.Capture, log: cfg.Logger}
	if cfg.Capture != nil {
		s.metrics.Registry().MustRegister(cfg.Capture)
	}
	s.gate = &gate{az: cfg.Authz, tagsOf: func(arn string) ([]spec.Tag, bool, error) {
		kind, name, ok := s.parseResourceARN(arn)
		if !ok {
			return nil, false, nil
		}
		return s.tagsOf(kind, name)
	}}
	s.ctx = s.bg.Context()
	s.ics = newComponents(s)
	s.series, s.status = newStatus(s)
	s.streams, s.endStreams = context.WithCancel(context.Background())
	s.logs = newLogService(s)
	s.identity = newIdentity(s)
	if b, ok := cfg.Backend.(containers.MultiModelObservable); ok {
		b.SetMultiModelObserver(s.metrics.MultiModelObserver)
	}
	var uc *metrics.UsageCollector
	if src, ok := cfg.Backend.(containers.UsageSource); ok {
		uc = metrics.NewUsageCollector(src)
		s.metrics.Registry().MustRegister(uc)
	}
	s.metrics.Registry().MustRegister(metrics.NewStateCollector(metricsState(s)), metrics.NewBuildInfo(cfg.Version), metrics.NewComponentCollector(s.ics.Gauges))
	s.metrics.Registry().MustRegister(metrics.NewClockOffset(cfg.Clock.Now)) // 0 on the wall clock
	s.invoker = pipeline.NewInvoker(pipeline.Options{
		Timeout:    cfg.ContainerTimeout,
		MaxPayload: MaxPayload,
		Observer:   s.metrics,
	})
	s.sessions = sessions.Open(sessions.Options{}, store.SessionBacking{S: s.store}, func(err error) {
		cfg.Logger.Warn().Err(err).Msg("stateful sessions: state not saved or read")
	})
	s.mirror = s.invoker.NewMirror(pipeline.MirrorOptions{Context: s.ctx, Go: s.bg.Go, Observer: shadow.New(shadow.Options{
		Invocation: s.metrics.ObserveInvocation, Dropped: s.metrics.ShadowDropped, Record: s.series.Record, Log: cfg.Logger,
		Answered: func(c *pipeline.ShadowCall) { captureShadow(s.reg.get(c.Endpoint), c) }, // data capture (datacapture.go)
	})})
	s.async = newAsyncQueue(s)
	s.published = newPublisher(s) // after every source it samples
	startAutoScaling(s)
	if uc != nil {
		if s.published != nil {
			uc.Also(s.published.ObserveUsage) // one read of the engine's usage for both
		}
		every := cfg.UsageInterval
		if every <= 0 {
			every = metrics.DefaultUsageInterval
		}
		s.bg.Go(func() { uc.Run(s.ctx, every) })
	}

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.echoError
	if cfg.AccessLog != nil {
		e.Use(s.accessLogger) // outermost: it sees the status a panic turned into
	}
	e.Use(s.recoverPanics)
	e.Use(s.boundUnreadBody)
	e.POST("/", s.controlPlane)
	e.POST(cloudwatch.CBORPathPrefix+":op", func(c echo.Context) error { return serveCloudWatch(s, c) })
	e.POST("/endpoints/:name/invocations", s.invokeEndpoint)
	e.POST("/endpoints/:name/invocations-response-stream", s.invokeEndpointStream)
	e.POST("/endpoints/:name/async-invocations", s.invokeEndpointAsync)
	openaiRoutes(s, e) // the OpenAI-compatible route (openai_handler.go)
	if cfg.MetricsOnAPI {
		metrics := s.MetricsHandler()
		e.GET("/metrics", func(c echo.Context) error {
			if a := s.cfg.Authz; a != nil && a.Enabled() {
				// Scrapers do not sign; with policies enforced, metrics
				// live on the operator's listener only.
				return echo.ErrNotFound
			}
			metrics.ServeHTTP(c.Response(), c.Request())
			return nil
		})
		// The status page goes where the metrics go, under the same rule.
		for path, h := range map[string]http.HandlerFunc{
			"/":            func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/status", http.StatusFound) },
			"/status":      s.status.ServePage,
			"/status.json": s.status.ServeJSON,
		} {
			e.GET(path, func(c echo.Context) error {
				if a := s.cfg.Authz; a != nil && a.Enabled() {
					return echo.ErrNotFound
				}
				h(c.Response(), c.Request())
				return nil
			})
		}
	}
	e.GET("/mce/endpoints/:name/logs", s.containerLogs)
	e.GET("/ping", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	e.GET("/mce/endpoints", func(c echo.Context) error {
		// The same information as ListEndpoints, so the same permission.
		if api := s.gate.authorize(c.Request().Context(), c.Request(), nil, "sagemaker:ListEndpoints", "*", nil); api != nil {
			apierr.Write(c.Response(), api)
			return nil
		}
		return c.JSON(http.StatusOK, s.Endpoints())
	})
	s.echo = e
	return s
}

// Handler is the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.echo }

// MetricsHandler serves the Prometheus metrics, unauthenticated: mount it
// where only the operator reaches it (mce serve --metrics-listen).
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.Registry(), promhttp.HandlerOpts{})
}

// EndStreams ends the calls that stream until told (mce logs --follow), so
// that a graceful shutdown of the HTTP server does not wait for them: give
// it to http.Server.RegisterOnShutdown.
func (s *Server) EndStreams() { s.endStreams() }

// Invoker is the server's router to containers (for dropping pooled
// connections to containers that moved).
func (s *Server) Invoker() *pipeline.Invoker { return s.invoker }

// ForgetAddress drops pooled connections to a container base URL that
// moved, in every invoker of the server.
func (s *Server) ForgetAddress(baseURL string) {
	s.invoker.Forget(baseURL)
	s.async.Forget(baseURL)
}

// Close aborts launches in progress and stops every endpoint's containers,
// keeping the endpoints' records: the next start relaunches them. Stop the
// HTTP server first (http.Server.Shutdown drains requests in flight).
func (s *Server) Close(ctx context.Context) error {
	s.bg.Cancel()
	s.endStreams()
	s.mirror.Close() // shadow copies: no new ones; those in flight were cut
	s.bg.Wait()
	var ls []containers.Launched
	for _, e := range s.reg.all() {
		e.route.Store(nil)
		e.mu.Lock()
		if e.launched != nil {
			ls = append(ls, e.launched)
		}
		e.launched = nil
		e.mu.Unlock()
	}
	ls = append(ls, s.ics.Detach()...) // inference components' copies
	err := parallel.Each(ls, func(l containers.Launched) error { return l.Close(ctx) })
	s.invoker.Close()
	s.async.Close()
	if s.published != nil {
		s.published.Close()
	}
	return err
}

// echoError writes router-level failures (unknown path, wrong method) in the
// same JSON shape as every other error.
func (s *Server) echoError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	reqID := c.Response().Header().Get(hdrRequestID)
	if reqID == "" {
		reqID = s.ids.next()
		c.Response().Header().Set(hdrRequestID, reqID)
	}
	var he *echo.HTTPError
	var api *apierr.Error
	switch {
	case errors.As(err, &he) && he.Code == http.StatusNotFound:
		api = &apierr.Error{Status: http.StatusNotFound, Code: apierr.CodeUnknownOperation,
			Message: "mce has no operation at " + c.Request().Method + " " + c.Request().URL.Path}
	case errors.As(err, &he) && he.Code == http.StatusMethodNotAllowed:
		api = &apierr.Error{Status: http.StatusMethodNotAllowed, Code: apierr.CodeUnknownOperation,
			Message: "method " + c.Request().Method + " is not allowed on " + c.Request().URL.Path}
	case errors.As(err, &he) && he.Code >= 400 && he.Code < 500:
		api = &apierr.Error{Status: he.Code, Code: apierr.CodeValidation, Message: http.StatusText(he.Code) + "."}
	default:
		api = s.internalError(reqID, err)
	}
	apierr.Write(c.Response(), api)
}

// recoverPanics turns a panic in a handler into an InternalFailure with the
// request ID (the stack goes to the log), instead of a dropped connection.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error().Str("stack", string(debug.Stack())).Msg("handler panicked")
				err = fmt.Errorf("handler panicked: %v", v)
			}
		}()
		return next(c)
	}
}

func (s *Server) unsupported(op string) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set(hdrRequestID, s.ids.next())
		apierr.Write(c.Response(), apierr.Validation("%s is not supported by mce; use InvokeEndpoint.", op))
		return nil
	}
}
