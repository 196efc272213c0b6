package host

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"golang.org/x/sync/semaphore"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/pipeline"
)

// MaxPayload is SageMaker's 6 MiB limit on request and response bodies
// (contracts doc §1.3).
const MaxPayload = 6 << 20

// Config configures a Server. Zero values are defaults.
type Config struct {
	Region  string // default us-east-1
	Account string // default 123456789012
	// ContainerTimeout bounds each container call; default 60 s, SageMaker's
	// limit (contracts doc §3.1).
	ContainerTimeout time.Duration
	Backend          Backend
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
	// MaxContainers caps the containers of all endpoints together
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
	// MetricsOnAPI also serves GET /metrics on Handler, unsigned, for as
	// long as no policy is enforced (never while Authz is enabled: metrics
	// name every endpoint and their traffic). MetricsHandler serves them
	// regardless, for a listener of the operator's.
	MetricsOnAPI bool
	Logger       zerolog.Logger
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
	metrics *metrics
	reg     registry
	store   *store.Store
	ids     *requestIDs
	// bodyBudget holds Config.BodyMemory bytes; request bodies take from it
	// as they arrive.
	bodyBudget *semaphore.Weighted

	ctx    context.Context // cancelled by Close: aborts launches in progress
	cancel context.CancelFunc
	wg     sync.WaitGroup
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
	s := &Server{cfg: cfg, log: cfg.Logger, metrics: newMetrics(), ids: newRequestIDs(), store: cfg.Store,
		bodyBudget: semaphore.NewWeighted(cfg.BodyMemory)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if b, ok := cfg.Backend.(*DockerBackend); ok {
		b.Runtime.SetMultiModelObserver(s.MultiModelObserver)
	}
	if src, ok := cfg.Backend.(UsageSource); ok {
		s.metrics.reg.MustRegister(newUsageCollector(src))
	}
	s.invoker = pipeline.NewInvoker(pipeline.Options{
		Timeout:    cfg.ContainerTimeout,
		MaxPayload: MaxPayload,
		Observer:   s.metrics,
	})

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.echoError
	e.Use(s.recoverPanics)
	e.POST("/", s.controlPlane)
	e.POST("/endpoints/:name/invocations", s.invokeEndpoint)
	e.POST("/endpoints/:name/invocations-response-stream", s.unsupported("InvokeEndpointWithResponseStream"))
	e.POST("/endpoints/:name/async-invocations", s.unsupported("InvokeEndpointAsync"))
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
	}
	e.GET("/ping", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	e.GET("/mce/endpoints", func(c echo.Context) error {
		// The same information as ListEndpoints, so the same permission.
		if api := s.authorize(c.Request().Context(), c.Request(), nil, "sagemaker:ListEndpoints", "*", nil); api != nil {
			writeError(c.Response(), api)
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
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
}

// Invoker is the server's router to containers (for dropping pooled
// connections to containers that moved).
func (s *Server) Invoker() *pipeline.Invoker { return s.invoker }

// Close aborts launches in progress and stops every endpoint's containers,
// keeping the endpoints' records: the next start relaunches them. Stop the
// HTTP server first (http.Server.Shutdown drains requests in flight).
func (s *Server) Close(ctx context.Context) error {
	s.cancel()
	s.wg.Wait()
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, e := range s.reg.all() {
		e.route.Store(nil)
		e.mu.Lock()
		l := e.launched
		e.launched = nil
		e.mu.Unlock()
		if l == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Close(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	s.invoker.Close()
	return errors.Join(errs...)
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
	var api *APIError
	switch {
	case errors.As(err, &he) && he.Code == http.StatusNotFound:
		api = &APIError{Status: http.StatusNotFound, Code: CodeUnknownOperation,
			Message: "mce has no operation at " + c.Request().Method + " " + c.Request().URL.Path}
	case errors.As(err, &he) && he.Code == http.StatusMethodNotAllowed:
		api = &APIError{Status: http.StatusMethodNotAllowed, Code: CodeUnknownOperation,
			Message: "method " + c.Request().Method + " is not allowed on " + c.Request().URL.Path}
	case errors.As(err, &he) && he.Code >= 400 && he.Code < 500:
		api = &APIError{Status: he.Code, Code: CodeValidation, Message: http.StatusText(he.Code) + "."}
	default:
		api = s.internalError(reqID, err)
	}
	writeError(c.Response(), api)
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
		writeError(c.Response(), validationError("%s is not supported by mce; use InvokeEndpoint.", op))
		return nil
	}
}
