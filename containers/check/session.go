package check

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/docker"
)

// Labels on everything a check creates.
const (
	// LabelCheck marks a check's containers and networks ("true").
	LabelCheck = "io.mce.check"
	// LabelOwner is "<hostname>:<pid>:<start>" of the process that ran the
	// check (start: its start time, containers.ProcessStart); a later check
	// on that machine removes what a dead owner left.
	LabelOwner = "io.mce.check.owner"
)

// callTimeout bounds every engine call but waits.
const callTimeout = 30 * time.Second

// logTail is how many of a container's last log lines a failure shows.
const logTail = 15

// session is one run's engine objects, removed by close.
type session struct {
	engine  Engine
	id      string // random, names the network and containers
	owner   string
	network string
	created []string // container IDs, in creation order
}

func newSession(e Engine) *session {
	var b [4]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	return &session{engine: e, id: id, owner: Owner(), network: "mce-check-" + id}
}

// Owner is the value of LabelOwner on what this process creates.
func Owner() string {
	host, _ := os.Hostname()
	start, _ := containers.ProcessStart(os.Getpid())
	return host + ":" + strconv.Itoa(os.Getpid()) + ":" + start
}

func (s *session) labels() map[string]string {
	return map[string]string{LabelCheck: "true", LabelOwner: s.owner}
}

// createNetwork makes the session's bridge network. The create is not cut
// short by the caller, so a network the engine made is always known and
// removed.
func (s *session) createNetwork(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	if _, err := s.engine.NetworkCreate(cctx, s.network, client.NetworkCreateOptions{Driver: "bridge", Labels: s.labels()}); err != nil {
		return fmt.Errorf("create network %s: %w", s.network, err)
	}
	return ctx.Err()
}

// launch creates and starts one container. Its ID is remembered before
// cancellation is honoured, so close removes it.
func (s *session) launch(ctx context.Context, name string, cfg *container.Config, host *container.HostConfig) (string, error) {
	cfg.Labels = s.labels()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	res, err := s.engine.ContainerCreate(cctx, client.ContainerCreateOptions{Name: s.network + "-" + name, Config: cfg, HostConfig: host})
	cancel()
	if err != nil {
		return "", fmt.Errorf("create container: %w", err)
	}
	s.created = append(s.created, res.ID)
	if err := ctx.Err(); err != nil {
		return res.ID, err
	}
	cctx, cancel = context.WithTimeout(ctx, callTimeout)
	_, err = s.engine.ContainerStart(cctx, res.ID, client.ContainerStartOptions{})
	cancel()
	if err != nil {
		return res.ID, fmt.Errorf("start container: %w", err)
	}
	return res.ID, nil
}

func (s *session) inspect(ctx context.Context, id string) (container.InspectResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := s.engine.ContainerInspect(cctx, id, client.ContainerInspectOptions{})
	return res.Container, err
}

// tail returns the container's last log lines, stdout and stderr together.
func (s *session) tail(ctx context.Context, id string) string {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	rc, err := s.engine.ContainerLogs(cctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(logTail)})
	if err != nil {
		return "(no logs: " + err.Error() + ")"
	}
	defer rc.Close()
	var b bytes.Buffer
	w := &capped{w: &b, n: 16 << 10}
	if _, err := stdcopy.StdCopy(w, w, rc); err != nil && !errors.Is(err, errCapped) && !errors.Is(err, io.EOF) {
		fmt.Fprintf(&b, "\n(log stream: %v)", err)
	}
	out := strings.TrimRight(b.String(), "\n")
	if out == "" {
		return "(the container logged nothing)"
	}
	return out
}

var errCapped = errors.New("log tail cap reached")

// capped writes at most n bytes to w, then fails.
type capped struct {
	w io.Writer
	n int
}

func (c *capped) Write(p []byte) (int, error) {
	if len(p) > c.n {
		c.w.Write(p[:c.n])
		c.n = 0
		return 0, errCapped
	}
	c.n -= len(p)
	return c.w.Write(p)
}

// close removes the session's containers (force: SIGKILL) and network,
// whatever ctx says: it runs on every path, a cancelled run included.
func (s *session) close(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	// The copies that joined the first container's network namespace go
	// first, then the first one.
	for i := len(s.created) - 1; i >= 0; i-- {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := s.engine.ContainerRemove(cctx, s.created[i], client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		cancel()
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %.12s: %w", s.created[i], err))
		}
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	_, err := s.engine.NetworkRemove(cctx, s.network, client.NetworkRemoveOptions{})
	cancel()
	if err != nil && !cerrdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("remove network %s: %w", s.network, err))
	}
	return errors.Join(errs...)
}

// reap removes containers and networks that an earlier check on this
// machine left behind when its process was killed (SIGKILL gives no chance
// to clean up): those whose owner label names this host and a process that
// no longer runs (gone, or its PID reused by a later process). Another
// machine's, or a live process's, are left alone.
func reap(ctx context.Context, e Engine) error {
	host, _ := os.Hostname()
	dead := func(owner string) bool {
		h, rest, ok := strings.Cut(owner, ":")
		p, start, _ := strings.Cut(rest, ":")
		pid, err := strconv.Atoi(p)
		if !ok || h != host || err != nil {
			return false
		}
		return containers.ProcessGone(pid, start)
	}
	f := client.Filters{}.Add("label", LabelCheck+"=true")
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	cs, err := e.ContainerList(cctx, client.ContainerListOptions{All: true, Filters: f})
	cancel()
	if err != nil {
		return fmt.Errorf("list leftover check containers: %w", err)
	}
	var errs []error
	for _, c := range cs.Items {
		if !dead(c.Labels[LabelOwner]) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := e.ContainerRemove(cctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		cancel()
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	cctx, cancel = context.WithTimeout(ctx, callTimeout)
	ns, err := e.NetworkList(cctx, client.NetworkListOptions{Filters: f})
	cancel()
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list leftover check networks: %w", err))...)
	}
	for _, n := range ns.Items {
		if !dead(n.Labels[LabelOwner]) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := e.NetworkRemove(cctx, n.ID, client.NetworkRemoveOptions{})
		cancel()
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pidsLimit is what mce gives its containers.
func pidsLimit() *int64 {
	n := docker.DefaultPidsLimit()
	return &n
}
