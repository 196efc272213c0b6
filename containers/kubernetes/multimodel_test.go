package kubernetes

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/mme"
	"github.com/mce-run/mce/containers/mme/agent"
	"github.com/mce-run/mce/pipeline"
)

// podNet routes the engine's calls to pod addresses (10.1.0.N:port) to
// loopback servers, standing in for the pod network.
type podNet struct {
	mu    sync.Mutex
	addrs map[string]string
}

func (n *podNet) route(podAddr, to string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.addrs[podAddr] = to
}

func (n *podNet) client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.mu.Lock()
		to, ok := n.addrs[addr]
		n.mu.Unlock()
		if !ok {
			return nil, errors.New("no route to " + addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, to)
	}}}
}

// mmContainer is a multi-model container that checks the files it is told
// to load exist in the agent's folder (which it would mount).
type mmContainer struct {
	dir   string
	mu    sync.Mutex
	loads []string // TargetModels
}

func (c *mmContainer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/models" {
		w.WriteHeader(http.StatusOK) // unloads
		return
	}
	var b map[string]string
	json.NewDecoder(r.Body).Decode(&b)
	rel, ok := strings.CutPrefix(b["url"], agent.ModelsDir+"/")
	if _, err := os.Stat(filepath.Join(c.dir, rel, "weights.bin")); !ok || err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.loads = append(c.loads, r.Header.Get(mme.TargetModelHeader))
	c.mu.Unlock()
}

type loadObserver struct {
	mme.NopObserver
	loads atomic.Int64
}

func (o *loadObserver) ModelLoadingTime(time.Duration) { o.loads.Add(1) }

// TestMultiModelPods: the MultiModel container of a copy is a
// pipeline.MultiModel and containers.MultiModelDetail loading through its pod's
// agent; the agent is reset when mce attaches; a restart of the container
// resets the manager; a pod that goes takes its manager along.
func TestMultiModelPods(t *testing.T) {
	// A real agent over a file:// prefix, reached as 10.1.0.N:9400.
	root := t.TempDir()
	prefix, dir := filepath.Join(root, "models"), filepath.Join(root, "cache")
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTarGz(t, filepath.Join(prefix, "a.tar.gz"), "weights.bin", "w")
	f, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{prefix}})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := mme.NewCache(mme.CacheOptions{Dir: dir, Prefix: "file://" + prefix + "/", Fetcher: f, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	var resets atomic.Int64
	as := agent.NewServer(cache, zerolog.Nop())
	agentSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/reset" {
			resets.Add(1)
		}
		as.ServeHTTP(w, r)
	}))
	defer agentSrv.Close()
	mc := &mmContainer{dir: dir}
	ctrSrv := httptest.NewServer(mc)
	defer ctrSrv.Close()
	pn := &podNet{addrs: map[string]string{}}
	for _, ip := range []string{"10.1.0.1", "10.1.0.2"} {
		pn.route(ip+":9400", agentSrv.Listener.Addr().String())
		pn.route(ip+":8081", ctrSrv.Listener.Addr().String())
	}

	client := newClient(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := New(ctx, Options{Client: client, Manifest: testOptions(), Logger: zerolog.Nop(), LaunchSlack: time.Second, PodHTTP: pn.client()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	obs := &loadObserver{}
	e.SetMultiModelObserver(func(endpoint, variant, container string) mme.Observer { return obs })
	c := &cluster{t: t, client: client}
	plan := testPlan()
	plan.Variants[0].InstanceCount = 1
	mm := &plan.Variants[0].Containers[1]
	mm.Mode, mm.ModelDataURL, mm.GPUs, mm.ModelCacheSetting = "MultiModel", "s3://bucket/mme/", "", "Enabled"
	done := make(chan containers.Launched, 1)
	go func() {
		l, err := e.Launch(context.Background(), plan, 1)
		if err != nil {
			t.Error(err)
		}
		done <- l
	}()
	d := c.waitDeployment(deploymentName("default", plan.Name, 1, "AllTraffic"))
	p1 := c.pod(d, nil)
	l := <-done
	if l == nil {
		t.FailNow()
	}
	cp := l.Copies("AllTraffic")[0]
	if _, ok := cp[0].(pipeline.MultiModel); ok {
		t.Error("a SingleModel container is a pipeline.MultiModel")
	}
	mmc, ok := cp[1].(pipeline.MultiModel)
	detail, ok2 := cp[1].(containers.MultiModelDetail)
	if !ok || !ok2 {
		t.Fatalf("the MultiModel container %T is not a pipeline.MultiModel and containers.MultiModelDetail", cp[1])
	}
	if _, ok := cp[1].(containers.ContainerDetail); !ok {
		t.Error("the MultiModel container lost its ContainerDetail")
	}
	lease, err := mmc.Acquire(ctx, "a.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	if lease.ModelID() != mme.ModelID("a.tar.gz") {
		t.Errorf("ModelID %s", lease.ModelID())
	}
	lease.Release()
	if got := detail.LoadedModels(); !slices.Equal(got, []string{"a.tar.gz"}) {
		t.Errorf("LoadedModels %v", got)
	}
	if b, n := detail.CacheUsage(); n != 1 || b != 1 {
		t.Errorf("CacheUsage %d bytes %d models", b, n)
	}
	if resets.Load() != 1 || obs.loads.Load() != 1 {
		t.Errorf("%d agent resets, %d loads observed; want 1 and 1", resets.Load(), obs.loads.Load())
	}
	if _, err := mmc.Acquire(ctx, "missing.tar.gz"); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("missing: %v", err)
	}

	// The model container restarts: nothing is loaded any more.
	p1.Status.ContainerStatuses[1].RestartCount = 1
	// Through the tracker: the kubelet, not the engine, writes pod status.
	if err := client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), p1, "ml"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the restart resets the manager", func() bool { return len(detail.LoadedModels()) == 0 })
	if lease, err = mmc.Acquire(ctx, "a.tar.gz"); err != nil {
		t.Fatal(err)
	}
	lease.Release()

	// Not Ready for a while: no calls, but what it loaded is remembered.
	setReady := func(ready bool) {
		t.Helper()
		obj, err := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), "ml", p1.Name)
		if err != nil {
			t.Fatal(err)
		}
		p := obj.(*corev1.Pod).DeepCopy()
		p.Status.Conditions[0].Status = map[bool]corev1.ConditionStatus{true: corev1.ConditionTrue, false: corev1.ConditionFalse}[ready]
		if err := client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), p, "ml"); err != nil {
			t.Fatal(err)
		}
	}
	setReady(false)
	eventually(t, "a pod that is not Ready takes no calls", func() bool {
		_, err := mmc.Acquire(ctx, "a.tar.gz")
		return errors.Is(err, ErrNoPod)
	})
	setReady(true)
	eventually(t, "the pod Ready again", func() bool { return cp[1].Ready() })
	if got := detail.LoadedModels(); !slices.Equal(got, []string{"a.tar.gz"}) || resets.Load() != 1 {
		t.Errorf("after a readiness flap: loaded %v, %d agent resets; want the model kept and 1", got, resets.Load())
	}

	// The pod goes: no manager; a new pod gets a new one, which resets its agent.
	c.deletePod(p1.Name)
	eventually(t, "the pod's manager goes", func() bool {
		_, err := mmc.Acquire(ctx, "a.tar.gz")
		return errors.Is(err, ErrNoPod)
	})
	c.pod(d, nil)
	eventually(t, "a manager for the new pod", func() bool { return cp[1].Ready() })
	if lease, err = mmc.Acquire(ctx, "a.tar.gz"); err != nil {
		t.Fatal(err)
	}
	lease.Release()
	if n := resets.Load(); n != 2 {
		t.Errorf("%d agent resets, want 2 (one per pod)", n)
	}
	mc.mu.Lock()
	if len(mc.loads) != 3 {
		t.Errorf("loads %v, want 3 (first, after the restart, on the new pod)", mc.loads)
	}
	mc.mu.Unlock()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := mmc.Acquire(ctx, "a.tar.gz"); !errors.Is(err, ErrNoPod) {
		t.Errorf("after Close: %v", err)
	}
}

func writeTarGz(t *testing.T, path, name, body string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
	tw.Write([]byte(body))
	tw.Close()
	gz.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
