package smserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ShutdownTimeout bounds the graceful shutdown after SIGTERM; connections still busy after it are closed.
const ShutdownTimeout = 5 * time.Second

// Program is one example container: its name (for logs) and how it loads its model.
type Program struct {
	// Name prefixes log lines and error messages.
	Name string
	// Load reads the model (normally from cfg.ModelDir) and returns what to serve. It runs in the background
	// while /ping answers 503, and must return promptly when ctx is done. An error ends the process.
	Load func(ctx context.Context, cfg Config) (Loaded, error)
}

// Loaded is the result of Program.Load.
type Loaded struct {
	// Invocations serves POST /invocations. Required.
	Invocations http.Handler
	// Ready, if set, is consulted by /ping after loading (nil means always ready). Must be safe for
	// concurrent use.
	Ready func() bool
	// Summary describes the loaded model in the start-up log line on stderr.
	Summary string
	// Adapters, if set, serves /adapters and /adapters/… (SageMaker's
	// adapter API for adapter inference components); without it they are
	// 404.
	Adapters http.Handler
	// Bidirectional, if set, serves the WebSocket of
	// InvokeEndpointWithBidirectionalStream at
	// /invocations-bidirectional-stream; without it that path is 404.
	Bidirectional http.Handler
}

// Main runs p as the process: it parses os.Args and the environment, stops on SIGTERM or SIGINT, reports a
// failure on stderr and returns the exit status for os.Exit (see ExitCode).
func Main(p Program) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := Start(ctx, p, os.Args[1:], os.Environ(), os.Exit, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", p.Name, err)
	}
	return ExitCode(err)
}

// Start checks the arguments (none, or the single word "serve" that SageMaker passes), builds the Config
// from environ, listens on the configured port on all interfaces and calls Serve.
func Start(ctx context.Context, p Program, args, environ []string, exit func(int), stdout, stderr io.Writer) error {
	if len(args) > 1 || (len(args) == 1 && args[0] != "serve") {
		return fmt.Errorf("%w: unexpected arguments %q (usage: %s [serve])", ErrConfig, args, p.Name)
	}
	cfg, err := ConfigFromEnviron(environ, exit)
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("", strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return Serve(ctx, ln, p, cfg, stdout, stderr)
}

// Serve serves the inference contract on ln until ctx is done (then it shuts down gracefully within
// ShutdownTimeout and returns nil), the model fails to load, or the listener fails. It writes one start-up
// line to stdout ("<name> listening on <addr>") and one to stderr once the model is loaded. Serve closes ln.
func Serve(ctx context.Context, ln net.Listener, p Program, cfg Config, stdout, stderr io.Writer) error {
	s := &server{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ping", s.ping)
	mux.HandleFunc("POST /invocations", s.invoke)
	adapters := s.optional(func(l *Loaded) http.Handler { return l.Adapters }, "this container serves no adapters")
	mux.HandleFunc("/adapters", adapters)
	mux.HandleFunc("/adapters/", adapters)
	mux.HandleFunc("GET /invocations-bidirectional-stream",
		s.optional(func(l *Loaded) http.Handler { return l.Bidirectional }, "this container serves no bidirectional streams"))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(stderr, p.Name+": http: ", 0),
	}

	loadCtx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	fmt.Fprintf(stdout, "%s listening on %s, model dir %s\n", p.Name, ln.Addr(), cfg.ModelDir)

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	loadErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		start := time.Now()
		l, err := p.Load(loadCtx, cfg)
		if err == nil && l.Invocations == nil {
			err = errors.New("program returned no invocations handler")
		}
		if err != nil {
			loadErr <- fmt.Errorf("load model from %s: %w", cfg.ModelDir, err)
			return
		}
		s.loaded.Store(&l)
		fmt.Fprintf(stderr, "%s: model loaded from %s in %s: %s\n", p.Name, cfg.ModelDir,
			time.Since(start).Round(time.Microsecond), l.Summary)
	})
	defer wg.Wait()

	var err error
	select {
	case <-ctx.Done():
	case err = <-loadErr:
	case err = <-serveErr:
		return fmt.Errorf("serve: %w", err)
	}
	cancelLoad()
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	if serr := srv.Shutdown(shutCtx); serr != nil {
		_ = srv.Close() // deadline passed: drop the connections still busy
	}
	return err
}

// server holds the loaded model; nil until Load succeeds.
type server struct {
	loaded atomic.Pointer[Loaded]
}

// adapters hands the adapter API to the program, once loaded: 503 before,
// 404 when it has none.
// optional serves what the loaded program's pick returns; 503 before the
// model is loaded, 404 (saying none) when the program has none.
func (s *server) optional(pick func(*Loaded) http.Handler, none string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		l := s.loaded.Load()
		switch {
		case l == nil:
			WriteError(w, Errorf(http.StatusServiceUnavailable, "the model is not loaded yet"))
		case pick(l) == nil:
			WriteError(w, Errorf(http.StatusNotFound, "%s", none))
		default:
			pick(l).ServeHTTP(w, r)
		}
	}
}

// ping answers 200 with an empty body once the model is loaded and the program is ready, 503 before
// (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html).
func (s *server) ping(w http.ResponseWriter, _ *http.Request) {
	l := s.loaded.Load()
	if l == nil || (l.Ready != nil && !l.Ready()) {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *server) invoke(w http.ResponseWriter, r *http.Request) {
	l := s.loaded.Load()
	if l == nil {
		WriteError(w, &Error{Status: http.StatusServiceUnavailable, Message: "model is not loaded yet", Err: ErrNotReady})
		return
	}
	l.Invocations.ServeHTTP(w, r)
}
