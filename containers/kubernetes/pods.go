package kubernetes

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/pipeline"
)

// slot is one copy of a variant's container set, bound to whichever Ready
// pod runs it now (none while it has none).
type slot struct {
	pod        atomic.Pointer[podState]
	containers []*Container
	models     atomic.Pointer[podModels] // the MultiModel container's, on this pod
}

// podState is what routing needs of a pod, taken at the last event.
type podState struct {
	uid      types.UID
	name     string
	ip       string
	ready    []bool // per container, in chain order
	restarts []int
	exit     []int
	// agentRestarts counts the model cache agent's restarts.
	agentRestarts int
}

// Container is one container of a copy: it answers at its pod's IP on its
// own port. It implements [pipeline.Container].
type Container struct {
	slot     *slot
	index    int
	hostname string
	port     string
}

var _ pipeline.Container = (*Container)(nil)

// Hostname implements pipeline.Container.
func (c *Container) Hostname() string { return c.hostname }

// BaseURL implements pipeline.Container: the pod's IP and the container's
// SAGEMAKER_BIND_TO_PORT; empty while the copy has no pod.
func (c *Container) BaseURL() string {
	p := c.slot.pod.Load()
	if p == nil {
		return ""
	}
	return "http://" + net.JoinHostPort(p.ip, c.port)
}

// Ready implements pipeline.Container: the pod is Ready and so is this
// container.
func (c *Container) Ready() bool {
	p := c.slot.pod.Load()
	return p != nil && c.index < len(p.ready) && p.ready[c.index]
}

// ID names the container as the cluster does: pod/container.
func (c *Container) ID() string {
	p := c.slot.pod.Load()
	if p == nil {
		return ""
	}
	return p.name + "/" + c.hostname
}

// Restarts is how often the kubelet restarted the container.
func (c *Container) Restarts() int {
	p := c.slot.pod.Load()
	if p == nil || c.index >= len(p.restarts) {
		return 0
	}
	return p.restarts[c.index]
}

// LastExitCode is the exit code of the container's last run, 0 if none.
func (c *Container) LastExitCode() int {
	p := c.slot.pod.Load()
	if p == nil || c.index >= len(p.exit) {
		return 0
	}
	return p.exit[c.index]
}

// LogTail is empty: the cluster keeps the logs (kubectl logs).
func (c *Container) LogTail() []string { return nil }

// Unavailable says why the container takes no requests, "" when it does.
func (c *Container) Unavailable() string {
	switch p := c.slot.pod.Load(); {
	case p == nil:
		return "no Ready pod runs this instance now"
	case !c.Ready():
		return "pod " + p.name + " reports the container not Ready"
	}
	return ""
}

// podReady reports the pod's Ready condition.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// snapshot takes what routing needs of a pod; containers are matched to the
// plan by position (the pod's containers are in chain order).
func snapshot(p *corev1.Pod, v containers.VariantPlan) *podState {
	s := &podState{uid: p.UID, name: p.Name, ip: p.Status.PodIP,
		ready: make([]bool, len(v.Containers)), restarts: make([]int, len(v.Containers)), exit: make([]int, len(v.Containers))}
	idx := map[string]int{}
	for i, c := range p.Spec.Containers {
		idx[c.Name] = i
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == AgentContainer {
			s.agentRestarts = int(cs.RestartCount)
			continue
		}
		i, ok := idx[cs.Name]
		if !ok || i >= len(s.ready) {
			continue
		}
		s.ready[i] = cs.Ready
		s.restarts[i] = int(cs.RestartCount)
		if t := cs.LastTerminationState.Terminated; t != nil {
			s.exit[i] = int(t.ExitCode)
		}
	}
	return s
}

// imageReasons are the kubelet's waiting reasons for an image it cannot get.
var imageReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true,
	"InvalidImageName": true, "ImageInspectError": true, "RegistryUnavailable": true,
}

// PodFailure is the FailureReason, in SageMaker's words, of a pod of
// variant v that cannot become Ready; "" while it still may. It reads only
// the pod; the engine adds what the kubelet's probes said (probeNotes).
func PodFailure(p *corev1.Pod, v containers.VariantPlan) string { return podFailure(p, v, nil) }

// podFailure is PodFailure with the probe notes of the pod's containers, by
// container name (nil: none known).
func podFailure(p *corev1.Pod, v containers.VariantPlan, probes map[string]probeNote) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
			strings.Contains(c.Message, "Insufficient "+string(ResourceGPU)) {
			return fmt.Sprintf("an instance of variant %q asks for nvidia.com/gpu: %d; no node has that many free (%s)", v.Name, variantGPUs(v), strings.TrimSpace(c.Message))
		}
	}
	for _, cs := range p.Status.InitContainerStatuses {
		if w := cs.State.Waiting; w != nil && imageReasons[w.Reason] {
			return fmt.Sprintf("image %q (mce's own, which fetches model data) could not be pulled: %s: %s", cs.Image, w.Reason, w.Message)
		}
		if t := terminated(cs); t != nil && t.ExitCode != 0 {
			var i, k int
			if _, err := fmt.Sscanf(cs.Name, fetchExtraPrefix+"%d-%d", &i, &k); err == nil && i >= 0 && i < len(v.Containers) && k >= 0 && k < len(v.Containers[i].AdditionalModelData) {
				return fmt.Sprintf("the additional model data (channel %q) of container %q could not be fetched (exit code %d)",
					v.Containers[i].AdditionalModelData[k].Channel, v.Containers[i].Hostname, t.ExitCode) + lastLines(t.Message)
			}
			if idx, ok := strings.CutPrefix(cs.Name, fetchCodePrefix); ok {
				return fmt.Sprintf("the inference code (%s) of container %q could not be fetched (exit code %d)",
					containers.SubmitDirEnv, hostnameOfFetch(v, "fetch-"+idx), t.ExitCode) + lastLines(t.Message)
			}
			return fmt.Sprintf("model data of container %q could not be fetched (exit code %d)", hostnameOfFetch(v, cs.Name), t.ExitCode) + lastLines(t.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		host := hostnameOf(p, v, cs.Name)
		if w := cs.State.Waiting; w != nil {
			switch {
			case imageReasons[w.Reason]:
				return fmt.Sprintf("image %q of container %q could not be pulled: %s: %s", cs.Image, host, w.Reason, w.Message)
			case w.Reason == "CreateContainerConfigError" || w.Reason == "CreateContainerError" || w.Reason == "RunContainerError":
				return fmt.Sprintf("container %q could not be started: %s: %s", host, w.Reason, w.Message)
			}
		}
		// SageMaker fails an endpoint whose container exits before it passes
		// its health check; the kubelet would restart it (CrashLoopBackOff).
		// A container the kubelet stopped because /ping did not pass within
		// the startup window also ends, often with code 0: that is said as
		// what it is, with the last ping seen.
		if t := terminated(cs); t != nil && !cs.Ready {
			if msg := stoppedByStartupProbe(p, cs, t, host, probes[cs.Name]); msg != "" {
				return msg
			}
			return fmt.Sprintf("container %q exited with code %d before it passed the ping health check", host, t.ExitCode) + lastLines(t.Message)
		}
	}
	return ""
}

// terminated is a container's current or last termination, nil if it has
// not ended; a container that ended and was restarted counts.
func terminated(cs corev1.ContainerStatus) *corev1.ContainerStateTerminated {
	if t := cs.State.Terminated; t != nil {
		return t
	}
	return cs.LastTerminationState.Terminated
}

// lastLines is ": " and the last lines of a container's termination message
// (its last log lines, by FallbackToLogsOnError) on one line, "" if empty.
func lastLines(msg string) string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	s := strings.TrimSpace(strings.Join(lines, " | "))
	if len(s) > 1024 {
		s = "…" + s[len(s)-1024:]
	}
	if s == "" {
		return ""
	}
	return ": " + s
}

// hostnameOf maps a pod's container name back to its ContainerHostname.
func hostnameOf(p *corev1.Pod, v containers.VariantPlan, name string) string {
	if name == AgentContainer {
		return AgentContainer + " (the model cache sidecar)"
	}
	for i, c := range p.Spec.Containers {
		if c.Name == name && i < len(v.Containers) {
			return v.Containers[i].Hostname
		}
	}
	return name
}

// hostnameOfFetch is the ContainerHostname the init container named name
// (fetch-<index>) fetches for.
func hostnameOfFetch(v containers.VariantPlan, name string) string {
	var idx int
	if _, err := fmt.Sscanf(name, "fetch-%d", &idx); err == nil && idx >= 0 && idx < len(v.Containers) {
		return v.Containers[idx].Hostname
	}
	return name
}

// variantGPUs is how many GPUs one instance of the variant asks for.
func variantGPUs(v containers.VariantPlan) int {
	n := 0
	for _, c := range v.Containers {
		k, _ := gpuCount(c.GPUs)
		n += k
	}
	return n
}
