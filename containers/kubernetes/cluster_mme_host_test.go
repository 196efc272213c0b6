//go:build linux

package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mce-run/mce/host"
	"github.com/mce-run/mce/internal/kubetest"
	"github.com/mce-run/mce/internal/testenv/hostenv"
)

// hostChildEnv carries the parent's settings to the half of
// TestMultiModelThroughHost that runs inside the cluster's network.
const hostChildEnv = "MCE_KUBE_MME_HOST_CHILD"

type hostChildConfig struct {
	Kubeconfig string
	Models     string
}

// TestMultiModelThroughHost drives a MultiModel endpoint on a real cluster
// through mce's SageMaker API with aws-sdk-go-v2 (opt-in: MCE_KUBE_TEST=1):
// CreateModel/CreateEndpointConfig/CreateEndpoint → InService, InvokeEndpoint
// with TargetModel for three models (the third evicting one by 507) answering
// the generator's outputs, SageMaker-shaped errors for a bad and a missing
// TargetModel, DeleteEndpoint leaving no object. The host and the engine
// run in a child process inside the cluster's network namespace, where pod
// IPs are routable (the pipeline dials them itself).
func TestMultiModelThroughHost(t *testing.T) {
	if cfg := os.Getenv(hostChildEnv); cfg != "" {
		var hc hostChildConfig
		if err := json.Unmarshal([]byte(cfg), &hc); err != nil {
			t.Fatal(err)
		}
		hostChild(t, hc)
		return
	}
	checkImages(t)
	c := kubetest.Start(t)
	c.LoadImage(t, modelserverImage)
	c.LoadImage(t, mceImage)
	models := generateModels(t, t.TempDir())
	b, _ := json.Marshal(hostChildConfig{Kubeconfig: c.Kubeconfig, Models: models})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := c.Command(ctx, os.Args[0], "-test.run=^TestMultiModelThroughHost$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), hostChildEnv+"="+string(b))
	out, err := cmd.CombinedOutput()
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.Contains(l, `"level":"debug"`) {
			lines = append(lines, l)
		}
	}
	t.Logf("inside the cluster's network:\n%s", strings.Join(lines, "\n"))
	if err != nil {
		t.Fatalf("the child failed: %v", err)
	}
}

func hostChild(t *testing.T, hc hostChildConfig) {
	mf := readManifest(t, hc.Models)
	cfg, err := clientcmd.BuildConfigFromFlags("", hc.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	e, err := New(ctx, Options{Client: client, Logger: log, LaunchSlack: 30 * time.Second,
		Manifest: ManifestOptions{Instance: "mmehost", Namespace: "default", FetchImage: mceImage,
			ImagePullPolicy: corev1.PullNever, FetchArgs: []string{"--model-root", "/models"}, StopGrace: 2 * time.Second,
			ModelVolumes: []ModelVolume{{MountPath: "/models", Volume: corev1.Volume{Name: "models",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hc.Models}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() }) // after the host's teardown (hostenv's cleanup, registered later, runs first)
	// The host's configuration as this test always had it: the engine's
	// log, and none of the fixture's Docker-side defaults (the fetcher's
	// model roots know no /models, which lies in the pods).
	h := hostenv.New(t, hostenv.Options{Backend: e, Host: func(c *host.Config) {
		c.Logger, c.ModelData, c.ContainerTimeout, c.MetricsOnAPI = log, nil, 0, false
	}})
	srv := h.Server
	sm, rt := h.SageMakerClient(), h.RuntimeClient()

	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("mme-model"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String(modelserverImage), Mode: smtypes.ContainerModeMultiModel,
			ModelDataUrl: aws.String("file:///models/"),
			// Memory for two of the 10 MiB models: a third gets 507.
			Environment: map[string]string{"MODELSERVER_MEMORY_BYTES": "25Mi"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("mme-config"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("mme-model"),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}}}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("mme"), EndpointConfigName: aws.String("mme-config")}); err != nil {
		t.Fatal(err)
	}
	for {
		d, err := sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("mme")})
		if err != nil {
			t.Fatal(err)
		}
		if d.EndpointStatus == smtypes.EndpointStatusInService {
			break
		}
		if d.EndpointStatus == smtypes.EndpointStatusFailed || ctx.Err() != nil {
			t.Fatalf("endpoint %s: %s", d.EndpointStatus, aws.ToString(d.FailureReason))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("CreateEndpoint → InService (a multi-model pod with its agent): %v", time.Since(t0).Round(10*time.Millisecond))

	invoke := func(target string, body []byte) ([]byte, error) {
		t0 := time.Now()
		out, err := rt.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("mme"),
			TargetModel: aws.String(target), ContentType: aws.String("application/json"), Body: body})
		if err != nil {
			return nil, err
		}
		t.Logf("InvokeEndpoint %s: %v", target, time.Since(t0).Round(time.Millisecond))
		return out.Body, nil
	}
	for _, i := range []int{0, 1, 2, 0} {
		got, err := invoke(mf.Models[i].TargetModel, mf.Models[i].Request)
		if err != nil {
			logPods(t, client, LabelInstance+"=mmehost")
			t.Fatalf("%s: %v", mf.Models[i].TargetModel, err)
		}
		var g, w any
		if json.Unmarshal(got, &g) != nil || json.Unmarshal(mf.Models[i].Response, &w) != nil || !reflect.DeepEqual(g, w) {
			t.Errorf("%s answered %s\nwant %s", mf.Models[i].TargetModel, got, mf.Models[i].Response)
		}
	}
	for target, want := range map[string]string{
		"../" + mf.Models[0].TargetModel: "must be a relative path below the ModelDataUrl prefix",
		"no-such-model.tar.gz":           "Failed to download model data for TargetModel no-such-model.tar.gz",
	} {
		_, err := invoke(target, []byte("{}"))
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" || !strings.Contains(ae.ErrorMessage(), want) {
			t.Errorf("TargetModel %q: %v, want a ValidationError saying %q", target, err, want)
		}
	}
	inv := srv.Inventory()
	if len(inv.Endpoints) != 1 || inv.Endpoints[0].Mode != "MultiModel" {
		t.Fatalf("inventory %+v", inv)
	}
	mm := inv.Endpoints[0].Variants[0].Copies[0].Containers[0].MultiModel
	if mm == nil || len(mm.Loaded) != 2 || mm.CacheModels != 3 {
		t.Errorf("the status page's multi-model detail: %+v; want 2 loaded, 3 cached", mm)
	}

	if _, err := sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("mme")}); err != nil {
		t.Fatal(err)
	}
	sel := LabelInstance + "=mmehost"
	for {
		ps, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
		ds, _ := client.AppsV1().Deployments("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
		cms, _ := client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
		if len(ps.Items)+len(ds.Items)+len(cms.Items) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after DeleteEndpoint: %d pods, %d deployments, %d config maps left", len(ps.Items), len(ds.Items), len(cms.Items))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logPods logs the state of the pods that sel selects and the last lines of
// their containers' logs, so that a failed call can be told from a container
// that restarted or crashed under it.
func logPods(t *testing.T, client clientset.Interface, sel string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ps, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Logf("listing the pods: %v", err)
		return
	}
	tail := int64(60)
	for _, p := range ps.Items {
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			t.Logf("pod %s container %s: ready %v, restarts %d, state %+v, last state %+v",
				p.Name, cs.Name, cs.Ready, cs.RestartCount, cs.State, cs.LastTerminationState)
		}
		for _, c := range p.Spec.Containers {
			for _, previous := range []bool{false, true} {
				b, err := client.CoreV1().Pods("default").GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: &tail, Previous: previous}).DoRaw(ctx)
				if err == nil {
					t.Logf("pod %s container %s log (previous %v):\n%s", p.Name, c.Name, previous, b)
				}
			}
		}
	}
}
