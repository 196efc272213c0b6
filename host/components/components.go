package components

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/pipeline"
)

// Inference components: an endpoint whose variants name no model runs no
// containers of its own; each component placed on one of its variants runs
// its own copies, each copy one container with exactly the component's
// resources.
//
// A copy is launched through the same engine as every endpoint: as one
// generation of the endpoint (the plan carries the endpoint's name, one
// variant, one instance, one container named after the component), the
// copy's number being the generation. The copies of all components of an
// endpoint thus share its network and its labels, restarts of mce adopt them
// one by one (Engine.Adopt with the copy's number), and Reconcile removes
// those no record owns. An endpoint that hosts components launches nothing
// itself, so its generation numbers are the copies' alone.
//
// Placement is the engine's (containers.CopyPlacer): the Docker engine
// packs the copies on its machine's instances and pins GPUs by device ID;
// the Kubernetes engine leaves them to its cluster's scheduler (instance
// -1: each copy is launched with its resources, and one the scheduler
// finds no room for fails its launch with an UnschedulableError). The
// Manager keeps the copies' numbers, how many run against how many are
// desired, and the component's status. A copy that does not fit is never
// dropped: the component reports it (Failed, FailureReason naming what is
// short, CurrentCopyCount below DesiredCopyCount) and keeps serving with
// the copies it has. The copy's plan carries how many instances the
// variant's copies may occupy.

// Record is the durable state of one inference component.
type Record struct {
	Name         string
	ARN          string
	EndpointName string
	VariantName  string
	Spec         spec.InferenceComponentSpecification
	// Template is what each copy runs: one variant, one instance, one
	// container, resolved when the specification was given (a model
	// deleted later does not change it).
	Template      containers.VariantPlan
	Desired       int
	Status        spec.Status
	FailureReason string `json:",omitempty"`
	Created       time.Time
	Modified      time.Time
	Tags          []spec.Tag
	// Copies are the copies placed (launched or being launched).
	Copies []CopyRecord
	// LastCopyID is the highest copy number the component ever had: numbers
	// are not used again (nextCopyID).
	LastCopyID int `json:",omitempty"`
	// SpecVersion counts specifications: copies of another one are
	// replaced by UpdateInferenceComponent's rolling update.
	SpecVersion int
	// Rollout is the rolling update in progress (rolling.go): the
	// specification its copies replace; nil when there is none.
	Rollout *Rollout `json:",omitempty"`
	// Applied fingerprints the endpoint files' definition of the component
	// when Apply last created or updated it from them; empty when the API
	// made it.
	Applied string `json:",omitempty"`
	// BaseDir is where a relative file:// ArtifactUrl of an adapter
	// resolves (its template has no container to carry it).
	BaseDir string `json:",omitempty"`
	// AdapterSource is where an adapter's files are staged, as the base's
	// copies see them (the src it is registered with).
	AdapterSource string `json:",omitempty"`
}

// CopyRecord is one placed copy.
type CopyRecord struct {
	ID int // the generation the engine knows it by
	// Instance is the variant's instance it is placed on; -1 where its
	// launch decided (the engine's scheduler placed it).
	Instance    int
	GPUs        []string `json:",omitempty"`
	SpecVersion int
}

// Component is one inference component known to the Manager. Its fields
// are the Manager's; read it through its methods.
type Component struct {
	name     string
	endpoint string     // EndpointName, never changed
	ops      sync.Mutex // one lifecycle operation at a time
	mu       sync.Mutex // guards rec and launched
	rec      Record
	launched map[int]containers.Launched // running copies by ID
	insts    map[int]*pipeline.Instance  // their routing instances
	route    atomic.Pointer[pipeline.Route]
	deleting atomic.Bool
	// launching is cancelled by a deletion: launches of copies in progress
	// stop and remove what they started.
	launching  context.Context
	stopLaunch context.CancelFunc
}

// Name is the component's name as created.
func (c *Component) Name() string { return c.name }

// Deleting reports whether the component is being deleted.
func (c *Component) Deleting() bool { return c.deleting.Load() }

// launchContext is the context copies launch under (set once, under mu).
func (m *Manager) launchContext(c *Component) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.launching == nil {
		c.launching, c.stopLaunch = context.WithCancel(m.ctx)
	}
	return c.launching
}

// Record is the component's record now.
func (c *Component) Record() Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.rec
	r.Copies = slices.Clone(r.Copies)
	if r.Rollout != nil {
		ro := *r.Rollout
		r.Rollout = &ro
	}
	return r
}

// saveComponent changes the record and persists it, under the component's lock.
func (m *Manager) saveComponent(c *Component, change func(*Record)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	change(&c.rec)
	if c.deleting.Load() {
		c.rec.Status = spec.StatusDeleting
	}
	c.rec.Modified = time.Now()
	if err := m.store.Put(store.InferenceComponents, c.rec.Name, c.rec); err != nil {
		m.log.Error().Err(err).Str("inference_component", c.rec.Name).Msg("could not persist the inference component's state")
	}
}

// Route is the route to the component's serving copies (nil before any).
func (c *Component) Route() *pipeline.Route { return c.route.Load() }

// setRoute points the component's route at its running copies.
func (c *Component) setRoute() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setRouteLocked()
}

func (c *Component) setRouteLocked() {
	ids := make([]int, 0, len(c.insts))
	for id := range c.insts {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	var insts []*pipeline.Instance
	for _, id := range ids {
		insts = append(insts, c.insts[id])
	}
	if r := c.route.Load(); r != nil {
		r.Variants()[0].SetInstances(insts)
		return
	}
	v := pipeline.NewVariant(c.rec.VariantName, 1, insts)
	v.SetStrategy(pipeline.StrategyOf(c.rec.Template.RoutingStrategy)) // the variant's RoutingConfig
	v.SetPrefixAware(c.rec.Template.PrefixLength, c.rec.Template.ConcurrencyThreshold)
	c.route.Store(pipeline.NewRoute(c.rec.EndpointName, pipeline.Serial, []*pipeline.Variant{v}))
}

// CurrentCopies is how many copies take calls now.
func (c *Component) CurrentCopies() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.insts)
}

// copyPlan is the plan the engine launches for one copy of a component
// on host, the endpoint's variant: what the specification of its version
// runs.
func copyPlan(rec Record, configName string, cp CopyRecord, host containers.VariantPlan) containers.EndpointPlan {
	sp, v, _ := rec.specOf(cp.SpecVersion)
	v.InstanceCount, v.Weight = 1, 1
	v.CopyInstances = copyInstances(host)
	v.Containers = slices.Clone(v.Containers)
	c := &v.Containers[0]
	c.GPUs = ""
	if len(cp.GPUs) > 0 {
		c.GPUs = "device=" + strings.Join(cp.GPUs, ",")
	}
	n := needsOf(sp)
	c.Resources = containers.Resources{Cpus: n.CPUs, MemoryMiB: n.MemoryMiB}
	if r := sp.ComputeResourceRequirements; r != nil && r.MaxMemoryRequiredInMb != nil {
		c.Resources.MemoryMiB = int64(*r.MaxMemoryRequiredInMb)
	}
	if n.MemoryMiB < c.Resources.MemoryMiB {
		c.MemoryRequestMiB = n.MemoryMiB
	}
	if n.GPUs > 0 && cp.Instance < 0 {
		// Placed where its launch decides: a count, never device IDs.
		c.GPUs = strconv.Itoa(n.GPUs)
	}
	if n.Partition != "" && cp.Instance < 0 {
		// Likewise a partition of its profile, never a partition's UUID.
		c.GPUs, c.Partition = "", n.Partition
	}
	return containers.EndpointPlan{Name: rec.EndpointName, ConfigName: configName, Mode: spec.ModeSerial, Variants: []containers.VariantPlan{v}}
}

// copyInstances is how many instances the copies on a variant may occupy
// together: ManagedInstanceScaling's MaxInstanceCount when ENABLED, else
// InitialInstanceCount.
func copyInstances(v containers.VariantPlan) int {
	if v.MaxInstanceCount > 0 {
		return v.MaxInstanceCount
	}
	return max(v.InstanceCount, 1)
}

// copyVariant is variant v of endpoint as placement sees it.
func copyVariant(endpoint string, v containers.VariantPlan) containers.CopyVariant {
	gpus, all := spec.InstanceGPUCount(v.InstanceType)
	return containers.CopyVariant{Endpoint: endpoint, Variant: v.Name, InstanceType: v.InstanceType,
		Instances: v.InstanceCount, MaxInstances: copyInstances(v), InstanceGPUs: gpus, AllGPUs: all, Partitions: v.Partitions}
}

// placedCopies is every copy placed, of every component, each with the
// needs of the specification it runs; own's copies of its current
// specification are marked Own. The caller holds m.place.
func (m *Manager) placedCopies(own *Component) []containers.PlacedCopy {
	var out []containers.PlacedCopy
	for _, c := range m.All() {
		rec := c.Record()
		for _, cp := range rec.Copies {
			sp, _, _ := rec.specOf(cp.SpecVersion)
			out = append(out, containers.PlacedCopy{Endpoint: rec.EndpointName, Variant: rec.VariantName,
				CopyPlace: containers.CopyPlace{Instance: cp.Instance, GPUs: cp.GPUs}, Needs: needsOf(sp),
				Own: c == own && cp.SpecVersion == rec.SpecVersion})
		}
	}
	return out
}

// hostVariant is the variant of an endpoint's plan a component is placed on.
func hostVariant(plan containers.EndpointPlan, variant string) (containers.VariantPlan, bool) {
	for _, v := range plan.Variants {
		if v.Name == variant {
			return v, true
		}
	}
	return containers.VariantPlan{}, false
}

// reconcileCopies brings the component to its desired copies of its
// current specification: new copies are placed and launched (and take
// calls once ready), then surplus copies leave the route, drain and stop.
// It ends InService when every desired copy runs, Failed with what is
// short otherwise. A component with a Rollout in its record (a new
// specification) is rolled instead (roll). It runs under c.ops.
func (m *Manager) reconcileCopies(c *Component) {
	if c.deleting.Load() {
		return
	}
	rec := c.Record()
	log := m.log.With().Str("inference_component", rec.Name).Str("endpoint", rec.EndpointName).Logger()
	e := m.endpoint(rec.EndpointName)
	if e == nil {
		m.saveComponent(c, func(r *Record) {
			r.Status, r.FailureReason = spec.StatusFailed, "Endpoint "+rec.EndpointName+" does not exist."
		})
		return
	}
	v, ok := hostVariant(e.State().Plan, rec.VariantName)
	if !ok {
		m.saveComponent(c, func(r *Record) {
			r.Status, r.FailureReason = spec.StatusFailed, "Variant "+rec.VariantName+" is not part of endpoint "+rec.EndpointName+"."
		})
		return
	}
	fresh, _ := rec.split()
	current := len(fresh)
	missing := rec.Desired - current
	if why := variantOutOfBounds(v); why != "" && (missing > 0 || rec.Rollout != nil) {
		// Only a record of an older mce has such a variant (the API
		// refuses it): the component fails, the rest of mce serves.
		m.saveComponent(c, func(r *Record) {
			r.Status, r.FailureReason = spec.StatusFailed, fmt.Sprintf("%d of %d copies of the inference component are running. %s", current, r.Desired, why)
		})
		log.Error().Int("instances", v.InstanceCount).Int("max_instances", v.MaxInstanceCount).Msg("inference component not placed: its variant's recorded instance count is out of bounds")
		return
	}
	if rec.Rollout != nil {
		m.roll(c, e, v)
		return
	}
	var got launchResult
	if missing > 0 {
		got = m.launchCopies(c, rec, e, v, missing)
	}
	if c.deleting.Load() || m.ctx.Err() != nil {
		return // deleted, or mce stops: the record says what is left to do
	}
	// Surplus copies (beyond Desired; the newest stay) leave the route,
	// drain and stop; so do copies of a specification the record no
	// longer names (none but in a record of an older mce), once the
	// current one has all its copies.
	rec = c.Record()
	fresh, old := rec.split()
	var remove []CopyRecord
	if len(fresh) > rec.Desired {
		remove = fresh[:len(fresh)-rec.Desired]
	}
	if len(fresh) >= rec.Desired {
		remove = append(remove, old...)
	}
	m.removeCopies(c, remove)
	rec = c.Record()
	fresh, old = rec.split()
	running := len(fresh)
	m.saveComponent(c, func(r *Record) {
		if running >= r.Desired {
			r.Status, r.FailureReason = spec.StatusInService, ""
			return
		}
		reason := fmt.Sprintf("%d of %d copies of the inference component are running.", running, r.Desired) + got.why("The copies left", v)
		if len(old) > 0 {
			reason += fmt.Sprintf(" %d copies of the previous specification keep serving.", len(old))
		}
		r.Status, r.FailureReason = spec.StatusFailed, apierr.Truncate(reason, spec.MaxFailureReason)
	})
	log.Info().Int("desired", rec.Desired).Int("running", running).Msg("inference component reconciled")
}

// launchResult is what launchCopies started, and what kept the others
// from starting.
type launchResult struct {
	ready    []CopyRecord // launched, taking calls
	short    string       // what placement found short
	limit    string       // the words of --max-containers, when it stopped copies
	unplaced *containers.UnschedulableError
	failures []error
}

// why says what kept copies from starting, each sentence led by a space
// (what names them: "The copies left", "The new copies"); "" when nothing
// did.
func (r launchResult) why(what string, v containers.VariantPlan) string {
	out := ""
	if r.short != "" {
		out += " " + what + " could not be placed on the " + strconv.Itoa(v.InstanceCount) + " instance(s) of variant " + v.Name + ": not enough " + r.short + "."
	}
	out += r.limit
	if r.unplaced != nil {
		out += " " + what + " could not be placed: " + r.unplaced.Message
	}
	if err := errors.Join(r.failures...); err != nil {
		out += " Copies failed to start: " + apierr.RedactPaths(err.Error())
	}
	return out
}

// launchCopies places n copies of the record's specification (as many as
// fit, and as --max-containers allows), reserves them in the record, and
// launches them in parallel; each takes calls once ready (its adapters
// registered first). Copies that fail to start leave the record. The
// caller holds c.ops.
func (m *Manager) launchCopies(c *Component, rec Record, e HostEndpoint, v containers.VariantPlan, n int) launchResult {
	var out launchResult
	log := m.log.With().Str("inference_component", rec.Name).Str("endpoint", rec.EndpointName).Logger()
	var placed []CopyRecord
	m.place.Lock()
	// Each copy is a container: --max-containers counts it.
	if room, most, ok := m.containerRoom(); ok && room < n {
		out.limit = fmt.Sprintf(" The copies left would pass the limit of %d containers of all endpoints and inference component copies together (mce serve --max-containers; %d in use).",
			most, most-room)
		n = max(room, 0)
	}
	next := m.nextCopyID(rec.EndpointName)
	places, short, err := m.placer.PlaceCopies(m.launchContext(c), containers.CopyRequest{Variant: copyVariant(rec.EndpointName, v),
		Needs: needsOf(rec.Spec), Count: n, Binpack: rec.Spec.PlacementStrategy() == spec.PlacementBinpack, Placed: m.placedCopies(c)})
	if err != nil {
		out.failures = append(out.failures, fmt.Errorf("placing the copies: %w", err))
	}
	out.short = short
	for _, p := range places {
		placed = append(placed, CopyRecord{ID: next, Instance: p.Instance, GPUs: p.GPUs, SpecVersion: rec.SpecVersion})
		next++
	}
	// Reserved in the record before the launch, so that placements
	// of other components count them.
	m.tookCopyIDs(rec.EndpointName, next-1)
	m.saveComponent(c, func(r *Record) {
		r.Copies = append(r.Copies, placed...)
		r.LastCopyID = max(r.LastCopyID, next-1)
	})
	m.place.Unlock()
	// Launch the placed copies in parallel; each takes calls once ready.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, cp := range placed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				// A panic (in the engine, or registering adapters) fails
				// this copy, not mce: what it started goes.
				if v := recover(); v != nil {
					m.bg.LogPanic(v, "inference_component", c.name)
					mu.Lock()
					out.failures = append(out.failures, errCopyPanicked)
					out.ready = slices.DeleteFunc(out.ready, func(x CopyRecord) bool { return x.ID == cp.ID })
					mu.Unlock()
					m.removeCopies(c, []CopyRecord{cp})
				}
			}()
			start := time.Now()
			l, err := m.engine.Launch(m.launchContext(c), copyPlan(rec, e.State().ConfigName, cp, v), cp.ID)
			if err == nil && c.deleting.Load() {
				l.Close(context.WithoutCancel(m.ctx))
				err = errors.New("deleted")
			}
			if err != nil {
				var ue *containers.UnschedulableError
				mu.Lock()
				if errors.As(err, &ue) {
					// The scheduler's verdict is what is short, said once
					// for every copy it refused.
					if out.unplaced == nil {
						out.unplaced = ue
					}
				} else {
					out.failures = append(out.failures, err)
				}
				mu.Unlock()
				m.saveComponent(c, func(r *Record) {
					r.Copies = slices.DeleteFunc(r.Copies, func(x CopyRecord) bool { return x.ID == cp.ID })
				})
				return
			}
			m.registerAdaptersOn(c, l) // before it takes calls
			m.adoptCopy(c, cp.ID, l)
			mu.Lock()
			out.ready = append(out.ready, cp)
			mu.Unlock()
			log.Info().Int("copy", cp.ID).Int("instance", cp.Instance).Strs("gpus", cp.GPUs).Dur("took_ms", time.Since(start)).Msg("inference component copy ready")
		}()
	}
	wg.Wait()
	slices.SortFunc(out.ready, func(a, b CopyRecord) int { return a.ID - b.ID })
	return out
}

// checkCopyCapacity refuses, with SageMaker's ResourceLimitExceeded, a
// component (c; nil for a new one) asking for desired copies that would
// pass mce serve --max-containers (Options.CheckContainers): a new count
// adds what it asks beyond the copies there are; a new specification
// (roll, the copies it replaces at a time; 0 for none) needs room for one
// batch beside the copies it replaces (rollCapacity). Placement checks the
// limit again (launchCopies), so two calls at once cannot both take the
// last room.
func (m *Manager) checkCopyCapacity(c *Component, desired, roll int) error {
	placed := 0
	if c != nil {
		fresh, _ := c.Record().split()
		placed = len(fresh)
	}
	delta := desired - placed
	if roll > 0 {
		delta = rollCapacity(placed, desired, roll)
	}
	if m.check == nil {
		return nil
	}
	return m.check(delta)
}

// containerRoom is Options.ContainerRoom; ok is false without a limit.
func (m *Manager) containerRoom() (room, limit int, ok bool) {
	if m.room == nil {
		return 0, 0, false
	}
	return m.room()
}

// errCopyPanicked is a copy's failure when its launch panicked: the value
// and stack are in the log, not in a FailureReason.
var errCopyPanicked = errors.New("mce met an internal error while launching a copy (its log has the details)")

// reconcileLater reconciles c in the background, under c.ops. A panic
// there leaves c Failed (componentPanicked), never mce down.
func (m *Manager) reconcileLater(c *Component) {
	m.bg.GoOr(func() {
		c.ops.Lock()
		defer c.ops.Unlock()
		m.reconcile(c)
	}, func(v any) { m.componentPanicked(c, v) })
}

// componentPanicked reports a panic met while working on c: logged with
// its stack, and c Failed with a reason that shows nothing of the inside.
func (m *Manager) componentPanicked(c *Component, v any) {
	m.bg.LogPanic(v, "inference_component", c.name)
	m.saveComponent(c, func(r *Record) {
		r.Status, r.FailureReason = spec.StatusFailed, "mce met an internal error while placing or launching the copies of this inference component (its log has the details); the other inference components and endpoints are not affected. Update the inference component to try again."
	})
}

// adoptCopy makes a running copy take calls.
func (m *Manager) adoptCopy(c *Component, id int, l containers.Launched) {
	copies := l.Copies(c.rec.VariantName)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.launched == nil {
		c.launched, c.insts = map[int]containers.Launched{}, map[int]*pipeline.Instance{}
	}
	c.launched[id] = l
	if len(copies) > 0 {
		c.insts[id] = pipeline.NewInstance(copies[0])
	}
	c.setRouteLocked()
}

// removeCopies takes copies out of the route, waits for their calls to end
// and stops them.
func (m *Manager) removeCopies(c *Component, remove []CopyRecord) {
	if len(remove) == 0 {
		return
	}
	var drain []*pipeline.Instance
	var stop []containers.Launched
	c.mu.Lock()
	for _, cp := range remove {
		if in := c.insts[cp.ID]; in != nil {
			drain = append(drain, in)
		}
		if l := c.launched[cp.ID]; l != nil {
			stop = append(stop, l)
		}
		delete(c.insts, cp.ID)
		delete(c.launched, cp.ID)
	}
	if c.route.Load() != nil {
		c.setRouteLocked()
	}
	c.mu.Unlock()
	pipeline.Drain(m.ctx, drain, m.timeout)
	for _, l := range stop {
		if err := l.Close(context.WithoutCancel(m.ctx)); err != nil {
			m.log.Warn().Err(err).Str("inference_component", c.name).Msg("removing a copy")
		}
	}
	ids := map[int]bool{}
	for _, cp := range remove {
		ids[cp.ID] = true
	}
	m.saveComponent(c, func(r *Record) {
		r.Copies = slices.DeleteFunc(r.Copies, func(x CopyRecord) bool { return ids[x.ID] })
	})
}

// nextCopyID is a copy number no copy of the endpoint holds.
// Numbers are never used twice on one endpoint: a copy stopped a moment ago
// may still be going (on Kubernetes its objects, named after the number,
// are still being deleted), so the next is above every number a component
// of the endpoint ever had (LastCopyID) and every one this process issued
// (components deleted since included). The caller holds m.place and
// reports what it took with tookCopyIDs.
func (m *Manager) nextCopyID(endpoint string) int {
	n := m.issued[strings.ToLower(endpoint)]
	for _, c := range m.OfEndpoint(endpoint) {
		rec := c.Record()
		n = max(n, rec.LastCopyID)
		for _, cp := range rec.Copies {
			n = max(n, cp.ID)
		}
	}
	return n + 1
}

// tookCopyIDs records that copy numbers up to last were handed out on
// endpoint. The caller holds m.place.
func (m *Manager) tookCopyIDs(endpoint string, last int) {
	if m.issued == nil {
		m.issued = map[string]int{}
	}
	k := strings.ToLower(endpoint)
	m.issued[k] = max(m.issued[k], last)
}

// Remove takes the component out of service and removes its copies and
// record in the background, without the checks of DeleteInferenceComponent
// (Delete); wait is closed when it is gone.
func (m *Manager) Remove(c *Component) (wait <-chan struct{}) {
	done := make(chan struct{})
	if c.deleting.Swap(true) {
		close(done)
		return done
	}
	m.saveComponent(c, func(r *Record) { r.Status = spec.StatusDeleting })
	m.launchContext(c)
	c.mu.Lock()
	c.stopLaunch() // launches in progress stop
	c.mu.Unlock()
	m.bg.Go(func() {
		defer close(done)
		c.ops.Lock()
		defer c.ops.Unlock()
		if c.Record().IsAdapter() {
			m.deleteAdapter(c)
		}
		m.removeCopies(c, c.Record().Copies)
		if _, err := m.store.Delete(store.InferenceComponents, c.name); err != nil {
			m.log.Error().Err(err).Str("inference_component", c.name).Msg("could not remove the inference component's record")
		}
		m.remove(c)
		m.log.Info().Str("inference_component", c.name).Msg("inference component deleted")
	})
	return done
}

// RemoveAll removes the components of an endpoint being deleted and
// waits until their copies are gone.
func (m *Manager) RemoveAll(endpoint string) {
	cs := m.OfEndpoint(endpoint)
	var waits []<-chan struct{}
	for _, c := range cs { // adapters first: they unregister from their bases' copies
		if c.Record().IsAdapter() {
			waits = append(waits, m.Remove(c))
		}
	}
	for _, w := range waits {
		<-w
	}
	for _, c := range cs {
		<-m.Remove(c)
	}
}

// Recover brings back the components of the durable state after a
// restart (their endpoints recovered first), adopting each copy that still
// runs. Call relaunch once the engine's Reconcile ran: it places and
// launches the copies that could not be adopted.
func (m *Manager) Recover(ctx context.Context) (relaunch func()) {
	again := m.recoverComponents(ctx)
	return func() { m.relaunchComponents(again) }
}

// recoverComponents brings back the components of the durable state; it
// returns those with copies to launch again.
func (m *Manager) recoverComponents(ctx context.Context) []*Component {
	var recs []Record
	if err := store.List(m.store, store.InferenceComponents, func(r Record) error { recs = append(recs, r); return nil }); err != nil {
		m.log.Error().Err(err).Msg("reading inference components from the state")
		return nil
	}
	var again []*Component
	for _, rec := range recs {
		if rec.Status == spec.StatusDeleting || m.endpoint(rec.EndpointName) == nil {
			m.store.Delete(store.InferenceComponents, rec.Name) // its copies go with Reconcile
			continue
		}
		c := &Component{name: rec.Name, endpoint: rec.EndpointName, rec: rec}
		m.add(c)
		if m.recoverComponent(ctx, c) {
			again = append(again, c)
		}
	}
	return again
}

// recoverComponent adopts the running copies of c's record, each as the
// specification of its version runs (in a rolling update, the new one's
// or the one it replaces); it reports whether c has work left (copies to
// launch, a rolling update to go on with, an adapter to register). A copy
// placed where this engine places none (KeepsCopy: on Docker an instance
// of -1, which the Kubernetes engine writes, or one the variant does not
// have), or of a specification the record no longer knows, is not adopted
// but placed again; its container, if any, goes with Reconcile. (Without
// the variant, reconcile says so and places nothing.) A panic leaves c
// Failed and the others recovering.
func (m *Manager) recoverComponent(ctx context.Context, c *Component) (again bool) {
	rec := c.Record()
	defer func() {
		if v := recover(); v != nil {
			m.componentPanicked(c, v)
			again = false
		}
	}()
	est := m.endpoint(rec.EndpointName).State()
	configName := est.ConfigName
	hv, found := hostVariant(est.Plan, rec.VariantName)
	var kept []CopyRecord
	for _, cp := range rec.Copies {
		if found && !m.placer.KeepsCopy(copyVariant(rec.EndpointName, hv), containers.CopyPlace{Instance: cp.Instance, GPUs: cp.GPUs}) {
			m.log.Warn().Str("inference_component", rec.Name).Int("copy", cp.ID).Int("instance", cp.Instance).
				Msg("copy recorded on an instance this engine does not have (another engine's record); it will be placed again")
			continue
		}
		if _, _, known := rec.specOf(cp.SpecVersion); !known {
			m.log.Info().Str("inference_component", rec.Name).Int("copy", cp.ID).Msg("copy of a specification the record no longer knows; it will be placed again")
			continue
		}
		l, err := m.engine.Adopt(ctx, copyPlan(rec, configName, cp, hv), cp.ID)
		if err != nil {
			m.log.Info().Str("inference_component", rec.Name).Int("copy", cp.ID).Str("why", err.Error()).Msg("copy will be launched again")
			continue
		}
		kept = append(kept, cp)
		m.adoptCopy(c, cp.ID, l)
	}
	c.setRoute()
	m.saveComponent(c, func(r *Record) {
		r.Copies = kept
		if r.Status == spec.StatusCreating || r.Status == spec.StatusUpdating {
			r.Status = spec.StatusUpdating
		}
	})
	// An adapter is staged and registered again.
	return rec.IsAdapter() || len(kept) < rec.Desired || rec.Status != spec.StatusInService
}

// relaunchComponents places and launches the copies recoverComponents
// could not adopt.
func (m *Manager) relaunchComponents(cs []*Component) {
	for _, c := range cs {
		m.saveComponent(c, func(r *Record) { r.Status = spec.StatusUpdating })
		m.reconcileLater(c)
	}
}

// Detach takes every running copy out of routing and returns them for the
// caller to stop (the host's Close); the records keep them, and the next
// start adopts or relaunches them.
func (m *Manager) Detach() []containers.Launched {
	var ls []containers.Launched
	for _, c := range m.All() {
		c.mu.Lock()
		for _, l := range c.launched {
			ls = append(ls, l)
		}
		c.launched, c.insts = nil, nil
		c.route.Store(nil)
		c.mu.Unlock()
	}
	return ls
}

// RunningCopy is one running copy of a component, for the inventory.
type RunningCopy struct {
	Image      string
	Containers []pipeline.Container
}

// RunningCopies is the running copies of the components on an endpoint's
// variant, for the inventory (the status page, GET /mce/endpoints and the
// state metrics): each a copy of one container named after its component.
func (m *Manager) RunningCopies(endpoint, variant string) []RunningCopy {
	var out []RunningCopy
	for _, c := range m.OfEndpoint(endpoint) {
		c.mu.Lock()
		if c.rec.VariantName != variant {
			c.mu.Unlock()
			continue
		}
		version := map[int]int{} // copy ID → its specification's version
		for _, cp := range c.rec.Copies {
			version[cp.ID] = cp.SpecVersion
		}
		ids := make([]int, 0, len(c.launched))
		for id := range c.launched {
			ids = append(ids, id)
		}
		sort.Ints(ids)
		ls := make([]containers.Launched, 0, len(ids))
		images := make([]string, 0, len(ids)) // during a rolling update, of either specification
		for _, id := range ids {
			ls = append(ls, c.launched[id])
			image := ""
			if _, tpl, _ := c.rec.specOf(version[id]); len(tpl.Containers) > 0 {
				image = tpl.Containers[0].Image
			}
			images = append(images, image)
		}
		c.mu.Unlock()
		for i, l := range ls {
			for _, cp := range l.Copies(variant) {
				out = append(out, RunningCopy{Image: images[i], Containers: cp})
			}
		}
	}
	return out
}

// Gauge is one component's copies, for the metrics.
type Gauge struct {
	Endpoint, Variant, Component string
	Desired, Current             int
	// GPUs are those its placed copies hold: pinned by device ID, or asked
	// for by number where the launch decided.
	GPUs int
}

// Gauges is every component's Gauge, by name.
func (m *Manager) Gauges() []Gauge {
	var out []Gauge
	for _, c := range m.All() {
		rec := c.Record()
		g := Gauge{Endpoint: rec.EndpointName, Variant: rec.VariantName, Component: rec.Name, Desired: rec.Desired, Current: c.CurrentCopies()}
		for _, cp := range rec.Copies {
			sp, _, _ := rec.specOf(cp.SpecVersion)
			n := needsOf(sp)
			if n.Partition != "" {
				continue // a MIG partition, not a GPU
			}
			g.GPUs += len(cp.GPUs)
			if cp.Instance < 0 { // placed where its launch decided, by count
				g.GPUs += n.GPUs
			}
		}
		out = append(out, g)
	}
	return out
}

// maxCopyGPUs bounds the GPUs a copy asks for in placement: the API takes
// any whole number (a float), far more than any machine has, and one that
// does not fit an int must not turn negative.
const maxCopyGPUs = 1 << 20

// needsOf is what one copy of a component with sp takes.
func needsOf(sp spec.InferenceComponentSpecification) containers.CopyNeeds {
	var n containers.CopyNeeds
	if r := sp.ComputeResourceRequirements; r != nil {
		if r.NumberOfCpuCoresRequired != nil {
			n.CPUs = *r.NumberOfCpuCoresRequired
		}
		if r.MinMemoryRequiredInMb != nil {
			n.MemoryMiB = int64(*r.MinMemoryRequiredInMb)
		}
		if g := r.NumberOfAcceleratorDevicesRequired; g != nil && *g > 0 && !math.IsNaN(*g) {
			n.GPUs = int(min(*g, maxCopyGPUs))
		}
		if t := r.AcceleratorPartitionType; t != nil && *t != "" {
			// One partition of that profile: NumberOfAcceleratorDevicesRequired
			// (1, as the specification's check requires) counts it.
			n.Partition, n.GPUs = *t, 0
		}
	}
	return n
}

// variantOutOfBounds says why copies cannot be placed on a variant whose
// recorded instances are out of spec.MaxInstances's bounds (a record of an
// older mce, which accepted any count), or "".
func variantOutOfBounds(v containers.VariantPlan) string {
	if v.InstanceCount >= 1 && v.InstanceCount <= spec.MaxInstances && v.MaxInstanceCount <= spec.MaxInstances {
		return ""
	}
	n := v.InstanceCount
	if v.MaxInstanceCount > spec.MaxInstances {
		n = v.MaxInstanceCount
	}
	return fmt.Sprintf("Variant %s of the endpoint has %d instances in its recorded configuration; mce runs 1 to %d instances per variant. Update the endpoint to a configuration within that limit, then update the inference component.",
		v.Name, n, spec.MaxInstances)
}
