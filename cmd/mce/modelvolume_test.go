package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/mce-run/mce/containers"
	kengine "github.com/mce-run/mce/containers/kubernetes"
)

// TestParseModelVolumes: the --model-volume forms, and hostile values
// refused with a message naming what is wrong.
func TestParseModelVolumes(t *testing.T) {
	vs, err := parseModelVolumes([]string{"weights=hostPath:/srv/models", "shared=pvc:model-store.v1:/data/shared"})
	if err != nil {
		t.Fatal(err)
	}
	if v := vs[0]; v.Volume.Name != "mv-weights" || v.MountPath != "/models/weights" || v.Volume.HostPath == nil ||
		v.Volume.HostPath.Path != "/srv/models" || *v.Volume.HostPath.Type != corev1.HostPathDirectory {
		t.Errorf("hostPath volume %+v", v)
	}
	if v := vs[1]; v.Volume.Name != "mv-shared" || v.MountPath != "/data/shared" || v.Volume.PersistentVolumeClaim == nil ||
		v.Volume.PersistentVolumeClaim.ClaimName != "model-store.v1" || !v.Volume.PersistentVolumeClaim.ReadOnly {
		t.Errorf("pvc volume %+v", v)
	}
	for _, c := range []struct {
		vals []string
		want string
	}{
		{[]string{"weights"}, "want NAME=hostPath"},
		{[]string{"Weights=pvc:x"}, "must be a DNS label"},
		{[]string{strings.Repeat("a", 51) + "=pvc:x"}, "must be a DNS label"},
		{[]string{"w=nfs:server:/x"}, `the source "nfs" is neither`},
		{[]string{"w=hostPath:relative"}, "absolute, clean path"},
		{[]string{"w=hostPath:/srv/../etc"}, "absolute, clean path"},
		{[]string{"w=hostPath:/"}, "system folder"},
		{[]string{"w=hostPath:/var"}, "system folder"}, // holds /var/run
		{[]string{"w=hostPath:/etc/ssl"}, "system folder"},
		{[]string{"w=pvc:Bad_Claim"}, "DNS subdomain"},
		{[]string{"w=pvc:"}, "DNS subdomain"},
		{[]string{"w=pvc:c:models"}, `mount "models" must be an absolute`},
		{[]string{"w=pvc:c:/opt/ml"}, "overlaps where model data is written"},
		{[]string{"w=pvc:c:/mnt"}, "overlaps where model data is written"},
		{[]string{"w=pvc:c:/proc/x"}, "system folder"},
		{[]string{"w=pvc:c:/a,b"}, "absolute, clean path"},
		{[]string{"w=pvc:a", "w=pvc:b"}, "given twice"},
		{[]string{"a=pvc:a:/m", "b=pvc:b:/m/b"}, "overlaps a's /m"},
	} {
		t.Run(strings.Join(c.vals, " "), func(t *testing.T) {
			if _, err := parseModelVolumes(c.vals); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
}

// TestPodModelData: on the kubernetes engine, CreateModel's file:// data
// must lie in a model volume's mount; relative and outside paths are refused.
func TestPodModelData(t *testing.T) {
	p := podModelData{mounts: []string{"/models/weights"}}
	for u, ok := range map[string]bool{
		"file:///models/weights/m.tar.gz":         true,
		"file:///models/weights":                  true,
		"s3://bucket/m.tar.gz":                    true,
		"file:///models/weights/../../etc/passwd": false,
		"file:///models/weightsX/m.tar.gz":        false,
		"file://m.tar.gz":                         false,
		"file:///var/lib/kubelet/pods/x/m.tar.gz": false,
		"file:///models/weights/./a/../m.tar.gz":  true,
	} {
		if err := p.CheckModelDataURL(u, "/cwd"); (err == nil) != ok {
			t.Errorf("%s: %v, want ok=%v", u, err, ok)
		}
	}
	if err := (podModelData{}).CheckModelDataURL("file:///models/m.tar.gz", ""); err == nil || !strings.Contains(err.Error(), "no --model-volume") {
		t.Errorf("no volumes: %v", err)
	}
}

// TestModelVolumeManifest: serve's flags become the Deployment the engine
// creates (fake clientset): the volume in the pod, mounted read-only into the
// fetch init container only, its mount a --model-root of mce fetch.
func TestModelVolumeManifest(t *testing.T) {
	var f serveFlags
	f.instance, f.kube.fetchImage, f.stopGrace = "mv", "mce-example/mce:test", 2*time.Second
	f.kube.modelVolumes = []string{"weights=hostPath:/srv/models"}
	f.maxArtifactBytes, f.maxArtifactRatio = 1<<30, 100
	mo, mounts, err := kubeManifest(f, "ml")
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) != 1 || mounts[0] != "/models/weights" {
		t.Errorf("mounts %v", mounts)
	}
	client := fake.NewClientset()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := kengine.New(ctx, kengine.Options{Client: client, Manifest: mo, Logger: zerolog.Nop(), LaunchSlack: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	plan := containers.EndpointPlan{Name: "ep", Mode: "Direct", Variants: []containers.VariantPlan{{
		Name: "AllTraffic", InstanceCount: 1, Weight: 1, HealthCheckTimeout: time.Second,
		Containers: []containers.ContainerPlan{
			{Hostname: "plain", Image: "mce-example/probe:latest", Mode: "SingleModel"},
			{Hostname: "model", Image: "mce-example/probe:latest", Mode: "SingleModel", ModelDataURL: "file:///models/weights/m.tar.gz"},
		},
	}}}
	lctx, lcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := e.Launch(lctx, plan, 1); done <- err }()
	defer func() { lcancel(); <-done }()
	var ps corev1.PodSpec
	for {
		ds, err := client.AppsV1().Deployments("ml").List(ctx, metav1.ListOptions{})
		if err == nil && len(ds.Items) == 1 {
			ps = ds.Items[0].Spec.Template.Spec
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no Deployment")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var vol *corev1.Volume
	for i := range ps.Volumes {
		if ps.Volumes[i].Name == "mv-weights" {
			vol = &ps.Volumes[i]
		}
	}
	if vol == nil || vol.HostPath == nil || vol.HostPath.Path != "/srv/models" {
		t.Fatalf("pod volumes %+v", ps.Volumes)
	}
	if len(ps.InitContainers) != 1 {
		t.Fatalf("%d init containers", len(ps.InitContainers))
	}
	init := ps.InitContainers[0]
	args := strings.Join(init.Args, " ")
	if !strings.Contains(args, "--url file:///models/weights/m.tar.gz") || !strings.Contains(args, "--model-root /models/weights") {
		t.Errorf("fetch args %q", args)
	}
	mounted := false
	for _, m := range init.VolumeMounts {
		if m.Name == "mv-weights" {
			mounted = m.MountPath == "/models/weights" && m.ReadOnly
		}
	}
	if !mounted {
		t.Errorf("init container mounts %+v", init.VolumeMounts)
	}
	for _, c := range ps.Containers {
		for _, m := range c.VolumeMounts {
			if m.Name == "mv-weights" {
				t.Errorf("model container %s mounts the model volume", c.Name)
			}
		}
	}
}

// TestServeKubeFlagsRefused: --on-exit and --model-volume mistakes stop
// serve before anything runs.
func TestServeKubeFlagsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := []string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "off", "--state-dir", t.TempDir()}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--on-exit", "later"}, `--on-exit "later": use remove or keep`},
		{[]string{"--on-exit", "keep"}, "--on-exit keep: the docker engine removes"},
		{[]string{"--model-volume", "w=pvc:c"}, "--model-volume is for the kubernetes engine"},
		{[]string{"--engine", "kubernetes", "--model-volume", "w=hostPath:/etc"}, `--model-volume "w=hostPath:/etc"`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := runCLI(ctx, append(base, c.args...)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
}
