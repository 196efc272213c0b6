package kubernetes

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mce-run/mce/containers"
)

// shortClaims is the claim's timing shortened for a test.
func shortClaims(lease time.Duration) ClaimOptions {
	return ClaimOptions{LeaseDuration: lease, RenewDeadline: lease * 2 / 3, RetryPeriod: lease / 8}
}

// as is o with claims held as id.
func as(o ClaimOptions, id string) ClaimOptions {
	o.Identity = func() string { return id }
	return o
}

// TestClaimRefusesASecondHolder: while one mce holds an instance, another
// with the same instance and namespace is refused with an error naming the
// holder; once the first releases, the second claims at once; another
// instance name is never in the way.
func TestClaimRefusesASecondHolder(t *testing.T) {
	// Long enough that the first holder renews in time on a loaded machine:
	// with 1.5 s it had 1 s to renew, and a renewal that late under -race
	// would let the second holder in. The refusal waits a lease and two
	// retries.
	short := shortClaims(4 * time.Second)
	client := newClient(false)
	ctx := context.Background()
	hostA, hostB := as(short, "mce on host-a boot x pid 1 start 1"), as(short, "mce on host-b boot y pid 2 start 2")
	a, err := ClaimInstance(ctx, client, "ns", "prod", zerolog.Nop(), hostA)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if _, err := ClaimInstance(ctx, client, "ns", "prod", zerolog.Nop(), hostB); err == nil || !strings.Contains(err.Error(), `"mce on host-a boot x pid 1 start 1"`) {
		t.Fatalf("second holder: err = %v, want a refusal naming host-a", err)
	}
	if waited := time.Since(t0); waited > 10*time.Second {
		t.Errorf("the refusal took %v", waited)
	}
	other, err := ClaimInstance(ctx, client, "ns", "staging", zerolog.Nop(), hostB)
	if err != nil {
		t.Fatalf("another instance: %v", err)
	}
	other.Release()

	a.Release()
	select {
	case err, ok := <-a.Lost():
		if ok && err != nil {
			t.Errorf("a released claim reported lost: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("Lost not closed after Release")
	}
	t0 = time.Now()
	b, err := ClaimInstance(ctx, client, "ns", "prod", zerolog.Nop(), hostB)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	defer b.Release()
	if waited := time.Since(t0); waited > short.LeaseDuration {
		t.Errorf("claiming a released instance took %v, want no wait for expiry", waited)
	}
}

// TestClaimTakesOverADeadHolderAtOnce: a Lease whose holder ran on this
// machine and is gone is taken without waiting for it to expire; one whose
// holder is on another machine is waited out.
func TestClaimTakesOverADeadHolderAtOnce(t *testing.T) {
	long := shortClaims(30 * time.Second) // far longer than the test may wait
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start, ok := containers.ProcessStart(cmd.Process.Pid)
	if !ok {
		t.Skip("no /proc here")
	}
	dead := strings.Replace(holderIdentity(), "pid "+itoa(osPid()), "pid "+itoa(cmd.Process.Pid), 1)
	dead = dead[:strings.LastIndex(dead, " start ")] + " start " + start
	cmd.Process.Kill()
	cmd.Wait()
	if !holderGone(dead) {
		t.Fatalf("holderGone(%q) = false for a killed process", dead)
	}
	if holderGone(holderIdentity()) {
		t.Fatal("this process counts as gone")
	}
	if holderGone("mce on elsewhere boot b pid 1 start 1") || holderGone("garbage") {
		t.Fatal("a holder on another machine, or an unreadable identity, counts as gone")
	}

	client := newClient(false)
	now := metav1.NewMicroTime(time.Now())
	secs := int32(30)
	client.CoordinationV1().Leases("ns").Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: ClaimName("prod"), Namespace: "ns"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &dead, RenewTime: &now, AcquireTime: &now, LeaseDurationSeconds: &secs},
	}, metav1.CreateOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := ClaimInstance(ctx, client, "ns", "prod", zerolog.Nop(), long) // as this process
	if err != nil {
		t.Fatalf("a dead holder's claim was not taken over: %v", err)
	}
	c.Release()
}

// TestClaimLost: when this mce cannot renew its Lease (the API server
// refuses or is unreachable) for the renew deadline, Lost reports it so
// serve can stop. (The fake clientset does not check resource versions, so a
// takeover by another holder is played by failing renewals.)
func TestClaimLost(t *testing.T) {
	short := shortClaims(1500 * time.Millisecond)
	client := newClient(false)
	var unreachable atomic.Bool // the fake's reactors may not be added while it is in use
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if unreachable.Load() {
			return true, nil, errors.New("the API server is unreachable")
		}
		return false, nil, nil
	})
	c, err := ClaimInstance(context.Background(), client, "ns", "prod", zerolog.Nop(), as(short, "mce on host-a boot x pid 1 start 1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	unreachable.Store(true)
	select {
	case err := <-c.Lost():
		if err == nil || !strings.Contains(err.Error(), "lost the claim") {
			t.Fatalf("Lost gave %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a claim that could not be renewed was not reported lost")
	}
}

func osPid() int { return os.Getpid() }

func itoa(i int) string { return strconv.Itoa(i) }
