//go:build linux

package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/internal/kubetest"
	"github.com/mce-run/mce/internal/testenv"
	"github.com/mce-run/mce/pipeline"
)

const modelserverImage = "mce-example/modelserver:latest"

// netnsHTTP is a client whose connections are opened inside the network
// namespace at path, where pod IPs are routable: each dial locks its thread,
// enters the namespace, dials, and goes back to the thread's own namespace
// before unlocking. Going back matters: a goroutine may run on the main
// thread, which the runtime never ends, and /proc/PID/ns/net (what
// cluster.sh down uses to find the cluster's processes) is the main
// thread's; left in the namespace, the whole test binary would count as one
// of the cluster's processes and be killed with it (seen in CI).
func netnsHTTP(path string) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			return nil, err
		}
		defer own.Close()
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			return nil, err
		}
		c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
		if berr := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); berr != nil {
			// The thread cannot be trusted any more: keep it locked, so the
			// runtime ends it with this goroutine (unless it is the main one).
			runtime.LockOSThread()
			if c != nil {
				c.Close()
			}
			return nil, fmt.Errorf("returning from the cluster's network namespace: %w", berr)
		}
		return c, err
	}
	return &http.Client{Transport: &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second}}
}

// mmeManifest is the part of the generator's manifest.json the test reads.
type mmeManifest struct {
	Models []struct {
		TargetModel string          `json:"target_model"`
		Request     json.RawMessage `json:"request"`
		Response    json.RawMessage `json:"response"`
	} `json:"models"`
}

// generateModels writes 4 generated models of 10 MiB (memory_bytes) for
// mce-example/modelserver, and their manifest.json, into dir.
func generateModels(t *testing.T, dir string) string {
	t.Helper()
	gen := exec.Command("go", "run", "./examples/containers/modelserver/gen", "-out", dir, "-n", "4", "-memory-bytes", "10485760")
	gen.Dir = testenv.RepoRoot(t)
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("generating models: %v\n%s", err, out)
	}
	return dir
}

func readManifest(t *testing.T, dir string) mmeManifest {
	t.Helper()
	var mf mmeManifest
	if b, err := os.ReadFile(filepath.Join(dir, "manifest.json")); err != nil || json.Unmarshal(b, &mf) != nil || len(mf.Models) != 4 {
		t.Fatalf("manifest.json: %v", err)
	}
	return mf
}

// checkImages fails a cluster test early when an image it needs is missing.
func checkImages(t *testing.T) {
	t.Helper()
	if os.Getenv(kubetest.EnvVar) == "" {
		return
	}
	for _, img := range []string{modelserverImage, mceImage} {
		if err := exec.Command("docker", "image", "inspect", img).Run(); err != nil {
			t.Fatalf("%s is not in the Docker engine: scripts/images.sh", img)
		}
	}
	if out, err := exec.Command("docker", "run", "--rm", mceImage, "agent", "--help").CombinedOutput(); err != nil {
		t.Fatalf("%s has no agent command (rebuild it with scripts/images.sh mce): %v\n%s", mceImage, err, out)
	}
}

type countingObserver struct {
	mme.NopObserver
	downloads, loads, evictions atomic.Int64
}

func (o *countingObserver) ModelDownloadingTime(time.Duration) { o.downloads.Add(1) }
func (o *countingObserver) ModelLoadingTime(time.Duration)     { o.loads.Add(1) }
func (o *countingObserver) ModelEvicted()                      { o.evictions.Add(1) }

// TestMultiModelOnCluster runs a MultiModel endpoint on a real cluster
// (opt-in: MCE_KUBE_TEST=1): mce-example/modelserver with the mce agent
// sidecar, model artifacts on a hostPath volume that the agent reads
// file:// from. Two models load through the agent and answer what the
// generator computed; a third, with memory for two, evicts the least
// recently used (507), and the unloaded model's files stay in the agent's
// cache for a later load (its disk capacity, which now refuses what does not
// fit beside the models in use, is covered by containers/mme/agent's tests);
// a missing model is ModelNotFound; a second engine adopts
// the pod (resetting the agent) and loads again; Close leaves nothing.
func TestMultiModelOnCluster(t *testing.T) {
	checkImages(t)
	c := kubetest.Start(t)
	c.LoadImage(t, modelserverImage)
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

	// The generator's artifacts and answers, on a hostPath volume: the
	// agent reads file:///models/ (a --model-root), as it would a
	// PersistentVolumeClaim; the node is this machine.
	models := generateModels(t, t.TempDir())
	mf := readManifest(t, models)

	hc := netnsHTTP(c.NetnsPath)
	mo := ManifestOptions{Instance: "mmetest", Namespace: "default", FetchImage: mceImage,
		ImagePullPolicy: corev1.PullNever, FetchArgs: []string{"--model-root", "/models"}, StopGrace: 2 * time.Second,
		ModelVolumes: []ModelVolume{{MountPath: "/models", Volume: corev1.Volume{Name: "models",
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: models}}}}}}
	opts := Options{Client: client, Manifest: mo, Logger: zerolog.New(zerolog.NewTestWriter(t)), LaunchSlack: 30 * time.Second, PodHTTP: hc}
	e, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	obs := &countingObserver{}
	e.SetMultiModelObserver(func(endpoint, variant, container string) mme.Observer {
		if endpoint != "mme-ep" || variant != "AllTraffic" || container != "models" {
			t.Errorf("observer for %s/%s/%s", endpoint, variant, container)
		}
		return obs
	})

	plan := containers.EndpointPlan{Name: "mme-ep", Mode: "Direct", Variants: []containers.VariantPlan{{
		Name: "AllTraffic", InstanceCount: 1, Weight: 1, HealthCheckTimeout: time.Minute,
		Containers: []containers.ContainerPlan{{Hostname: "models", Image: modelserverImage, Mode: "MultiModel",
			ModelDataURL: "file:///models/", ModelCacheSetting: "Enabled",
			// Memory for two of the 10 MiB models: a third gets 507.
			Environment: map[string]string{"MODELSERVER_MEMORY_BYTES": "25Mi"}}},
	}}}
	t0 := time.Now()
	l, err := e.Launch(ctx, plan, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Launch of a multi-model pod (modelserver + agent): %v", time.Since(t0).Round(100*time.Millisecond))

	use := func(l containers.Launched, i int) {
		t.Helper()
		target := mf.Models[i].TargetModel
		ctr := l.Copies("AllTraffic")[0][0]
		mm, ok := ctr.(pipeline.MultiModel)
		if !ok {
			t.Fatalf("the MultiModel container %T is not a pipeline.MultiModel", ctr)
		}
		start := time.Now()
		lease, err := mm.Acquire(ctx, target)
		if err != nil {
			t.Fatalf("Acquire %s: %v", target, err)
		}
		defer lease.Release()
		took := time.Since(start)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ctr.BaseURL()+"/models/"+lease.ModelID()+"/invoke", bytes.NewReader(mf.Models[i].Request))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(mme.TargetModelHeader, target)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var got, want any
		if resp.StatusCode != 200 || json.Unmarshal(body, &got) != nil || json.Unmarshal(mf.Models[i].Response, &want) != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s answered %d %s\nwant %s", target, resp.StatusCode, body, mf.Models[i].Response)
		}
		t.Logf("%s: acquired in %v, answered as computed", target, took.Round(time.Millisecond))
	}
	detail := func(l containers.Launched) containers.MultiModelDetail {
		d, ok := l.Copies("AllTraffic")[0][0].(containers.MultiModelDetail)
		if !ok {
			t.Fatal("the MultiModel container is not a containers.MultiModelDetail")
		}
		return d
	}
	name := func(i int) string { return mf.Models[i].TargetModel }

	use(l, 0)
	use(l, 1)
	use(l, 0) // a hit: 1 is now the least recently used
	use(l, 2) // 507: 1 is evicted
	if got, want := detail(l).LoadedModels(), []string{name(0), name(2)}; !slices.Equal(got, want) {
		t.Errorf("loaded %v, want %v", got, want)
	}
	if _, n := detail(l).CacheUsage(); n != 3 {
		t.Errorf("the agent's cache holds %d models' files, want 3 (the unloaded one's stay for a later load)", n)
	}
	if d, ld, ev := obs.downloads.Load(), obs.loads.Load(), obs.evictions.Load(); d != 3 || ld != 3 || ev != 1 {
		t.Errorf("metrics: %d downloads, %d loads, %d evictions; want 3, 3, 1", d, ld, ev)
	}
	ctr := l.Copies("AllTraffic")[0][0].(pipeline.MultiModel)
	_, err = ctr.Acquire(ctx, "no-such-model.tar.gz")
	var nf *mme.ModelNotFoundError
	if !errors.As(err, &nf) {
		t.Errorf("a missing model: %v, want ModelNotFoundError", err)
	}
	if _, err := ctr.Acquire(ctx, "../"+name(0)); !errors.Is(err, mme.ErrInvalidTargetModel) {
		t.Errorf("a path out of the prefix: %v", err)
	}

	// A restarted mce adopts the pod: its manager resets the agent and
	// loads again (the container answers 409 for what it has).
	e.Close()
	e2, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	l2, err := e2.Adopt(ctx, plan, 1)
	if err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	use(l2, 2)
	use(l2, 3)
	if got := detail(l2).LoadedModels(); !slices.Contains(got, name(3)) {
		t.Errorf("after adoption loaded %v", got)
	}

	t0 = time.Now()
	if err := l2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close: %v", time.Since(t0).Round(100*time.Millisecond))
	sel := LabelInstance + "=mmetest"
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
