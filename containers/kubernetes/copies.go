package kubernetes

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/mce-run/mce/containers"
)

// Inference-component copies on a cluster: the scheduler places each copy
// (a pod with its CPU, memory and nvidia.com/gpu requests), so the engine,
// a containers.CopyPlacer, places every copy where its launch decides
// (containers.LaunchPlacer) and checks a new specification against the
// nodes (CopyFits). An instance of the variant is a node: the copies of all
// components on a variant occupy at most CopyInstances nodes (its
// InitialInstanceCount, or ManagedInstanceScaling's MaxInstanceCount).
// Once they occupy that many, a new copy's pod may go only to those nodes
// (a required node affinity on their names); while they occupy fewer, the
// scheduler may open another, and copies are scheduled one at a time so
// that two copies cannot open two nodes where one was left. A copy the
// scheduler finds no room for fails its launch at once with an
// *containers.UnschedulableError (its pod is deleted): the component
// reports it, and its other copies keep serving.

var _ containers.CopyPlacer = (*Engine)(nil)

// PlaceCopies implements containers.CopyPlacer: every copy is placed where
// the scheduler puts its pod (instance -1).
func (e *Engine) PlaceCopies(ctx context.Context, req containers.CopyRequest) ([]containers.CopyPlace, string, error) {
	return containers.LaunchPlacer{}.PlaceCopies(ctx, req)
}

// KeepsCopy implements containers.CopyPlacer: whatever a record says, the
// copy's pod is where the scheduler put it (Adopt finds it or not).
func (e *Engine) KeepsCopy(v containers.CopyVariant, p containers.CopyPlace) bool {
	return containers.LaunchPlacer{}.KeepsCopy(v, p)
}

// NodeNameField is the node field copies' node affinity selects on.
const NodeNameField = "metadata.name"

// copyBound is the instance bound of a copy's plan; 0 for an endpoint's own
// variants.
func copyBound(plan containers.EndpointPlan) (containers.VariantPlan, int) {
	if len(plan.Variants) != 1 || plan.Variants[0].CopyInstances <= 0 {
		return containers.VariantPlan{}, 0
	}
	return plan.Variants[0], plan.Variants[0].CopyInstances
}

// copyNodes returns the nodes the variant's copies run on when they already
// occupy bound nodes (the new copy must go to one of them). Otherwise it
// returns none (the scheduler may choose any node) and holds the engine's
// placing lock until release is called, once the new copy's pod is
// scheduled, so that the next copy sees where it went.
func (e *Engine) copyNodes(endpoint, variant string, bound int) (nodes []string, release func()) {
	e.placing.Lock()
	sel := labels.SelectorFromSet(labels.Set{LabelManaged: "true", LabelInstance: LabelValue(e.opts.Manifest.Instance),
		LabelEndpoint: LabelValue(endpoint), LabelVariant: LabelValue(variant)})
	pods, _ := e.pods.Pods(e.ns).List(sel)
	seen := map[string]bool{}
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" && !seen[p.Spec.NodeName] {
			seen[p.Spec.NodeName] = true
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	if len(nodes) >= bound {
		e.placing.Unlock()
		sort.Strings(nodes)
		return nodes, func() {}
	}
	var once sync.Once
	return nil, func() { once.Do(e.placing.Unlock) }
}

// onNodes confines a pod to the named nodes.
func onNodes(nodes []string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: NodeNameField, Operator: corev1.NodeSelectorOpIn, Values: slices.Clone(nodes)}},
		}}},
	}}
}

// waitScheduled waits (at most a minute) until a pod matching sel is bound
// to a node or the scheduler has said it cannot be.
func (e *Engine) waitScheduled(ctx context.Context, sel labels.Selector) {
	deadline := time.After(time.Minute)
	for {
		ch := e.wait()
		pods, _ := e.pods.Pods(e.ns).List(sel)
		for _, p := range pods {
			if p.Spec.NodeName != "" || unschedulableCondition(p) != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline:
			return
		case <-ch:
		case <-time.After(time.Second):
		}
	}
}

func unschedulableCondition(p *corev1.Pod) *corev1.PodCondition {
	for i, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

var insufficient = regexp.MustCompile(`Insufficient ([A-Za-z0-9./_-]*[A-Za-z0-9])`)

// resourceWords names a resource as the component's FailureReason does.
func resourceWords(name string) string {
	switch corev1.ResourceName(name) {
	case corev1.ResourceCPU:
		return "CPU cores"
	case corev1.ResourceMemory:
		return "memory"
	case ResourceGPU:
		return "accelerator devices"
	}
	if strings.HasPrefix(name, resourceMIGPrefix) {
		return "accelerator partitions"
	}
	return name
}

// Unschedulable is the scheduler's verdict on a copy's pod, in the
// component's words; nil while the scheduler has not refused it. v is the
// copy's plan (its CopyInstances is the variant's instance bound).
func Unschedulable(p *corev1.Pod, v containers.VariantPlan) *containers.UnschedulableError {
	c := unschedulableCondition(p)
	if c == nil {
		return nil
	}
	// "0/1 nodes are available: 1 Insufficient nvidia.com/gpu." and what
	// came after the filters (preemption, claims) that says nothing more.
	said := strings.TrimSpace(c.Message)
	if i := strings.Index(said, ". "); i > 0 {
		said = said[:i+1]
	}
	var short []string
	for _, m := range insufficient.FindAllStringSubmatch(said, -1) {
		if w := resourceWords(m[1]); !slices.Contains(short, w) {
			short = append(short, w)
		}
	}
	what := "room"
	if len(short) > 0 {
		what = strings.Join(short, ", ")
	}
	bound := "at most " + strconv.Itoa(v.CopyInstances) + ": an instance is a node"
	// "didn't match Pod's node affinity/selector" (older schedulers) or
	// "didn't satisfy plugin(s) [NodeAffinity]" (1.35).
	if p.Spec.Affinity != nil && strings.Contains(strings.ToLower(strings.ReplaceAll(said, " ", "")), "nodeaffinity") {
		// Nodes with room were left out: the copies occupy all they may.
		short = append(short, "instances")
		bound += ", and they occupy that many already"
	}
	return &containers.UnschedulableError{Short: short, Message: fmt.Sprintf(
		"not enough %s for one more copy (%s) on the nodes the copies of variant %s may occupy (%s); the Kubernetes scheduler: %s",
		what, podAsks(p), v.Name, bound, said)}
}

// podAsks lists what a pod's containers ask for: "nvidia.com/gpu: 1, cpu: 500m, memory: 256Mi".
func podAsks(p *corev1.Pod) string {
	sum := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		for k, q := range c.Resources.Requests {
			t := sum[k]
			t.Add(q)
			sum[k] = t
		}
		for k, q := range c.Resources.Limits { // extended resources need only limits
			if _, ok := c.Resources.Requests[k]; !ok {
				t := sum[k]
				t.Add(q)
				sum[k] = t
			}
		}
	}
	var parts []string
	order := []corev1.ResourceName{ResourceGPU}
	for k := range sum {
		if strings.HasPrefix(string(k), resourceMIGPrefix) {
			order = append(order, k)
		}
	}
	slices.Sort(order[1:])
	for _, k := range append(order, corev1.ResourceCPU, corev1.ResourceMemory) {
		if q, ok := sum[k]; ok {
			parts = append(parts, string(k)+": "+q.String())
		}
	}
	if len(parts) == 0 {
		return "it asks for no resources"
	}
	return "it asks for " + strings.Join(parts, ", ")
}

// CopyFits implements containers.CopyPlacer: what no node of the cluster
// could offer one copy even when empty, from the nodes' allocatable
// resources. Where mce may not list nodes (the namespaced Role of
// examples/kubernetes grants no cluster-wide read), it cannot tell and says
// nothing: the scheduler's verdict at launch is then the only one.
func (e *Engine) CopyFits(ctx context.Context, _ containers.CopyVariant, n containers.CopyNeeds) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nodes, err := e.client.CoreV1().Nodes().List(cctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("listing the cluster's nodes: %w", err)
	}
	need := copyRequests(n)
	best := corev1.ResourceList{}
	schedulable := 0
	for _, node := range nodes.Items {
		if node.Spec.Unschedulable {
			continue
		}
		schedulable++
		fits := true
		for k, q := range need {
			a := node.Status.Allocatable[k]
			if b, ok := best[k]; !ok || a.Cmp(b) > 0 {
				best[k] = a.DeepCopy()
			}
			if a.Cmp(q) < 0 {
				fits = false
			}
		}
		if fits {
			return "", nil
		}
	}
	if schedulable == 0 {
		return "", nil // no node yet: nothing to say
	}
	var short []string
	for _, k := range []corev1.ResourceName{ResourceGPU, ResourcePartition(n.Partition), corev1.ResourceCPU, corev1.ResourceMemory} {
		q, ok := need[k]
		if !ok {
			continue
		}
		if b := best[k]; b.Cmp(q) < 0 {
			short = append(short, fmt.Sprintf("%s (a copy asks for %s: %s, a node has at most %s allocatable)", resourceWords(string(k)), k, q.String(), b.String()))
		}
	}
	if len(short) == 0 {
		return "CPU cores, memory and accelerator devices together (each is allocatable on some node, but no node has them all)", nil
	}
	return strings.Join(short, ", "), nil
}

// copyRequests is what the pod of a copy with n requests.
func copyRequests(n containers.CopyNeeds) corev1.ResourceList {
	r := corev1.ResourceList{}
	if n.GPUs > 0 {
		r[ResourceGPU] = *resource.NewQuantity(int64(n.GPUs), resource.DecimalSI)
	}
	if n.Partition != "" {
		r[ResourcePartition(n.Partition)] = *resource.NewQuantity(1, resource.DecimalSI)
	}
	if n.CPUs > 0 {
		r[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(math.Ceil(n.CPUs*1000)), resource.DecimalSI)
	}
	if n.MemoryMiB > 0 {
		r[corev1.ResourceMemory] = *resource.NewQuantity(n.MemoryMiB<<20, resource.BinarySI)
	}
	return r
}
