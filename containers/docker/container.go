package docker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers/mme"
)

// Container is one running model container. It satisfies pipeline.Container:
// Hostname, BaseURL and Ready are safe for concurrent use and cheap (atomics),
// since they sit on the invocation hot path.
type Container struct {
	rt       *Runtime
	id       atomic.Pointer[string] // changes when the container is recreated
	name     string
	endpoint string
	gen      int
	variant  string
	copy     int
	spec     ContainerSpec
	create   client.ContainerCreateOptions // how to make it again (recreate)
	network  string                        // the Docker network it is reached on
	port     int                           // SAGEMAKER_BIND_TO_PORT inside the container
	health   time.Duration
	log      zerolog.Logger
	tail     *lineRing
	subs     logSubs // followers of the output (Follow)

	url      atomic.Pointer[string]
	ready    atomic.Bool
	stopping atomic.Bool
	// down says why a container is not ready (it exited, a restart failed),
	// for the endpoint's status; nil while it serves.
	down atomic.Pointer[string]
	// lifeMu orders recreation against removal: remove never reads an ID that
	// a recreation is about to replace.
	lifeMu   sync.Mutex
	restarts atomic.Int64
	lastExit atomic.Int64

	died chan int // exit codes from the event watcher; buffered

	models *mme.Manager // multi-model containers only
	// recycle says why mce stopped the container to restart it (GPU memory
	// its server kept after unloads); nil otherwise.
	recycle atomic.Pointer[string]
	cpu     cpuSample // the previous CPU reading, for Usage

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// bidi: the image carries containers.LabelBidirectionalStreaming=true.
	bidi bool
}

// Hostname is the container's ContainerHostname.
func (c *Container) Hostname() string { return c.spec.Hostname }

// BaseURL is where mce reaches the container, e.g. "http://172.18.0.3:8080";
// empty until it has started.
func (c *Container) BaseURL() string {
	if p := c.url.Load(); p != nil {
		return *p
	}
	return ""
}

// Ready reports whether the container is running and passing /ping. Calls to a
// container that is not ready fail fast.
func (c *Container) Ready() bool { return c.ready.Load() }

// ID is the Docker container ID. It changes when mce recreates a container
// that disappeared or could not be restarted.
func (c *Container) ID() string {
	if p := c.id.Load(); p != nil {
		return *p
	}
	return ""
}

// Unavailable says why the container cannot serve now (it exited and is
// being restarted, a restart failed, it fails its liveness pings); "" when
// it is ready.
func (c *Container) Unavailable() string {
	if c.ready.Load() {
		return ""
	}
	if p := c.down.Load(); p != nil {
		return *p
	}
	return "container " + c.spec.Hostname + " is not ready"
}

func (c *Container) setDown(format string, args ...any) {
	s := "container " + c.spec.Hostname + " (variant " + c.variant + ", copy " + strconv.Itoa(c.copy) + ") " + fmt.Sprintf(format, args...)
	c.down.Store(&s)
}

// Name is the Docker container name.
func (c *Container) Name() string { return c.name }

// Variant is the production variant the container belongs to.
func (c *Container) Variant() string { return c.variant }

// Copy is which copy of the variant's container set this container is in.
func (c *Container) Copy() int { return c.copy }

// Restarts counts the times mce restarted the container after it exited.
func (c *Container) Restarts() int { return int(c.restarts.Load()) }

// LastExitCode is the exit code of the container's last exit, or -1.
func (c *Container) LastExitCode() int { return int(c.lastExit.Load()) }

// Models is the multi-model manager of a container in MultiModel mode; nil
// otherwise.
func (c *Container) Models() *mme.Manager { return c.models }

// LogTail returns the container's last output lines, oldest first.
func (c *Container) LogTail() []string { return c.tail.lines() }

func (c *Container) String() string {
	return fmt.Sprintf("container %q (variant %q, copy %d) of endpoint %q", c.spec.Hostname, c.variant, c.copy, c.endpoint)
}

// notifyDied hands an exit to the container's supervisor without blocking the
// event watcher.
func (c *Container) notifyDied(code int) {
	select {
	case c.died <- code:
	default:
	}
}

// BidirectionalStreaming reports whether the container's image carries
// containers.LabelBidirectionalStreaming=true (containers.BidirectionalCapable).
func (c *Container) BidirectionalStreaming() bool { return c.bidi }
