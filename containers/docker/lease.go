package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers"
)

// The instance lease: an instance name is claimed engine-wide, not only in
// one state folder, so that a second mce with the same --instance refuses to
// start instead of sweeping the first one's containers as "left behind".
//
// The lease is a container that is created and never started, named
// leaseName(instance). Docker's container names are unique and reserved
// atomically by the engine, so of two mce processes creating it at once
// exactly one succeeds; the other gets a name conflict. Its labels record the
// owner. A container was chosen over a network or a volume because network
// names are not unique on every engine (before API 1.44 the check is opt-in
// and racy) and volumes with the same name are silently shared.
//
// The lease is released by Close. A lease left by an mce that died (SIGKILL,
// a crash, a reboot) is stale, and the next mce takes it over, when its owner
// is provably gone:
//   - an owner on this machine (same hostname and kernel boot ID, mce not in
//     a container): its process ID no longer runs a process that started at
//     the recorded time (so a reused PID does not count as alive); a different
//     boot ID on the same hostname means the machine restarted;
//   - an owner in a container of this engine (docker-compose): that container
//     no longer exists, is not running, or was restarted since (its start
//     time differs).
//
// No heartbeat is needed: liveness is checked against the process or
// container itself, so a paused or slow owner is never mistaken for a dead
// one. An owner that cannot be checked (another machine sharing the engine)
// is treated as alive, and the error says how to release it by hand.

// LabelLease marks an instance's lease container; its value is the instance
// name. Lease containers do not carry LabelInstance, so nothing that selects
// an instance's containers (Reconcile, the event watcher) ever sees them.
const LabelLease = "io.mce.lease"

// Labels recording the lease's owner.
const (
	labelLeaseHost      = "io.mce.lease.host"      // os.Hostname of the owner
	labelLeaseBoot      = "io.mce.lease.boot-id"   // the owner machine's kernel boot ID
	labelLeasePID       = "io.mce.lease.pid"       // the owner's process ID
	labelLeasePIDStart  = "io.mce.lease.pid-start" // its start time (clock ticks since boot)
	labelLeaseContainer = "io.mce.lease.container" // the container the owner runs in, if any
	labelLeaseCStarted  = "io.mce.lease.c-started" // that container's StartedAt
	labelLeaseStateDir  = "io.mce.lease.state-dir" // the owner's --state-dir
	labelLeaseSince     = "io.mce.lease.since"     // when the lease was taken (RFC 3339)
	leaseImage          = "mce-lease:1"            // an empty image, imported on first use
	leaseCmd            = "mce-instance-lease-never-started"
)

// ErrInstanceInUse means another live mce holds the instance name on this
// Docker engine.
var ErrInstanceInUse = errors.New("instance name in use")

// LeaseName is the Docker name of the instance's lease container. The
// underscore keeps it apart from every other name mce gives (endpoint and
// instance names have none).
func LeaseName(instance string) string { return "mce_lease_" + instance }

// leaseOwner identifies a process holding a lease.
type leaseOwner struct {
	host, boot, pid, pidStart string
	container, cStarted       string
	stateDir, since           string
}

func (o leaseOwner) labels(instance string) map[string]string {
	return map[string]string{
		LabelManaged: "true", LabelLease: instance,
		labelLeaseHost: o.host, labelLeaseBoot: o.boot, labelLeasePID: o.pid, labelLeasePIDStart: o.pidStart,
		labelLeaseContainer: o.container, labelLeaseCStarted: o.cStarted,
		labelLeaseStateDir: o.stateDir, labelLeaseSince: o.since,
	}
}

func ownerFromLabels(l map[string]string) leaseOwner {
	return leaseOwner{
		host: l[labelLeaseHost], boot: l[labelLeaseBoot], pid: l[labelLeasePID], pidStart: l[labelLeasePIDStart],
		container: l[labelLeaseContainer], cStarted: l[labelLeaseCStarted],
		stateDir: l[labelLeaseStateDir], since: l[labelLeaseSince],
	}
}

func (o leaseOwner) String() string {
	where := "pid " + o.pid + " on host " + o.host
	if o.container != "" {
		where = "pid " + o.pid + " in container " + shortID(o.container)
	}
	return where + ", state folder " + o.stateDir + ", since " + o.since
}

// leaseProbe is what deciding liveness reads about this process and machine;
// tests substitute their own.
type leaseProbe struct {
	hostname string
	bootID   string
	// pidStart returns a process's start time, or ok=false when no such
	// process runs.
	pidStart func(pid string) (start string, ok bool)
}

func hostProbe() leaseProbe {
	h, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	pidStart := procStartOf
	if _, ok := containers.ProcessStart(os.Getpid()); !ok {
		pidStart = pidRuns // no /proc (macOS): whether the PID runs at all
	}
	return leaseProbe{hostname: h, bootID: strings.TrimSpace(string(boot)), pidStart: pidStart}
}

// procStartOf is ProcessStart of a PID as a lease's labels hold it.
func procStartOf(pid string) (string, bool) {
	n, err := strconv.Atoi(pid)
	if err != nil {
		return "", false
	}
	return containers.ProcessStart(n)
}

// pidRuns is ProcessRuns of a PID as a lease's labels hold it, with no
// start time; used where /proc cannot be read.
func pidRuns(pid string) (string, bool) {
	n, err := strconv.Atoi(pid)
	if err != nil {
		return "", false
	}
	return "", containers.ProcessRuns(n)
}

// self describes this process as a lease owner. inContainer is the container
// mce runs in on this engine, or nil.
func (rt *Runtime) leaseSelf(p leaseProbe, inContainer *container.InspectResponse) leaseOwner {
	pid := strconv.Itoa(os.Getpid())
	start, _ := p.pidStart(pid)
	o := leaseOwner{host: p.hostname, boot: p.bootID, pid: pid, pidStart: start,
		stateDir: rt.opts.StateDir, since: time.Now().UTC().Format(time.RFC3339)}
	if inContainer != nil {
		o.container = inContainer.ID
		if inContainer.State != nil {
			o.cStarted = inContainer.State.StartedAt
		}
	}
	return o
}

// ownerAlive decides whether the owner of a lease may still run. It answers
// false only when the owner is provably gone.
func (rt *Runtime) ownerAlive(ctx context.Context, p leaseProbe, me, o leaseOwner) (bool, error) {
	sameProcessSpace := o.container == me.container && o.host == me.host && o.boot == me.boot
	if o.container != "" && o.container != me.container {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		res, err := rt.engine.ContainerInspect(cctx, o.container, client.ContainerInspectOptions{})
		cancel()
		if cerrdefs.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return true, classify("inspect the container of the lease's owner", err)
		}
		st := res.Container.State
		if st == nil || !st.Running || (o.cStarted != "" && st.StartedAt != o.cStarted) {
			return false, nil
		}
		return true, nil
	}
	switch {
	case sameProcessSpace:
		start, ok := p.pidStart(o.pid)
		return ok && start == o.pidStart, nil
	case o.container == "" && me.container == "" && o.host == me.host && o.boot != me.boot && o.boot != "":
		return false, nil // this machine restarted since the owner took the lease
	}
	return true, nil // another machine: it cannot be checked from here
}

// acquireLease takes the instance's lease, taking over a stale one.
func (rt *Runtime) acquireLease(ctx context.Context, p leaseProbe) error {
	self, err := rt.selfContainer(ctx)
	if err != nil {
		return err
	}
	me := rt.leaseSelf(p, self)
	name := LeaseName(rt.opts.Instance)
	if err := rt.ensureLeaseImage(ctx); err != nil {
		return err
	}
	for range 3 {
		// A create the engine carries out must be seen (see ensureNetwork).
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		res, err := rt.engine.ContainerCreate(cctx, client.ContainerCreateOptions{
			Name: name,
			Config: &container.Config{Image: leaseImage, Cmd: []string{leaseCmd},
				Labels: me.labels(rt.opts.Instance)},
			HostConfig: &container.HostConfig{NetworkMode: "none"},
		})
		cancel()
		if err == nil {
			rt.leaseID = res.ID
			return nil
		}
		if !cerrdefs.IsConflict(err) {
			return classify("create the lease container "+name+" of instance "+rt.opts.Instance, err)
		}
		cctx, cancel = context.WithTimeout(ctx, callTimeout)
		held, err := rt.engine.ContainerInspect(cctx, name, client.ContainerInspectOptions{})
		cancel()
		if cerrdefs.IsNotFound(err) {
			continue // released meanwhile
		}
		if err != nil {
			return classify("inspect the lease container "+name, err)
		}
		var labels map[string]string
		if held.Container.Config != nil {
			labels = held.Container.Config.Labels
		}
		if labels[LabelLease] != rt.opts.Instance {
			return fmt.Errorf("%w: a container named %s exists that mce did not make; remove or rename it, or choose another --instance", ErrInstanceInUse, name)
		}
		owner := ownerFromLabels(labels)
		alive, err := rt.ownerAlive(ctx, p, me, owner)
		if err != nil {
			return err
		}
		if alive {
			return fmt.Errorf("%w: another mce holds instance name %q on this Docker engine (%s); stop it or choose another --instance. If that mce is gone, release the name with: docker rm %s",
				ErrInstanceInUse, rt.opts.Instance, owner, name)
		}
		rt.log.Warn().Str("instance", rt.opts.Instance).Str("previous_owner", owner.String()).
			Msg("taking over the instance lease of an mce that is no longer running")
		cctx, cancel = context.WithTimeout(ctx, callTimeout)
		_, err = rt.engine.ContainerRemove(cctx, held.Container.ID, client.ContainerRemoveOptions{Force: true})
		cancel()
		if !gone(err) {
			return classify("remove the stale lease container "+name, err)
		}
	}
	return fmt.Errorf("%w: the lease of instance %q changed hands while mce tried to take it; another mce is starting with this name", ErrInstanceInUse, rt.opts.Instance)
}

// ensureLeaseImage imports the empty image the lease container is made from.
// It holds no files and is never run.
func (rt *Runtime) ensureLeaseImage(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := rt.engine.ImageInspect(cctx, leaseImage); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return classify("inspect image "+leaseImage, err)
	}
	var empty bytes.Buffer
	tw := tar.NewWriter(&empty)
	tw.Close()
	res, err := rt.engine.ImageImport(cctx, client.ImageImportSource{Source: &empty, SourceName: "-"}, leaseImage,
		client.ImageImportOptions{Changes: []string{"LABEL " + LabelManaged + "=true", "CMD [\"" + leaseCmd + "\"]"}})
	if err != nil {
		return classify("import image "+leaseImage, err)
	}
	out, _ := io.ReadAll(io.LimitReader(res, 64<<10))
	res.Close()
	if _, err := rt.engine.ImageInspect(cctx, leaseImage); err != nil {
		return fmt.Errorf("import image %s: %s: %w", leaseImage, strings.TrimSpace(string(out)), classify("inspect", err))
	}
	return nil
}

// leaseCheckInterval is how often a running mce checks that its lease still
// exists (docker container prune removes containers that never ran).
const leaseCheckInterval = 30 * time.Second

// holdLease re-creates the lease if it disappears while mce runs, so that a
// pruned lease does not let a second mce in. It runs until Close.
func (rt *Runtime) holdLease() {
	defer rt.wg.Done()
	t := time.NewTicker(leaseCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-rt.ctx.Done():
			return
		case <-t.C:
			rt.checkLease(rt.ctx, hostProbe())
		}
	}
}

// checkLease takes the lease again when it has disappeared; if another mce
// took the name meanwhile, it says so loudly (there is nothing safe to do but
// let the operator stop one of them).
func (rt *Runtime) checkLease(ctx context.Context, p leaseProbe) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	_, err := rt.engine.ContainerInspect(cctx, rt.leaseID, client.ContainerInspectOptions{})
	cancel()
	if !cerrdefs.IsNotFound(err) {
		return
	}
	rt.log.Warn().Str("instance", rt.opts.Instance).Msg("the instance lease container was removed (docker container prune?); taking it again")
	if err := rt.acquireLease(ctx, p); err != nil {
		rt.log.Error().Err(err).Str("instance", rt.opts.Instance).Msg("could not take the instance lease again; two mce processes may now share this instance name")
	}
}

// releaseLease removes the lease container this runtime created. A lease
// taken over by someone else has another ID and is left alone.
func (rt *Runtime) releaseLease(ctx context.Context) {
	if rt.leaseID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := rt.engine.ContainerRemove(ctx, rt.leaseID, client.ContainerRemoveOptions{Force: true})
	if !gone(err) {
		rt.log.Error().Err(err).Str("instance", rt.opts.Instance).Msg("could not release the instance lease; the next mce with this name takes it over once this process has exited")
	}
	rt.leaseID = ""
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
