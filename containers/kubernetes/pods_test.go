package kubernetes

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// Testplan's 60 s health window, probed every 2 s: 30 failures.
	window, _, ok := startupWindow(pod(corev1.PodStatus{}), "pre")
	if !ok || window != 60*time.Second {
		t.Fatalf("startup window %s, %v; want 60s", window, ok)
	}
	start := metav1.NewTime(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	ran := func(d time.Duration, code int32, reason string) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason,
			StartedAt: start, FinishedAt: metav1.NewTime(start.Add(d))}}
	}
	crashLoop := func(last corev1.ContainerState) *corev1.Pod {
		return pod(corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "pre", RestartCount: 1,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: last}}})
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		// /ping never passed: the kubelet stopped it after the window
		// (issue 18: it was reported as "exited with code 0 before …").
		{"stopped after the window, exit 0", crashLoop(ran(61*time.Second, 0, "Completed")),
			`container "Pre" did not pass the ping health check within its startup window (1m0s): the kubelet stopped it after the window (exit code 0, Completed; restarted 1 times)`},
		{"stopped after the window, SIGTERM", crashLoop(ran(59*time.Second, 143, "Error")),
			`container "Pre" did not pass the ping health check within its startup window (1m0s): the kubelet stopped it after the window (exit code 143, Error; restarted 1 times)`},
		// Ended on its own, within the window, or with its own code.
		{"exit 0 early", crashLoop(ran(3*time.Second, 0, "Completed")),
			`container "Pre" exited with code 0 before it passed the ping health check`},
		{"own exit code after a while", crashLoop(ran(90*time.Second, 1, "Error")),
			`container "Pre" exited with code 1 before it passed the ping health check`},
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
