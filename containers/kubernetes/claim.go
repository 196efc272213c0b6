package kubernetes

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/mce-run/mce/containers"
)

// The instance claim: an instance name is claimed in its namespace, so that a
// second mce with the same --instance refuses to start instead of adopting,
// reconciling and deleting the first one's objects under it. It is the
// Kubernetes engine's counterpart of the Docker engine's lease container
// (containers/docker/lease.go).
//
// The claim is a coordination.k8s.io Lease named ClaimName(instance), held
// with client-go's leader election (https://kubernetes.io/docs/concepts/architecture/leases/):
// the holder renews it every RetryPeriod, and a holder that stops renewing
// for LeaseDuration (it died, or lost the API server) has lost it. A holder
// that loses the claim while running stops serving (Claim.Lost), because
// another mce may now own its objects. A graceful stop releases the claim at
// once.
//
// A holder that died without releasing is waited out (up to LeaseDuration),
// except when it ran on this same machine (same hostname and kernel boot ID)
// and its process is provably gone (its PID runs no process that started at
// the recorded time): then the stale Lease is deleted and taken at once, so
// a restart after a crash does not wait.

// ClaimOptions configure ClaimInstance. The zero value is what `mce serve`
// uses; tests shorten the timing and play several holders.
type ClaimOptions struct {
	// LeaseDuration is how long a holder that stopped renewing keeps the
	// claim (and how long a new holder may wait for it); 0 means 15 s.
	LeaseDuration time.Duration
	// RenewDeadline is how long the holder may fail to renew before it
	// gives the claim up (Claim.Lost); 0 means 10 s.
	RenewDeadline time.Duration
	// RetryPeriod is how often the holder renews, and a waiting one tries;
	// 0 means 2 s.
	RetryPeriod time.Duration
	// Identity names the holder in the Lease; nil means this process
	// ("mce on HOST boot BOOT-ID pid PID start START"), which lets a later
	// mce on the same machine tell that the holder is gone.
	Identity func() string
}

func (o ClaimOptions) withDefaults() ClaimOptions {
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 15 * time.Second
	}
	if o.RenewDeadline <= 0 {
		o.RenewDeadline = 10 * time.Second
	}
	if o.RetryPeriod <= 0 {
		o.RetryPeriod = 2 * time.Second
	}
	if o.Identity == nil {
		o.Identity = holderIdentity
	}
	return o
}

// ClaimName is the name of an instance's Lease.
func ClaimName(instance string) string { return Name(253, "mce-instance", instance) }

// Claim is a held instance claim.
type Claim struct {
	cancel context.CancelFunc
	done   chan struct{}
	lost   chan error
}

// Lost is closed (after one error is sent) when the claim was lost while
// held: the caller must stop managing the instance's objects.
func (c *Claim) Lost() <-chan error { return c.lost }

// Release gives the claim back (the Lease's holder is cleared) and waits
// for the renewing goroutine to end.
func (c *Claim) Release() {
	c.cancel()
	<-c.done
}

// ClaimInstance takes the instance's claim in namespace ns, or fails with an
// error that names the holder when a live mce holds it. It waits at most
// about one LeaseDuration for a holder that has stopped renewing.
func ClaimInstance(ctx context.Context, client clientset.Interface, ns, instance string, log zerolog.Logger, opts ClaimOptions) (*Claim, error) {
	opts = opts.withDefaults()
	id := opts.Identity()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: ClaimName(instance)},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	if err := takeStale(ctx, client, lock, log); err != nil {
		return nil, err
	}
	acquired := make(chan struct{})
	c := &Claim{done: make(chan struct{}), lost: make(chan error, 1)}
	var released atomic.Bool // set by Release before it cancels
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: lock.LeaseMeta.Name,
		LeaseDuration: opts.LeaseDuration, RenewDeadline: opts.RenewDeadline, RetryPeriod: opts.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(acquired) },
			OnStoppedLeading: func() {
				select {
				case <-acquired:
				default:
					return // never held
				}
				if !released.Load() {
					c.lost <- fmt.Errorf("kubernetes engine: lost the claim on instance %q in namespace %q (Lease %s not renewed within %s); another mce may own its objects now",
						instance, ns, lock.LeaseMeta.Name, opts.RenewDeadline)
				}
				close(c.lost)
			},
		},
	})
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = func() { released.Store(true); cancel() }
	go func() {
		defer close(c.done)
		le.Run(runCtx)
	}()
	wait := time.NewTimer(opts.LeaseDuration + 2*opts.RetryPeriod)
	defer wait.Stop()
	select {
	case <-acquired:
		log.Info().Str("lease", lock.LeaseMeta.Name).Str("holder", id).Msg("kubernetes engine: instance claimed")
		return c, nil
	case <-ctx.Done():
		c.Release()
		return nil, ctx.Err()
	case <-wait.C:
	}
	c.Release()
	holder := "another mce"
	if l, err := client.CoordinationV1().Leases(ns).Get(ctx, lock.LeaseMeta.Name, metav1.GetOptions{}); err == nil && l.Spec.HolderIdentity != nil {
		holder = strconv.Quote(*l.Spec.HolderIdentity)
		if l.Spec.RenewTime != nil {
			holder += fmt.Sprintf(" (renewed %s ago)", time.Since(l.Spec.RenewTime.Time).Round(time.Second))
		}
	}
	return nil, fmt.Errorf("kubernetes engine: instance %q in namespace %q is claimed by %s: stop that mce, or give this one another --instance (or --namespace); a holder that died loses the claim after %s",
		instance, ns, holder, opts.LeaseDuration)
}

// takeStale deletes the instance's Lease when its holder ran on this
// machine and is provably gone.
func takeStale(ctx context.Context, client clientset.Interface, lock *resourcelock.LeaseLock, log zerolog.Logger) error {
	leases := client.CoordinationV1().Leases(lock.LeaseMeta.Namespace)
	l, err := leases.Get(ctx, lock.LeaseMeta.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubernetes engine: reading the instance claim: %w", err)
	}
	if l.Spec.HolderIdentity == nil || !holderGone(*l.Spec.HolderIdentity) {
		return nil
	}
	err = leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &l.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("kubernetes engine: removing a stale instance claim: %w", err)
	}
	log.Info().Str("lease", l.Name).Str("holder", *l.Spec.HolderIdentity).Msg("kubernetes engine: took over the claim of an mce that is gone")
	return nil
}

// holderIdentity says who holds a claim, in a form holderGone can check:
// "mce on HOST boot BOOTID pid PID start START".
func holderIdentity() string {
	host, _ := os.Hostname()
	pid := os.Getpid()
	start, _ := containers.ProcessStart(pid)
	return fmt.Sprintf("mce on %s boot %s pid %d start %s", host, bootID(), pid, start)
}

// holderGone reports whether id (from holderIdentity) names a process of
// this machine, since this boot, that no longer runs. Anything else (another
// machine, an unreadable identity) is not provably gone.
func holderGone(id string) bool {
	f := strings.Fields(id)
	if len(f) != 9 || f[0] != "mce" || f[1] != "on" || f[3] != "boot" || f[5] != "pid" || f[7] != "start" {
		return false
	}
	host, _ := os.Hostname()
	boot := bootID()
	if f[2] != host || boot == "" || f[4] != boot {
		return false
	}
	pid, err := strconv.Atoi(f[6])
	if err != nil || pid == os.Getpid() {
		return false
	}
	return containers.ProcessGone(pid, f[8])
}

// bootID is the kernel's boot ID, "" when it cannot be read.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
