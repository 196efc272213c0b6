package kubernetes

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPodFailure(t *testing.T) {
	plan := testPlan()
	v := plan.Variants[0]
	d, err := Deployment(testOptions(), plan, 1, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	pod := func(s corev1.PodStatus) *corev1.Pod {
		return &corev1.Pod{Spec: d.Spec.Template.Spec, Status: s}
	}
	exited := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3,
		Message: "line 1\nline 2\nline 3\nline 4\nline 5\nTraceback: boom\n"}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"pending", pod(corev1.PodStatus{Phase: corev1.PodPending}), ""},
		{"starting", pod(corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "pre",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}), ""},
		{"no GPUs", pod(corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. "}}}),
			`an instance of variant "AllTraffic" asks for nvidia.com/gpu: 2; no node has that many free (0/1 nodes are available: 1 Insufficient nvidia.com/gpu.)`},
		{"no CPU is not (yet) a failure", pod(corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}}}), ""},
		{"image", pod(corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "model", Image: "m:1",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}}),
			`image "m:1" of container "model" could not be pulled: ImagePullBackOff: Back-off pulling image`},
		{"crash", pod(corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "pre", RestartCount: 2,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: exited}}}),
			`container "Pre" exited with code 3 before it passed the ping health check: line 2 | line 3 | line 4 | line 5 | Traceback: boom`},
		{"fetch", pod(corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{Name: "fetch-1", State: exited}}}),
			`model data of container "model" could not be fetched (exit code 3): line 2 | line 3 | line 4 | line 5 | Traceback: boom`},
		{"fetch image", pod(corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{Name: "fetch-1", Image: "mce:x",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "not present"}}}}}),
			`image "mce:x" (mce's own, which fetches model data) could not be pulled: ErrImageNeverPull: not present`},
	} {
		if got := PodFailure(tc.pod, v); got != tc.want {
			t.Errorf("%s: PodFailure = %q, want %q", tc.name, got, tc.want)
		}
	}
	if !strings.Contains((&LaunchError{Variant: "v", Reason: "r"}).Error(), `variant "v": r`) {
		t.Error("LaunchError wording")
	}
}
