package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/pipeline"
)

// Options configure an [Engine].
type Options struct {
	// Client talks to the cluster.
	Client clientset.Interface
	// Manifest are the settings of generated objects; Manifest.Instance and
	// Manifest.Namespace are required.
	Manifest ManifestOptions
	// Logger logs the engine's progress.
	Logger zerolog.Logger
	// LaunchSlack is added to a variant's startup window (pulling images
	// and fetching model data come before it); 0 means 5 minutes.
	LaunchSlack time.Duration
	// MultiModel configures the model managers of MultiModel containers.
	MultiModel MultiModelOptions
	// PodHTTP sends mce's own calls to pods: to the model cache agents and
	// the load and unload calls of MultiModel containers. Nil means a
	// client with keep-alives; every call is bounded by a context.
	PodHTTP *http.Client
}

// Engine runs endpoints on a Kubernetes cluster: a variant is a Deployment,
// an instance a pod. It implements [containers.Engine].
type Engine struct {
	opts   Options
	client clientset.Interface
	ns     string
	sel    string // the label selector of this instance's objects
	log    zerolog.Logger

	podHTTP *http.Client

	factory informers.SharedInformerFactory
	pods    corelisters.PodLister
	stop    chan struct{}

	mu       sync.Mutex
	launched map[genKey]*Launched
	changed  chan struct{} // closed and replaced on every pod event
	observer func(endpoint, variant, container string) mme.Observer

	// placing serializes the scheduling of inference-component copies that
	// may open a node (copies.go).
	placing sync.Mutex

	detached atomic.Bool // set by Detach: Close and Reconcile leave what runs
}

type genKey struct {
	endpoint string // label value
	gen      int
}

var _ containers.Engine = (*Engine)(nil)

// New starts watching the instance's pods and returns once the watch has
// its first listing.
func New(ctx context.Context, opts Options) (*Engine, error) {
	if opts.Client == nil || opts.Manifest.Namespace == "" || opts.Manifest.Instance == "" {
		return nil, errors.New("kubernetes engine: a client, a namespace and an instance name are required")
	}
	if opts.LaunchSlack <= 0 {
		opts.LaunchSlack = 5 * time.Minute
	}
	if opts.PodHTTP == nil {
		opts.PodHTTP = defaultPodHTTP()
	}
	e := &Engine{opts: opts, client: opts.Client, ns: opts.Manifest.Namespace, log: opts.Logger, podHTTP: opts.PodHTTP,
		sel:      labels.SelectorFromSet(labels.Set{LabelManaged: "true", LabelInstance: LabelValue(opts.Manifest.Instance)}).String(),
		launched: map[genKey]*Launched{}, changed: make(chan struct{}), stop: make(chan struct{})}
	e.factory = informers.NewSharedInformerFactoryWithOptions(opts.Client, 0, informers.WithNamespace(e.ns),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = e.sel }))
	inf := e.factory.Core().V1().Pods()
	e.pods = inf.Lister()
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { e.podsChanged() },
		UpdateFunc: func(any, any) { e.podsChanged() },
		DeleteFunc: func(any) { e.podsChanged() },
	}); err != nil {
		return nil, err
	}
	e.factory.Start(e.stop)
	for typ, ok := range e.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			e.Close()
			return nil, fmt.Errorf("kubernetes engine: watching %v in namespace %q did not start: %w", typ, e.ns, context.Cause(ctx))
		}
	}
	return e, nil
}

// Close stops watching; what runs keeps running (a restarted mce adopts it).
func (e *Engine) Close() {
	select {
	case <-e.stop:
	default:
		close(e.stop)
		e.factory.Shutdown()
	}
}

// Detach makes the engine leave what runs on the cluster from now on:
// Launched.Close only stops routing to it and Reconcile deletes nothing.
// mce serve calls it before it shuts down (--on-exit keep, the default on
// this engine), so that the endpoints' pods outlive mce's own pod (a rolling
// update, an eviction) and the next mce adopts them.
func (e *Engine) Detach() { e.detached.Store(true) }

// podsChanged moves every launched generation's copies onto the pods that
// run now, and wakes whoever waits for pods.
func (e *Engine) podsChanged() {
	e.mu.Lock()
	ls := make([]*Launched, 0, len(e.launched))
	for _, l := range e.launched {
		ls = append(ls, l)
	}
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
	for _, l := range ls {
		l.assign()
	}
}

// wait returns a channel closed at the next pod event.
func (e *Engine) wait() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}

// Launch implements containers.Engine: the owner ConfigMap, then a Deployment
// per variant, then it waits for every instance to be Ready.
func (e *Engine) Launch(ctx context.Context, plan containers.EndpointPlan, gen int) (containers.Launched, error) {
	if err := Check(plan); err != nil {
		return nil, err
	}
	mo := e.opts.Manifest
	hash, err := PlanHash(mo, plan, gen)
	if err != nil {
		return nil, err
	}
	owner, err := e.client.CoreV1().ConfigMaps(e.ns).Create(ctx, OwnerConfigMap(mo, plan, gen, hash), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating the endpoint's objects in namespace %q: %w", e.ns, err)
	}
	l := e.newLaunched(plan, gen, owner)
	release := func() {}
	defer func() { release() }()
	fail := func(err error) (containers.Launched, error) {
		release()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if cerr := l.Close(cctx); cerr != nil {
			e.log.Warn().Err(cerr).Str("endpoint", plan.Name).Msg("removing a failed launch")
		}
		return nil, err
	}
	for _, v := range plan.Variants {
		d, err := Deployment(mo, plan, gen, v, owner)
		if err != nil {
			return fail(err)
		}
		if _, bound := copyBound(plan); bound > 0 {
			// An inference-component copy: within the variant's nodes.
			var nodes []string
			nodes, release = e.copyNodes(plan.Name, v.Name, bound)
			if len(nodes) > 0 {
				d.Spec.Template.Spec.Affinity = onNodes(nodes)
			}
		}
		if _, err := e.client.AppsV1().Deployments(e.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return fail(fmt.Errorf("variant %q: creating its Deployment: %w", v.Name, err))
		}
		l.setWant(v.Name, v.InstanceCount)
	}
	if _, bound := copyBound(plan); bound > 0 {
		e.waitScheduled(ctx, l.variants[plan.Variants[0].Name].selector)
		release()
	}
	for _, v := range plan.Variants {
		if err := l.waitReady(ctx, v, v.InstanceCount); err != nil {
			return fail(err)
		}
	}
	return l, nil
}

// Adopt implements containers.Engine: the generation's owner and Deployments
// must exist with the plan's fingerprints, and their pods become Ready.
func (e *Engine) Adopt(ctx context.Context, plan containers.EndpointPlan, gen int) (containers.Launched, error) {
	if err := Check(plan); err != nil {
		return nil, err
	}
	mo := e.opts.Manifest
	hash, err := PlanHash(mo, plan, gen)
	if err != nil {
		return nil, err
	}
	owner, err := e.client.CoreV1().ConfigMaps(e.ns).Get(ctx, ownerName(mo.Instance, plan.Name, gen), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("nothing to adopt: %w", err)
	}
	if owner.DeletionTimestamp != nil || owner.Annotations[AnnotationSpec] != hash {
		return nil, errors.New("nothing to adopt: what runs was made from another definition")
	}
	l := e.newLaunched(plan, gen, owner)
	fail := func(err error) (containers.Launched, error) {
		e.forget(l)
		return nil, err
	}
	for _, v := range plan.Variants {
		want, err := Deployment(mo, plan, gen, v, nil)
		if err != nil {
			return fail(err)
		}
		d, err := e.client.AppsV1().Deployments(e.ns).Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return fail(fmt.Errorf("nothing to adopt for variant %q: %w", v.Name, err))
		}
		if err := adoptable(d, want, owner); err != nil {
			return fail(fmt.Errorf("variant %q: %w", v.Name, err))
		}
		n := v.InstanceCount
		if d.Spec.Replicas != nil {
			n = int(*d.Spec.Replicas)
		}
		l.setWant(v.Name, n)
	}
	for _, v := range plan.Variants {
		hc := v
		if hc.HealthCheckTimeout <= 0 || hc.HealthCheckTimeout > time.Minute {
			hc.HealthCheckTimeout = time.Minute
		}
		if err := l.waitReady(ctx, hc, l.wantOf(v.Name)); err != nil {
			return fail(err)
		}
	}
	return l, nil
}

// adoptable checks that a running Deployment is the one the plan makes.
func adoptable(d, want *appsv1.Deployment, owner *corev1.ConfigMap) error {
	switch {
	case d.DeletionTimestamp != nil:
		return errors.New("its Deployment is being deleted")
	case d.Annotations[AnnotationSpec] != want.Annotations[AnnotationSpec]:
		return errors.New("its Deployment was made from another definition")
	}
	for _, r := range d.OwnerReferences {
		if r.UID == owner.UID {
			return nil
		}
	}
	return errors.New("its Deployment belongs to no owner of this generation")
}

// Reconcile implements containers.Engine: it deletes the owner ConfigMaps (and
// so everything they own) and Deployments of this instance that no Launched
// owns.
func (e *Engine) Reconcile(ctx context.Context) error {
	if e.detached.Load() {
		return nil
	}
	cms, err := e.client.CoreV1().ConfigMaps(e.ns).List(ctx, metav1.ListOptions{LabelSelector: e.sel})
	if err != nil {
		return err
	}
	live := map[types.UID]bool{}
	e.mu.Lock()
	for _, l := range e.launched {
		live[l.owner.UID] = true
	}
	e.mu.Unlock()
	bg := metav1.DeletePropagationBackground
	var errs []error
	for _, cm := range cms.Items {
		if live[cm.UID] {
			continue
		}
		e.log.Info().Str("configmap", cm.Name).Msg("removing an endpoint generation no endpoint owns")
		err := e.client.CoreV1().ConfigMaps(e.ns).Delete(ctx, cm.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	ds, err := e.client.AppsV1().Deployments(e.ns).List(ctx, metav1.ListOptions{LabelSelector: e.sel})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, d := range ds.Items {
		owned := false
		for _, r := range d.OwnerReferences {
			owned = owned || live[r.UID]
		}
		if owned {
			continue
		}
		err := e.client.AppsV1().Deployments(e.ns).Delete(ctx, d.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (e *Engine) newLaunched(plan containers.EndpointPlan, gen int, owner *corev1.ConfigMap) *Launched {
	l := &Launched{e: e, plan: plan, gen: gen, owner: owner, variants: map[string]*variantCopies{}}
	for _, v := range plan.Variants {
		vc := &variantCopies{plan: v, deployment: deploymentName(e.opts.Manifest.Instance, plan.Name, gen, v.Name),
			selector: labels.SelectorFromSet(Labels(e.opts.Manifest.Instance, plan.Name, gen, v.Name)), multiModel: -1,
			models: map[types.UID]*podModels{}}
		for i, c := range v.Containers {
			if c.Mode == "MultiModel" {
				vc.multiModel, vc.multiModelPort = i, containers.ContainerPort(i)
			}
		}
		l.variants[v.Name] = vc
	}
	e.mu.Lock()
	e.launched[genKey{plan.Name, gen}] = l
	e.mu.Unlock()
	return l
}

func (e *Engine) forget(l *Launched) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.launched[genKey{l.plan.Name, l.gen}] == l {
		delete(e.launched, genKey{l.plan.Name, l.gen})
	}
}

// Launched is one generation of an endpoint on the cluster. It implements
// [containers.Launched].
type Launched struct {
	e     *Engine
	plan  containers.EndpointPlan
	gen   int
	owner *corev1.ConfigMap

	mu       sync.Mutex
	variants map[string]*variantCopies
}

var _ containers.Launched = (*Launched)(nil)

// variantCopies are a variant's copies: slots that follow the pods.
type variantCopies struct {
	plan       containers.VariantPlan
	deployment string
	selector   labels.Selector
	want       int
	slots      []*slot
	// multiModel is the index of the MultiModel container, -1 if none.
	multiModel     int
	multiModelPort int
	models         map[types.UID]*podModels // by pod, while it runs
}

func (l *Launched) setWant(variant string, n int) {
	l.mu.Lock()
	vc := l.variants[variant]
	vc.want = n
	for len(vc.slots) < n {
		s := &slot{}
		for i, c := range vc.plan.Containers {
			s.containers = append(s.containers, &Container{slot: s, index: i, hostname: c.Hostname,
				port: strconv.Itoa(containers.ContainerPort(i))})
		}
		vc.slots = append(vc.slots, s)
	}
	vc.slots = vc.slots[:n]
	l.mu.Unlock()
	l.assign()
}

func (l *Launched) wantOf(variant string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.variants[variant].want
}

// assign binds each slot to a Ready pod, keeping the pods slots already
// have while they stay, so that routing follows pods appearing and
// disappearing.
func (l *Launched) assign() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, vc := range l.variants {
		pods, err := l.e.pods.Pods(l.e.ns).List(vc.selector)
		if err != nil {
			continue
		}
		byUID := map[types.UID]*corev1.Pod{}
		var free []*corev1.Pod
		sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
		for _, p := range pods {
			if p.DeletionTimestamp == nil && p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
				byUID[p.UID] = p
			}
		}
		taken := map[types.UID]bool{}
		for _, s := range vc.slots {
			cur := s.pod.Load()
			if cur == nil {
				continue
			}
			if p, ok := byUID[cur.uid]; ok && podReady(p) {
				s.pod.Store(snapshot(p, vc.plan))
				taken[cur.uid] = true
				continue
			}
			s.pod.Store(nil)
		}
		for _, p := range pods {
			if byUID[p.UID] != nil && !taken[p.UID] && podReady(p) {
				free = append(free, p)
			}
		}
		for _, s := range vc.slots {
			if s.pod.Load() == nil && len(free) > 0 {
				s.pod.Store(snapshot(free[0], vc.plan))
				free = free[1:]
			}
			l.bindModels(vc, s)
		}
		vc.dropModels(func(uid types.UID) bool { return byUID[uid] != nil })
	}
}

// readyCopies counts the variant's slots bound to a Ready pod.
func (l *Launched) readyCopies(variant string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.variants[variant].slots {
		if s.pod.Load() != nil {
			n++
		}
	}
	return n
}

// Copies implements containers.Launched: one copy per instance; a copy's
// containers answer at their pod's IP while the pod is Ready.
func (l *Launched) Copies(variant string) [][]pipeline.Container {
	l.mu.Lock()
	defer l.mu.Unlock()
	vc := l.variants[variant]
	if vc == nil {
		return nil
	}
	out := make([][]pipeline.Container, len(vc.slots))
	for i, s := range vc.slots {
		for _, c := range s.containers {
			if c.index == vc.multiModel {
				out[i] = append(out[i], multiModelContainer{c})
				continue
			}
			out[i] = append(out[i], c)
		}
	}
	return out
}

// Scale implements containers.Launched: it sets the Deployment's replicas and
// waits until that many instances are Ready (or, scaling in, until the
// removed pods are gone).
func (l *Launched) Scale(ctx context.Context, variant string, n int) error {
	l.mu.Lock()
	vc := l.variants[variant]
	l.mu.Unlock()
	if vc == nil {
		return fmt.Errorf("variant %q is not part of this endpoint", variant)
	}
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
	if _, err := l.e.client.AppsV1().Deployments(l.e.ns).Patch(ctx, vc.deployment, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("variant %q: scaling to %d instances: %w", variant, n, err)
	}
	prev := l.wantOf(variant)
	l.setWant(variant, n)
	if err := l.waitReady(ctx, vc.plan, n); err != nil {
		return err
	}
	if n >= prev {
		return nil
	}
	return l.waitPods(ctx, vc.selector, n)
}

// Close implements containers.Launched: it deletes the owner ConfigMap and the
// Deployments in the foreground and waits until their pods are gone. After
// Detach it only forgets them.
func (l *Launched) Close(ctx context.Context) error {
	l.e.forget(l)
	l.mu.Lock()
	for _, vc := range l.variants {
		for _, s := range vc.slots {
			s.models.Store(nil)
		}
		vc.dropModels(func(types.UID) bool { return false })
	}
	l.mu.Unlock()
	if l.e.detached.Load() {
		return nil
	}
	fg := metav1.DeletePropagationForeground
	del := metav1.DeleteOptions{PropagationPolicy: &fg}
	var errs []error
	if err := l.e.client.CoreV1().ConfigMaps(l.e.ns).Delete(ctx, l.owner.Name, del); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	// The Deployments go too even where no garbage collector runs.
	for _, vc := range l.variants {
		if err := l.e.client.AppsV1().Deployments(l.e.ns).Delete(ctx, vc.deployment, del); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return l.waitPods(ctx, labels.SelectorFromSet(Labels(l.e.opts.Manifest.Instance, l.plan.Name, l.gen, "")), 0)
}

// waitPods waits until at most n pods match sel.
func (l *Launched) waitPods(ctx context.Context, sel labels.Selector, n int) error {
	for {
		ch := l.e.wait()
		pods, err := l.e.pods.Pods(l.e.ns).List(sel)
		if err != nil {
			return err
		}
		if len(pods) <= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d pods of endpoint %q are still running: %w", len(pods)-n, l.plan.Name, context.Cause(ctx))
		case <-ch:
		case <-time.After(2 * time.Second):
		}
	}
}

// waitReady waits until n instances of the variant are Ready, failing
// early with SageMaker's words when a pod cannot become Ready.
func (l *Launched) waitReady(ctx context.Context, v containers.VariantPlan, n int) error {
	health := v.HealthCheckTimeout
	if health <= 0 {
		health = containers.DefaultHealthCheckTimeout
	}
	deadline := time.Now().Add(health + l.e.opts.LaunchSlack)
	vc := l.variants[v.Name]
	for {
		ch := l.e.wait()
		l.assign()
		ready := l.readyCopies(v.Name)
		if ready >= n {
			return nil
		}
		pods, err := l.e.pods.Pods(l.e.ns).List(vc.selector)
		if err != nil {
			return err
		}
		for _, p := range pods {
			if v.CopyInstances > 0 {
				// A copy the scheduler has no room for fails now: the
				// component reports it (nothing would free room by itself).
				if u := Unschedulable(p, v); u != nil {
					return &LaunchError{Variant: v.Name, Reason: u.Message, Err: u}
				}
			}
			if reason := PodFailure(p, v); reason != "" {
				// What the kubelet's probes said, for a container it stopped.
				if r := podFailure(p, v, l.e.probeNotes(ctx, p)); r != "" {
					reason = r
				}
				return &LaunchError{Variant: v.Name, Reason: reason}
			}
		}
		if time.Now().After(deadline) {
			return &LaunchError{Variant: v.Name, Reason: l.e.timeoutReason(ctx, vc, n-ready, n, health)}
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ch:
		case <-time.After(time.Second):
		}
	}
}

// LaunchError is a variant that could not start; Reason is its
// FailureReason.
type LaunchError struct {
	Variant string
	Reason  string
	// Err is the cause where it has a type of its own (an
	// *containers.UnschedulableError), else nil.
	Err error
}

func (e *LaunchError) Error() string { return fmt.Sprintf("variant %q: %s", e.Variant, e.Reason) }

func (e *LaunchError) Unwrap() error { return e.Err }

// timeoutReason says why instances were not Ready in time: the latest
// warning events of the variant's objects, or the pods' states.
func (e *Engine) timeoutReason(ctx context.Context, vc *variantCopies, notReady, n int, health time.Duration) string {
	msg := fmt.Sprintf("%d of %d instances did not become Ready within the startup window (%s, plus %s for pulling images and fetching model data)",
		notReady, n, health, e.opts.LaunchSlack)
	evs, err := e.client.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return msg
	}
	var last *corev1.Event
	for i := range evs.Items {
		ev := &evs.Items[i]
		if ev.Type != corev1.EventTypeWarning || !strings.HasPrefix(ev.InvolvedObject.Name, vc.deployment) {
			continue
		}
		if last == nil || ev.LastTimestamp.After(last.LastTimestamp.Time) {
			last = ev
		}
	}
	if last != nil {
		msg += "; last warning: " + last.Reason + ": " + last.Message
	}
	return msg
}
