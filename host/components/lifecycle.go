package components

import (
	"context"
	"fmt"
	"strings"
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
		RoutingStrategy: v.RoutingStrategy} // the variant's RoutingConfig picks among the copies
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
// could ever succeed.
func (m *Manager) fitsOneInstance(ctx context.Context, endpoint string, sp spec.InferenceComponentSpecification, v containers.VariantPlan) error {
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
	if err := m.checkCopyCapacity(nil, int(*in.RuntimeConfig.CopyCount), true); err != nil {
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
// applies change, and reconciles its copies in the background.
func (m *Manager) startUpdate(c *Component, change func(*Record)) error {
	// Checked and set in one step: of two updates at once, one is refused.
	var refused error
	m.saveComponent(c, func(r *Record) {
		if c.deleting.Load() || (r.Status != spec.StatusInService && r.Status != spec.StatusFailed) {
			refused = apierr.ValidationException("Cannot update in-progress inference component %q: its status is %s.", r.ARN, r.Status)
			return
		}
		change(r)
		r.Status = spec.StatusUpdating
	})
	if refused != nil {
		return refused
	}
	m.reconcileLater(c)
	return nil
}

// Update is an UpdateInferenceComponent: a new Specification, a new
// RuntimeConfig (its CopyCount checked), or both.
type Update struct {
	Specification *spec.InferenceComponentSpecification
	RuntimeConfig *spec.InferenceComponentRuntimeConfig
	// BaseDir is where a relative file:// ArtifactUrl resolves.
	BaseDir string
	// Also, if not nil, changes the record with the update (Apply marks
	// what it applied).
	Also func(*Record)
}

// Update starts UpdateInferenceComponent on c, the caller authorized:
// Updating while new copies replace the old ones (for an adapter, while
// its new artifact is staged and registered) in the background.
func (m *Manager) Update(ctx context.Context, c *Component, u Update) error {
	if u.Specification == nil && u.RuntimeConfig == nil {
		return apierr.ValidationException("UpdateInferenceComponent needs Specification or RuntimeConfig (or both).")
	}
	if u.RuntimeConfig != nil {
		if err := tooManyCopies(int(*u.RuntimeConfig.CopyCount)); err != nil {
			return err
		}
	}
	rec := c.Record()
	if rec.IsAdapter() || u.Specification.IsAdapter() {
		return m.updateAdapter(c, u)
	}
	var tpl containers.VariantPlan
	if u.Specification != nil {
		if err := spec.ValidateSpecification(u.Specification); err != nil {
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
		if err := m.fitsOneInstance(ctx, rec.EndpointName, *u.Specification, v); err != nil {
			return err
		}
		var err error
		if tpl, err = m.template(rec.Name, *u.Specification, v, u.BaseDir); err != nil {
			return err
		}
	}
	desired := rec.Desired
	if u.RuntimeConfig != nil {
		desired = int(*u.RuntimeConfig.CopyCount)
	}
	if err := m.checkCopyCapacity(c, desired, u.Specification != nil); err != nil {
		return err
	}
	return m.startUpdate(c, func(r *Record) {
		if u.Specification != nil {
			r.Spec, r.Template, r.SpecVersion = *u.Specification, tpl, r.SpecVersion+1
		}
		if u.RuntimeConfig != nil {
			r.Desired = int(*u.RuntimeConfig.CopyCount)
		}
		if u.Also != nil {
			u.Also(r)
		}
	})
}

// Scale starts UpdateInferenceComponentRuntimeConfig on c, the caller
// authorized: Updating while its copies become n.
func (m *Manager) Scale(c *Component, n int) error {
	if err := tooManyCopies(n); err != nil {
		return err
	}
	if rec := c.Record(); rec.IsAdapter() {
		return errAdapterCopies(rec)
	}
	if err := m.checkCopyCapacity(c, n, false); err != nil {
		return err
	}
	return m.startUpdate(c, func(r *Record) { r.Desired = n })
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

// updateAdapter is UpdateInferenceComponent of an adapter: a new
// Specification (another ArtifactUrl of the same base) is staged and
// registered again with the base's copies, replacing the old adapter.
func (m *Manager) updateAdapter(c *Component, u Update) error {
	rec := c.Record()
	if !rec.IsAdapter() {
		return apierr.ValidationException("Inference component %q hosts a model: it cannot become an adapter inference component (BaseInferenceComponentName); create an adapter instead.", rec.ARN)
	}
	if u.RuntimeConfig != nil {
		return errAdapterCopies(rec)
	}
	if u.Specification == nil {
		return apierr.ValidationException("UpdateInferenceComponent of an adapter inference component needs its Specification.")
	}
	sp := *u.Specification
	if !sp.IsAdapter() {
		return apierr.ValidationException("Inference component %q is an adapter inference component: its Specification keeps BaseInferenceComponentName %s.", rec.ARN, rec.Spec.BaseInferenceComponentName)
	}
	if err := spec.ValidateSpecification(&sp); err != nil {
		return err
	}
	if !strings.EqualFold(sp.BaseInferenceComponentName, rec.Spec.BaseInferenceComponentName) {
		return apierr.ValidationException("The base of adapter inference component %q is %s: an adapter cannot move to another base (%s); create a new adapter.",
			rec.ARN, rec.Spec.BaseInferenceComponentName, sp.BaseInferenceComponentName)
	}
	if err := m.checkModelData(sp.Container.ArtifactURL, u.BaseDir); err != nil {
		return err
	}
	return m.startUpdate(c, func(r *Record) {
		r.Spec, r.BaseDir, r.SpecVersion = sp, u.BaseDir, r.SpecVersion+1
		if u.Also != nil {
			u.Also(r)
		}
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
