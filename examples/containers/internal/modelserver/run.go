package modelserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

// Name is the program name used in logs.
const Name = "modelserver"

// Main runs the model server as the process and returns its exit status (see smserve.ExitCode).
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := Start(ctx, os.Args[1:], os.Environ(), os.Exit, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", Name, err)
	}
	return smserve.ExitCode(err)
}

// Start serves the multi-model API when SAGEMAKER_MULTI_MODEL=true, else the single-model contract through
// smserve. It returns when ctx is done (nil after a graceful shutdown) or on a failure.
func Start(ctx context.Context, args, environ []string, exit func(int), stdout, stderr io.Writer) error {
	cfg, err := smserve.ConfigFromEnviron(environ, exit)
	if err != nil {
		return err
	}
	st, err := SettingsFromConfig(cfg)
	if err != nil {
		return err
	}
	if !st.MultiModel {
		return smserve.Start(ctx, Program(), args, environ, exit, stdout, stderr)
	}
	if len(args) > 1 || (len(args) == 1 && args[0] != "serve") {
		return fmt.Errorf("%w: unexpected arguments %q (usage: %s [serve])", smserve.ErrConfig, args, Name)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("", strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return ServeMME(ctx, ln, st, "", stdout, stderr)
}

// ServeMME serves the multi-model API on ln until ctx is done (then it shuts down gracefully within
// smserve.ShutdownTimeout and returns nil) or the listener fails. Model URLs are read under root. It
// closes ln.
func ServeMME(ctx context.Context, ln net.Listener, st Settings, root string, stdout, stderr io.Writer) error {
	loadCtx, cancelLoads := context.WithCancel(ctx)
	defer cancelLoads()
	srv := &http.Server{
		Handler:           NewMME(loadCtx, st, root, stderr),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(stderr, Name+": http: ", 0),
	}
	fmt.Fprintf(stdout, "%s listening on %s, multi-model mode, memory budget %d bytes, workspace %d bytes, load delay %s\n",
		Name, ln.Addr(), st.MemoryBytes, st.WorkspaceBytes, st.LoadDelay)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	}
	cancelLoads()
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), smserve.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		_ = srv.Close()
	}
	return nil
}

// Program is the single-model container: the model in the model directory answers POST /invocations.
func Program() smserve.Program {
	return smserve.Program{Name: Name, Load: Load}
}

// Load reads the model from cfg.ModelDir: model.json (and config.pbtxt) at its root, or in its only
// subdirectory, or in the subdirectory SAGEMAKER_TRITON_DEFAULT_MODEL_NAME names, as Triton does.
func Load(ctx context.Context, cfg smserve.Config) (smserve.Loaded, error) {
	st, err := SettingsFromConfig(cfg)
	if err != nil {
		return smserve.Loaded{}, err
	}
	root, err := os.OpenRoot(cfg.ModelDir)
	if err != nil {
		return smserve.Loaded{}, err
	}
	defer root.Close()
	fsys := root.FS()
	dir := st.DefaultModel
	if dir == "" {
		if dir, err = ResolveModelDir(fsys); err != nil {
			return smserve.Loaded{}, err
		}
	}
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		return smserve.Loaded{}, err
	}
	m, err := LoadFS(sub)
	if err != nil {
		return smserve.Loaded{}, err
	}
	name := m.Name
	if dir != "." {
		name = dir // Triton names the model after its directory
	}
	if name == "" {
		name = "model"
	}
	b := &budget{limit: st.MemoryBytes, workspace: st.WorkspaceBytes}
	if ok, free := b.take(m.Footprint); !ok {
		return smserve.Loaded{}, fmt.Errorf("out of memory: model needs %d bytes, %s=%d (%d free)", m.Footprint, EnvMemoryBytes, st.MemoryBytes, free)
	}
	if st.LoadDelay > 0 {
		t := time.NewTimer(st.LoadDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return smserve.Loaded{}, errors.New("stopped while loading")
		}
	}
	adapterRoot := cfg.Getenv(EnvAdapterRoot)
	if adapterRoot == "" {
		adapterRoot = DefaultAdapterRoot
	}
	adapters := newAdapterSet(m, adapterRoot, b)
	h := handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		am, err := adapters.model(r) // the base, or the adapter the call names
		if err != nil {
			return err
		}
		return infer(w, r, am, name, b)
	})
	return smserve.Loaded{Invocations: h, Adapters: adapters, Summary: fmt.Sprintf("model '%s' version %s: %s", name, m.Version, m.Describe())}, nil
}
