package docker

import (
	"context"
	"errors"
	"fmt"
	"golang.org/x/sync/singleflight"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/gpu"
	"github.com/mce-run/mce/containers/mme"
)

// callTimeout bounds every Docker call that is not a wait or a stop.
const callTimeout = 30 * time.Second

// Options configure a Runtime. The zero value of every field but Client is a
// usable default.
type Options struct {
	Client   Client
	Instance string // names this mce instance in labels; default "default"
	// StateDir holds the instance lock and extracted model artifacts; default
	// $XDG_STATE_HOME/mce or ~/.local/state/mce.
	StateDir string
	Network  NetworkMode
	Fetcher  *artifact.Fetcher // nil: one with default options is made on first use
	GPUs     *gpu.Inventory    // nil: NVML is loaded on the first GPU request
	// PullPolicy says when images are pulled; empty: if-missing when Pull
	// is set, else never.
	PullPolicy PullPolicy
	Pull       bool // the older switch: pull missing images
	// Registry says where pull credentials come from (docker config.json,
	// credential helpers, ECR).
	Registry RegistryOptions
	// Adopt keeps what an earlier run of this instance left running: New does
	// not remove it; the caller Adopts the endpoints it knows, then calls
	// Reconcile to remove the rest.
	Adopt  bool
	Logger zerolog.Logger
	// StopGrace is how long a container gets between SIGTERM and SIGKILL at
	// teardown; default 30 s, as SageMaker does.
	StopGrace time.Duration
	// HealthInterval is the period of the liveness ping once a container is
	// ready; default 5 s. Three failed pings in a row take it out of routing.
	HealthInterval time.Duration
	// MultiModel configures how multi-model containers load their models.
	MultiModel MultiModelOptions
	// ArtifactDiskBudget bounds the bytes of extracted model artifacts of
	// all endpoints and multi-model caches together; unused multi-model
	// files are deleted, least recently used first, to make room, and a
	// launch or model download that cannot fit fails naming the limit.
	// Zero means no limit.
	ArtifactDiskBudget int64
	// RestartBackoff is the first wait before restarting a crashed container;
	// it doubles up to RestartBackoffMax (defaults 500 ms and 30 s).
	RestartBackoff    time.Duration
	RestartBackoffMax time.Duration
	// PidsLimit caps the processes (threads included) of each container,
	// against fork bombs; 0 means DefaultPidsLimit(), negative means no limit.
	PidsLimit int64
	// InContainer says where to look for signs that mce runs in a container
	// of its engine; the zero value looks where Docker puts them.
	InContainer InContainerSigns
}

// DefaultPidsLimit is the default process and thread cap of a container:
// 4096, or 64 per CPU core of this machine where that is more. Ample for a
// framework server with a worker per core and their threads, small enough
// that a fork bomb in one container cannot exhaust the host's PIDs.
func DefaultPidsLimit() int64 { return max(4096, 64*int64(goruntime.NumCPU())) }

// MultiModelOptions configure dynamic model loading (package mme) for
// containers in MultiModel mode. Zero values are mme's defaults.
type MultiModelOptions struct {
	LoadTimeout  time.Duration // a load slower than this answers NotReady while it carries on (default 60 s)
	DiskCapacity int64         // bytes of extracted models kept per container definition (0: unlimited)
	IdleTTL      time.Duration // unload models nobody called for this long (0: never)
	GPUThreshold float64       // share of GPU memory loads may fill (default 0.9)
	// RestartOnLeak, in (0, 1], restarts a multi-model container with GPUs
	// once the GPU memory it keeps after unloads passes this share of its
	// GPUs' memory (mme.ManagerOptions.RestartOnLeak); 0 never does.
	RestartOnLeak float64
	// Observer, if set, gives the metrics sink of one container.
	Observer func(endpoint, variant, container string) mme.Observer
}

// Runtime brings endpoints' containers up and down on one Docker engine. It is
// safe for concurrent use. Close stops its background work but leaves
// deployments alone; close those first.
type Runtime struct {
	engine  Client
	opts    Options
	log     zerolog.Logger
	network NetworkMode
	self    string // NetworkJoin: the ID of the container mce joins to endpoint networks
	pinger  *http.Client
	lock    *os.File
	leaseID string // the instance's lease container (lease.go)

	ctx    context.Context // cancelled by Close; parent of all background work
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex
	byID        map[string]*Container // every live container, by Docker ID
	fetcher     *artifact.Fetcher
	budget      *artifact.Budget // shared by every deployment's artifacts, caches and adapters
	gpus        *gpu.Inventory
	rtInfo      *gpu.RuntimeInfo
	deployments map[deploymentKey]*Deployment // nil while a Deploy is under way
	onAddr      []func(oldURL string)

	// adapterBytes are the bytes of each staged adapter counted in budget,
	// by adapterKey (under mu; made on first use).
	adapterBytes map[string]int64

	auth  *authResolver
	pulls singleflight.Group // one pull per image at a time
}

// New connects the runtime to its engine, takes the instance lock (one mce per
// instance name and state folder) and the instance lease (one live mce per
// instance name on the engine, lease.go; ErrInstanceInUse otherwise), removes whatever an earlier run of this
// instance left behind, and starts watching container events.
func New(ctx context.Context, opts Options) (*Runtime, error) {
	if opts.Client == nil {
		return nil, errors.New("docker: Options.Client is required")
	}
	if opts.Instance == "" {
		opts.Instance = "default"
	}
	if !hostnamePattern.MatchString(opts.Instance) {
		return nil, fmt.Errorf("containers: instance name %q must match %s", opts.Instance, hostnamePattern)
	}
	if opts.StateDir == "" {
		dir, err := DefaultStateDir()
		if err != nil {
			return nil, err
		}
		opts.StateDir = dir
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 30 * time.Second
	}
	if opts.HealthInterval <= 0 {
		opts.HealthInterval = 5 * time.Second
	}
	if opts.RestartBackoff <= 0 {
		opts.RestartBackoff = 500 * time.Millisecond
	}
	if opts.RestartBackoffMax <= 0 {
		opts.RestartBackoffMax = 30 * time.Second
	}
	if opts.Network == "" {
		opts.Network = NetworkAuto
	}
	if opts.PullPolicy == "" {
		opts.PullPolicy = PullNever
		if opts.Pull {
			opts.PullPolicy = PullIfMissing
		}
	}
	if _, err := ParsePullPolicy(string(opts.PullPolicy)); err != nil {
		return nil, fmt.Errorf("containers: %w", err)
	}
	rt := &Runtime{
		auth:        newAuthResolver(opts.Registry),
		engine:      opts.Client,
		opts:        opts,
		log:         opts.Logger,
		fetcher:     opts.Fetcher,
		budget:      artifact.NewBudget(opts.ArtifactDiskBudget),
		gpus:        opts.GPUs,
		byID:        map[string]*Container{},
		deployments: map[deploymentKey]*Deployment{},
		pinger: &http.Client{Transport: &http.Transport{
			Proxy:               nil,
			DisableCompression:  true,
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     30 * time.Second,
		}},
	}
	if err := os.MkdirAll(rt.instanceDir(), 0o755); err != nil {
		return nil, fmt.Errorf("state folder: %w", err)
	}
	lock, err := lockFile(filepath.Join(rt.instanceDir(), "lock"))
	if err != nil {
		return nil, fmt.Errorf("another mce with instance name %q is running with state folder %s: %w", opts.Instance, opts.StateDir, err)
	}
	rt.lock = lock
	if err := rt.acquireLease(ctx, hostProbe()); err != nil {
		rt.unlock()
		return nil, err
	}

	mode, why, err := rt.pickNetworkMode(ctx)
	if err != nil {
		rt.releaseLease(context.WithoutCancel(ctx)) // ctx may be what failed
		rt.unlock()
		return nil, err
	}
	rt.network = mode
	rt.log.Info().Str("network_mode", string(mode)).Msg(why)
	if mode == NetworkJoin {
		rt.startJoin(ctx)
	}

	// The runtime's lifetime (event watcher, health checks, shared pulls)
	// outlives ctx, which bounds New alone: detached from its cancellation,
	// ended by Close.
	rt.ctx, rt.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if !opts.Adopt {
		if err := rt.Reconcile(ctx); err != nil {
			rt.cancel()
			rt.releaseLease(context.WithoutCancel(ctx)) // ctx may be what failed
			rt.unlock()
			return nil, err
		}
	}
	rt.wg.Add(2)
	go rt.watchEvents()
	go rt.holdLease()
	return rt, nil
}

// pidsLimit is the PidsLimit given to containers; nil for no limit.
func (rt *Runtime) pidsLimit() *int64 {
	n := rt.opts.PidsLimit
	switch {
	case n == 0:
		n = DefaultPidsLimit()
	case n < 0:
		return nil
	}
	return &n
}

// DefaultStateDir is $XDG_STATE_HOME/mce, else ~/.local/state/mce.
func DefaultStateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "mce"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no state folder: set --state-dir: %w", err)
	}
	return filepath.Join(home, ".local", "state", "mce"), nil
}

// Instance is the instance name in this runtime's labels.
func (rt *Runtime) Instance() string { return rt.opts.Instance }

// InstanceDir is this instance's folder in the state folder (the lock, the
// artifacts, and room for the caller's own state).
func (rt *Runtime) InstanceDir() string { return rt.instanceDir() }

func (rt *Runtime) instanceDir() string {
	return filepath.Join(rt.opts.StateDir, "instances", rt.opts.Instance)
}

func (rt *Runtime) artifactsDir() string { return filepath.Join(rt.instanceDir(), "artifacts") }

// Close stops the event watcher and health checks and releases the instance
// lock and lease. Deployments still running stay running; call Deployment.Close first.
func (rt *Runtime) Close() error {
	if rt.cancel != nil {
		rt.cancel()
	}
	rt.wg.Wait()
	if rt.gpus != nil && rt.opts.GPUs == nil {
		rt.gpus.Close()
	}
	// Close has no caller's context (yet): the lease removal is bounded by
	// callTimeout alone.
	rt.releaseLease(context.Background())
	rt.unlock()
	return nil
}

// artifactFetcher is the runtime's one model-data fetcher, made on first use
// (no I/O: a context would have nothing to bound).
func (rt *Runtime) artifactFetcher() (*artifact.Fetcher, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.fetcher == nil {
		f, err := artifact.NewFetcher(artifact.Options{})
		if err != nil {
			return nil, err
		}
		rt.fetcher = f
	}
	return rt.fetcher, nil
}

// SetMultiModelObserver sets the metrics sink factory of multi-model
// containers deployed from now on (Options.MultiModel.Observer).
func (rt *Runtime) SetMultiModelObserver(fn func(endpoint, variant, container string) mme.Observer) {
	rt.mu.Lock()
	rt.opts.MultiModel.Observer = fn
	rt.mu.Unlock()
}

func (rt *Runtime) multiModelObserver(endpoint, variant, container string) mme.Observer {
	rt.mu.Lock()
	fn := rt.opts.MultiModel.Observer
	rt.mu.Unlock()
	if fn == nil {
		return nil
	}
	return fn(endpoint, variant, container)
}
