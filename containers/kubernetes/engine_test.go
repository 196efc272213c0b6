package kubernetes

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mce-run/mce/containers"
)

// cluster stands in for the controllers the fake clientset lacks: tests
// create and delete the pods a Deployment would have.
type cluster struct {
	t      *testing.T
	client *fake.Clientset
	n      int
}

// newClient is a fake clientset that gives created objects UIDs, as the
// API server does; with gc, deleting a ConfigMap deletes every pod, as the
// garbage collector deletes an owner's dependents.
func newClient(gc bool) *fake.Clientset {
	c := fake.NewClientset()
	n := 0
	c.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		record(a)
		return false, nil, nil
	})
	c.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		record(a)
		return false, nil, nil
	})
	c.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if m, err := meta.Accessor(a.(k8stesting.CreateAction).GetObject()); err == nil && m.GetUID() == "" {
			n++
			m.SetUID(types.UID(fmt.Sprintf("created-%d", n)))
		}
		return false, nil, nil
	})
	if gc {
		c.PrependReactor("delete", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
			pods, err := c.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), a.GetNamespace())
			if err != nil {
				return true, nil, err
			}
			for _, p := range pods.(*corev1.PodList).Items {
				_ = c.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), p.Namespace, p.Name)
			}
			return false, nil, nil
		})
	}
	return c
}

// launchAsync starts e.Launch(plan, n) in the background; its error comes
// on the channel once the test has made the pods it waits for.
func launchAsync(e *Engine, plan containers.EndpointPlan, n int) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := e.Launch(context.Background(), plan, n)
		done <- err
	}()
	return done
}

func newEngine(t *testing.T, c *fake.Clientset) *Engine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := New(ctx, Options{Client: c, Manifest: testOptions(), Logger: zerolog.Nop(), LaunchSlack: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// waitDeployment waits until the engine created the variant's Deployment.
func (c *cluster) waitDeployment(name string) *appsv1.Deployment {
	c.t.Helper()
	for range 500 {
		d, err := c.client.AppsV1().Deployments("ml").Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			return d
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("no Deployment %s", name)
	return nil
}

// pod adds a pod of d, Ready or as status makes it.
func (c *cluster) pod(d *appsv1.Deployment, status func(*corev1.PodStatus)) *corev1.Pod {
	c.t.Helper()
	c.n++
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", d.Name, c.n), Namespace: "ml", Labels: d.Spec.Template.Labels,
			UID: types.UID(fmt.Sprintf("uid-%d", c.n))},
		Spec: d.Spec.Template.Spec,
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.1.0.%d", c.n),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	for _, ctr := range d.Spec.Template.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: ctr.Name, Image: ctr.Image, Ready: true})
	}
	if status != nil {
		status(&p.Status)
	}
	p, err := c.client.CoreV1().Pods("ml").Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

func (c *cluster) deletePod(name string) {
	c.t.Helper()
	if err := c.client.CoreV1().Pods("ml").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func baseURLs(l containers.Launched, variant string) []string {
	var out []string
	for _, cp := range l.Copies(variant) {
		for _, c := range cp {
			if c.Ready() {
				out = append(out, c.Hostname()+"="+c.BaseURL())
			}
		}
	}
	return out
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for range 300 {
		if ok() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

func TestLaunchCopiesScaleClose(t *testing.T) {
	client := newClient(false)
	e := newEngine(t, client)
	c := &cluster{t: t, client: client}
	plan := testPlan()
	plan.Variants[0].Containers[1].GPUs = "" // the fake has no node to ask
	type result struct {
		l   containers.Launched
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := e.Launch(context.Background(), plan, 1)
		done <- result{l, err}
	}()
	d := c.waitDeployment(deploymentName("default", plan.Name, 1, "AllTraffic"))
	if *d.Spec.Replicas != 2 || d.OwnerReferences[0].UID == "" {
		t.Fatalf("deployment replicas %d owners %+v", *d.Spec.Replicas, d.OwnerReferences)
	}
	p1 := c.pod(d, nil)
	select {
	case r := <-done:
		t.Fatalf("Launch returned with one of two instances Ready: %v", r.err)
	case <-time.After(200 * time.Millisecond):
	}
	c.pod(d, nil)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	l := r.l
	got := strings.Join(baseURLs(l, "AllTraffic"), " ")
	want := "Pre=http://10.1.0.1:8080 model=http://10.1.0.1:8081 Pre=http://10.1.0.2:8080 model=http://10.1.0.2:8081"
	if got != want {
		t.Errorf("copies %q, want %q", got, want)
	}
	// A pod goes: its copy has no container Ready; a new pod takes its place.
	c.deletePod(p1.Name)
	eventually(t, "the deleted pod leaves routing", func() bool { return len(baseURLs(l, "AllTraffic")) == 2 })
	c.pod(d, nil)
	eventually(t, "a new pod joins routing", func() bool {
		return strings.Contains(strings.Join(baseURLs(l, "AllTraffic"), " "), "10.1.0.3:8081")
	})
	// A pod that is not Ready takes no requests.
	c.pod(d, func(s *corev1.PodStatus) { s.Conditions[0].Status = corev1.ConditionFalse })

	// Scale out: replicas patched; Scale returns once the third is Ready.
	scaled := make(chan error, 1)
	go func() { scaled <- l.Scale(context.Background(), "AllTraffic", 3) }()
	eventually(t, "replicas patched to 3", func() bool {
		d, _ := client.AppsV1().Deployments("ml").Get(context.Background(), d.Name, metav1.GetOptions{})
		return *d.Spec.Replicas == 3
	})
	c.pod(d, nil)
	if err := <-scaled; err != nil {
		t.Fatal(err)
	}
	if n := len(l.Copies("AllTraffic")); n != 3 || len(baseURLs(l, "AllTraffic")) != 6 {
		t.Errorf("%d copies, %v Ready; want 3 with all 6 containers", n, baseURLs(l, "AllTraffic"))
	}

	// Close deletes the owner in the foreground and waits for the pods.
	closed := make(chan error, 1)
	go func() { closed <- l.Close(context.Background()) }()
	eventually(t, "the owner ConfigMap is deleted", func() bool {
		_, err := client.CoreV1().ConfigMaps("ml").Get(context.Background(), ownerName("default", plan.Name, 1), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	select {
	case err := <-closed:
		t.Fatalf("Close returned with pods left: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	pods, _ := client.CoreV1().Pods("ml").List(context.Background(), metav1.ListOptions{})
	for _, p := range pods.Items {
		c.deletePod(p.Name) // what the garbage collector does
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	foreground := 0
	for _, a := range client.Actions() {
		if da, ok := a.(k8stesting.DeleteActionImpl); ok && (da.Resource.Resource == "configmaps" || da.Resource.Resource == "deployments") {
			if pp := da.DeleteOptions.PropagationPolicy; pp != nil && *pp == metav1.DeletePropagationForeground {
				foreground++
			}
		}
	}
	if foreground != 2 {
		t.Errorf("%d foreground deletions of the owner and Deployment, want 2", foreground)
	}
}

func TestLaunchFailsWithReason(t *testing.T) {
	client := newClient(true)
	e := newEngine(t, client)
	c := &cluster{t: t, client: client}
	plan := testPlan()
	done := launchAsync(e, plan, 1)
	d := c.waitDeployment(deploymentName("default", plan.Name, 1, "AllTraffic"))
	c.pod(d, func(s *corev1.PodStatus) {
		s.Conditions[0].Status = corev1.ConditionFalse
		s.ContainerStatuses[1].Ready = false
		s.ContainerStatuses[1].State.Waiting = &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull",
			Message: `Container image "mce-example/model:latest" is not present with pull policy of Never`}
	})
	err := <-done
	if err == nil || !strings.Contains(err.Error(), `image "mce-example/model:latest" of container "model" could not be pulled`) {
		t.Fatalf("Launch: %v", err)
	}
	// Nothing is left of the failed launch.
	if cms, _ := client.CoreV1().ConfigMaps("ml").List(context.Background(), metav1.ListOptions{}); len(cms.Items) != 0 {
		t.Errorf("owner left: %v", cms.Items)
	}
	if ds, _ := client.AppsV1().Deployments("ml").List(context.Background(), metav1.ListOptions{}); len(ds.Items) != 0 {
		t.Errorf("deployment left")
	}
}

func TestLaunchTimesOutWithEvent(t *testing.T) {
	client := newClient(true)
	e := newEngine(t, client)
	plan := testPlan()
	plan.Variants[0].HealthCheckTimeout = time.Second
	name := deploymentName("default", plan.Name, 1, "AllTraffic")
	client.CoreV1().Events("ml").Create(context.Background(), &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "ev", Namespace: "ml"},
		InvolvedObject: corev1.ObjectReference{Kind: "ReplicaSet", Name: name + "-abc"}, Type: corev1.EventTypeWarning,
		Reason: "FailedCreate", Message: `pods is forbidden: exceeded quota`}, metav1.CreateOptions{})
	_, err := e.Launch(context.Background(), plan, 1)
	if err == nil || !strings.Contains(err.Error(), "2 of 2 instances did not become Ready") || !strings.Contains(err.Error(), "FailedCreate: pods is forbidden: exceeded quota") {
		t.Fatalf("Launch: %v", err)
	}
}

// TestLaunchTimeoutCountsNotReady: the timeout counts instances that are
// not Ready, not pods that do not exist: with one Ready pod and one that
// stays unready, 1 of 2 did not become Ready.
func TestLaunchTimeoutCountsNotReady(t *testing.T) {
	client := newClient(true)
	e := newEngine(t, client)
	c := &cluster{t: t, client: client}
	plan := testPlan()
	plan.Variants[0].HealthCheckTimeout = time.Second
	done := launchAsync(e, plan, 1)
	d := c.waitDeployment(deploymentName("default", plan.Name, 1, "AllTraffic"))
	c.pod(d, nil)
	c.pod(d, func(s *corev1.PodStatus) { s.Conditions[0].Status = corev1.ConditionFalse })
	if err := <-done; err == nil || !strings.Contains(err.Error(), "1 of 2 instances did not become Ready") {
		t.Fatalf("Launch: %v", err)
	}
}

func TestAdoptAndReconcile(t *testing.T) {
	client := newClient(true)
	e := newEngine(t, client)
	c := &cluster{t: t, client: client}
	plan := testPlan()
	done := launchAsync(e, plan, 4)
	d := c.waitDeployment(deploymentName("default", plan.Name, 4, "AllTraffic"))
	c.pod(d, nil)
	c.pod(d, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A restarted mce: a new engine on the same cluster.
	e2 := newEngine(t, client)
	ctx := context.Background()
	changed := testPlan()
	changed.Variants[0].Containers[0].Image = "mce-example/pre:v2"
	if _, err := e2.Adopt(ctx, changed, 4); err == nil || !strings.Contains(err.Error(), "another definition") {
		t.Errorf("adopting a changed definition: %v", err)
	}
	if _, err := e2.Adopt(ctx, plan, 5); err == nil {
		t.Error("adopted a generation that does not run")
	}
	l, err := e2.Adopt(ctx, plan, 4)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(baseURLs(l, "AllTraffic")); n != 4 {
		t.Errorf("adopted %d Ready containers, want 4", n)
	}
	// An orphan generation of this instance goes; another instance's stays.
	orphan := OwnerConfigMap(testOptions(), plan, 3, "x")
	client.CoreV1().ConfigMaps("ml").Create(ctx, orphan, metav1.CreateOptions{})
	otherOpts := testOptions()
	otherOpts.Instance = "other"
	client.CoreV1().ConfigMaps("ml").Create(ctx, OwnerConfigMap(otherOpts, plan, 3, "x"), metav1.CreateOptions{})
	if err := e2.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	cms, _ := client.CoreV1().ConfigMaps("ml").List(ctx, metav1.ListOptions{})
	var left []string
	for _, cm := range cms.Items {
		left = append(left, cm.Name)
	}
	want := ownerName("default", plan.Name, 4) + " " + ownerName("other", plan.Name, 3)
	if got := strings.Join(left, " "); got != want {
		t.Errorf("after Reconcile: %q, want %q", got, want)
	}
}

// TestDetachLeavesWhatRuns: after Detach (mce serve shutting down with
// --on-exit keep), Close and Reconcile delete nothing, so the next mce
// adopts the same pods.
func TestDetachLeavesWhatRuns(t *testing.T) {
	client := newClient(false)
	e := newEngine(t, client)
	c := &cluster{t: t, client: client}
	plan := testPlan()
	plan.Variants[0].Containers[1].GPUs = ""
	done := make(chan error, 1)
	var l containers.Launched
	go func() {
		var err error
		l, err = e.Launch(context.Background(), plan, 1)
		done <- err
	}()
	d := c.waitDeployment(deploymentName("default", plan.Name, 1, "AllTraffic"))
	c.pod(d, nil)
	c.pod(d, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.Detach()
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "delete" {
			t.Errorf("after Detach: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	if _, err := client.AppsV1().Deployments("ml").Get(context.Background(), d.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the Deployment is gone after a detached Close: %v", err)
	}
	// A second engine (the restarted mce) adopts the same generation.
	e2 := newEngine(t, client)
	l2, err := e2.Adopt(context.Background(), plan, 1)
	if err != nil {
		t.Fatalf("Adopt after a detached Close: %v", err)
	}
	if got := len(baseURLs(l2, "AllTraffic")); got != 4 {
		t.Errorf("adopted %d Ready containers, want 4", got)
	}
}

// TestLaunchFailsWithLastPing: a container whose /ping answered 500 for its
// whole startup window and that the kubelet then stopped (it exited 0) is
// reported as such, with the last ping status from the kubelet's events,
// not as a container that exited by itself.
func TestLaunchFailsWithLastPing(t *testing.T) {
	client := newClient(true)
	e := newEngine(t, client)
	c := &cluster{t: t, client: client}
	plan := testPlan()
	done := launchAsync(e, plan, 1)
	d := c.waitDeployment(deploymentName("default", plan.Name, 1, "AllTraffic"))
	podName := fmt.Sprintf("%s-%d", d.Name, c.n+1) // the name c.pod gives it
	now := time.Now()
	type probeEvent struct {
		Reason, Message, FieldPath, Pod string
		LastTimestamp                   metav1.Time
	}
	for i, ev := range []probeEvent{
		{Reason: "Unhealthy", Message: `Startup probe failed: Get "http://10.1.0.1:8080/ping": dial tcp 10.1.0.1:8080: connect: connection refused`,
			LastTimestamp: metav1.NewTime(now.Add(-50 * time.Second))},
		{Reason: "Unhealthy", Message: "Startup probe failed: HTTP probe failed with statuscode: 500",
			LastTimestamp: metav1.NewTime(now.Add(-2 * time.Second))},
		{Reason: "Killing", Message: "Container pre failed startup probe, will be restarted", LastTimestamp: metav1.NewTime(now)},
		// Another container's and another pod's events are not this one's.
		{Reason: "Unhealthy", Message: "Startup probe failed: HTTP probe failed with statuscode: 404", FieldPath: "spec.containers{model}",
			LastTimestamp: metav1.NewTime(now)},
		{Reason: "Unhealthy", Message: "Startup probe failed: HTTP probe failed with statuscode: 503", Pod: "other",
			LastTimestamp: metav1.NewTime(now)},
	} {
		fp, pod := cmp.Or(ev.FieldPath, "spec.containers{pre}"), cmp.Or(ev.Pod, podName)
		if _, err := client.CoreV1().Events("ml").Create(context.Background(), &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("ev-%d", i), Namespace: "ml"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: pod, Namespace: "ml", FieldPath: fp},
			Type:           corev1.EventTypeWarning, Reason: ev.Reason, Message: ev.Message, LastTimestamp: ev.LastTimestamp,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.pod(d, func(s *corev1.PodStatus) {
		s.Conditions[0].Status = corev1.ConditionFalse
		s.ContainerStatuses[0].Ready = false
		s.ContainerStatuses[0].RestartCount = 2
		s.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
		s.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
			StartedAt: metav1.NewTime(now.Add(-60 * time.Second)), FinishedAt: metav1.NewTime(now)}
	})
	err := <-done
	want := `container "Pre" did not pass the ping health check within its startup window (1m0s): its last /ping answered 500, ` +
		`and the kubelet stopped it after the window (exit code 0, Completed; restarted 2 times)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Launch: %v\nwant it to say: %s", err, want)
	}
}
