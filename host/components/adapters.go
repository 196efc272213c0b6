package components

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/pipeline"
)

// Adapter inference components
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_InferenceComponentSpecification.html):
// a component whose Specification names a BaseInferenceComponentName and
// a Container.ArtifactUrl is an adapter (LoRA-style) of that base. It has
// no copies and no resources of its own: the engine stages its artifact
// into the base's folder of adapters (containers.AdapterStore), which every
// copy of the base sees at containers.AdapterMount, and the host registers
// it with each copy's container through the adapter API of SageMaker's
// model hosting container standards
// (https://github.com/aws/model-hosting-container-standards, its LoRA
// handlers): POST /adapters {"name", "src"} and DELETE /adapters/{name}.
// An invocation that names the adapter goes to the base's copies with the
// headers X-Amzn-SageMaker-Adapter-Identifier and -Alias naming it.
//
// Copies of the base started later (scaling up, an update, a restart)
// have every adapter registered before they take calls; a restarted mce
// stages and registers them again (registering is idempotent in the
// containers that follow the standard: a name registered again is
// replaced).

// IsAdapter reports whether the record is an adapter component's.
func (r Record) IsAdapter() bool { return r.Spec.BaseInferenceComponentName != "" }

// adaptersOf lists the adapter components of base (deleting ones too).
func (m *Manager) adaptersOf(base *Component) []*Component {
	var out []*Component
	for _, c := range m.OfEndpoint(base.endpoint) {
		if strings.EqualFold(c.Record().Spec.BaseInferenceComponentName, base.name) {
			out = append(out, c)
		}
	}
	return out
}

// checkAdapterBase finds an adapter's base for CreateInferenceComponent:
// it must exist on the same endpoint, be no adapter itself, not be
// deleted, and run on an engine with adapter folders.
func (m *Manager) checkAdapterBase(in *spec.CreateInferenceComponentInput) (*Component, error) {
	baseName := in.Specification.BaseInferenceComponentName
	base := m.Get(baseName)
	if base == nil {
		return nil, apierr.ValidationException("Could not find base inference component %q.", m.arn(spec.KindInferenceComponent, baseName))
	}
	brec := base.Record()
	switch {
	case !strings.EqualFold(brec.EndpointName, in.EndpointName):
		return nil, apierr.ValidationException("The base inference component %q is hosted by endpoint %q, not %q: an adapter inference component is created on its base's endpoint.",
			brec.ARN, brec.EndpointName, in.EndpointName)
	case in.VariantName != "" && in.VariantName != brec.VariantName:
		return nil, apierr.ValidationException("The base inference component %q is placed on variant %s, not %s: omit VariantName or give the base's.", brec.ARN, brec.VariantName, in.VariantName)
	case brec.IsAdapter():
		return nil, apierr.ValidationException("Inference component %q is an adapter inference component: an adapter's base must host a model (an adapter of an adapter is not supported).", brec.ARN)
	case base.deleting.Load() || brec.Status == spec.StatusDeleting:
		return nil, apierr.ValidationException("Cannot create an adapter of inference component %q: it is being deleted.", brec.ARN)
	case m.adapters == nil:
		return nil, apierr.ValidationException("Adapter inference components need mce's Docker engine, which gives the base's copies a folder of adapters; this engine has none.")
	case len(brec.Template.Containers) == 0 || !brec.Template.Containers[0].Adapters:
		return nil, apierr.ValidationException("The base inference component %q was created by an mce without adapter support: update its Specification (UpdateInferenceComponent) so that its copies start again with a folder of adapters.", brec.ARN)
	}
	return base, nil
}

// reconcile brings a component to its record: copies for a component
// with a model, its registration with the base's copies for an adapter.
// It runs under c.ops.
func (m *Manager) reconcile(c *Component) {
	if c.Record().IsAdapter() {
		m.reconcileAdapter(c)
		return
	}
	m.reconcileCopies(c)
}

// reconcileAdapter stages the adapter's artifact and registers it with
// every running copy of its base; the adapter is then InService, or Failed
// with what went wrong.
func (m *Manager) reconcileAdapter(c *Component) {
	if c.deleting.Load() {
		return
	}
	rec := c.Record()
	// The files go before the status says Failed: a caller who sees
	// Failed finds nothing of the adapter left on disk.
	fail := func(reason string) {
		m.dropAdapter(c)
		m.saveComponent(c, func(r *Record) {
			r.Status, r.FailureReason = spec.StatusFailed, apierr.Truncate(reason, spec.MaxFailureReason)
		})
	}
	base := m.Get(rec.Spec.BaseInferenceComponentName)
	if base == nil || base.deleting.Load() {
		fail(fmt.Sprintf("The base inference component %s no longer exists.", rec.Spec.BaseInferenceComponentName))
		return
	}
	store := m.adapters
	if store == nil {
		fail("This engine has no folders of adapters (adapters need mce's Docker engine).")
		return
	}
	ctx, cancel := context.WithTimeout(m.launchContext(c), adapterStageTimeout)
	src, err := store.StageAdapter(ctx, rec.EndpointName, base.name, rec.Name, rec.Spec.Container.ArtifactURL, rec.BaseDir)
	cancel()
	if err != nil {
		fail("The adapter's artifact could not be staged: " + apierr.RedactPaths(err.Error()))
		return
	}
	m.saveComponent(c, func(r *Record) { r.AdapterSource = src })
	var errs []error
	for _, ct := range base.copyContainers() {
		if err := m.registerAdapter(ct, rec.Name, src); err != nil {
			errs = append(errs, err)
		}
	}
	if c.deleting.Load() {
		return
	}
	if err := errors.Join(errs...); err != nil {
		fail("The adapter could not be registered with the base inference component's copies: " + apierr.RedactPaths(err.Error()))
		return
	}
	m.saveComponent(c, func(r *Record) { r.Status, r.FailureReason = spec.StatusInService, "" })
	m.log.Info().Str("inference_component", rec.Name).Str("base", base.name).Msg("adapter inference component registered")
}

// adapterStageTimeout bounds the staging of an adapter's artifact.
const adapterStageTimeout = 10 * time.Minute

// copyContainers is the container of each running copy.
func (c *Component) copyContainers() []pipeline.Container {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []pipeline.Container
	for _, l := range c.launched {
		for _, cp := range l.Copies(c.rec.VariantName) {
			if len(cp) > 0 {
				out = append(out, cp[0])
			}
		}
	}
	return out
}

// registerAdaptersOn registers every staged adapter of base with the
// container of a new copy, before it takes calls. An adapter the copy
// refuses is marked Failed (the other copies keep it).
func (m *Manager) registerAdaptersOn(base *Component, l containers.Launched) {
	adapters := m.adaptersOf(base)
	if len(adapters) == 0 {
		return
	}
	var cts []pipeline.Container
	for _, cp := range l.Copies(base.Record().VariantName) {
		if len(cp) > 0 {
			cts = append(cts, cp[0])
		}
	}
	for _, a := range adapters {
		rec := a.Record()
		if a.deleting.Load() || rec.AdapterSource == "" {
			continue
		}
		for _, ct := range cts {
			if err := m.registerAdapter(ct, rec.Name, rec.AdapterSource); err != nil {
				m.saveComponent(a, func(r *Record) {
					r.Status = spec.StatusFailed
					r.FailureReason = apierr.Truncate("A new copy of the base inference component refused the adapter: "+apierr.RedactPaths(err.Error()), spec.MaxFailureReason)
				})
				// Under the adapter's own lock (this runs under the base's).
				m.bg.Go(func() {
					a.ops.Lock()
					defer a.ops.Unlock()
					if r := a.Record(); r.Status == spec.StatusFailed && !a.deleting.Load() {
						m.dropAdapter(a)
					}
				})
				break
			}
		}
	}
}

// dropAdapter unregisters a Failed adapter from its base's copies and
// removes its staged files, which gives their share of the disk budget
// back: a Failed adapter serves nothing, so it holds nothing either (an
// UpdateInferenceComponent stages it again). It runs under c.ops.
func (m *Manager) dropAdapter(c *Component) {
	if c.deleting.Load() {
		return // deleteComponent removes it
	}
	m.deleteAdapter(c)
	m.saveComponent(c, func(r *Record) { r.AdapterSource = "" })
}

// adapterBody is the register request of the adapter API.
type adapterBody struct {
	Name string `json:"name"`
	Src  string `json:"src"`
}

// registerAdapter is POST /adapters on one container.
func (m *Manager) registerAdapter(ct pipeline.Container, name, src string) error {
	body, _ := json.Marshal(adapterBody{Name: name, Src: src})
	return m.adapterCall(ct, http.MethodPost, "/adapters", body)
}

// unregisterAdapter is DELETE /adapters/{name} on one container; an
// adapter the container does not know (404) is gone already.
func (m *Manager) unregisterAdapter(ct pipeline.Container, name string) error {
	err := m.adapterCall(ct, http.MethodDelete, "/adapters/"+url.PathEscape(name), nil)
	var st *adapterStatusError
	if errors.As(err, &st) && st.status == http.StatusNotFound {
		return nil
	}
	return err
}

// adapterStatusError is a container's non-2xx answer to an adapter call.
type adapterStatusError struct {
	container string
	status    int
	body      string
}

func (e *adapterStatusError) Error() string {
	msg := strings.TrimSpace(e.body)
	var j struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal([]byte(msg), &j) == nil && (j.Error != "" || j.Message != "") {
		msg = j.Error + j.Message
	}
	return fmt.Sprintf("container %s answered %d: %s", e.container, e.status, apierr.Truncate(msg, 512))
}

func (m *Manager) adapterCall(ct pipeline.Container, method, path string, body []byte) error {
	timeout := m.timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(m.ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, ct.BaseURL()+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := adapterClient.Do(req)
	if err != nil {
		return fmt.Errorf("container %s: %w", ct.Hostname(), err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return &adapterStatusError{container: ct.Hostname(), status: resp.StatusCode, body: string(b)}
	}
	return nil
}

// adapterClient calls containers' adapter API: no proxy (containers are
// on this machine's networks), no redirects.
var adapterClient = &http.Client{
	Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second},
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
}

// deleteAdapter unregisters the adapter from its base's copies and removes
// its staged files; it runs under c.ops before the record goes.
func (m *Manager) deleteAdapter(c *Component) {
	rec := c.Record()
	if base := m.Get(rec.Spec.BaseInferenceComponentName); base != nil {
		for _, ct := range base.copyContainers() {
			if err := m.unregisterAdapter(ct, rec.Name); err != nil {
				m.log.Warn().Err(err).Str("inference_component", rec.Name).Msg("unregistering the adapter")
			}
		}
	}
	if store := m.adapters; store != nil && rec.AdapterSource != "" {
		if err := store.RemoveAdapter(rec.EndpointName, rec.Spec.BaseInferenceComponentName, rec.Name); err != nil {
			m.log.Warn().Err(err).Str("inference_component", rec.Name).Msg("removing the adapter's files")
		}
	}
}

// refuseBaseDeletion refuses to delete a component that adapters still
// name (mce's rule: SageMaker's is not documented): they would be left
// with nothing to serve them.
func (m *Manager) refuseBaseDeletion(c *Component) error {
	var names []string
	for _, a := range m.adaptersOf(c) {
		if !a.deleting.Load() {
			names = append(names, a.name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return apierr.ValidationException("Cannot delete inference component %q: it is the base of the adapter inference components %s; delete them first.",
		c.Record().ARN, strings.Join(names, ", "))
}

// adapterRoute is the route of an invocation of the adapter of record rec:
// its base's copies.
func (m *Manager) adapterRoute(rec Record) (*pipeline.Route, *apierr.Error) {
	base := m.Get(rec.Spec.BaseInferenceComponentName)
	if base == nil || base.deleting.Load() {
		return nil, apierr.Validation("Inference Component %s is an adapter of inference component %s, which no longer exists.", rec.Name, rec.Spec.BaseInferenceComponentName)
	}
	// Updating with an adapter registered before (a restart, a new
	// artifact on its way) serves with what the copies hold.
	serving := rec.Status == spec.StatusInService || (rec.Status == spec.StatusUpdating && rec.AdapterSource != "" && rec.FailureReason == "")
	if !serving {
		why := ""
		if rec.FailureReason != "" {
			why = " " + rec.FailureReason
		}
		return nil, apierr.Validation("Adapter inference component %s is %s and cannot take calls.%s", rec.Name, rec.Status, why)
	}
	r := base.route.Load()
	if r == nil || base.CurrentCopies() == 0 {
		return nil, apierr.Validation("Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress (if configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API.")
	}
	return r, nil
}
