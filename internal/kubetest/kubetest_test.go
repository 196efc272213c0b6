package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const probeImage = "mce-example/probe:latest"

// TestClusterUpDown brings a cluster up, runs a 2-replica Deployment of a
// 2-container pod (the probe on two ports, as a SageMaker instance with two
// containers), reaches every container at its pod IP from inside the
// namespace, then tears the cluster down and checks that nothing of it is
// left: no process, no mount, no network namespace, no veth.
func TestClusterUpDown(t *testing.T) {
	if os.Getenv(EnvVar) != "" {
		if err := exec.Command("docker", "image", "inspect", probeImage).Run(); err != nil {
			t.Fatalf("%s is not in the Docker engine: build it with scripts/images.sh probe", probeImage)
		}
	}
	start := time.Now()
	c := Start(t)
	t.Logf("cluster up in %v: %s (netns %s)", time.Since(start).Round(100*time.Millisecond), c.Server, c.Netns)

	t0 := time.Now()
	c.LoadImage(t, probeImage)
	t.Logf("loaded %s in %v", probeImage, time.Since(t0).Round(10*time.Millisecond))

	hc, err := c.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t0 = time.Now()
	apiDo(ctx, t, hc, http.MethodPost, c.Server+"/apis/apps/v1/namespaces/default/deployments", deployment("probe", 2), http.StatusCreated, nil)
	var pods []pod
	for {
		var list struct{ Items []pod }
		apiDo(ctx, t, hc, http.MethodGet, c.Server+"/api/v1/namespaces/default/pods?labelSelector=app%3Dprobe", nil, http.StatusOK, &list)
		pods = pods[:0]
		for _, p := range list.Items {
			if p.ready() {
				pods = append(pods, p)
			}
		}
		if len(pods) == 2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("2 ready pods: still %d of %d after 3 minutes: %+v", len(pods), len(list.Items), list.Items)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("2-replica Deployment of 2-container pods ready in %v", time.Since(t0).Round(100*time.Millisecond))

	if pods[0].Status.PodIP == pods[1].Status.PodIP {
		t.Fatalf("both pods have IP %s", pods[0].Status.PodIP)
	}
	for _, p := range pods {
		for port, tag := range map[int]string{8080: "a", 9090: "b"} {
			url := fmt.Sprintf("http://%s:%d/invocations", p.Status.PodIP, port)
			out, err := c.Exec("curl", "-sS", "--fail", "--max-time", "10", "-H", "Content-Type: text/plain", "--data-binary", "x", url)
			if err != nil {
				t.Fatalf("pod %s: %v", p.Metadata.Name, err)
			}
			if got, want := string(out), "x"+tag; got != want {
				t.Errorf("POST %s = %q, want %q", url, got, want)
			}
			// The pod's hostname is its name: the answer comes from that pod.
			out, err = c.Exec("curl", "-sS", "--fail", "--max-time", "10", "-H", "X-Amzn-SageMaker-Custom-Attributes: info", "--data-binary", "x", url)
			if err != nil {
				t.Fatalf("pod %s: %v", p.Metadata.Name, err)
			}
			var info struct{ Hostname string }
			if err := json.Unmarshal(out, &info); err != nil || info.Hostname != p.Metadata.Name {
				t.Errorf("info from %s: hostname %q (%v), want %q", url, info.Hostname, err, p.Metadata.Name)
			}
		}
	}
	// The fake GPUs are schedulable.
	var node struct {
		Status struct{ Allocatable map[string]string }
	}
	apiDo(ctx, t, hc, http.MethodGet, c.Server+"/api/v1/nodes/"+c.Node, nil, http.StatusOK, &node)
	if got := node.Status.Allocatable["nvidia.com/gpu"]; got != "2" {
		t.Errorf("node allocatable nvidia.com/gpu = %q, want 2", got)
	}

	// ... and counted: a pod asking for both runs (the kubelet admits it too),
	// a further one asking for one is not scheduled.
	apiDo(ctx, t, hc, http.MethodPost, c.Server+"/api/v1/namespaces/default/pods", gpuPod("gpu-a", 2), http.StatusCreated, nil)
	apiDo(ctx, t, hc, http.MethodPost, c.Server+"/api/v1/namespaces/default/pods", gpuPod("gpu-b", 1), http.StatusCreated, nil)
	for _, w := range []struct {
		name, cond, status, message string
	}{{"gpu-a", "Ready", "True", ""}, {"gpu-b", "PodScheduled", "False", "Insufficient nvidia.com/gpu"}} {
		for {
			var p struct {
				Status struct {
					Conditions []struct{ Type, Status, Message string }
				}
			}
			apiDo(ctx, t, hc, http.MethodGet, c.Server+"/api/v1/namespaces/default/pods/"+w.name, nil, http.StatusOK, &p)
			done := false
			for _, cond := range p.Status.Conditions {
				if cond.Type == w.cond && cond.Status == w.status {
					if !strings.Contains(cond.Message, w.message) {
						t.Errorf("pod %s: %s %s: %q, want it to say %q", w.name, w.cond, cond.Status, cond.Message, w.message)
					}
					done = true
				}
			}
			if done {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("pod %s: %s never %s: %+v", w.name, w.cond, w.status, p.Status.Conditions)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	var cgroups []string
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			id, ok := strings.CutPrefix(cs.ContainerID, "containerd://")
			if !ok {
				t.Fatalf("container id %q", cs.ContainerID)
			}
			cgroups = append(cgroups, "/sys/fs/cgroup/memory/k8s.io/"+id)
		}
	}
	if _, err := os.Stat(cgroups[0]); err != nil {
		t.Fatalf("container cgroup: %v", err)
	}

	rss := c.memory(t)
	t.Logf("idle memory (RSS): %s", rss)

	t0 = time.Now()
	if err := c.Down(); err != nil {
		t.Fatal(err)
	}
	t.Logf("down in %v", time.Since(t0).Round(100*time.Millisecond))
	c.assertGone(t)
	for _, cg := range cgroups {
		if _, err := os.Stat(cg); err == nil {
			t.Errorf("cgroup %s left", cg)
		}
	}
}

// deployment is a Deployment of REPLICAS pods, each two probe containers on
// ports 8080 and 9090 (tags a and b), ready when /ping answers on both.
func deployment(name string, replicas int) map[string]any {
	container := func(cname string, port int, tag string) map[string]any {
		return map[string]any{
			"name":            cname,
			"image":           probeImage,
			"imagePullPolicy": "Never",
			"env": []map[string]string{
				{"name": "SAGEMAKER_BIND_TO_PORT", "value": fmt.Sprint(port)},
				{"name": "PROBE_TAG", "value": tag},
			},
			"ports": []map[string]any{{"containerPort": port}},
			"readinessProbe": map[string]any{
				"httpGet":       map[string]any{"path": "/ping", "port": port},
				"periodSeconds": 1,
			},
		}
	}
	labels := map[string]string{"app": name}
	return map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   map[string]any{"name": name, "labels": labels},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{
					"terminationGracePeriodSeconds": 5,
					"containers": []any{
						container("first", 8080, "a"),
						container("second", 9090, "b"),
					},
				},
			},
		},
	}
}

// gpuPod is a pod of one probe container with a limit of GPUS nvidia.com/gpu.
func gpuPod(name string, gpus int) map[string]any {
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"terminationGracePeriodSeconds": 5,
			"containers": []any{map[string]any{
				"name":            "gpu",
				"image":           probeImage,
				"imagePullPolicy": "Never",
				"resources":       map[string]any{"limits": map[string]any{"nvidia.com/gpu": fmt.Sprint(gpus)}},
			}},
		},
	}
}

type pod struct {
	Metadata struct{ Name string }
	Status   struct {
		Phase             string
		PodIP             string
		Conditions        []struct{ Type, Status string }
		ContainerStatuses []struct{ ContainerID string }
	}
}

func (p pod) ready() bool {
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" && c.Status == "True" {
			return true
		}
	}
	return false
}

// apiDo sends BODY (JSON) and decodes the answer into OUT, failing the test
// unless the status is WANT.
func apiDo(ctx context.Context, t *testing.T, hc *http.Client, method, url string, body any, want int, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %s: %s", method, url, resp.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
	}
}

// memory sums the resident memory of the cluster's components, from their
// PID files (the processes nsenter started exec them).
func (c *Cluster) memory(t *testing.T) string {
	var parts []string
	var total int64
	files, _ := filepath.Glob(filepath.Join(c.Dir, "pids", "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		status, err := os.ReadFile("/proc/" + strings.TrimSpace(string(b)) + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				var kb int64
				fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
				total += kb
				parts = append(parts, fmt.Sprintf("%s %d MB", filepath.Base(f), kb/1024))
			}
		}
	}
	return fmt.Sprintf("%d MB in all (%s)", total/1024, strings.Join(parts, ", "))
}

// assertGone checks that the cluster left nothing on the host.
func (c *Cluster) assertGone(t *testing.T) {
	t.Helper()
	// Dead is gone or a zombie: the holder's reaper is whatever adopted it
	// (init), which may collect it late; kill -0 succeeds on a zombie.
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.HolderPID)); err == nil {
		// The state follows the last ")" (the command name may hold one).
		if i := bytes.LastIndexByte(st, ')'); i >= 0 && i+2 < len(st) && st[i+2] != 'Z' && st[i+2] != 'X' {
			t.Errorf("namespace holder %d still running (state %c)", c.HolderPID, st[i+2])
		}
	}
	// Every component and shim names the cluster's folder on its command line.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(c.Dir)) {
			t.Errorf("process %s still running: %s", filepath.Dir(p), bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
	for _, f := range []string{"/proc/self/mountinfo", "/proc/1/mountinfo"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, c.Dir) || strings.Contains(line, "mce-kube") || strings.Contains(line, "/run/netns/cni-") {
				t.Errorf("mount left in %s: %s", f, line)
			}
		}
	}
	if _, err := os.Stat(c.NetnsPath); err == nil {
		t.Errorf("network namespace %s still there", c.NetnsPath)
	}
	if out, err := exec.Command("ip", "-o", "link", "show", c.Netns+"h").CombinedOutput(); err == nil {
		t.Errorf("veth %sh still there: %s", c.Netns, out)
	}
	if out, err := exec.Command("ip", "-o", "addr", "show").Output(); err != nil {
		t.Fatal(err)
	} else {
		// Another cluster (a parallel test) may take the freed address at
		// once, on its own veth: only an interface that is not another
		// cluster's counts.
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 || !strings.Contains(l, " "+strings.TrimSuffix(c.Addr, "2")+"1/30 ") {
				continue
			}
			if name := strings.Split(f[1], "@")[0]; !strings.HasPrefix(name, "mcek") || name == c.Netns+"h" {
				t.Errorf("host address for %s still there: %s", c.Addr, l)
			}
		}
	}
	left, _ := filepath.Glob("/run/netns/cni-*")
	if len(left) > 0 {
		t.Errorf("CNI network namespaces left on the host: %v", left)
	}
}
