package kubernetes

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/internal/kubetest"
)

// TestShadowOnCluster: on a real cluster, a plan's shadow variant
// (ShadowProductionVariants) runs beside its production variant as a
// Deployment of its own, labelled mce.run/shadow=true; a restarted mce
// adopts both, and Close removes both. Opt-in, as every cluster test
// (MCE_KUBE_TEST=1, make kube-test).
func TestShadowOnCluster(t *testing.T) {
	if os.Getenv(kubetest.EnvVar) != "" {
		if err := exec.Command("docker", "image", "inspect", probeImage).Run(); err != nil {
			t.Fatalf("%s is not in the Docker engine: scripts/images.sh", probeImage)
		}
	}
	c := kubetest.Start(t)
	c.LoadImage(t, probeImage)
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	mo := ManifestOptions{Instance: "shadowtest", Namespace: "default", FetchImage: mceImage,
		ImagePullPolicy: corev1.PullNever, StopGrace: 2 * time.Second}
	e, err := New(ctx, Options{Client: client, Manifest: mo, Logger: zerolog.New(zerolog.NewTestWriter(t)), LaunchSlack: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	variant := func(name string, shadow bool) containers.VariantPlan {
		return containers.VariantPlan{Name: name, InstanceCount: 1, Weight: 1, HealthCheckTimeout: time.Minute, Shadow: shadow,
			Containers: []containers.ContainerPlan{{Hostname: "model", Image: probeImage, Environment: map[string]string{"PROBE_TAG": "-a"}, Mode: "SingleModel"}}}
	}
	plan := containers.EndpointPlan{Name: "shadow-ep", Mode: "Serial",
		Variants: []containers.VariantPlan{variant("AllTraffic", false), variant("Shadow", true)}}
	l, err := e.Launch(ctx, plan, 1)
	if err != nil {
		t.Fatal(err)
	}
	prodPod := answers(t, c, l, "AllTraffic", 1)
	shadowPod := answers(t, c, l, "Shadow", 1)
	if prodPod[0] == shadowPod[0] {
		t.Errorf("the production and the shadow variant answer from one pod %s", prodPod[0])
	}
	sel := LabelInstance + "=shadowtest," + LabelShadow + "=true"
	ds, err := client.AppsV1().Deployments("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil || len(ds.Items) != 1 || ds.Items[0].Labels[LabelVariant] != "Shadow" {
		t.Fatalf("deployments labelled %s: %v %v, want the shadow variant's only", sel, ds, err)
	}
	ps, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil || len(ps.Items) != 1 || ps.Items[0].Name != shadowPod[0] {
		t.Fatalf("pods labelled %s: %d %v, want the shadow's pod %s", sel, len(ps.Items), err, shadowPod[0])
	}

	e2, err := New(ctx, Options{Client: client, Manifest: mo, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	l2, err := e2.Adopt(ctx, plan, 1)
	if err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	if got := answers(t, c, l2, "Shadow", 1); got[0] != shadowPod[0] {
		t.Errorf("the adopted shadow answers from pod %s, want %s", got[0], shadowPod[0])
	}
	if err := l2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	all := LabelInstance + "=shadowtest"
	for {
		ps, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: all})
		ds, _ := client.AppsV1().Deployments("default").List(ctx, metav1.ListOptions{LabelSelector: all})
		if len(ps.Items)+len(ds.Items) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("left behind: %d pods, %d deployments", len(ps.Items), len(ds.Items))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
