package kubernetes

import (
	"archive/tar"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/internal/kubetest"
)

const probeImage = "mce-example/probe:latest"

// mceImage is mce's own image (scripts/images.sh mce); MCE_KUBE_MCE_IMAGE
// names another build of it.
var mceImage = cmp.Or(os.Getenv("MCE_KUBE_MCE_IMAGE"), "mce-example/mce:latest")

// TestOnCluster runs the engine against a real single-node cluster
// (opt-in: MCE_KUBE_TEST=1): a 2-instance endpoint of two containers, one
// with model data fetched by mce's init container, answers from both pods
// at the addresses Copies gives; it scales out; a second engine adopts it;
// an image the node does not have and GPUs no node has fail with
// SageMaker-worded reasons; Close leaves no object of the endpoint behind.
func TestOnCluster(t *testing.T) {
	if os.Getenv(kubetest.EnvVar) != "" {
		for _, img := range []string{probeImage, mceImage} {
			if err := exec.Command("docker", "image", "inspect", img).Run(); err != nil {
				t.Fatalf("%s is not in the Docker engine: scripts/images.sh", img)
			}
		}
		if out, err := exec.Command("docker", "run", "--rm", mceImage, "fetch", "--help").CombinedOutput(); err != nil {
			t.Fatalf("%s has no fetch command (rebuild it with scripts/images.sh mce): %v\n%s", mceImage, err, out)
		}
	}
	c := kubetest.Start(t)
	c.LoadImage(t, probeImage)
	c.LoadImage(t, mceImage)
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

	// Model data on a hostPath volume the init container reads file:// from.
	models := t.TempDir()
	writeModel(t, filepath.Join(models, "model.tar.gz"))
	mo := ManifestOptions{Instance: "clustertest", Namespace: "default", FetchImage: mceImage,
		ImagePullPolicy: corev1.PullNever, FetchArgs: []string{"--model-root", "/models"}, StopGrace: 2 * time.Second,
		ModelVolumes: []ModelVolume{{MountPath: "/models", Volume: corev1.Volume{Name: "models",
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: models}}}}}}
	e, err := New(ctx, Options{Client: client, Manifest: mo, Logger: zerolog.New(zerolog.NewTestWriter(t)), LaunchSlack: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	plan := containers.EndpointPlan{Name: "direct-ep", Mode: "Direct", Variants: []containers.VariantPlan{{
		Name: "AllTraffic", InstanceCount: 2, Weight: 1, HealthCheckTimeout: time.Minute,
		Containers: []containers.ContainerPlan{
			{Hostname: "first", Image: probeImage, Environment: map[string]string{"PROBE_TAG": "-a"}, Mode: "SingleModel"},
			{Hostname: "second", Image: probeImage, Environment: map[string]string{"PROBE_TAG": "-b"}, Mode: "SingleModel",
				ModelDataURL: "file:///models/model.tar.gz"},
		},
	}}}
	t0 := time.Now()
	l, err := e.Launch(ctx, plan, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Launch of a 2-instance, 2-container variant (one init container each): %v", time.Since(t0).Round(100*time.Millisecond))
	pods := answers(t, c, l, plan.Variants[0].Name, 2)

	t0 = time.Now()
	if err := l.Scale(ctx, "AllTraffic", 3); err != nil {
		t.Fatal(err)
	}
	t.Logf("Scale 2 → 3: %v", time.Since(t0).Round(100*time.Millisecond))
	if got := answers(t, c, l, "AllTraffic", 3); !strings.Contains(strings.Join(got, " "), pods[0]) {
		t.Errorf("after scaling out the pods %v do not include %s", got, pods[0])
	}

	// A restarted mce adopts what runs.
	e2, err := New(ctx, Options{Client: client, Manifest: mo, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	l2, err := e2.Adopt(ctx, plan, 1)
	if err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	answers(t, c, l2, "AllTraffic", 3)

	// Failures in SageMaker's words, leaving nothing behind.
	missing := plan
	missing.Name = "missing-image"
	missing.Variants = []containers.VariantPlan{plan.Variants[0]}
	missing.Variants[0].Containers = []containers.ContainerPlan{{Hostname: "m", Image: "mce-example/no-such-image:latest", Mode: "SingleModel"}}
	if _, err := e.Launch(ctx, missing, 1); err == nil || !strings.Contains(err.Error(), `image "mce-example/no-such-image:latest" of container "m" could not be pulled: ErrImageNeverPull`) {
		t.Errorf("a missing image: %v", err)
	}
	gpus := plan
	gpus.Name = "gpu-ep"
	gpus.Variants = []containers.VariantPlan{plan.Variants[0]}
	gpus.Variants[0].InstanceCount = 1
	gpus.Variants[0].Containers = []containers.ContainerPlan{{Hostname: "g", Image: probeImage, Mode: "SingleModel", GPUs: "4"}}
	if _, err := e.Launch(ctx, gpus, 1); err == nil || !strings.Contains(err.Error(), `asks for nvidia.com/gpu: 4; no node has that many free`) {
		t.Errorf("4 GPUs on a node with 2: %v", err)
	}
	migCopies(ctx, t, c, e, client)

	t0 = time.Now()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close (foreground deletion, pods gone): %v", time.Since(t0).Round(100*time.Millisecond))
	sel := LabelInstance + "=clustertest"
	for {
		ps, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
		ds, _ := client.AppsV1().Deployments("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
		rs, _ := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
		cms, _ := client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
		if len(ps.Items)+len(ds.Items)+len(rs.Items)+len(cms.Items) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("left behind: %d pods, %d deployments, %d replica sets, %d config maps", len(ps.Items), len(ds.Items), len(rs.Items), len(cms.Items))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// answers invokes every container of every copy at its BaseURL from inside
// the cluster's network and returns the pods that answered (distinct).
func answers(t *testing.T, c *kubetest.Cluster, l containers.Launched, variant string, want int) []string {
	t.Helper()
	copies := l.Copies(variant)
	if len(copies) != want {
		t.Fatalf("%d copies, want %d", len(copies), want)
	}
	seen := map[string]bool{}
	var pods []string
	for _, cp := range copies {
		var pod string
		for i, ctr := range cp {
			if !ctr.Ready() {
				t.Fatalf("container %s of a copy is not Ready", ctr.Hostname())
			}
			tag := map[int]string{0: "-a", 1: "-b"}[i]
			out, err := c.Exec("curl", "-sS", "--fail", "--max-time", "10", "--data-binary", "x", ctr.BaseURL()+"/invocations")
			if err != nil || string(out) != "x"+tag {
				t.Fatalf("%s at %s: %q %v, want %q", ctr.Hostname(), ctr.BaseURL(), out, err, "x"+tag)
			}
			out, err = c.Exec("curl", "-sS", "--fail", "--max-time", "10", "-H", "X-Amzn-SageMaker-Custom-Attributes: info", "--data-binary", "x", ctr.BaseURL()+"/invocations")
			var info struct{ Hostname string }
			if err != nil || json.Unmarshal(out, &info) != nil {
				t.Fatalf("info from %s: %q %v", ctr.BaseURL(), out, err)
			}
			if pod != "" && info.Hostname != pod {
				t.Errorf("the containers of one copy answer from pods %s and %s", pod, info.Hostname)
			}
			pod = info.Hostname
		}
		if seen[pod] {
			t.Errorf("two copies route to pod %s", pod)
		}
		seen[pod] = true
		pods = append(pods, pod)
	}
	return pods
}

func writeModel(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	body := []byte("weights")
	tw.WriteHeader(&tar.Header{Name: "weights.txt", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
	tw.Write(body)
	tw.Close()
	gz.Close()
}

// migCopies: copies of an inference component on MIG partitions, on a
// node given a fake nvidia.com/mig-1g.10gb capacity of 2 (as NVIDIA's
// device plugin offers partitions under its mixed strategy): each copy's
// pod asks for one partition of its profile, two are scheduled, and a
// third is refused in the component's words.
func migCopies(ctx context.Context, t *testing.T, c *kubetest.Cluster, e *Engine, client clientset.Interface) {
	t.Helper()
	const res = "nvidia.com~1mig-1g.10gb"
	patch := func(op string) {
		body := `[{"op":"` + op + `","path":"/status/capacity/` + res + `"},{"op":"` + op + `","path":"/status/allocatable/` + res + `"}]`
		if op == "add" {
			body = `[{"op":"add","path":"/status/capacity/` + res + `","value":"2"},{"op":"add","path":"/status/allocatable/` + res + `","value":"2"}]`
		}
		if _, err := client.CoreV1().Nodes().Patch(ctx, c.Node, types.JSONPatchType, []byte(body), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("%s the fake MIG capacity: %v", op, err)
		}
	}
	patch("add")
	defer patch("remove")
	if short, err := e.CopyFits(ctx, containers.CopyVariant{}, containers.CopyNeeds{Partition: "mig-1g.10gb"}); short != "" || err != nil {
		t.Fatalf("CopyFits of a 1g.10gb copy: %q, %v", short, err)
	}
	copyOf := func(name string) containers.EndpointPlan {
		return containers.EndpointPlan{Name: name, Mode: "Serial", Variants: []containers.VariantPlan{{
			Name: "AllTraffic", InstanceCount: 1, Weight: 1, HealthCheckTimeout: time.Minute, CopyInstances: 1,
			Containers: []containers.ContainerPlan{{Hostname: "a", Image: probeImage, Environment: map[string]string{"PROBE_TAG": "-a"},
				Mode: "SingleModel", Partition: "mig-1g.10gb"}},
		}}}
	}
	var launched []containers.Launched
	for i := range 2 {
		l, err := e.Launch(ctx, copyOf("mig-copy-"+strconv.Itoa(i)), 1)
		if err != nil {
			t.Fatalf("copy %d on a MIG partition: %v", i, err)
		}
		launched = append(launched, l)
		answers(t, c, l, "AllTraffic", 1)
	}
	pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: LabelEndpoint + "=mig-copy-0"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the first copy's pods: %v, %v", pods, err)
	}
	if q := pods.Items[0].Spec.Containers[0].Resources.Limits["nvidia.com/mig-1g.10gb"]; q.String() != "1" {
		t.Errorf("a copy's limits %v, want nvidia.com/mig-1g.10gb: 1", pods.Items[0].Spec.Containers[0].Resources.Limits)
	}
	_, err = e.Launch(ctx, copyOf("mig-copy-2"), 1)
	var ue *containers.UnschedulableError
	if !errors.As(err, &ue) || !slices.Contains(ue.Short, "accelerator partitions") || !strings.Contains(ue.Message, "nvidia.com/mig-1g.10gb: 1") {
		t.Errorf("a third copy on two partitions: %v", err)
	}
	for _, l := range launched {
		if err := l.Close(ctx); err != nil {
			t.Error(err)
		}
	}
}
