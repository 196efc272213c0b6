package docker

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"
)

// fakeProbe is a machine whose running processes are procs (PID → start).
func fakeProbe(host, boot string, procs map[string]string) leaseProbe {
	return leaseProbe{hostname: host, bootID: boot, pidStart: func(pid string) (string, bool) {
		s, ok := procs[pid]
		return s, ok
	}}
}

// TestLeaseOwnership: an instance name held by a live owner is refused with
// ErrInstanceInUse and the holder's lease is untouched; one whose owner is
// provably gone is taken over.
func TestLeaseOwnership(t *testing.T) {
	const (
		boot    = "b0075eed-0000-4000-8000-000000000001"
		other   = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		started = "2026-11-24T01:00:00.000000001Z"
	)
	me := strconv.Itoa(os.Getpid())
	tests := []struct {
		name      string
		inCont    bool              // this mce runs in container selfID
		owner     map[string]string // the existing lease's labels; nil: no lease
		procs     map[string]string // processes running on this machine
		otherC    *container.State  // the state of container `other`, if it exists
		wantTaken bool
	}{
		{name: "free", owner: nil, wantTaken: true},
		{name: "live owner on this machine",
			owner: map[string]string{labelLeaseHost: "h", labelLeaseBoot: boot, labelLeasePID: "4242", labelLeasePIDStart: "100"},
			procs: map[string]string{"4242": "100"}},
		{name: "owner's PID reused by a later process",
			owner: map[string]string{labelLeaseHost: "h", labelLeaseBoot: boot, labelLeasePID: "4242", labelLeasePIDStart: "100"},
			procs: map[string]string{"4242": "900"}, wantTaken: true},
		{name: "owner's process is gone",
			owner:     map[string]string{labelLeaseHost: "h", labelLeaseBoot: boot, labelLeasePID: "4242", labelLeasePIDStart: "100"},
			wantTaken: true},
		{name: "this machine restarted since",
			owner: map[string]string{labelLeaseHost: "h", labelLeaseBoot: "old-boot", labelLeasePID: "4242", labelLeasePIDStart: "100"},
			procs: map[string]string{"4242": "100"}, wantTaken: true},
		{name: "owner on another machine cannot be checked",
			owner: map[string]string{labelLeaseHost: "elsewhere", labelLeaseBoot: "x", labelLeasePID: "1", labelLeasePIDStart: "1"}},
		{name: "this process already holds it",
			owner: map[string]string{labelLeaseHost: "h", labelLeaseBoot: boot, labelLeasePID: me, labelLeasePIDStart: "55"},
			procs: map[string]string{me: "55"}},
		{name: "owner's container runs",
			owner:  map[string]string{labelLeaseHost: "c1", labelLeasePID: "1", labelLeaseContainer: other, labelLeaseCStarted: started},
			otherC: &container.State{Running: true, StartedAt: started}},
		{name: "owner's container restarted since", inCont: true,
			owner:  map[string]string{labelLeaseHost: "c1", labelLeasePID: "1", labelLeaseContainer: other, labelLeaseCStarted: started},
			otherC: &container.State{Running: true, StartedAt: "2026-11-24T02:00:00Z"}, wantTaken: true},
		{name: "owner's container stopped",
			owner:  map[string]string{labelLeaseHost: "c1", labelLeasePID: "1", labelLeaseContainer: other, labelLeaseCStarted: started},
			otherC: &container.State{Running: false, StartedAt: started}, wantTaken: true},
		{name: "owner's container removed",
			owner:     map[string]string{labelLeaseHost: "c1", labelLeasePID: "1", labelLeaseContainer: other, labelLeaseCStarted: started},
			wantTaken: true},
		{name: "owner on the host, this mce in a container: cannot be checked", inCont: true,
			owner: map[string]string{labelLeaseHost: "h", labelLeaseBoot: boot, labelLeasePID: "4242", labelLeasePIDStart: "100"}},
		{name: "a container of that name mce did not make", owner: map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newJoinEngine()
			signs := inContainer(t, false, "h", "")
			if tt.inCont {
				signs = inContainer(t, true, selfID[:12], "")
				e.addContainer(selfID, "proj_mce_1", selfID[:12], true, "proj_default")
			}
			if tt.otherC != nil {
				e.addContainer(other, "proj_mce_2", "c1", tt.otherC.Running, "proj_default")
				e.containers[other].State = tt.otherC
			}
			var heldID string
			if tt.owner != nil {
				labels := map[string]string{}
				if len(tt.owner) > 0 {
					labels = (leaseOwner{}).labels("t")
				}
				for k, v := range tt.owner {
					labels[k] = v
				}
				heldID = strings.Repeat("e", 64)
				e.addContainer(heldID, LeaseName("t"), "", false, "none")
				e.containers[heldID].Config.Labels = labels
			}
			rt := &Runtime{engine: e, opts: Options{Instance: "t", StateDir: "/state", InContainer: signs}, log: zerolog.Nop()}
			procs := map[string]string{me: "55"}
			for k, v := range tt.procs {
				procs[k] = v
			}
			err := rt.acquireLease(context.Background(), fakeProbe("h", boot, procs))
			if !tt.wantTaken {
				if !errors.Is(err, ErrInstanceInUse) {
					t.Fatalf("err = %v, want ErrInstanceInUse", err)
				}
				if !strings.Contains(err.Error(), "docker rm "+LeaseName("t")) && len(tt.owner) > 0 {
					t.Errorf("error %q does not say how to release the name", err)
				}
				if e.containers[heldID] == nil {
					t.Error("the live holder's lease was removed")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			l := e.find(LeaseName("t"))
			if l == nil || l.ID != rt.leaseID || l.ID == heldID {
				t.Fatalf("lease not taken: %+v, runtime holds %q", l, rt.leaseID)
			}
			got := ownerFromLabels(l.Config.Labels)
			if got.pid != me || got.host != "h" || got.stateDir != "/state" || l.Config.Labels[LabelLease] != "t" {
				t.Errorf("lease owner %+v", got)
			}
			if tt.inCont && got.container != selfID {
				t.Errorf("lease names container %q, want %q", got.container, selfID)
			}
			rt.releaseLease(t.Context())
			if e.find(LeaseName("t")) != nil {
				t.Error("releaseLease left the lease")
			}
		})
	}
}

// TestLeaseTakenAgainWhenPruned: a lease removed behind mce's back (docker
// container prune removes never-started containers) is taken again.
func TestLeaseTakenAgainWhenPruned(t *testing.T) {
	signs := inContainer(t, false, "h", "")
	e := newJoinEngine()
	rt := &Runtime{engine: e, opts: Options{Instance: "t", StateDir: "/state", InContainer: signs}, log: zerolog.Nop()}
	me := strconv.Itoa(os.Getpid())
	p := fakeProbe("h", "boot", map[string]string{me: "55"})
	if err := rt.acquireLease(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	first := rt.leaseID
	rt.checkLease(context.Background(), p)
	if rt.leaseID != first {
		t.Fatal("checkLease replaced a lease that exists")
	}
	e.ContainerRemove(context.Background(), first, client.ContainerRemoveOptions{})
	rt.checkLease(context.Background(), p)
	if l := e.find(LeaseName("t")); l == nil || l.ID != rt.leaseID || rt.leaseID == first {
		t.Fatalf("pruned lease not taken again: %+v, runtime holds %q", l, rt.leaseID)
	}
}

func TestPidsLimit(t *testing.T) {
	for _, tt := range []struct {
		opt  int64
		want *int64
	}{
		{0, ptr(DefaultPidsLimit())},
		{100, ptr[int64](100)},
		{-1, nil},
	} {
		rt := &Runtime{opts: Options{PidsLimit: tt.opt}}
		got := rt.pidsLimit()
		if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
			t.Errorf("PidsLimit %d: got %v, want %v", tt.opt, got, tt.want)
		}
	}
	if DefaultPidsLimit() < 4096 {
		t.Errorf("DefaultPidsLimit() = %d", DefaultPidsLimit())
	}
}

func ptr[T any](v T) *T { return &v }

// TestLeasePIDs reads PIDs as a lease's labels hold them: decimal, or
// nothing.
func TestLeasePIDs(t *testing.T) {
	me := strconv.Itoa(os.Getpid())
	if _, ok := pidRuns(me); !ok {
		t.Error("pidRuns(self) found no process")
	}
	if s, ok := procStartOf(me); !ok || s == "" {
		t.Errorf("procStartOf(self) = %q, %v", s, ok)
	}
	for _, pid := range []string{"", "x", "../self", "0"} {
		if _, ok := pidRuns(pid); ok {
			t.Errorf("pidRuns(%q) found a process", pid)
		}
		if _, ok := procStartOf(pid); ok {
			t.Errorf("procStartOf(%q) found a process", pid)
		}
	}
}
