package components

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/pipeline"
)

// rollEngine is an engine of one instance of cpus cores that places
// copies by their CPU cores (a containers.CopyPlacer), launches each as a
// copy of values, and keeps them running until closed, so that a second
// Manager on the same store adopts them as after a crash of mce. A launch
// of an image in fail fails; one of an image in hold waits until the
// image's channel is closed (or its context ends). It counts launches and
// the most copies it ever ran at once.
type rollEngine struct {
	cpus float64

	mu       sync.Mutex
	alive    map[int]string // copy (generation) → the image it runs
	launches map[string]int // by image
	closed   int
	peak     int
	fail     map[string]bool
	hold     map[string]chan struct{}
	holding  chan int // the generation of each launch that waits on hold
}

var _ containers.CopyPlacer = (*rollEngine)(nil)

// release lets the held launch of image go on and makes every later
// launch of the images in fail fail.
func (e *rollEngine) release(image string, fail ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	close(e.hold[image])
	delete(e.hold, image)
	for _, f := range fail {
		e.fail[f] = true
	}
}

func newRollEngine(cpus float64) *rollEngine {
	return &rollEngine{cpus: cpus, alive: map[int]string{}, launches: map[string]int{}, fail: map[string]bool{},
		hold: map[string]chan struct{}{}, holding: make(chan int, 16)}
}

func (e *rollEngine) PlaceCopies(_ context.Context, req containers.CopyRequest) ([]containers.CopyPlace, string, error) {
	used := 0.0
	for _, p := range req.Placed {
		used += p.Needs.CPUs
	}
	var out []containers.CopyPlace
	for range req.Count {
		if used+req.Needs.CPUs > e.cpus {
			return out, fmt.Sprintf("CPU cores (a copy needs %g, the instance has %g free of %g)", req.Needs.CPUs, e.cpus-used, e.cpus), nil
		}
		used += req.Needs.CPUs
		out = append(out, containers.CopyPlace{Instance: 0})
	}
	return out, "", nil
}

func (e *rollEngine) CopyFits(_ context.Context, _ containers.CopyVariant, n containers.CopyNeeds) (string, error) {
	if n.CPUs > e.cpus {
		return "CPU cores", nil
	}
	return "", nil
}

func (e *rollEngine) KeepsCopy(_ containers.CopyVariant, p containers.CopyPlace) bool {
	return p.Instance == 0
}

func (e *rollEngine) Launch(ctx context.Context, p containers.EndpointPlan, gen int) (containers.Launched, error) {
	image := p.Variants[0].Containers[0].Image
	e.mu.Lock()
	e.launches[image]++
	hold, fail := e.hold[image], e.fail[image]
	e.mu.Unlock()
	if hold != nil {
		e.holding <- gen
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if fail {
		return nil, errors.New("container " + image + " exited during its health check")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.alive[gen] = image
	e.peak = max(e.peak, len(e.alive))
	return e.launched(p, gen), nil
}

func (e *rollEngine) launched(p containers.EndpointPlan, gen int) containers.Launched {
	return &rollLaunched{e: e, gen: gen, c: valueContainer{p.Variants[0].Containers[0].Hostname}}
}

// Adopt finds a copy still running the plan's image, as the Docker engine
// adopts only a container made from the same definition.
func (e *rollEngine) Adopt(_ context.Context, p containers.EndpointPlan, gen int) (containers.Launched, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if image, ok := e.alive[gen]; !ok || image != p.Variants[0].Containers[0].Image {
		return nil, fmt.Errorf("copy %d is not running %s", gen, p.Variants[0].Containers[0].Image)
	}
	return e.launched(p, gen), nil
}

func (*rollEngine) Reconcile(context.Context) error { return nil }

// running is the images of the copies running, by copy.
func (e *rollEngine) running() map[int]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[int]string{}
	for k, v := range e.alive {
		out[k] = v
	}
	return out
}

type rollLaunched struct {
	e   *rollEngine
	gen int
	c   valueContainer
}

func (l *rollLaunched) Copies(string) [][]pipeline.Container   { return [][]pipeline.Container{{l.c}} }
func (*rollLaunched) Scale(context.Context, string, int) error { return errors.New("no scaling") }
func (l *rollLaunched) Close(context.Context) error {
	l.e.mu.Lock()
	defer l.e.mu.Unlock()
	if _, ok := l.e.alive[l.gen]; ok {
		delete(l.e.alive, l.gen)
		l.e.closed++
	}
	return nil
}

// rollHarness is a Manager on a rollEngine, with models m1 (image img-m1)
// and m2 (img-m2), and the deltas CheckContainers was asked for.
type rollHarness struct {
	m      *Manager
	st     *store.Store
	engine *rollEngine
	ep     *fakeEndpoint
	mu     sync.Mutex
	deltas []int
	// onModel, when set, runs as a model is looked up (an update resolving
	// what its copies run).
	onModel func(name string)
}

func newRollHarness(t *testing.T, engine *rollEngine, st *store.Store) *rollHarness {
	t.Helper()
	h := &rollHarness{engine: engine, ep: componentsEndpoint("ml.m5.xlarge")}
	h.m, h.st = newTestManagerWith(t, engine, h.ep, st, func(o *Options) {
		o.Model = func(name string) (spec.CreateModelInput, string, error) {
			h.mu.Lock()
			hook := h.onModel
			h.mu.Unlock()
			if hook != nil {
				hook(name)
			}
			if name != "m1" && name != "m2" {
				return spec.CreateModelInput{}, "", errors.New("no model " + name)
			}
			return spec.CreateModelInput{ModelName: name, PrimaryContainer: &spec.ContainerDefinition{Image: "img-" + name}}, "", nil
		}
		o.CheckContainers = func(delta int) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.deltas = append(h.deltas, delta)
			return nil
		}
	})
	return h
}

// specJSON decodes a specification as the API's JSON gives it.
func specJSON(t *testing.T, s string) *spec.InferenceComponentSpecification {
	t.Helper()
	var sp spec.InferenceComponentSpecification
	if err := json.Unmarshal([]byte(s), &sp); err != nil {
		t.Fatal(err)
	}
	return &sp
}

func (h *rollHarness) create(t *testing.T, name, specification string, copies int32) *Component {
	t.Helper()
	in := &spec.CreateInferenceComponentInput{InferenceComponentName: name, EndpointName: "ep", VariantName: "AllTraffic",
		Specification: specJSON(t, specification), RuntimeConfig: &spec.InferenceComponentRuntimeConfig{CopyCount: new(copies)}}
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}
	_, c, err := h.m.Create(context.Background(), in, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if rec := waitSettled(t, c); rec.Status != spec.StatusInService {
		t.Fatalf("%s: %s %s", name, rec.Status, rec.FailureReason)
	}
	return c
}

func (h *rollHarness) update(t *testing.T, c *Component, specification string, copies int32) {
	t.Helper()
	u := Update{}
	if specification != "" {
		u.Specification = specJSON(t, specification)
	}
	if copies >= 0 {
		u.RuntimeConfig = &spec.InferenceComponentRuntimeConfig{CopyCount: new(copies)}
	}
	if err := h.m.Update(context.Background(), c, u); err != nil {
		t.Fatal(err)
	}
}

func copyIDs(rec Record) []int {
	var out []int
	for _, cp := range rec.Copies {
		out = append(out, cp.ID)
	}
	return out
}

const (
	oneCore = `"ComputeResourceRequirements": {"NumberOfCpuCoresRequired": 1, "MinMemoryRequiredInMb": 128}`
	model1  = `{"ModelName": "m1", ` + oneCore + `}`
)

// TestPartialSpecificationKeepsTheRest: an update that names only
// ComputeResourceRequirements (what the SageMaker Python SDK's
// update_predictor(resources=…) sends) keeps the model, the startup
// parameters and the scheduling of the current specification, and rolls
// the copies onto the new resources; a Container given drops the
// ModelName; a merged specification that breaks a rule of
// CreateInferenceComponent is refused, nothing changed.
func TestPartialSpecificationKeepsTheRest(t *testing.T) {
	h := newRollHarness(t, newRollEngine(16), nil)
	c := h.create(t, "ic", `{"ModelName": "m1", `+oneCore+`, "StartupParameters": {"ContainerStartupHealthCheckTimeoutInSeconds": 600},
		"SchedulingConfig": {"PlacementStrategy": "BINPACK"}}`, 2)
	h.update(t, c, `{"ComputeResourceRequirements": {"NumberOfCpuCoresRequired": 2, "MinMemoryRequiredInMb": 256}}`, -1)
	rec := waitSettled(t, c)
	if rec.Status != spec.StatusInService || rec.Spec.ModelName != "m1" || rec.Spec.Container != nil ||
		*rec.Spec.ComputeResourceRequirements.NumberOfCpuCoresRequired != 2 || *rec.Spec.ComputeResourceRequirements.MinMemoryRequiredInMb != 256 ||
		rec.Spec.StartupParameters == nil || rec.Spec.PlacementStrategy() != spec.PlacementBinpack || rec.Rollout != nil {
		t.Fatalf("after a resources-only update: %s %q %+v", rec.Status, rec.FailureReason, rec.Spec)
	}
	if got := copyIDs(rec); !slices.Equal(got, []int{3, 4}) {
		t.Errorf("copies %v, want [3 4]: the two copies replaced by copies with the new resources", got)
	}
	plan := copyPlan(rec, "ep-config", rec.Copies[0], h.ep.State().Plan.Variants[0])
	if ct := plan.Variants[0].Containers[0]; ct.Image != "img-m1" || ct.Resources.Cpus != 2 || plan.Variants[0].HealthCheckTimeout != 600*time.Second {
		t.Errorf("a new copy runs %q with %v cores and a health check of %v; want img-m1, 2, 10m0s", ct.Image, ct.Resources.Cpus, plan.Variants[0].HealthCheckTimeout)
	}

	// A Container replaces the ModelName (they are alternatives).
	h.update(t, c, `{"Container": {"Image": "img-own"}}`, -1)
	if rec = waitSettled(t, c); rec.Spec.ModelName != "" || rec.Spec.Container == nil || rec.Spec.Container.Image != "img-own" ||
		*rec.Spec.ComputeResourceRequirements.NumberOfCpuCoresRequired != 2 {
		t.Fatalf("after a Container-only update: %+v", rec.Spec)
	}

	// Refused after the merge as CreateInferenceComponent refuses: both
	// alternatives at once, a model that does not exist, a member out of
	// range (named as the request sent it).
	for upd, want := range map[string]string{
		`{"ModelName": "m2", "Container": {"Image": "x"}}`:              "Specify either ModelName or Container in the inference component specification, not both.",
		`{"ModelName": "m9"}`:                                           "no model m9",
		`{"ComputeResourceRequirements": {"MinMemoryRequiredInMb": 1}}`: "specification.computeResourceRequirements.minMemoryRequiredInMb",
		`{"BaseInferenceComponentName": "other"}`:                       "cannot become an adapter",
		`{"Container": {"ArtifactUrl": "s3://b/k"}}`:                    "The inference component specification needs a ModelName, or a Container with an Image.",
	} {
		err := h.m.Update(context.Background(), c, Update{Specification: specJSON(t, upd)})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("update %s: %v; want an error saying %q", upd, err, want)
		}
	}
	if after := c.Record(); after.Status != spec.StatusInService || after.SpecVersion != rec.SpecVersion || canonicalJSON(after.Spec) != canonicalJSON(rec.Spec) {
		t.Errorf("refused updates changed the record: %s v%d %+v", after.Status, after.SpecVersion, after.Spec)
	}
}

// TestUnchangedSpecificationOnlyScales: on an instance with room for one
// more copy, an UpdateInferenceComponent that sends the current
// specification again (in another JSON form) with a copy count of 3
// instead of 2 adds one copy and replaces none; before, it started 3 new
// copies beside the 2 and ended Failed with 1 of 3.
func TestUnchangedSpecificationOnlyScales(t *testing.T) {
	h := newRollHarness(t, newRollEngine(4), nil)
	h.create(t, "other", model1, 1)
	c := h.create(t, "ic", `{"ModelName": "m1", `+oneCore+`, "SchedulingConfig": {"PlacementStrategy": "SPREAD", "AvailabilityZoneBalance": null}}`, 2)
	before := copyIDs(c.Record())
	h.update(t, c, `{"SchedulingConfig": {"AvailabilityZoneBalance": null, "PlacementStrategy": "SPREAD"},
		"ComputeResourceRequirements": {"MinMemoryRequiredInMb": 128, "NumberOfCpuCoresRequired": 1.0}, "ModelName": "m1"}`, 3)
	rec := waitSettled(t, c)
	if rec.Status != spec.StatusInService || c.CurrentCopies() != 3 || rec.SpecVersion != 1 {
		t.Fatalf("%s %q, %d copies, specification version %d; want InService, 3, 1", rec.Status, rec.FailureReason, c.CurrentCopies(), rec.SpecVersion)
	}
	if got := copyIDs(rec); !slices.Equal(got[:2], before) || len(got) != 3 {
		t.Errorf("copies %v, want %v and one more", got, before)
	}
	h.engine.mu.Lock()
	launches, closed := h.engine.launches["img-m1"], h.engine.closed
	h.engine.mu.Unlock()
	if launches != 4 || closed != 0 {
		t.Errorf("%d launches and %d copies closed; want 4 (1 + 2 + 1) and 0", launches, closed)
	}
	// The same specification with the copy count alone, or nothing else.
	h.update(t, c, model1, -1)
	if rec = waitSettled(t, c); rec.Status != spec.StatusInService || len(rec.Copies) != 3 || rec.SpecVersion != 1 {
		t.Fatalf("the same specification again: %s, %d copies, version %d", rec.Status, len(rec.Copies), rec.SpecVersion)
	}
}

// TestRollingUpdateNeedsRoomForOneBatch: a new specification of a
// component with 3 copies, on an instance with room for one more copy,
// replaces them one at a time: never more than 4 copies run, each old one
// stops only once a new one serves, the count check asks for room for one
// container, and CurrentCopyCount never drops below 3. With batches of 2,
// room for 2 more is needed and enough.
func TestRollingUpdateNeedsRoomForOneBatch(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cpus       float64
		batch      int
		wantDelta  int
		wantLaunch int
	}{{"one at a time", 4, 0, 1, 3}, {"batches of 2", 5, 2, 2, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newRollHarness(t, newRollEngine(tc.cpus), nil)
			c := h.create(t, "ic", model1, 3)
			h.mu.Lock()
			h.deltas = nil
			h.mu.Unlock()
			var low sync.WaitGroup
			stop := make(chan struct{})
			least := 3
			low.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					least = min(least, c.CurrentCopies())
					time.Sleep(100 * time.Microsecond)
				}
			})
			if err := h.m.Update(context.Background(), c, Update{Specification: specJSON(t, `{"ModelName": "m2"}`), Batch: tc.batch}); err != nil {
				t.Fatal(err)
			}
			rec := waitSettled(t, c)
			close(stop)
			low.Wait()
			if rec.Status != spec.StatusInService || rec.FailureReason != "" || rec.Spec.ModelName != "m2" || rec.Rollout != nil || c.CurrentCopies() != 3 {
				t.Fatalf("%s %q %+v, %d copies", rec.Status, rec.FailureReason, rec.Spec, c.CurrentCopies())
			}
			for _, image := range h.engine.running() {
				if image != "img-m2" {
					t.Errorf("a copy of %s still runs", image)
				}
			}
			h.engine.mu.Lock()
			peak, launches := h.engine.peak, h.engine.launches["img-m2"]
			h.engine.mu.Unlock()
			if want := 3 + max(tc.batch, 1); peak != want || launches != tc.wantLaunch {
				t.Errorf("%d copies at most, %d launches of the new one; want %d and %d", peak, launches, want, tc.wantLaunch)
			}
			h.mu.Lock()
			if !slices.Equal(h.deltas, []int{tc.wantDelta}) {
				t.Errorf("the container limit was asked for %v, want [%d]", h.deltas, tc.wantDelta)
			}
			h.mu.Unlock()
			if least < 3 {
				t.Errorf("%d copies took calls at one moment of the update, want at least 3", least)
			}
		})
	}
}

// TestFailedRollingUpdateKeepsTheOldCopies: a new specification whose
// copies do not start is rolled back. Failing at its first copy, the old
// copies never stopped; failing at its second, the copy of the old
// specification that the first replaced starts again. Either way the
// component ends InService on its previous specification and count, the
// FailureReason saying so, no copy of the new one left.
func TestFailedRollingUpdateKeepsTheOldCopies(t *testing.T) {
	t.Run("first copy", func(t *testing.T) {
		engine := newRollEngine(4)
		engine.fail["img-m2"] = true
		h := newRollHarness(t, engine, nil)
		c := h.create(t, "ic", model1, 3)
		before := copyIDs(c.Record())
		h.update(t, c, `{"ModelName": "m2"}`, 2)
		rec := waitSettled(t, c)
		want := "The update of the inference component's specification failed and was rolled back: the previous specification serves. Copies failed to start: container img-m2 exited during its health check"
		if rec.Status != spec.StatusInService || rec.FailureReason != want || rec.Spec.ModelName != "m1" || rec.Desired != 3 || rec.Rollout != nil {
			t.Fatalf("%s %q, %+v, %d desired\nwant InService %q", rec.Status, rec.FailureReason, rec.Spec, rec.Desired, want)
		}
		if got := copyIDs(rec); !slices.Equal(got, before) || c.CurrentCopies() != 3 {
			t.Errorf("copies %v (%d serving), want the old ones %v", got, c.CurrentCopies(), before)
		}
		// The next update that works clears the reason.
		h.update(t, c, "", 2)
		if rec = waitSettled(t, c); rec.Status != spec.StatusInService || rec.FailureReason != "" {
			t.Errorf("scaled after the rollback: %s %q", rec.Status, rec.FailureReason)
		}
	})
	t.Run("a component short of copies", func(t *testing.T) {
		h := newRollHarness(t, newRollEngine(2), nil)
		in := &spec.CreateInferenceComponentInput{InferenceComponentName: "ic", EndpointName: "ep", VariantName: "AllTraffic",
			Specification: specJSON(t, model1), RuntimeConfig: &spec.InferenceComponentRuntimeConfig{CopyCount: new(int32(3))}}
		_, c, err := h.m.Create(context.Background(), in, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if rec := waitSettled(t, c); rec.Status != spec.StatusFailed || len(rec.Copies) != 2 {
			t.Fatalf("3 copies of 1 core on 2 cores: %s, %d copies", rec.Status, len(rec.Copies))
		}
		h.update(t, c, `{"ModelName": "m2"}`, -1)
		rec := waitSettled(t, c)
		want := "2 of 3 copies of the inference component are running. The update of its specification failed and was rolled back. " +
			"The new copies could not be placed on the 1 instance(s) of variant AllTraffic: not enough CPU cores (a copy needs 1, the instance has 0 free of 2)."
		if rec.Status != spec.StatusFailed || rec.FailureReason != want || rec.Spec.ModelName != "m1" || c.CurrentCopies() != 2 {
			t.Fatalf("%s %q, %+v, %d serving\nwant Failed %q", rec.Status, rec.FailureReason, rec.Spec, c.CurrentCopies(), want)
		}
	})
	t.Run("second copy", func(t *testing.T) {
		engine := newRollEngine(4)
		h := newRollHarness(t, engine, nil)
		c := h.create(t, "ic", model1, 3)
		engine.hold["img-m2"] = make(chan struct{})
		h.update(t, c, `{"ModelName": "m2"}`, -1)
		<-engine.holding
		engine.release("img-m2", "img-m2") // the copies after the first fail
		rec := waitSettled(t, c)
		if rec.Status != spec.StatusInService || !strings.HasPrefix(rec.FailureReason, "The update of the inference component's specification failed and was rolled back") ||
			rec.Spec.ModelName != "m1" || rec.Rollout != nil || len(rec.Copies) != 3 || c.CurrentCopies() != 3 {
			t.Fatalf("%s %q, %+v, copies %v (%d serving)", rec.Status, rec.FailureReason, rec.Spec, copyIDs(rec), c.CurrentCopies())
		}
		running := engine.running()
		for _, cp := range rec.Copies {
			if running[cp.ID] != "img-m1" || cp.SpecVersion != rec.SpecVersion {
				t.Errorf("copy %d (version %d) runs %q, want img-m1 of version %d", cp.ID, cp.SpecVersion, running[cp.ID], rec.SpecVersion)
			}
		}
		if len(running) != 3 {
			t.Errorf("%d copies run, want 3: %v", len(running), running)
		}
		engine.mu.Lock()
		relaunched := engine.launches["img-m1"]
		engine.mu.Unlock()
		if relaunched != 4 {
			t.Errorf("%d launches of the old specification, want 4 (3, and the one the rollback brought back)", relaunched)
		}
	})
}

// TestRollbackThatFailsToo: when the copies of the previous specification
// do not start again either, the component is Failed, every copy that
// runs (of both specifications) keeps serving, the record keeps the
// rollout; the next update of the count goes on with it and ends InService
// on the previous specification.
func TestRollbackThatFailsToo(t *testing.T) {
	engine := newRollEngine(4)
	h := newRollHarness(t, engine, nil)
	c := h.create(t, "ic", model1, 3)
	engine.hold["img-m2"] = make(chan struct{})
	h.update(t, c, `{"ModelName": "m2"}`, -1)
	<-engine.holding
	engine.release("img-m2", "img-m2", "img-m1") // the second new copy fails, and so does the old one the rollback starts
	rec := waitSettled(t, c)
	want := "2 of 3 copies of the inference component are running. The update of its specification failed (Copies failed to start: container img-m2 exited during its health check), " +
		"and rolling it back did not finish: copies of the previous specification did not start either (Copies failed to start: container img-m1 exited during its health check). " +
		"1 copies of the failed specification keep serving; update the inference component to try again."
	if rec.Status != spec.StatusFailed || rec.FailureReason != want || rec.Rollout == nil || rec.Spec.ModelName != "m1" || c.CurrentCopies() != 3 {
		t.Fatalf("%s %q, rollout %+v, %+v, %d serving\nwant Failed %q", rec.Status, rec.FailureReason, rec.Rollout, rec.Spec, c.CurrentCopies(), want)
	}
	engine.mu.Lock()
	engine.fail["img-m1"] = false
	engine.mu.Unlock()
	if err := h.m.Scale(c, 3); err != nil {
		t.Fatal(err)
	}
	rec = waitSettled(t, c)
	if rec.Status != spec.StatusInService || rec.FailureReason != "" || rec.Rollout != nil || rec.Spec.ModelName != "m1" || c.CurrentCopies() != 3 {
		t.Fatalf("scaled after the failed rollback: %s %q, rollout %+v, %+v, %d serving", rec.Status, rec.FailureReason, rec.Rollout, rec.Spec, c.CurrentCopies())
	}
	for id, image := range engine.running() {
		if image != "img-m1" {
			t.Errorf("copy %d runs %s, want img-m1", id, image)
		}
	}
}

// TestRestartInTheMiddleOfARollingUpdate: mce stops as a crash would
// (copies left running) while the second batch of a rolling update
// starts: the record says Updating, with the copies of both
// specifications. A new Manager on the same state adopts each running copy
// as the specification it runs, so the component serves at once, and goes
// on with the update until every copy runs the new specification.
func TestRestartInTheMiddleOfARollingUpdate(t *testing.T) {
	engine := newRollEngine(4)
	h := newRollHarness(t, engine, nil)
	c := h.create(t, "ic", model1, 3)
	engine.hold["img-m2"] = make(chan struct{})
	h.update(t, c, `{"ModelName": "m2"}`, -1)
	<-engine.holding // the first new copy waits
	engine.mu.Lock()
	first := engine.hold["img-m2"]
	engine.hold["img-m2"] = make(chan struct{}) // the second will wait for good
	engine.mu.Unlock()
	close(first)
	<-engine.holding

	var saved Record
	if err := h.st.Get(store.InferenceComponents, "ic", &saved); err != nil {
		t.Fatal(err)
	}
	fresh, old := saved.split()
	if saved.Status != spec.StatusUpdating || saved.Rollout == nil || saved.Spec.ModelName != "m2" || saved.Rollout.FromSpec.ModelName != "m1" ||
		len(fresh) != 2 || len(old) != 2 {
		t.Fatalf("the record in the middle of the update: %s, rollout %+v, %d new copies (one launching), %d old", saved.Status, saved.Rollout, len(fresh), len(old))
	}

	// The crash: the first Manager does nothing more; the second starts
	// on the same state and engine.
	h2 := newRollHarness(t, engine, h.st)
	engine.mu.Lock()
	delete(engine.hold, "img-m2") // the relaunched copies start at once
	engine.mu.Unlock()
	relaunch := h2.m.Recover(context.Background())
	c2 := h2.m.Get("ic")
	if c2 == nil {
		t.Fatal("the component was not recovered")
	}
	if n := c2.CurrentCopies(); n != 3 {
		t.Errorf("%d copies serve after the restart, want the 3 adopted (2 old, 1 new)", n)
	}
	relaunch()
	rec := waitSettled(t, c2)
	if rec.Status != spec.StatusInService || rec.Spec.ModelName != "m2" || rec.Rollout != nil || c2.CurrentCopies() != 3 {
		t.Fatalf("after the restart: %s %q, %+v, %d copies", rec.Status, rec.FailureReason, rec.Spec, c2.CurrentCopies())
	}
	running := engine.running()
	for _, cp := range rec.Copies {
		if running[cp.ID] != "img-m2" {
			t.Errorf("copy %d runs %q, want img-m2", cp.ID, running[cp.ID])
		}
	}
	if !slices.Contains(copyIDs(rec), fresh[0].ID) {
		t.Errorf("copies %v: the new copy that ran before the restart (%d) was not kept", copyIDs(rec), fresh[0].ID)
	}
}

// TestConcurrentUpdatesOneWins: of updates started at once, one is taken
// and the others are refused as in progress; none is half applied.
func TestConcurrentUpdatesOneWins(t *testing.T) {
	engine := newRollEngine(16)
	h := newRollHarness(t, engine, nil)
	c := h.create(t, "ic", model1, 1)
	release := make(chan struct{})
	engine.hold["img-m1"] = release // the winner stays Updating until all have answered
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			cpus := float64(i%3 + 1)
			errs[i] = h.m.Update(context.Background(), c, Update{Specification: &spec.InferenceComponentSpecification{
				ComputeResourceRequirements: &spec.InferenceComponentComputeRequirements{NumberOfCpuCoresRequired: &cpus, MinMemoryRequiredInMb: new(int32(129 + i))}}}) // never the current one
		})
	}
	wg.Wait()
	close(release)
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Errorf("updates %d and %d both taken", won, i)
		case err == nil:
			won = i
		case !strings.Contains(err.Error(), "Cannot update in-progress inference component"):
			t.Errorf("update %d: %v", i, err)
		}
	}
	rec := waitSettled(t, c)
	if won < 0 || rec.Status != spec.StatusInService || rec.Spec.ModelName != "m1" || *rec.Spec.ComputeResourceRequirements.MinMemoryRequiredInMb != int32(129+won) {
		t.Fatalf("update %d won; the record: %s %+v", won, rec.Status, rec.Spec)
	}
}

// TestUpdateMergedAgainAfterAnotherEnded: an update merged over a
// specification that another update replaced before it started (the
// other began and ended while this one resolved its model) is merged
// again over the new one: the members of both are kept.
func TestUpdateMergedAgainAfterAnotherEnded(t *testing.T) {
	h := newRollHarness(t, newRollEngine(16), nil)
	c := h.create(t, "ic", model1, 1)
	reached, resume := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	h.mu.Lock()
	h.onModel = func(string) {
		if first.CompareAndSwap(false, true) { // the first lookup: the slow update's
			close(reached)
			<-resume
		}
	}
	h.mu.Unlock()
	slow := make(chan error, 1)
	go func() {
		slow <- h.m.Update(context.Background(), c, Update{Specification: specJSON(t, `{"StartupParameters": {"ModelDataDownloadTimeoutInSeconds": 900}}`)})
	}()
	<-reached
	h.update(t, c, `{"ComputeResourceRequirements": {"NumberOfCpuCoresRequired": 2, "MinMemoryRequiredInMb": 256}}`, -1)
	if rec := waitSettled(t, c); rec.Status != spec.StatusInService || rec.SpecVersion != 2 {
		t.Fatalf("the fast update: %s %q, version %d", rec.Status, rec.FailureReason, rec.SpecVersion)
	}
	close(resume)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	rec := waitSettled(t, c)
	sp := rec.Spec
	if rec.Status != spec.StatusInService || rec.SpecVersion != 3 || sp.ModelName != "m1" || sp.StartupParameters == nil ||
		*sp.StartupParameters.ModelDataDownloadTimeoutInSeconds != 900 || *sp.ComputeResourceRequirements.NumberOfCpuCoresRequired != 2 {
		t.Fatalf("after both updates: %s, version %d, %+v; want the model, the startup parameters of one and the resources of the other", rec.Status, rec.SpecVersion, sp)
	}
}
