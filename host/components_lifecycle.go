package host

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
// themselves are control_components.go; the copies, components.go.

// errNoComponentEndpoint is SageMaker's answer to a component placed on an
// endpoint whose variants name a model.
func errNoComponentEndpoint() error {
	return apierr.ValidationException("Inference Components are not supported in this Endpoint. Please make sure this endpoint can deploy inference components.")
}

func (s *Server) componentNotFound(name string) error {
	return notFound(s, spec.KindInferenceComponent, name)
}

func (s *Server) getComponent(name string) (*component, error) {
	if err := spec.ValidateComponentName("inferenceComponentName", name); err != nil {
		return nil, err
	}
	c := s.ics.get(name)
	if c == nil {
		return nil, s.componentNotFound(name)
	}
	return c, nil
}

// template resolves what each copy of a component runs.
// A relative file:// ArtifactUrl resolves against baseDir.
func (s *Server) template(name string, sp spec.InferenceComponentSpecification, v containers.VariantPlan, baseDir string) (containers.VariantPlan, error) {
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
		rec, err := s.getModel(sp.ModelName)
		if err != nil {
			return t, err
		}
		m := rec.Input
		if err := m.Validate(); err != nil {
			return t, err
		}
		if len(m.Containers) > 1 {
			return t, apierr.ValidationException("Model %q has %d containers; an inference component runs a model of one container.", sp.ModelName, len(m.Containers))
		}
		d := m.PrimaryContainer
		if d == nil {
			d = &m.Containers[0]
		}
		if d.Mode == spec.ModeMultiModel {
			return t, apierr.ValidationException("Model %q is a multi-model (MultiModel mode) container, which mce does not run as an inference component.", sp.ModelName)
		}
		c.Image, c.ModelDataURL, c.BaseDir = d.Image, d.ModelData(), rec.BaseDir
		if len(d.Environment) > 0 {
			c.Environment = map[string]string{}
			for k, v := range d.Environment {
				c.Environment[k] = v
			}
		}
		t.ModelName = sp.ModelName
		t.NetworkIsolation = t.NetworkIsolation || (m.EnableNetworkIsolation != nil && *m.EnableNetworkIsolation)
	} else {
		k := sp.Container
		// A relative file:// artifact resolves as a CreateModel one does,
		// and one outside the model roots is refused now, not at launch.
		c.Image, c.ModelDataURL, c.BaseDir = k.Image, k.ArtifactURL, baseDir
		if s.cfg.ModelData != nil {
			if err := s.cfg.ModelData.CheckModelDataURL(k.ArtifactURL, baseDir); err != nil {
				return t, apierr.ValidationException("%s", err.Error())
			}
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
	c.Adapters = s.adapterStore() != nil
	t.Containers = []containers.ContainerPlan{c}
	return t, nil
}

// fitsOneInstance refuses a specification of which not even one copy fits
// an empty instance of the variant (the engine's CopyFits): no placement
// could ever succeed.
func (s *Server) fitsOneInstance(ctx context.Context, endpoint string, sp spec.InferenceComponentSpecification, v containers.VariantPlan) error {
	short, err := s.placer().CopyFits(ctx, copyVariant(endpoint, v), needsOf(sp))
	if err != nil {
		s.log.Warn().Err(err).Msg("reading the engine's capacity for inference components")
	}
	if short != "" {
		return &apierr.Error{Status: 400, Code: "ResourceLimitExceeded", Message: "One copy of the inference component needs more than an instance of variant " +
			v.Name + " (" + v.InstanceType + ") has: not enough " + short + "."}
	}
	return nil
}

func (s *Server) createComponent(ctx context.Context, in *spec.CreateInferenceComponentInput, baseDir, applied string) (string, *component, error) {
	if err := in.Validate(); err != nil {
		return "", nil, err
	}
	// A component takes its endpoint's capacity: the caller needs
	// CreateInferenceComponent on the endpoint as well as on the component
	// (mce's choice: the authorization reference's resource types for it
	// could not be read).
	if err := alsoAuthorize(ctx, s.arn(spec.KindEndpoint, in.EndpointName), requestKeysOf(in)); err != nil {
		return "", nil, err
	}
	if sp := in.Specification; sp.IsAdapter() {
		if err := alsoAuthorize(ctx, s.arn(spec.KindInferenceComponent, sp.BaseInferenceComponentName), requestKeysOf(in)); err != nil {
			return "", nil, err
		}
	}
	arn := s.arn(spec.KindInferenceComponent, in.InferenceComponentName)
	if s.ics.get(in.InferenceComponentName) != nil {
		return "", nil, apierr.ValidationException("Cannot create already existing inference component %q.", arn)
	}
	e := s.reg.get(in.EndpointName)
	if e == nil {
		return "", nil, notFound(s, spec.KindEndpoint, in.EndpointName)
	}
	erec := e.record()
	if !erec.Plan.HostsComponents() {
		return "", nil, errNoComponentEndpoint()
	}
	if e.deleting.Load() || erec.Status == spec.StatusDeleting || erec.Status == spec.StatusFailed {
		return "", nil, apierr.ValidationException("Cannot create inference component %q: endpoint %q is %s.", arn, erec.ARN, erec.Status)
	}
	if in.Specification.IsAdapter() {
		return s.createAdapter(ctx, e, in, baseDir, applied)
	}
	v, ok := hostVariant(e, in.VariantName)
	if !ok {
		return "", nil, apierr.ValidationException("The variant name %s is not present in the endpoint %q.", in.VariantName, erec.ARN)
	}
	sp := *in.Specification
	if err := tooManyCopies(int(*in.RuntimeConfig.CopyCount)); err != nil {
		return "", nil, err
	}
	if err := s.checkCopyCapacity(nil, int(*in.RuntimeConfig.CopyCount), true); err != nil {
		return "", nil, err
	}
	if err := s.fitsOneInstance(ctx, erec.Name, sp, v); err != nil {
		return "", nil, err
	}
	tpl, err := s.template(in.InferenceComponentName, sp, v, baseDir)
	if err != nil {
		return "", nil, err
	}
	if err := ended(ctx, arn); err != nil {
		return "", nil, err
	}
	now := time.Now()
	rec := ComponentRecord{Name: in.InferenceComponentName, ARN: arn, EndpointName: erec.Name, VariantName: v.Name,
		Spec: sp, Template: tpl, Desired: int(*in.RuntimeConfig.CopyCount), Status: spec.StatusCreating,
		Created: now, Modified: now, Tags: tagList(in.Tags), SpecVersion: 1, Applied: applied}
	c := &component{name: rec.Name, endpoint: rec.EndpointName, rec: rec}
	if err := s.registerComponent(e, c, nil); err != nil {
		return "", nil, err
	}
	c.setRoute()
	s.reconcileLater(c)
	return arn, c, nil
}

// createAdapter creates an adapter inference component (adapters.go): no
// copies of its own, its artifact staged and registered with its base's
// copies in the background.
func (s *Server) createAdapter(ctx context.Context, e *Endpoint, in *spec.CreateInferenceComponentInput, baseDir, applied string) (string, *component, error) {
	arn := s.arn(spec.KindInferenceComponent, in.InferenceComponentName)
	base, err := s.checkAdapterBase(in)
	if err != nil {
		return "", nil, err
	}
	sp := *in.Specification
	if s.cfg.ModelData != nil {
		if err := s.cfg.ModelData.CheckModelDataURL(sp.Container.ArtifactURL, baseDir); err != nil {
			return "", nil, apierr.ValidationException("%s", err.Error())
		}
	}
	if err := ended(ctx, arn); err != nil {
		return "", nil, err
	}
	brec := base.record()
	now := time.Now()
	rec := ComponentRecord{Name: in.InferenceComponentName, ARN: arn, EndpointName: brec.EndpointName, VariantName: brec.VariantName,
		Spec: sp, Status: spec.StatusCreating, Created: now, Modified: now, Tags: tagList(in.Tags), SpecVersion: 1,
		Applied: applied, BaseDir: baseDir}
	c := &component{name: rec.Name, endpoint: rec.EndpointName, rec: rec}
	if err := s.registerComponent(e, c, func() error {
		// The base may have gone while this one was checked: an adapter
		// is never left without one.
		if base.deleting.Load() || s.ics.get(brec.Name) != base {
			return apierr.ValidationException("Cannot create an adapter of inference component %q: it is being deleted.", brec.ARN)
		}
		// Counted under the endpoint's lock, which every adapter of
		// this base is registered under.
		return s.tooManyAdapters(base, c)
	}); err != nil {
		return "", nil, err
	}
	s.reconcileLater(c)
	return arn, c, nil
}

// registerComponent adds c to the registry and to the durable state,
// under the endpoint's lock and only while the endpoint is not being
// deleted: deleteEndpoint sets deleting under the same lock before its
// components are collected, so a new component is either refused or
// collected and deleted with them, never left behind. check, if not nil,
// runs under the lock once c is in the registry; its error takes c out.
func (s *Server) registerComponent(e *Endpoint, c *component, check func() error) error {
	rec := c.rec
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deleting.Load() || s.reg.get(e.name) != e {
		return apierr.ValidationException("Cannot create inference component %q: endpoint %q is being deleted.", rec.ARN, s.arn(spec.KindEndpoint, e.name))
	}
	if !s.ics.add(c) {
		return apierr.ValidationException("Cannot create already existing inference component %q.", rec.ARN)
	}
	if check != nil {
		if err := check(); err != nil {
			s.ics.remove(c)
			return err
		}
	}
	if err := s.store.Put(store.InferenceComponents, rec.Name, rec); err != nil {
		s.ics.remove(c)
		return err
	}
	return nil
}

// startUpdate sets Updating on a component that is InService or Failed,
// applies change, and reconciles its copies in the background.
func (s *Server) startUpdate(c *component, change func(*ComponentRecord)) error {
	// Checked and set in one step: of two updates at once, one is refused.
	var refused error
	s.saveComponent(c, func(r *ComponentRecord) {
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
	s.reconcileLater(c)
	return nil
}

// updateComponent is UpdateInferenceComponent with a relative file://
// ArtifactUrl resolved against baseDir; also, if not nil, changes the
// record with the update.
func (s *Server) updateComponent(ctx context.Context, in *updateComponentInput, baseDir string, also func(*ComponentRecord)) (any, error) {
	c, err := s.getComponent(in.InferenceComponentName)
	if err != nil {
		return nil, err
	}
	if err := s.authorizeBase(ctx, c.record()); err != nil {
		return nil, err
	}
	if len(in.Specifications) > 0 && string(in.Specifications) != "null" {
		return nil, apierr.ValidationException("Specifications (one specification per instance type) is not supported by mce: its variants have one instance type. Give Specification instead.")
	}
	if in.Specification == nil && in.RuntimeConfig == nil {
		return nil, apierr.ValidationException("UpdateInferenceComponent needs Specification or RuntimeConfig (or both).")
	}
	if in.RuntimeConfig != nil {
		if err := spec.CheckCopyCount("runtimeConfig.copyCount", in.RuntimeConfig.CopyCount); err != nil {
			return nil, err
		}
		if err := tooManyCopies(int(*in.RuntimeConfig.CopyCount)); err != nil {
			return nil, err
		}
	}
	rec := c.record()
	if rec.isAdapter() || in.Specification.IsAdapter() {
		return s.updateAdapter(c, in, baseDir, also)
	}
	var tpl containers.VariantPlan
	if in.Specification != nil {
		if err := spec.ValidateSpecification(in.Specification); err != nil {
			return nil, err
		}
		e := s.reg.get(rec.EndpointName)
		if e == nil {
			return nil, notFound(s, spec.KindEndpoint, rec.EndpointName)
		}
		v, ok := hostVariant(e, rec.VariantName)
		if !ok {
			return nil, apierr.ValidationException("The variant name %s is not present in the endpoint %q.", rec.VariantName, e.record().ARN)
		}
		if err := s.fitsOneInstance(ctx, rec.EndpointName, *in.Specification, v); err != nil {
			return nil, err
		}
		if tpl, err = s.template(rec.Name, *in.Specification, v, baseDir); err != nil {
			return nil, err
		}
	}
	desired := rec.Desired
	if in.RuntimeConfig != nil {
		desired = int(*in.RuntimeConfig.CopyCount)
	}
	if err := s.checkCopyCapacity(c, desired, in.Specification != nil); err != nil {
		return nil, err
	}
	if err := s.startUpdate(c, func(r *ComponentRecord) {
		if in.Specification != nil {
			r.Spec, r.Template, r.SpecVersion = *in.Specification, tpl, r.SpecVersion+1
		}
		if in.RuntimeConfig != nil {
			r.Desired = int(*in.RuntimeConfig.CopyCount)
		}
		if also != nil {
			also(r)
		}
	}); err != nil {
		return nil, err
	}
	return map[string]string{"InferenceComponentArn": rec.ARN}, nil
}

// MaxAdaptersPerBase bounds the adapter inference components of one base
// (SageMaker documents no such number; its announcement speaks of
// hundreds of adapters per endpoint): each is staged on disk and
// registered with every copy of the base.
const MaxAdaptersPerBase = 256

// tooManyAdapters refuses adapter c when its base has MaxAdaptersPerBase
// others (those being deleted aside). The caller holds the endpoint's lock.
func (s *Server) tooManyAdapters(base, c *component) error {
	n := 0
	for _, a := range s.adaptersOf(base) {
		if a != c && !a.deleting.Load() {
			n++
		}
	}
	if n >= MaxAdaptersPerBase {
		return &apierr.Error{Status: 400, Code: "ResourceLimitExceeded", Message: fmt.Sprintf(
			"Inference component %q has %d adapter inference components, the most mce allows on one base inference component; delete one first.",
			base.record().ARN, n)}
	}
	return nil
}

// errAdapterCopies refuses a copy count for an adapter.
func errAdapterCopies(rec ComponentRecord) error {
	return apierr.ValidationException("Inference component %q is an adapter inference component: it has no copies of its own; scale its base inference component %s.",
		rec.ARN, rec.Spec.BaseInferenceComponentName)
}

// updateAdapter is UpdateInferenceComponent of an adapter: a new
// Specification (another ArtifactUrl of the same base) is staged and
// registered again with the base's copies, replacing the old adapter.
func (s *Server) updateAdapter(c *component, in *updateComponentInput, baseDir string, also func(*ComponentRecord)) (any, error) {
	rec := c.record()
	if !rec.isAdapter() {
		return nil, apierr.ValidationException("Inference component %q hosts a model: it cannot become an adapter inference component (BaseInferenceComponentName); create an adapter instead.", rec.ARN)
	}
	if in.RuntimeConfig != nil {
		return nil, errAdapterCopies(rec)
	}
	if in.Specification == nil {
		return nil, apierr.ValidationException("UpdateInferenceComponent of an adapter inference component needs its Specification.")
	}
	sp := *in.Specification
	if !sp.IsAdapter() {
		return nil, apierr.ValidationException("Inference component %q is an adapter inference component: its Specification keeps BaseInferenceComponentName %s.", rec.ARN, rec.Spec.BaseInferenceComponentName)
	}
	if err := spec.ValidateSpecification(&sp); err != nil {
		return nil, err
	}
	if !strings.EqualFold(sp.BaseInferenceComponentName, rec.Spec.BaseInferenceComponentName) {
		return nil, apierr.ValidationException("The base of adapter inference component %q is %s: an adapter cannot move to another base (%s); create a new adapter.",
			rec.ARN, rec.Spec.BaseInferenceComponentName, sp.BaseInferenceComponentName)
	}
	if s.cfg.ModelData != nil {
		if err := s.cfg.ModelData.CheckModelDataURL(sp.Container.ArtifactURL, baseDir); err != nil {
			return nil, apierr.ValidationException("%s", err.Error())
		}
	}
	if err := s.startUpdate(c, func(r *ComponentRecord) {
		r.Spec, r.BaseDir, r.SpecVersion = sp, baseDir, r.SpecVersion+1
		if also != nil {
			also(r)
		}
	}); err != nil {
		return nil, err
	}
	return map[string]string{"InferenceComponentArn": rec.ARN}, nil
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
