package kubernetes

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mce-run/mce/containers"
)

// copyPlan is what host launches for one copy of an inference component:
// one container with its resources, GPUs as a count, bound to instances.
func copyPlan(bound int) containers.EndpointPlan {
	return containers.EndpointPlan{Name: "shared", Mode: "Serial", Variants: []containers.VariantPlan{{
		Name: "AllTraffic", InstanceCount: 1, Weight: 1, HealthCheckTimeout: 60 * time.Second, CopyInstances: bound,
		Containers: []containers.ContainerPlan{{Hostname: "lm", Image: "mce-example/probe:latest", Mode: "SingleModel",
			Resources: containers.Resources{Cpus: 0.5, MemoryMiB: 512}, MemoryRequestMiB: 256, GPUs: "1"}},
	}}}
}

func TestCopyManifestResources(t *testing.T) {
	d, err := Deployment(testOptions(), copyPlan(1), 4, copyPlan(1).Variants[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	r := d.Spec.Template.Spec.Containers[0].Resources
	for _, c := range []struct {
		list corev1.ResourceList
		name corev1.ResourceName
		want string
	}{
		{r.Requests, corev1.ResourceCPU, "500m"}, {r.Limits, corev1.ResourceCPU, "500m"},
		{r.Requests, corev1.ResourceMemory, "256Mi"}, {r.Limits, corev1.ResourceMemory, "512Mi"},
		{r.Requests, ResourceGPU, "1"}, {r.Limits, ResourceGPU, "1"},
	} {
		q := c.list[c.name]
		if got := q.String(); got != c.want {
			t.Errorf("%s = %q, want %q (requests %v, limits %v)", c.name, got, c.want, r.Requests, r.Limits)
		}
	}
	// A copy on a MIG partition asks for one of its profile's resource
	// and no whole GPU.
	p := copyPlan(1)
	p.Variants[0].Containers[0].GPUs, p.Variants[0].Containers[0].Partition = "", "mig-3g.40gb"
	d, err = Deployment(testOptions(), p, 4, p.Variants[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	r = d.Spec.Template.Spec.Containers[0].Resources
	if q := r.Limits["nvidia.com/mig-3g.40gb"]; q.String() != "1" || r.Limits[ResourceGPU] != (resource.Quantity{}) {
		t.Errorf("a partition's limits %v", r.Limits)
	}
	// Without a maximum the minimum is request and limit.
	p = copyPlan(1)
	p.Variants[0].Containers[0].Resources.MemoryMiB, p.Variants[0].Containers[0].MemoryRequestMiB = 256, 0
	d, _ = Deployment(testOptions(), p, 4, p.Variants[0], nil)
	if q := d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]; q.String() != "256Mi" {
		t.Errorf("memory request without a maximum %s, want 256Mi", q.String())
	}
	// The node affinity a launch adds is no part of the definition.
	a, _ := fingerprint(d)
	d.Spec.Template.Spec.Affinity = onNodes([]string{"n1"})
	if b, _ := fingerprint(d); a != b {
		t.Error("the node affinity changes the Deployment's fingerprint: a restarted mce would not adopt the copy")
	}
}

func TestUnschedulable(t *testing.T) {
	v := copyPlan(2).Variants[0]
	d, _ := Deployment(testOptions(), copyPlan(2), 1, v, nil)
	pod := func(msg string) *corev1.Pod {
		ps := d.Spec.Template.Spec.DeepCopy()
		if strings.Contains(msg, "node affinity") || strings.Contains(msg, "NodeAffinity") {
			ps.Affinity = onNodes([]string{"n1", "n2"})
		}
		return &corev1.Pod{Spec: *ps, Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}}}}
	}
	for _, tc := range []struct {
		msg   string
		short []string
		want  string
	}{
		{"0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
			[]string{"accelerator devices"},
			"not enough accelerator devices for one more copy (it asks for nvidia.com/gpu: 1, cpu: 500m, memory: 256Mi) on the nodes the copies of variant AllTraffic may occupy (at most 2: an instance is a node); the Kubernetes scheduler: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu."},
		{"0/1 nodes are available: 1 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
			[]string{"accelerator devices"},
			"not enough accelerator devices for one more copy (it asks for nvidia.com/gpu: 1, cpu: 500m, memory: 256Mi) on the nodes the copies of variant AllTraffic may occupy (at most 2: an instance is a node); the Kubernetes scheduler: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu."},
		{"0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector.",
			[]string{"CPU cores", "memory", "instances"},
			"not enough CPU cores, memory for one more copy (it asks for nvidia.com/gpu: 1, cpu: 500m, memory: 256Mi) on the nodes the copies of variant AllTraffic may occupy (at most 2: an instance is a node, and they occupy that many already); the Kubernetes scheduler: 0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector."},
		{"0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't satisfy plugin(s) [NodeAffinity]. no new claims to deallocate, preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.",
			[]string{"accelerator devices", "instances"},
			"not enough accelerator devices for one more copy (it asks for nvidia.com/gpu: 1, cpu: 500m, memory: 256Mi) on the nodes the copies of variant AllTraffic may occupy (at most 2: an instance is a node, and they occupy that many already); the Kubernetes scheduler: 0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't satisfy plugin(s) [NodeAffinity]."},
		{"0/1 nodes are available: 1 node(s) had untolerated taint {k: v}.", nil,
			"not enough room for one more copy"},
	} {
		u := Unschedulable(pod(tc.msg), v)
		if u == nil {
			t.Fatalf("%s: not seen as unschedulable", tc.msg)
		}
		exact := strings.HasSuffix(tc.want, ".") && u.Message != tc.want
		if strings.Join(u.Short, ",") != strings.Join(tc.short, ",") || !strings.HasPrefix(u.Message, tc.want) || exact {
			t.Errorf("%s:\n short %q message %q\nwant %q %q…", tc.msg, u.Short, u.Message, tc.short, tc.want)
		}
	}
	scheduled := pod("")
	scheduled.Status.Conditions[0].Status = corev1.ConditionTrue
	if u := Unschedulable(scheduled, v); u != nil {
		t.Errorf("a scheduled pod: %v", u)
	}
}

// TestCopyLaunchUnschedulable: the scheduler's refusal fails the copy's
// launch at once with an UnschedulableError, and its objects are deleted.
func TestCopyLaunchUnschedulable(t *testing.T) {
	client := newClient(true)
	e := newEngine(t, client)
	c := &cluster{t: t, client: client}
	done := launchAsync(e, copyPlan(1), 7)
	d := c.waitDeployment(deploymentName("default", "shared", 7, "AllTraffic"))
	c.pod(d, func(s *corev1.PodStatus) {
		s.Phase, s.PodIP = corev1.PodPending, ""
		s.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}}
		s.ContainerStatuses = nil
	})
	var ue *containers.UnschedulableError
	select {
	case err := <-done:
		if !errors.As(err, &ue) || ue.Short[0] != "accelerator devices" {
			t.Fatalf("Launch: %v, want an UnschedulableError", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Launch of an unschedulable copy did not end")
	}
	if ds, _ := client.AppsV1().Deployments("ml").List(context.Background(), metav1.ListOptions{}); len(ds.Items) != 0 {
		t.Errorf("the unschedulable copy's Deployment is left")
	}
}

// TestCopiesStayWithinTheirInstances: once the variant's copies occupy as
// many nodes as it has instances, a new copy may go only to those nodes;
// below that, the scheduler chooses freely.
func TestCopiesStayWithinTheirInstances(t *testing.T) {
	client := newClient(false)
	e := newEngine(t, client)
	c := &cluster{t: t, client: client}
	launch := func(bound, gen int, node string) *corev1.PodSpec {
		t.Helper()
		done := launchAsync(e, copyPlan(bound), gen)
		d := c.waitDeployment(deploymentName("default", "shared", gen, "AllTraffic"))
		spec := d.Spec.Template.Spec.DeepCopy()
		d.Spec.Template.Spec.NodeName = node // the scheduler's choice
		c.pod(d, nil)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return spec
	}
	if s := launch(2, 1, "n1"); s.Affinity != nil {
		t.Errorf("first copy confined: %+v", s.Affinity)
	}
	if s := launch(2, 2, "n2"); s.Affinity != nil {
		t.Errorf("second copy (one node of two used) confined: %+v", s.Affinity)
	}
	s := launch(2, 3, "n2")
	if s.Affinity == nil {
		t.Fatal("third copy, with both instances occupied, may go anywhere")
	}
	req := s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0]
	if req.Key != NodeNameField || req.Operator != corev1.NodeSelectorOpIn || strings.Join(req.Values, ",") != "n1,n2" {
		t.Errorf("third copy's node affinity %+v, want metadata.name In [n1 n2]", req)
	}
}

// TestCopyFits: the pre-flight compares one copy with the nodes'
// allocatable resources, and says nothing where nodes may not be listed.
func TestCopyFits(t *testing.T) {
	client := newClient(false)
	node := func(name, cpu, mem, gpu string) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), ResourceGPU: resource.MustParse(gpu)}}}
		if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	node("small", "2", "4Gi", "2")
	node("big", "16", "64Gi", "0")
	// A GPU in MIG mode under the device plugin's mixed strategy: its
	// partitions by profile, no whole GPU.
	mig := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mig"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), "nvidia.com/mig-3g.40gb": resource.MustParse("2")}}}
	if _, err := client.CoreV1().Nodes().Create(context.Background(), mig, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, client)
	for _, tc := range []struct {
		n    containers.CopyNeeds
		want string
	}{
		{containers.CopyNeeds{CPUs: 2, MemoryMiB: 4096, GPUs: 2}, ""},
		{containers.CopyNeeds{CPUs: 8, MemoryMiB: 1024}, ""},
		{containers.CopyNeeds{CPUs: 1, GPUs: 3}, "accelerator devices (a copy asks for nvidia.com/gpu: 3, a node has at most 2 allocatable)"},
		{containers.CopyNeeds{CPUs: 32, MemoryMiB: 128 << 10}, "CPU cores (a copy asks for cpu: 32, a node has at most 16 allocatable), memory (a copy asks for memory: 128Gi, a node has at most 64Gi allocatable)"},
		{containers.CopyNeeds{CPUs: 4, GPUs: 1}, "CPU cores, memory and accelerator devices together (each is allocatable on some node, but no node has them all)"},
		{containers.CopyNeeds{CPUs: 4, Partition: "mig-3g.40gb"}, ""},
		{containers.CopyNeeds{CPUs: 1, Partition: "mig-1g.10gb"}, "accelerator partitions (a copy asks for nvidia.com/mig-1g.10gb: 1, a node has at most 0 allocatable)"},
	} {
		got, err := e.CopyFits(context.Background(), containers.CopyVariant{}, tc.n)
		if err != nil || got != tc.want {
			t.Errorf("%+v: %q, %v\nwant %q", tc.n, got, err, tc.want)
		}
	}
	client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrorsForbidden()
	})
	if got, err := e.CopyFits(context.Background(), containers.CopyVariant{}, containers.CopyNeeds{GPUs: 9}); got != "" || err != nil {
		t.Errorf("nodes not listable: %q, %v; want nothing said", got, err)
	}
}

func apierrorsForbidden() error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("no"))
}
