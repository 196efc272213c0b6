package docker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/internal/testenv"
)

func TestScaleUpAndDown(t *testing.T) {
	e := newEnv(t)
	d, err := e.deploy(t, probeSpec(e.probe, 2, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := d.Scale(ctx, "AllTraffic", 3); err != nil {
		t.Fatal(err)
	}
	copies := d.Copies("AllTraffic")
	if len(copies) != 3 {
		t.Fatalf("%d copies after scaling to 3", len(copies))
	}
	for _, cp := range copies {
		for _, c := range cp {
			if code, body := call(t, c, "", "x"); code != 200 || body != "x" {
				t.Errorf("copy %d %s: %d %q", c.Copy(), c.Hostname(), code, body)
			}
		}
	}
	if c, _ := testenv.Leftovers(t, e.cli, e.instance); c != 6 {
		t.Errorf("%d containers on the engine, want 6", c)
	}
	if err := d.Scale(ctx, "AllTraffic", 1); err != nil {
		t.Fatal(err)
	}
	if got := len(d.Copies("AllTraffic")); got != 1 {
		t.Errorf("%d copies after scaling to 1", got)
	}
	if c, _ := testenv.Leftovers(t, e.cli, e.instance); c != 2 {
		t.Errorf("%d containers on the engine after scaling down, want 2", c)
	}
	if err := d.Scale(ctx, "nope", 2); err == nil {
		t.Error("scaled an unknown variant")
	}
}

// TestFailedScaleUpRemovesWhatItStarted cancels a scale-up once its new
// containers exist on the engine (they take 2 s to pass /ping): Scale fails,
// every container it started is removed although its context is what
// failed, and the copy that ran before still serves.
func TestFailedScaleUpRemovesWhatItStarted(t *testing.T) {
	e := newEnv(t)
	d, err := e.deploy(t, probeSpec(e.probe, 2, map[string]string{"PROBE_READY_AFTER": "2s"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if c, _ := testenv.Leftovers(t, e.cli, e.instance); c > 2 {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	if err := d.Scale(ctx, "AllTraffic", 3); err == nil {
		t.Fatal("the scale-up succeeded although it was cancelled while its copies started")
	}
	if got := len(d.Copies("AllTraffic")); got != 1 {
		t.Errorf("%d copies after the failed scale-up, want the 1 from before", got)
	}
	if c, _ := testenv.Leftovers(t, e.cli, e.instance); c != 2 {
		t.Errorf("%d containers on the engine after the failed scale-up, want the first copy's 2", c)
	}
	for _, c := range d.Copies("AllTraffic")[0] {
		if code, body := call(t, c, "", "x"); code != 200 || body != "x" {
			t.Errorf("%s after the failed scale-up: %d %q", c.Hostname(), code, body)
		}
	}
}

// TestGenerationsShareTheNetwork runs an update's two container sets side by
// side: closing the old one keeps the network for the new one.
func TestGenerationsShareTheNetwork(t *testing.T) {
	e := newEnv(t)
	s := probeSpec(e.probe, 1, nil)
	old, err := e.deploy(t, s)
	if err != nil {
		t.Fatal(err)
	}
	s.Generation = 1
	s.Variants[0].Containers[0].Environment = map[string]string{"PROBE_TAG": "-v2"}
	next, err := e.deploy(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if old.Network() != next.Network() {
		t.Errorf("generations on networks %s and %s", old.Network(), next.Network())
	}
	if err := old.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := next.Containers()[0]
	if code, body := call(t, c, "", "x"); code != 200 || body != "x-v2" {
		t.Errorf("new generation after the old closed: %d %q", code, body)
	}
	if _, n := testenv.Leftovers(t, e.cli, e.instance); n != 1 {
		t.Errorf("%d networks, want the endpoint's one", n)
	}
}

// TestAdoptAfterRestart leaves a deployment running, starts a new runtime of
// the same instance with Adopt, and takes the containers over; a spec that
// changed is not adopted, and Reconcile then removes the strays.
func TestAdoptAfterRestart(t *testing.T) {
	cli := testenv.Docker(t)
	probe := testenv.Image(t, "probe")
	instance, state := testenv.Instance(t), t.TempDir()
	opts := docker.Options{Client: cli, Instance: instance, StateDir: state, Logger: zerolog.Nop(),
		StopGrace: time.Second, Adopt: true}
	ctx := context.Background()
	rt1, err := docker.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := probeSpec(probe, 2, nil)
	s.Variants[0].Copies = 2
	d1, err := rt1.Deploy(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, c := range d1.Containers() {
		ids[c.ID()] = true
	}
	rt1.Close() // the process "dies": containers keep running

	rt2, err := docker.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	changed := s
	changed.Name = s.Name
	changed.Variants = []docker.VariantSpec{s.Variants[0]}
	changed.Variants[0].Containers = append([]docker.ContainerSpec(nil), s.Variants[0].Containers...)
	changed.Variants[0].Containers[1].Environment = map[string]string{"NEW": "1"}
	if _, err := rt2.Adopt(ctx, changed); !errors.Is(err, docker.ErrNotAdoptable) {
		t.Fatalf("adopting a changed spec: %v, want ErrNotAdoptable", err)
	}
	d2, err := rt2.Adopt(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range d2.Containers() {
		if !ids[c.ID()] || !c.Ready() {
			t.Errorf("%s (copy %d) not adopted: id %s ready %v", c.Hostname(), c.Copy(), c.ID(), c.Ready())
		}
		if code, body := call(t, c, "", "hi"); code != 200 || body != "hi" {
			t.Errorf("adopted %s: %d %q", c.Hostname(), code, body)
		}
	}
	if err := rt2.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if c, n := testenv.Leftovers(t, cli, instance); c != 4 || n != 1 {
		t.Errorf("Reconcile removed adopted resources: %d containers, %d networks left", c, n)
	}
	if err := d2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rt2.Close()
	if c, n := testenv.Leftovers(t, cli, instance); c+n > 0 {
		t.Errorf("after Close: %d containers, %d networks", c, n)
	}
}

// TestCancelledDeployLeavesNothing cancels deployments at moments spread over
// their creation: whatever the engine had made is removed.
func TestCancelledDeployLeavesNothing(t *testing.T) {
	e := newEnv(t)
	for _, after := range []time.Duration{0, 2 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond, 80 * time.Millisecond, 200 * time.Millisecond} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(after, cancel)
		s := probeSpec(e.probe, 3, map[string]string{"PROBE_READY_AFTER": "5s"})
		d, err := e.rt.Deploy(ctx, s)
		cancel()
		if err == nil {
			d.Close(context.Background())
			t.Fatalf("cancelled after %v: the deployment succeeded", after)
		}
		if c, n := testenv.Leftovers(t, e.cli, e.instance); c+n > 0 {
			t.Errorf("cancelled after %v: %d containers and %d networks left (%v)", after, c, n, err)
		}
	}
}
