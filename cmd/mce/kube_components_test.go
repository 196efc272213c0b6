package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// componentsOnCluster places inference components on the cluster through
// mce serve --engine kubernetes and aws-sdk-go-v2: copies are pods with the
// component's resources that the scheduler places on the node's fake
// nvidia.com/gpu capacity (2), within the variant's one instance
// (ManagedInstanceScaling MaxInstanceCount 1: a node) even when a second
// node with room appears; a copy that does not fit is reported (Failed, 2
// of 3 copies, the scheduler's words) and its pod deleted while the others
// serve; the pre-flight refuses a copy no node
// could hold; scaling to 0 and back frees and takes the GPUs again; mce
// killed and started again adopts the copies that run.
func componentsOnCluster(t *testing.T, sm *sagemaker.Client, rt *sagemakerruntime.Client, kc kubernetes.Interface, restart func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("ic-config"),
		ExecutionRoleArn: aws.String("arn:aws:iam::123456789012:role/mce"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), InstanceType: smtypes.ProductionVariantInstanceTypeMlG512xlarge,
			InitialInstanceCount: aws.Int32(1),
			ManagedInstanceScaling: &smtypes.ProductionVariantManagedInstanceScaling{Status: smtypes.ManagedInstanceScalingStatusEnabled,
				MinInstanceCount: aws.Int32(1), MaxInstanceCount: aws.Int32(1)}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("ic"), EndpointConfigName: aws.String("ic-config")}); err != nil {
		t.Fatal(err)
	}
	waitInServiceSDK(t, sm, "ic")
	icSpec := func(gpus float32) *smtypes.InferenceComponentSpecification {
		return &smtypes.InferenceComponentSpecification{
			Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("mce-example/probe:latest"),
				Environment: map[string]string{"PROBE_TAG": "-ic"}},
			ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{NumberOfCpuCoresRequired: aws.Float32(0.25),
				MinMemoryRequiredInMb: aws.Int32(128), MaxMemoryRequiredInMb: aws.Int32(256), NumberOfAcceleratorDevicesRequired: aws.Float32(gpus)}}
	}
	create := func(name string, gpus float32, copies int32) error {
		_, err := sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String(name),
			EndpointName: aws.String("ic"), VariantName: aws.String("AllTraffic"), Specification: icSpec(gpus),
			RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(copies)}})
		return err
	}
	// The pre-flight reads the node: no node has 3 GPUs.
	var api smithy.APIError
	if err := create("too-big", 3, 1); !errors.As(err, &api) || api.ErrorCode() != "ResourceLimitExceeded" ||
		!strings.Contains(api.ErrorMessage(), "nvidia.com/gpu: 3, a node has at most 2 allocatable") {
		t.Fatalf("a component of 3 GPUs on a node of 2: %v, want ResourceLimitExceeded naming the GPUs", err)
	}

	// One copy takes the variant's one instance: the cluster's node.
	if err := create("gpu", 1, 1); err != nil {
		t.Fatal(err)
	}
	if d := waitComponent(ctx, t, sm, "gpu"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("one copy: %s: %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	// A second node with room for every copy appears; with
	// MaxInstanceCount 1 the copies may not use it: 3 copies of 1 GPU on the
	// first node's 2 leave one copy reported, its pod deleted.
	other := addNode(ctx, t, kc)
	t1 := time.Now()
	if _, err := sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String("gpu"),
		DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(3)}}); err != nil {
		t.Fatal(err)
	}
	d := waitComponent(ctx, t, sm, "gpu")
	reason := aws.ToString(d.FailureReason)
	t.Logf("3 copies of 1 GPU, 1 instance (a node of 2 GPUs) of 2 nodes: %s after %v: %s", d.InferenceComponentStatus, time.Since(t1).Round(10*time.Millisecond), reason)
	if d.InferenceComponentStatus != smtypes.InferenceComponentStatusFailed || aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 2 ||
		aws.ToInt32(d.RuntimeConfig.DesiredCopyCount) != 3 ||
		!strings.HasPrefix(reason, "2 of 3 copies of the inference component are running. The copies left could not be placed: not enough accelerator devices for one more copy (it asks for nvidia.com/gpu: 1, cpu: 250m, memory: 128Mi) on the nodes the copies of variant AllTraffic may occupy (at most 1: an instance is a node, and they occupy that many already); the Kubernetes scheduler: 0/2 nodes are available:") ||
		!strings.Contains(reason, "1 Insufficient nvidia.com/gpu") || !strings.Contains(reason, "1 node(s) didn't satisfy plugin(s) [NodeAffinity]") {
		t.Fatalf("%s, %d of %d copies: %q", d.InferenceComponentStatus, aws.ToInt32(d.RuntimeConfig.CurrentCopyCount), aws.ToInt32(d.RuntimeConfig.DesiredCopyCount), reason)
	}
	if err := kc.CoreV1().Nodes().Delete(ctx, other, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := componentPods(ctx, t, kc)
	if len(pods) != 2 {
		t.Fatalf("%d pods of the component, want 2 (the unschedulable one deleted)", len(pods))
	}
	confined := 0
	for _, p := range pods {
		if p.Spec.NodeName == other {
			t.Errorf("pod %s on the node beyond the variant's instances", p.Name)
		}
		r := p.Spec.Containers[0].Resources
		lim, req := r.Limits, r.Requests
		if g, c, m := lim[corev1.ResourceName("nvidia.com/gpu")], lim[corev1.ResourceCPU], lim[corev1.ResourceMemory]; g.String() != "1" || c.String() != "250m" || m.String() != "256Mi" {
			t.Errorf("pod %s limits %v, want nvidia.com/gpu 1, cpu 250m, memory 256Mi", p.Name, lim)
		}
		if c, m := req[corev1.ResourceCPU], req[corev1.ResourceMemory]; c.String() != "250m" || m.String() != "128Mi" {
			t.Errorf("pod %s requests %v, want cpu 250m, memory 128Mi", p.Name, req)
		}
		if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil {
			if v := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values; len(v) == 1 && v[0] == p.Spec.NodeName {
				confined++
			}
		}
	}
	// The first copy chose the node; the others, with the variant's one
	// instance occupied, could only go there.
	if confined != 1 {
		t.Errorf("%d copies confined to the variant's node, want 1", confined)
	}
	for range 4 {
		out, err := rt.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ic"), InferenceComponentName: aws.String("gpu"),
			ContentType: aws.String("text/plain"), Body: []byte("x")})
		if err != nil || string(out.Body) != "x-ic" {
			t.Fatalf("invoking the copies that run: %q, %v", out.Body, err)
		}
	}

	// To 0 (the pods go, their GPUs are free) and back to 2 (which fit).
	for _, n := range []int32{0, 2} {
		t1 := time.Now()
		if _, err := sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String("gpu"),
			DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(n)}}); err != nil {
			t.Fatal(err)
		}
		d := waitComponent(ctx, t, sm, "gpu")
		if d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService || aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != n {
			t.Fatalf("scaled to %d: %s, %d copies: %s", n, d.InferenceComponentStatus, aws.ToInt32(d.RuntimeConfig.CurrentCopyCount), aws.ToString(d.FailureReason))
		}
		if got := len(componentPods(ctx, t, kc)); got != int(n) {
			t.Errorf("scaled to %d: %d pods", n, got)
		}
		t.Logf("scaled to %d copies in %v", n, time.Since(t1).Round(10*time.Millisecond))
	}
	before := podNames(componentPods(ctx, t, kc))
	restart()
	waitAPI(t, sm)
	d = waitComponent(ctx, t, sm, "gpu")
	if after := podNames(componentPods(ctx, t, kc)); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService ||
		aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 2 || after != before {
		t.Fatalf("after a restart: %s, %d copies, pods %s (before %s): not adopted", d.InferenceComponentStatus,
			aws.ToInt32(d.RuntimeConfig.CurrentCopyCount), after, before)
	}
	if out, err := rt.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ic"), InferenceComponentName: aws.String("gpu"),
		ContentType: aws.String("text/plain"), Body: []byte("x")}); err != nil || string(out.Body) != "x-ic" {
		t.Fatalf("invoking the adopted copies: %v", err)
	}
	if _, err := sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("ic")}); err != nil {
		t.Fatal(err)
	}
	for len(componentPods(ctx, t, kc)) > 0 {
		if ctx.Err() != nil {
			t.Fatal("the component's pods outlived its endpoint")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func podNames(ps []corev1.Pod) string {
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}

// addNode registers a second node (no kubelet behind it) that is Ready
// with 8 fake GPUs and room for everything, and waits until the scheduler
// may use it (its not-ready taint gone). It returns the node's name.
func addNode(ctx context.Context, t *testing.T, kc kubernetes.Interface) string {
	t.Helper()
	room := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceName("nvidia.com/gpu"): resource.MustParse("8")}
	n, err := kc.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mce-test-roomy",
		Labels: map[string]string{"kubernetes.io/hostname": "mce-test-roomy", "kubernetes.io/os": "linux"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kc.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
	// The node controllers change it too (taints): retried on a conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := kc.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status = corev1.NodeStatus{Capacity: room, Allocatable: room, Phase: corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
		_, err = kc.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for {
		n, err := kc.CoreV1().Nodes().Get(ctx, "mce-test-roomy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(n.Spec.Taints) == 0 {
			return n.Name
		}
		if ctx.Err() != nil {
			t.Fatalf("the second node keeps its taints %v", n.Spec.Taints)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// componentPods are the pods of endpoint "ic" not being deleted.
func componentPods(ctx context.Context, t *testing.T, kc kubernetes.Interface) []corev1.Pod {
	t.Helper()
	ps, err := kc.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "mce.run/instance=kt,mce.run/endpoint=ic"})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range ps.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// waitComponent polls DescribeInferenceComponent while the component is
// Creating or Updating, as the SageMaker Python SDK does.
func waitComponent(ctx context.Context, t *testing.T, sm *sagemaker.Client, name string) *sagemaker.DescribeInferenceComponentOutput {
	t.Helper()
	time.Sleep(50 * time.Millisecond)
	for {
		d, err := sm.DescribeInferenceComponent(ctx, &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		switch d.InferenceComponentStatus {
		case smtypes.InferenceComponentStatusCreating, smtypes.InferenceComponentStatusUpdating:
		default:
			return d
		}
		if ctx.Err() != nil {
			t.Fatalf("inference component %s still %s", name, d.InferenceComponentStatus)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
