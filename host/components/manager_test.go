package components

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/background"
	"github.com/mce-run/mce/pipeline"
)

// valueContainer is a copy's container that is never called.
type valueContainer struct{ name string }

func (c valueContainer) Hostname() string { return c.name }
func (c valueContainer) BaseURL() string  { return "http://127.0.0.1:9" }
func (c valueContainer) Ready() bool      { return true }

type valueLaunched struct{ copies [][]pipeline.Container }

func (l valueLaunched) Copies(string) [][]pipeline.Container   { return l.copies }
func (valueLaunched) Scale(context.Context, string, int) error { return errors.New("no scaling") }
func (valueLaunched) Close(context.Context) error              { return nil }

// plainEngine offers nothing beyond containers.Engine (no CopyPlacer, no
// AdapterStore); it launches every plan as one copy of values and keeps
// the plans.
type plainEngine struct {
	mu    sync.Mutex
	plans []containers.EndpointPlan
}

func (e *plainEngine) Launch(_ context.Context, p containers.EndpointPlan, _ int) (containers.Launched, error) {
	e.mu.Lock()
	e.plans = append(e.plans, p)
	e.mu.Unlock()
	return valueLaunched{copies: [][]pipeline.Container{{valueContainer{p.Variants[0].Containers[0].Hostname}}}}, nil
}

func (*plainEngine) Adopt(context.Context, containers.EndpointPlan, int) (containers.Launched, error) {
	return nil, errors.New("nothing to adopt")
}

func (*plainEngine) Reconcile(context.Context) error { return nil }

// fakeEndpoint is an InService endpoint for inference components; refuse
// makes UnlessDeleting answer as an endpoint whose deletion began after
// the caller's checks.
type fakeEndpoint struct {
	mu     sync.Mutex
	st     EndpointState
	refuse bool
}

func (e *fakeEndpoint) State() EndpointState {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.st
}

func (e *fakeEndpoint) Deleting() bool { return false }

func (e *fakeEndpoint) UnlessDeleting(f func() error) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refuse {
		return false, nil
	}
	return true, f()
}

func newTestManager(t *testing.T, engine containers.Engine, e *fakeEndpoint) (*Manager, *store.Store) {
	t.Helper()
	return newTestManagerWith(t, engine, e, nil, nil)
}

// newTestManagerWith builds a Manager on st (a new store when nil), opts
// changing its Options when not nil.
func newTestManagerWith(t *testing.T, engine containers.Engine, e *fakeEndpoint, st *store.Store, opts func(*Options)) (*Manager, *store.Store) {
	t.Helper()
	if st == nil {
		var err error
		if st, err = store.Open(filepath.Join(t.TempDir(), "state.db")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
	}
	bg := background.New(context.Background(), zerolog.Nop())
	t.Cleanup(bg.Stop)
	o := Options{Engine: engine, Store: st, Background: bg, Logger: zerolog.Nop(),
		Endpoint: func(name string) HostEndpoint {
			if strings.EqualFold(name, e.st.Name) {
				return e
			}
			return nil
		}}
	if opts != nil {
		opts(&o)
	}
	return NewManager(o), st
}

func componentsEndpoint(instanceType string) *fakeEndpoint {
	return &fakeEndpoint{st: EndpointState{Name: "ep", ARN: "arn:aws:sagemaker:us-east-1:123456789012:endpoint/ep", ConfigName: "ep-config",
		Status: spec.StatusInService, Plan: containers.EndpointPlan{Name: "ep", Mode: spec.ModeSerial,
			Variants: []containers.VariantPlan{{Name: "AllTraffic", InstanceType: instanceType, InstanceCount: 1, Weight: 1}}}}}
}

func createInput(name string, copies int32, gpus, cpus float64) *spec.CreateInferenceComponentInput {
	return &spec.CreateInferenceComponentInput{InferenceComponentName: name, EndpointName: "ep", VariantName: "AllTraffic",
		Specification: &spec.InferenceComponentSpecification{Container: &spec.InferenceComponentContainer{Image: "img"},
			ComputeResourceRequirements: &spec.InferenceComponentComputeRequirements{MinMemoryRequiredInMb: new(int32(128)),
				NumberOfCpuCoresRequired: new(cpus), NumberOfAcceleratorDevicesRequired: new(gpus)}},
		RuntimeConfig: &spec.InferenceComponentRuntimeConfig{CopyCount: new(copies)}}
}

// TestCopiesOfAnEngineThatPlacesNothing: on an engine that is no
// containers.CopyPlacer, every copy is placed where its launch decides
// (LaunchPlacer): instance -1, no GPU pinned, the GPUs asked for by
// number; nothing is measured against the machine mce runs on, which
// says nothing of such an engine (before, host packed them on this
// machine's cores and memory with no GPUs, and refused this component).
func TestCopiesOfAnEngineThatPlacesNothing(t *testing.T) {
	engine := &plainEngine{}
	m, _ := newTestManager(t, engine, componentsEndpoint("ml.g5.12xlarge"))
	in := createInput("wide", 3, 2, 4096)
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}
	_, c, err := m.Create(context.Background(), in, "", "")
	if err != nil {
		t.Fatal(err)
	}
	rec := waitSettled(t, c)
	if rec.Status != spec.StatusInService || rec.FailureReason != "" || c.CurrentCopies() != 3 {
		t.Fatalf("%s %q with %d copies running, want InService with 3", rec.Status, rec.FailureReason, c.CurrentCopies())
	}
	for _, cp := range rec.Copies {
		if cp.Instance != -1 || len(cp.GPUs) > 0 {
			t.Errorf("copy %d placed on instance %d with GPUs %v, want -1 and none", cp.ID, cp.Instance, cp.GPUs)
		}
	}
	engine.mu.Lock()
	defer engine.mu.Unlock()
	for _, p := range engine.plans {
		if ct := p.Variants[0].Containers[0]; ct.GPUs != "2" || ct.Resources.Cpus != 4096 || p.Variants[0].CopyInstances != 1 {
			t.Errorf("copy plan asks for GPUs %q, %v cores, on %d instances; want 2, 4096, 1", ct.GPUs, ct.Resources.Cpus, p.Variants[0].CopyInstances)
		}
	}
}

// TestRegistrationOnlyWhileTheEndpointLives: a component whose endpoint's
// deletion began after Create's checks is refused at registration (under
// the endpoint's lock) and left nowhere: not in the registry, not in the
// durable state, nothing launched.
func TestRegistrationOnlyWhileTheEndpointLives(t *testing.T) {
	engine := &plainEngine{}
	e := componentsEndpoint("ml.m5.xlarge")
	e.refuse = true
	m, st := newTestManager(t, engine, e)
	in := createInput("late", 1, 0, 1)
	_, _, err := m.Create(context.Background(), in, "", "")
	if err == nil || !strings.Contains(err.Error(), `Cannot create inference component "arn:aws:sagemaker:us-east-1:123456789012:inference-component/late": endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/ep" is being deleted.`) {
		t.Fatalf("Create = %v", err)
	}
	if m.Get("late") != nil || len(m.All()) != 0 {
		t.Error("the refused component is in the registry")
	}
	var left []string
	if err := store.List(st, store.InferenceComponents, func(r Record) error { left = append(left, r.Name); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("stored records %v", left)
	}
	engine.mu.Lock()
	defer engine.mu.Unlock()
	if len(engine.plans) > 0 {
		t.Errorf("%d copies launched", len(engine.plans))
	}
}

// waitSettled waits until c is neither Creating nor Updating.
func waitSettled(t *testing.T, c *Component) Record {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rec := c.Record()
		if rec.Status != spec.StatusCreating && rec.Status != spec.StatusUpdating {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still %s", rec.Name, rec.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
