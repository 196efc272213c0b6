package components

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
)

// The lifecycle of inference components as the operations drive it: the
// checks of a new or changed specification, the records created and
// updated, and the bounds on copies and adapters. The operations
// themselves are host's (control_components.go); the copies,
// components.go.

// errNoComponentEndpoint is SageMaker's answer to a component placed on an
// endpoint whose variants name a model.
func errNoComponentEndpoint() error {
	return apierr.ValidationException("Inference Components are not supported in this Endpoint. Please make sure this endpoint can deploy inference components.")
}

// notFound is SageMaker's answer for a resource of kind that does not exist.
func (m *Manager) notFound(kind spec.Kind, name string) error {
	return &spec.NotFoundError{Kind: kind, Name: name, ARN: m.arn(kind, name)}
}

// Lookup returns the component an operation names, or the error that the
// name is not one or that no component has it.
func (m *Manager) Lookup(name string) (*Component, error) {
	if err := spec.ValidateComponentName("inferenceComponentName", name); err != nil {
		return nil, err
	}
	c := m.Get(name)
	if c == nil {
		return nil, m.notFound(spec.KindInferenceComponent, name)
	}
	return c, nil
}

// template resolves what each copy of a component runs.
// A relative file:// ArtifactUrl resolves against baseDir.
func (m *Manager) template(name string, sp spec.InferenceComponentSpecification, v containers.VariantPlan, baseDir string) (containers.VariantPlan, error) {
	t := containers.VariantPlan{Name: v.Name, InstanceType: v.InstanceType, InstanceCount: 1, Weight: 1,
		HealthCheckTimeout: v.HealthCheckTimeout, DownloadTimeout: v.DownloadTimeout, NetworkIsolation: v.NetworkIsolation,
		RoutingStrategy: v.RoutingStrategy, PrefixLength: v.PrefixLength, ConcurrencyThreshold: v.ConcurrencyThreshold} // the variant's RoutingConfig picks among the copies
	if st := sp.StartupParameters; st != nil {
		if st.ContainerStartupHealthCheckTimeoutInSeconds != nil {
			t.HealthCheckTimeout = time.Duration(*st.ContainerStartupHealthCheckTimeoutInSeconds) * time.Second
		}
		if st.ModelDataDownloadTimeoutInSeconds != nil {
			t.DownloadTimeout = time.Duration(*st.ModelDataDownloadTimeoutInSeconds) * time.Second
		}
	}
	c := containers.ContainerPlan{Hostname: name, Mode: spec.ModeSingleModel}
	if sp.ModelName != "" {
		md, modelDir, err := m.model(sp.ModelName)
		if err != nil {
			return t, err
		}
		if err := md.Validate(); err != nil {
			return t, err
		}
		if len(md.Containers) > 1 {
			return t, apierr.ValidationException("Model %q has %d containers; an inference component runs a model of one container.", sp.ModelName, len(md.Containers))
		}
		d := md.PrimaryContainer
		if d == nil {
			d = &md.Containers[0]
		}
		if d.Mode == spec.ModeMultiModel {
			return t, apierr.ValidationException("Model %q is a multi-model (MultiModel mode) container, which mce does not run as an inference component.", sp.ModelName)
		}
		c.Image, c.ModelDataURL, c.BaseDir = d.Image, d.ModelData(), modelDir
		if len(d.Environment) > 0 {
			c.Environment = map[string]string{}
			for k, v := range d.Environment {
				c.Environment[k] = v
			}
		}
		t.ModelName = sp.ModelName
		t.NetworkIsolation = t.NetworkIsolation || (md.EnableNetworkIsolation != nil && *md.EnableNetworkIsolation)
	} else {
		k := sp.Container
		// A relative file:// artifact resolves as a CreateModel one does,
		// and one outside the model roots is refused now, not at launch.
		c.Image, c.ModelDataURL, c.BaseDir = k.Image, k.ArtifactURL, baseDir
		if err := m.checkModelData(k.ArtifactURL, baseDir); err != nil {
			return t, err
		}
		if len(k.Environment) > 0 {
			c.Environment = map[string]string{}
			for key, v := range k.Environment {
				c.Environment[key] = v
			}
		}
	}
	// Every copy gets its component's folder of adapters, where the engine
	// has them: adapters may come after the copies start.
	c.Adapters = m.adapters != nil
	t.Containers = []containers.ContainerPlan{c}
	return t, nil
}

// fitsOneInstance refuses a specification of which not even one copy fits
// an empty instance of the variant (the engine's CopyFits): no placement
// could ever succeed. First the specification's partition type must suit
// the variant's partition layout (spec.PartitionTypeFits).
func (m *Manager) fitsOneInstance(ctx context.Context, endpoint string, sp spec.InferenceComponentSpecification, v containers.VariantPlan) error {
	if why := spec.PartitionTypeFits(needsOf(sp).Partition, v.Name, v.Partitions); why != "" {
		return apierr.ValidationException("%s", why)
	}
	short, err := m.placer.CopyFits(ctx, copyVariant(endpoint, v), needsOf(sp))
	if err != nil {
		m.log.Warn().Err(err).Msg("reading the engine's capacity for inference components")
	}
	if short != "" {
		return &apierr.Error{Status: 400, Code: "ResourceLimitExceeded", Message: "One copy of the inference component needs more than an instance of variant " +
			v.Name + " (" + v.InstanceType + ") has: not enough " + short + "."}
	}
	return nil
}

// checkModelData is Options.CheckModelData, its refusal a
// ValidationException.
func (m *Manager) checkModelData(url, baseDir string) error {
	if m.checkURL == nil {
		return nil
	}
	if err := m.checkURL(url, baseDir); err != nil {
		return apierr.ValidationException("%s", err.Error())
	}
	return nil
}

// Create creates a component of a valid CreateInferenceComponent input
// (in.Validate passed), the caller authorized: its record, in the
// registry and the durable state, Creating while its copies are placed
// and launched in the background (for an adapter, while its artifact is
// staged and registered with its base's copies). A relative file://
// Container.ArtifactUrl resolves against baseDir; applied fingerprints
// the endpoint files' definition when Apply creates it ("" for the API).
// It returns the component's ARN.
func (m *Manager) Create(ctx context.Context, in *spec.CreateInferenceComponentInput, baseDir, applied string) (string, *Component, error) {
	arn := m.arn(spec.KindInferenceComponent, in.InferenceComponentName)
	if m.Get(in.InferenceComponentName) != nil {
		return "", nil, apierr.ValidationException("Cannot create already existing inference component %q.", arn)
	}
	e := m.endpoint(in.EndpointName)
	if e == nil {
		return "", nil, m.notFound(spec.KindEndpoint, in.EndpointName)
	}
	erec := e.State()
	if !erec.Plan.HostsComponents() {
		return "", nil, errNoComponentEndpoint()
	}
	if e.Deleting() || erec.Status == spec.StatusDeleting || erec.Status == spec.StatusFailed {
		return "", nil, apierr.ValidationException("Cannot create inference component %q: endpoint %q is %s.", arn, erec.ARN, erec.Status)
	}
	if in.Specification.IsAdapter() {
		return m.createAdapter(ctx, e, in, baseDir, applied)
	}
	v, ok := hostVariant(erec.Plan, in.VariantName)
	if !ok {
		return "", nil, apierr.ValidationException("The variant name %s is not present in the endpoint %q.", in.VariantName, erec.ARN)
	}
	sp := *in.Specification
	if err := tooManyCopies(int(*in.RuntimeConfig.CopyCount)); err != nil {
		return "", nil, err
	}
	if err := m.checkCopyCapacity(nil, int(*in.RuntimeConfig.CopyCount), 0); err != nil {
		return "", nil, err
	}
	if err := m.fitsOneInstance(ctx, erec.Name, sp, v); err != nil {
		return "", nil, err
	}
	tpl, err := m.template(in.InferenceComponentName, sp, v, baseDir)
	if err != nil {
		return "", nil, err
	}
	if err := apierr.Ended(ctx, arn); err != nil {
		return "", nil, err
	}
	now := time.Now()
	rec := Record{Name: in.InferenceComponentName, ARN: arn, EndpointName: erec.Name, VariantName: v.Name,
		Spec: sp, Template: tpl, Desired: int(*in.RuntimeConfig.CopyCount), Status: spec.StatusCreating,
		Created: now, Modified: now, Tags: append([]spec.Tag{}, in.Tags...), SpecVersion: 1, Applied: applied}
	c := &Component{name: rec.Name, endpoint: rec.EndpointName, rec: rec}
	if err := m.register(e, erec.ARN, c, nil); err != nil {
		return "", nil, err
	}
	c.setRoute()
	m.reconcileLater(c)
	return arn, c, nil
}

// createAdapter creates an adapter inference component (adapters.go): no
// copies of its own, its artifact staged and registered with its base's
// copies in the background.
func (m *Manager) createAdapter(ctx context.Context, e HostEndpoint, in *spec.CreateInferenceComponentInput, baseDir, applied string) (string, *Component, error) {
	arn := m.arn(spec.KindInferenceComponent, in.InferenceComponentName)
	base, err := m.checkAdapterBase(in)
	if err != nil {
		return "", nil, err
	}
	sp := *in.Specification
	if err := m.checkModelData(sp.Container.ArtifactURL, baseDir); err != nil {
		return "", nil, err
	}
	if err := apierr.Ended(ctx, arn); err != nil {
		return "", nil, err
	}
	brec := base.Record()
	now := time.Now()
	rec := Record{Name: in.InferenceComponentName, ARN: arn, EndpointName: brec.EndpointName, VariantName: brec.VariantName,
		Spec: sp, Status: spec.StatusCreating, Created: now, Modified: now, Tags: append([]spec.Tag{}, in.Tags...), SpecVersion: 1,
		Applied: applied, BaseDir: baseDir}
	c := &Component{name: rec.Name, endpoint: rec.EndpointName, rec: rec}
	if err := m.register(e, e.State().ARN, c, func() error {
		// The base may have gone while this one was checked: an adapter
		// is never left without one.
		if base.deleting.Load() || m.Get(brec.Name) != base {
			return apierr.ValidationException("Cannot create an adapter of inference component %q: it is being deleted.", brec.ARN)
		}
		// Counted under the endpoint's lock, which every adapter of
		// this base is registered under.
		return m.tooManyAdapters(base, c)
	}); err != nil {
		return "", nil, err
	}
	m.reconcileLater(c)
	return arn, c, nil
}

// register adds c to the registry and to the durable state, under the
// endpoint's lock and only while the endpoint is not being deleted
// (HostEndpoint.UnlessDeleting): the endpoint's deletion marks it under
// the same lock before its components are collected, so a new component is
// either refused or collected and deleted with them, never left behind.
// check, if not nil, runs under the lock once c is in the registry; its
// error takes c out. endpointARN names the endpoint in the refusal.
func (m *Manager) register(e HostEndpoint, endpointARN string, c *Component, check func() error) error {
	rec := c.rec
	ran, err := e.UnlessDeleting(func() error {
		if !m.add(c) {
			return apierr.ValidationException("Cannot create already existing inference component %q.", rec.ARN)
		}
		if check != nil {
			if err := check(); err != nil {
				m.remove(c)
				return err
			}
		}
		if err := m.store.Put(store.InferenceComponents, rec.Name, rec); err != nil {
			m.remove(c)
			return err
		}
		return nil
	})
	if !ran {
		return apierr.ValidationException("Cannot create inference component %q: endpoint %q is being deleted.", rec.ARN, endpointARN)
	}
	return err
}

// startUpdate sets Updating on a component that is InService or Failed,
// applies change (its error refuses the update, nothing changed), and
// reconciles its copies in the background.
func (m *Manager) startUpdate(c *Component, change func(*Record) error) error {
	// Checked and set in one step: of two updates at once, one is refused.
	var refused error
	m.saveComponent(c, func(r *Record) {
		if c.deleting.Load() || (r.Status != spec.StatusInService && r.Status != spec.StatusFailed) {
			refused = errInProgress(*r)
			return
		}
		// change sees the record as saved: on an error it must leave it
		// as it was (saved again unchanged but for Modified).
		if refused = change(r); refused != nil {
			return
		}
		r.Status = spec.StatusUpdating
	})
	if refused != nil {
		return refused
	}
	m.reconcileLater(c)
	return nil
}

// errInProgress refuses an update of a component that is not InService
// or Failed.
func errInProgress(r Record) error {
	return apierr.ValidationException("Cannot update in-progress inference component %q: its status is %s.", r.ARN, r.Status)
}

// Update is an UpdateInferenceComponent: a new Specification, a new
// RuntimeConfig (its CopyCount checked), or both.
type Update struct {
	// Specification holds the members the update changes, merged over the
	// current specification (spec.InferenceComponentSpecification.Merge);
	// with Replace, it is the whole new specification (the endpoint
	// files' definition).
	Specification *spec.InferenceComponentSpecification
	Replace       bool
	RuntimeConfig *spec.InferenceComponentRuntimeConfig
	// BaseDir is where a relative file:// ArtifactUrl of the Container
	// the update gives resolves (a Container kept resolves where it did).
	BaseDir string
	// Batch is how many copies a new specification replaces at a time;
	// 0: DefaultBatch.
	Batch int
	// Wait is the bake after each batch (WaitIntervalInSeconds), during
	// which Alarms (AutoRollbackConfiguration) are watched: any in ALARM
	// rolls the update back.
	Wait   time.Duration
	Alarms []string
	// RollbackBatch is how many copies a rollback brings back at a time
	// (0: all at once); Timeout rolls back an update still rolling after
	// it (0: none), both on the Manager's clock.
	RollbackBatch int
	Timeout       time.Duration
	// Also, if not nil, changes the record with the update (Apply marks
	// what it applied).
	Also func(*Record)
}

// errSpecChanged is met when the record's specification changed between
// the merge of an update and its start (another update began and ended
// meanwhile): the update is merged again over the new one.
var errSpecChanged = errors.New("the specification changed meanwhile")

// Update starts UpdateInferenceComponent on c, the caller authorized. The
// specification it gives is merged over the current one and the result is
// checked as CreateInferenceComponent's; when it runs what the copies run
// already, only the copy count changes (copies are added or removed, none
// replaced); otherwise the copies are replaced by a rolling update
// (rolling.go), batch after batch. For an adapter, its new artifact is
// staged and registered. The component is Updating meanwhile.
//
// The merge reads the record without holding it (resolving a model and
// asking the engine whether a copy fits take time); the update starts
// only if the specification it merged over is still the record's, and is
// merged again otherwise, so that concurrent updates never lose members.
func (m *Manager) Update(ctx context.Context, c *Component, u Update) error {
	if u.Specification == nil && u.RuntimeConfig == nil {
		return apierr.ValidationException("UpdateInferenceComponent needs Specification or RuntimeConfig (or both).")
	}
	if u.RuntimeConfig != nil {
		if err := spec.CheckCopyCount("runtimeConfig.copyCount", u.RuntimeConfig.CopyCount); err != nil {
			return err
		}
		if err := tooManyCopies(int(*u.RuntimeConfig.CopyCount)); err != nil {
			return err
		}
	}
	for attempt := 1; ; attempt++ {
		rec := c.Record()
		var err error
		if rec.IsAdapter() || u.Specification.IsAdapter() {
			err = m.updateAdapter(c, rec, u)
		} else {
			err = m.updateCopies(ctx, c, rec, u)
		}
		if !errors.Is(err, errSpecChanged) {
			return err
		}
		if attempt == 3 {
			return apierr.ValidationException("Cannot update inference component %q: other updates changed its specification while this one was checked; try again.", rec.ARN)
		}
	}
}

// updateCopies is Update of a component with copies, merged over rec.
func (m *Manager) updateCopies(ctx context.Context, c *Component, rec Record, u Update) error {
	batch := u.Batch
	if batch <= 0 {
		batch = DefaultBatch
	}
	var sp spec.InferenceComponentSpecification
	var tpl containers.VariantPlan
	roll := false
	if u.Specification != nil {
		var err error // (a BaseInferenceComponentName given went to updateAdapter)
		sp, err = spec.MergeSpecification(rec.Spec, u.Specification)
		if u.Replace {
			sp, err = *u.Specification, spec.ValidateSpecification(u.Specification)
		}
		if err != nil {
			return err
		}
		e := m.endpoint(rec.EndpointName)
		if e == nil {
			return m.notFound(spec.KindEndpoint, rec.EndpointName)
		}
		est := e.State()
		v, ok := hostVariant(est.Plan, rec.VariantName)
		if !ok {
			return apierr.ValidationException("The variant name %s is not present in the endpoint %q.", rec.VariantName, est.ARN)
		}
		if err := m.fitsOneInstance(ctx, rec.EndpointName, sp, v); err != nil {
			return err
		}
		// A Container kept resolves where it did; one given, where the
		// update says.
		baseDir := u.BaseDir
		if givesModel := u.Replace || u.Specification.ModelName != "" || u.Specification.Container != nil; !givesModel && len(rec.Template.Containers) > 0 {
			baseDir = rec.Template.Containers[0].BaseDir
		}
		if tpl, err = m.template(rec.Name, sp, v, baseDir); err != nil {
			return err
		}
		roll = !sameDeployment(rec, sp, tpl)
	}
	desired := rec.Desired
	if u.RuntimeConfig != nil {
		desired = int(*u.RuntimeConfig.CopyCount)
	}
	capacityBatch := 0
	if roll {
		capacityBatch = batch
	}
	if err := m.checkCopyCapacity(c, desired, capacityBatch); err != nil {
		return err
	}
	return m.startUpdate(c, func(r *Record) error {
		if r.SpecVersion != rec.SpecVersion || canonicalJSON(r.Spec) != canonicalJSON(rec.Spec) {
			return errSpecChanged
		}
		if roll {
			startRollout(r, sp, tpl, batch)
			r.Rollout.Wait, r.Rollout.Alarms = u.Wait, u.Alarms
			r.Rollout.RollbackBatch, r.Rollout.Timeout = u.RollbackBatch, u.Timeout
			if u.Timeout > 0 {
				r.Rollout.Deadline = m.clock.Now().Add(u.Timeout)
			}
		} else {
			resumeRollout(r)
		}
		r.Desired = desired
		if u.Also != nil {
			u.Also(r)
		}
		return nil
	})
}

// Scale starts UpdateInferenceComponentRuntimeConfig on c, the caller
// authorized: Updating while its copies become n (copies added or
// removed, none replaced).
func (m *Manager) Scale(c *Component, n int) error {
	if err := tooManyCopies(n); err != nil {
		return err
	}
	if rec := c.Record(); rec.IsAdapter() {
		return errAdapterCopies(rec)
	}
	if err := m.checkCopyCapacity(c, n, 0); err != nil {
		return err
	}
	return m.startUpdate(c, func(r *Record) error {
		resumeRollout(r)
		r.Desired = n
		return nil
	})
}

// Delete starts DeleteInferenceComponent on c, the caller authorized:
// refused when c is being deleted already or is the base of adapters;
// otherwise c is Deleting while its copies go in the background.
func (m *Manager) Delete(c *Component) error {
	if c.deleting.Load() {
		return apierr.ValidationException("Inference component %q is already being deleted (DELETE_IN_PROGRESS).", c.Record().ARN)
	}
	if err := m.refuseBaseDeletion(c); err != nil {
		return err
	}
	m.Remove(c)
	return nil
}

// ChangeTags applies change to a component's tags durably; found is false
// when there is no component of the name (then nothing is written).
func (m *Manager) ChangeTags(name string, change func([]spec.Tag) ([]spec.Tag, error)) (found bool, err error) {
	c := m.Get(name)
	if c == nil {
		return false, nil
	}
	m.saveComponent(c, func(r *Record) {
		t, cerr := change(r.Tags)
		if cerr != nil {
			err = cerr
			return
		}
		r.Tags = t
	})
	return true, err
}

// MaxAdaptersPerBase bounds the adapter inference components of one base
// (SageMaker documents no such number; its announcement speaks of
// hundreds of adapters per endpoint): each is staged on disk and
// registered with every copy of the base.
const MaxAdaptersPerBase = 256

// tooManyAdapters refuses adapter c when its base has MaxAdaptersPerBase
// others (those being deleted aside). The caller holds the endpoint's lock.
func (m *Manager) tooManyAdapters(base, c *Component) error {
	n := 0
	for _, a := range m.adaptersOf(base) {
		if a != c && !a.deleting.Load() {
			n++
		}
	}
	if n >= MaxAdaptersPerBase {
		return &apierr.Error{Status: 400, Code: "ResourceLimitExceeded", Message: fmt.Sprintf(
			"Inference component %q has %d adapter inference components, the most mce allows on one base inference component; delete one first.",
			base.Record().ARN, n)}
	}
	return nil
}

// errAdapterCopies refuses a copy count for an adapter.
func errAdapterCopies(rec Record) error {
	return apierr.ValidationException("Inference component %q is an adapter inference component: it has no copies of its own; scale its base inference component %s.",
		rec.ARN, rec.Spec.BaseInferenceComponentName)
}

// updateAdapter is UpdateInferenceComponent of an adapter, merged over
// rec: a new Specification (another ArtifactUrl of the same base; the
// base may be left out) is staged and registered again with the base's
// copies, replacing the old adapter.
func (m *Manager) updateAdapter(c *Component, rec Record, u Update) error {
	if !rec.IsAdapter() {
		return apierr.ValidationException("Inference component %q hosts a model: it cannot become an adapter inference component (BaseInferenceComponentName); create an adapter instead.", rec.ARN)
	}
	if u.RuntimeConfig != nil {
		return errAdapterCopies(rec)
	}
	if u.Specification == nil {
		return apierr.ValidationException("UpdateInferenceComponent of an adapter inference component needs its Specification.")
	}
	if !rec.Spec.SameBase(u.Specification) {
		return apierr.ValidationException("The base of adapter inference component %q is %s: an adapter cannot move to another base (%s); create a new adapter.",
			rec.ARN, rec.Spec.BaseInferenceComponentName, u.Specification.BaseInferenceComponentName)
	}
	var sp spec.InferenceComponentSpecification
	var err error
	baseDir := u.BaseDir
	switch {
	case u.Replace && !u.Specification.IsAdapter():
		return apierr.ValidationException("Inference component %q is an adapter inference component: its Specification keeps BaseInferenceComponentName %s.", rec.ARN, rec.Spec.BaseInferenceComponentName)
	case u.Replace:
		sp, err = *u.Specification, spec.ValidateSpecification(u.Specification)
	default:
		sp, err = spec.MergeSpecification(rec.Spec, u.Specification)
		if u.Specification.Container == nil {
			baseDir = rec.BaseDir // the artifact kept resolves where it did
		}
	}
	if err != nil {
		return err
	}
	if err := m.checkModelData(sp.Container.ArtifactURL, baseDir); err != nil {
		return err
	}
	return m.startUpdate(c, func(r *Record) error {
		if r.SpecVersion != rec.SpecVersion {
			return errSpecChanged
		}
		r.Spec, r.BaseDir, r.SpecVersion = sp, baseDir, r.SpecVersion+1
		if u.Also != nil {
			u.Also(r)
		}
		return nil
	})
}

// MaxComponentCopies bounds one inference component's copies: placement
// bounds them by the instances' capacity too, but a machine whose memory is
// unknown would otherwise try any number.
const MaxComponentCopies = 1000

func tooManyCopies(n int) error {
	if n > MaxComponentCopies {
		return &apierr.Error{Status: 400, Code: "ResourceLimitExceeded", Message: fmt.Sprintf(
			"The inference component asks for %d copies; mce runs at most %d copies of one inference component.", n, MaxComponentCopies)}
	}
	return nil
}
