package kubernetes

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// probeNote is what the kubelet's events say of one container's probes:
// the last failed ping, and whether the kubelet stopped the container
// because its startup probe failed.
type probeNote struct {
	lastPing string // "answered 500", "failed: <the prober's words>"; "" if none seen
	at       time.Time
	killed   bool
}

// statusCode finds the HTTP status in the prober's "HTTP probe failed with
// statuscode: 500".
var statusCode = regexp.MustCompile(`statuscode: (\d{3})`)

// probeNotes reads the pod's events (reasons Unhealthy and Killing, which
// the kubelet writes for failed probes and the restarts they cause), by
// container name. A failure to read them is no note: the reason then says
// what the pod's status alone says.
func (e *Engine) probeNotes(ctx context.Context, p *corev1.Pod) map[string]probeNote {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	evs, err := e.client.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", p.Name).String()})
	if err != nil {
		return nil
	}
	return notesOf(p, evs.Items)
}

// notesOf keeps the events of pod p's containers that concern probes.
func notesOf(p *corev1.Pod, evs []corev1.Event) map[string]probeNote {
	notes := map[string]probeNote{}
	for _, ev := range evs {
		o := ev.InvolvedObject
		if o.Kind != "Pod" || o.Name != p.Name || (o.UID != "" && p.UID != "" && o.UID != p.UID) {
			continue
		}
		name, ok := strings.CutPrefix(o.FieldPath, "spec.containers{")
		if !ok {
			continue
		}
		name = strings.TrimSuffix(name, "}")
		n := notes[name]
		switch ev.Reason {
		case "Unhealthy":
			msg, _, _ := strings.Cut(ev.Message, "\n")
			_, detail, ok := strings.Cut(msg, "probe failed: ")
			if !ok {
				continue
			}
			if at := eventTime(ev); n.lastPing == "" || !at.Before(n.at) {
				n.at = at
				n.lastPing = "failed: " + firstLineN(strings.TrimSpace(detail), 300)
				if m := statusCode.FindStringSubmatch(detail); m != nil {
					n.lastPing = "answered " + m[1]
				}
			}
		case "Killing":
			if strings.Contains(ev.Message, "failed startup probe") {
				n.killed = true
			}
		default:
			continue
		}
		notes[name] = n
	}
	return notes
}

func eventTime(ev corev1.Event) time.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.FirstTimestamp.Time
}

func firstLineN(s string, n int) string {
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// startupWindow is how long the startup probe of container name gives it
// before the kubelet stops it: the initial delay and failureThreshold
// probes one period apart. ok is false without a startup probe.
func startupWindow(p *corev1.Pod, name string) (window, period time.Duration, ok bool) {
	for _, c := range p.Spec.Containers {
		if c.Name != name || c.StartupProbe == nil {
			continue
		}
		pr := c.StartupProbe
		period = time.Duration(max(pr.PeriodSeconds, 1)) * time.Second
		return time.Duration(pr.InitialDelaySeconds)*time.Second + time.Duration(max(pr.FailureThreshold, 1))*period, period, true
	}
	return 0, 0, false
}

// stoppedByStartupProbe is the FailureReason of a container that ended
// because the kubelet stopped it after its startup window: the kubelet said
// so (a Killing event), or it ran for the whole window and ended as a
// stopped process ends (0 after a handled SIGTERM, 143 or 137 by the
// signal). "" otherwise: the container ended on its own.
func stoppedByStartupProbe(p *corev1.Pod, cs corev1.ContainerStatus, t *corev1.ContainerStateTerminated, host string, n probeNote) string {
	window, period, ok := startupWindow(p, cs.Name)
	if !ok {
		return ""
	}
	ran := t.FinishedAt.Sub(t.StartedAt.Time)
	stopped := t.ExitCode == 0 || t.ExitCode == 128+15 || t.ExitCode == 128+9
	if !n.killed && (!stopped || t.StartedAt.IsZero() || t.FinishedAt.IsZero() || ran < window-period) {
		return ""
	}
	msg := fmt.Sprintf("container %q did not pass the ping health check within its startup window (%s): ", host, window)
	if n.lastPing != "" {
		msg += "its last /ping " + n.lastPing + ", and "
	}
	msg += fmt.Sprintf("the kubelet stopped it after the window (exit code %d", t.ExitCode)
	if t.Reason != "" {
		msg += ", " + t.Reason
	}
	if cs.RestartCount > 0 {
		msg += fmt.Sprintf("; restarted %d times", cs.RestartCount)
	}
	return msg + ")" + lastLines(t.Message)
}
