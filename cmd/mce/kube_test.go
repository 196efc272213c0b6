package main

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mce-run/mce/internal/kubetest"
	"github.com/mce-run/mce/internal/testenv"
)

// TestServeOnKubernetes runs `mce serve --engine kubernetes` inside a real
// cluster's network (opt-in: MCE_KUBE_TEST=1) and drives it with
// aws-sdk-go-v2: a 2-instance Direct endpoint answers from both pods, a
// Serial chain passes through both containers, UpdateEndpointWeightsAndCapacities
// scales to 3 pods, DeleteEndpoint leaves no object behind, inference
// components place GPU copies (componentsOnCluster). The same
// endpoint's CreateEndpoint → InService is measured on the Docker engine too.
func TestServeOnKubernetes(t *testing.T) {
	probe := "mce-example/probe:latest"
	mceImage := cmp.Or(os.Getenv("MCE_KUBE_MCE_IMAGE"), "mce-example/mce:latest")
	if os.Getenv(kubetest.EnvVar) != "" {
		testenv.Image(t, "probe")
		if out, err := exec.Command("docker", "run", "--rm", mceImage, "fetch", "--help").CombinedOutput(); err != nil {
			t.Fatalf("%s has no fetch command (rebuild it with scripts/images.sh mce): %v\n%s", mceImage, err, out)
		}
	}
	c := kubetest.Start(t)
	c.LoadImage(t, probe)
	c.LoadImage(t, mceImage)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	dir := t.TempDir()
	logf := filepath.Join(dir, "mce.log")
	listen := c.Addr + ":18080"
	argv := []string{"serve", "--engine", "kubernetes", "--kubeconfig", c.Kubeconfig, "--namespace", "default",
		"--fetch-image", mceImage, "--listen", listen, "--insecure", "--metrics-listen", "off",
		"--state-dir", filepath.Join(dir, "state"), "--instance", "kt", "--stop-grace", "2s", "--log-format", "json"}
	child := startServeIn(t, c.Command(context.Background(), os.Args[0], "-test.run=^$"), argv, logf)
	defer func() {
		child.Process.Signal(syscall.SIGTERM)
		child.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf)
			t.Logf("mce log:\n%s", b)
		}
	}()
	sm, rt := sdkClients("http://" + listen)
	waitAPI(t, sm)

	t0 := time.Now()
	createEndpoint(t, sm, "direct-ep", "Direct", 2)
	t.Logf("kubernetes: CreateEndpoint → InService, 2 instances of 2 containers: %v", time.Since(t0).Round(10*time.Millisecond))
	if got := podsAnswering(t, rt, "direct-ep", 40); len(got) != 2 {
		t.Errorf("answers from pods %v, want 2", got)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(cfg)
	overhead(t, c, kc, "http://"+listen+"/endpoints/direct-ep/invocations")

	createEndpoint(t, sm, "serial-ep", "Serial", 1)
	out, err := rt.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("serial-ep"),
		ContentType: aws.String("text/plain"), Body: []byte("x")})
	if err != nil || string(out.Body) != "x-a-b" {
		t.Errorf("serial chain: %q %v, want x-a-b", out.Body, err)
	}

	if _, err := sm.UpdateEndpointWeightsAndCapacities(ctx, &sagemaker.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("direct-ep"),
		DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"), DesiredInstanceCount: aws.Int32(3)}}}); err != nil {
		t.Fatal(err)
	}
	waitInServiceSDK(t, sm, "direct-ep")
	if got := podsAnswering(t, rt, "direct-ep", 60); len(got) != 3 {
		t.Errorf("after scaling to 3, answers from pods %v", got)
	}

	// UpdateEndpoint under traffic: the new generation's Deployment starts
	// beside the old one, traffic moves, the old one goes; no call fails.
	createConfig(t, sm, "direct-v2", "Direct", 2, "-c", "-d")
	var v2 atomic.Int64
	traffic := testenv.StartTraffic(t, 2, func() error {
		r, err := rt.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("direct-ep"),
			TargetContainerHostname: aws.String("second"), ContentType: aws.String("text/plain"), Body: []byte("x")})
		switch {
		case err != nil:
			t.Logf("call during the update: %v", err)
			return err
		case string(r.Body) == "x-d":
			v2.Add(1)
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond)
	t0 = time.Now()
	if _, err := sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("direct-ep"), EndpointConfigName: aws.String("direct-v2-config")}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	waitInServiceSDK(t, sm, "direct-ep")
	took := time.Since(t0)
	time.Sleep(300 * time.Millisecond)
	traffic.Stop()
	t.Logf("UpdateEndpoint under traffic: InService again in %v; %d calls answered (%d by the new generation), %d failed",
		took.Round(10*time.Millisecond), traffic.OK(), v2.Load(), traffic.Failed())
	if traffic.Failed() != 0 || v2.Load() == 0 {
		t.Errorf("update under traffic: %d failed calls, %d answered by the new generation", traffic.Failed(), v2.Load())
	}

	// mce killed and started again adopts the pods that run.
	before := podsAnswering(t, rt, "direct-ep", 30)
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	child = startServeIn(t, c.Command(context.Background(), os.Args[0], "-test.run=^$"), argv, logf)
	waitAPI(t, sm)
	waitInServiceSDK(t, sm, "direct-ep")
	after := podsAnswering(t, rt, "direct-ep", 30)
	slices.Sort(before)
	slices.Sort(after)
	if !slices.Equal(before, after) {
		t.Errorf("after a restart the endpoint answers from pods %v, before from %v: not adopted", after, before)
	}

	for _, ep := range []string{"direct-ep", "serial-ep"} {
		if _, err := sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String(ep)}); err != nil {
			t.Fatal(err)
		}
	}
	sel := "mce.run/instance=kt"
	for {
		ps, _ := kc.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
		ds, _ := kc.AppsV1().Deployments("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
		cms, _ := kc.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
		if len(ps.Items)+len(ds.Items)+len(cms.Items) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after DeleteEndpoint: %d pods, %d deployments, %d config maps left", len(ps.Items), len(ds.Items), len(cms.Items))
		}
		time.Sleep(200 * time.Millisecond)
	}

	t.Run("InferenceComponents", func(t *testing.T) {
		componentsOnCluster(t, sm, rt, kc, func() {
			child.Process.Signal(syscall.SIGKILL)
			child.Wait()
			child = startServeIn(t, c.Command(context.Background(), os.Args[0], "-test.run=^$"), argv, logf)
		})
	})

	// The same endpoint on the Docker engine, for comparison.
	dlisten := freePort(t)
	dlog := filepath.Join(dir, "docker.log")
	dargv := []string{"serve", "--listen", dlisten, "--metrics-listen", "off", "--state-dir", filepath.Join(dir, "dstate"),
		"--instance", "kt-docker", "--stop-grace", "2s", "--log-format", "json"}
	dchild := startServeIn(t, exec.Command(os.Args[0], "-test.run=^$"), dargv, dlog)
	defer func() {
		dchild.Process.Signal(syscall.SIGTERM)
		dchild.Wait()
	}()
	dsm, drt := sdkClients("http://" + dlisten)
	waitAPI(t, dsm)
	t0 = time.Now()
	createEndpoint(t, dsm, "direct-ep", "Direct", 2)
	t.Logf("docker: CreateEndpoint → InService, 2 instances of 2 containers: %v", time.Since(t0).Round(10*time.Millisecond))
	// On Docker every copy's container has the hostname "first": one answer
	// shows the endpoint works.
	if got := podsAnswering(t, drt, "direct-ep", 1); len(got) != 1 {
		t.Errorf("docker: answers from %v", got)
	}
	if _, err := dsm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("direct-ep")}); err != nil {
		t.Fatal(err)
	}
}

// startServeIn starts this test binary as `mce argv...` through cmd
// (TestMain runs serve when MCE_SERVE_ARGS is set).
func startServeIn(t *testing.T, cmd *exec.Cmd, argv []string, logf string) *exec.Cmd {
	t.Helper()
	b, _ := json.Marshal(argv)
	cmd.Env = append(os.Environ(), "MCE_SERVE_ARGS="+string(b))
	out, err := os.OpenFile(logf, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

func sdkClients(base string) (*sagemaker.Client, *sagemakerruntime.Client) {
	return sagemaker.New(sagemaker.Options{Region: "us-east-1", BaseEndpoint: aws.String(base), Credentials: aws.AnonymousCredentials{}}),
		sagemakerruntime.New(sagemakerruntime.Options{Region: "us-east-1", BaseEndpoint: aws.String(base), Credentials: aws.AnonymousCredentials{}})
}

func waitAPI(t *testing.T, sm *sagemaker.Client) {
	t.Helper()
	for range 300 {
		if _, err := sm.ListEndpoints(context.Background(), &sagemaker.ListEndpointsInput{}); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("mce never answered ListEndpoints")
}

// createEndpoint makes a model of two probe containers (tags -a and -b) in
// mode, a configuration of n instances and the endpoint, and waits for
// InService.
func createEndpoint(t *testing.T, sm *sagemaker.Client, name, mode string, n int32) {
	t.Helper()
	createConfig(t, sm, name, mode, n, "-a", "-b")
	if _, err := sm.CreateEndpoint(context.Background(), &sagemaker.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String(name + "-config")}); err != nil {
		t.Fatal(err)
	}
	waitInServiceSDK(t, sm, name)
}

// createConfig makes model name-model of two probe containers tagged a and
// b, and configuration name-config of n instances.
func createConfig(t *testing.T, sm *sagemaker.Client, name, mode string, n int32, a, b string) {
	t.Helper()
	ctx := context.Background()
	ctr := func(host, tag string) smtypes.ContainerDefinition {
		return smtypes.ContainerDefinition{ContainerHostname: aws.String(host), Image: aws.String("mce-example/probe:latest"),
			Environment: map[string]string{"PROBE_TAG": tag}}
	}
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String(name + "-model"),
		Containers:               []smtypes.ContainerDefinition{ctr("first", a), ctr("second", b)},
		InferenceExecutionConfig: &smtypes.InferenceExecutionConfig{Mode: smtypes.InferenceExecutionMode(mode)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(name + "-config"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String(name + "-model"),
			InitialInstanceCount: aws.Int32(n), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}}}); err != nil {
		t.Fatal(err)
	}
}

func waitInServiceSDK(t *testing.T, sm *sagemaker.Client, name string) {
	t.Helper()
	for range 1200 {
		d, err := sm.DescribeEndpoint(context.Background(), &sagemaker.DescribeEndpointInput{EndpointName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		switch d.EndpointStatus {
		case smtypes.EndpointStatusInService:
			return
		case smtypes.EndpointStatusFailed:
			t.Fatalf("endpoint %s Failed: %s", name, aws.ToString(d.FailureReason))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("endpoint %s never InService", name)
}

// podsAnswering invokes the Direct endpoint's container "first" n times and
// returns the distinct hostnames (pods, or containers on Docker) that
// answered.
func podsAnswering(t *testing.T, rt *sagemakerruntime.Client, name string, n int) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	for range n {
		r, err := rt.InvokeEndpoint(context.Background(), &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(name),
			TargetContainerHostname: aws.String("first"), CustomAttributes: aws.String("info"), Body: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		var info struct{ Hostname string }
		if err := json.Unmarshal(r.Body, &info); err != nil {
			t.Fatalf("info: %q: %v", r.Body, err)
		}
		if !seen[info.Hostname] {
			seen[info.Hostname] = true
			out = append(out, info.Hostname)
		}
	}
	return out
}

// overhead measures, from inside the cluster's network, the mean time of
// one invocation through mce and straight to a pod's container (the same
// curl process, keep-alive, 200 calls each).
func overhead(t *testing.T, c *kubetest.Cluster, kc kubernetes.Interface, viaMCE string) {
	t.Helper()
	pods, err := kc.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "mce.run/instance=kt"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods: %v", err)
	}
	direct := "http://" + pods.Items[0].Status.PodIP + ":8080/invocations"
	mean := func(url string, header string) time.Duration {
		args := []string{"curl", "-sS", "--fail", "-w", "%{time_total}\\n", "-H", "Content-Type: text/plain", "--data-binary", "x"}
		if header != "" {
			args = append(args, "-H", header)
		}
		for range 200 {
			args = append(args, "-o", "/dev/null", url)
		}
		out, err := c.Exec(args...)
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		lines := strings.Fields(string(out))
		for _, l := range lines {
			f, err := strconv.ParseFloat(l, 64)
			if err != nil {
				t.Fatalf("curl's timing %q: %v", l, err)
			}
			sum += f
		}
		return time.Duration(sum / float64(len(lines)) * float64(time.Second))
	}
	d := mean(direct, "")
	m := mean(viaMCE, "X-Amzn-SageMaker-Target-Container-Hostname: first")
	t.Logf("invocation, mean of 200 (curl, keep-alive): straight to the pod %v, through mce %v (+%v)", d.Round(time.Microsecond), m.Round(time.Microsecond), (m - d).Round(time.Microsecond))
}
