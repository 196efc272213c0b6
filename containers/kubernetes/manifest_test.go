package kubernetes

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mce-run/mce/containers"
)

func testOptions() ManifestOptions {
	return ManifestOptions{Instance: "default", Namespace: "ml", FetchImage: "mce-example/mce:latest",
		FetchArgs: []string{"--s3-endpoint", "http://s3.local:9000"}}
}

func testPlan() containers.EndpointPlan {
	return containers.EndpointPlan{Name: "Sentiment-EP", Mode: "Serial", Variants: []containers.VariantPlan{{
		Name: "AllTraffic", InstanceCount: 2, Weight: 1, HealthCheckTimeout: 60 * time.Second,
		Containers: []containers.ContainerPlan{
			{Hostname: "Pre", Image: "mce-example/pre:latest", Environment: map[string]string{"A": "1", "SAGEMAKER_BIND_TO_PORT": "9999"},
				Mode: "SingleModel", Resources: containers.Resources{Cpus: 1.5, MemoryMiB: 512}},
			{Hostname: "model", Image: "mce-example/model:latest", ModelDataURL: "s3://bucket/model.tar.gz",
				Mode: "SingleModel", GPUs: "2"},
		},
	}}}
}

func TestDeploymentManifest(t *testing.T) {
	plan := testPlan()
	owner := OwnerConfigMap(testOptions(), plan, 3, "h")
	owner.UID = "owner-uid"
	d, err := Deployment(testOptions(), plan, 3, plan.Variants[0], owner)
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{LabelManaged: "true", LabelInstance: "default", LabelEndpoint: "Sentiment-EP",
		LabelVariant: "AllTraffic", LabelGeneration: "3"}
	if !strings.HasPrefix(d.Name, "mce-default-sentiment-ep-g3-") || len(d.Name) > 46 || !dnsLabel.MatchString(d.Name) {
		t.Errorf("name %q: want a DNS label of at most 46 characters with a hash (the endpoint name has capitals)", d.Name)
	}
	if d.Namespace != "ml" || *d.Spec.Replicas != 2 {
		t.Errorf("namespace %q replicas %d, want ml and 2", d.Namespace, *d.Spec.Replicas)
	}
	for what, got := range map[string]map[string]string{"labels": d.Labels, "selector": d.Spec.Selector.MatchLabels, "pod labels": d.Spec.Template.Labels} {
		if !equality.Semantic.DeepEqual(got, wantLabels) {
			t.Errorf("%s = %v, want %v", what, got, wantLabels)
		}
	}
	if len(d.OwnerReferences) != 1 || d.OwnerReferences[0].UID != "owner-uid" || d.OwnerReferences[0].Kind != "ConfigMap" || d.OwnerReferences[0].Name != owner.Name {
		t.Errorf("owner references %+v, want the owner ConfigMap", d.OwnerReferences)
	}
	if d.Annotations[AnnotationSpec] == "" {
		t.Error("no spec fingerprint")
	}
	pod := d.Spec.Template.Spec
	if *pod.AutomountServiceAccountToken || *pod.EnableServiceLinks {
		t.Error("model containers get a service account token or service links")
	}
	if d.Spec.Template.Annotations[AnnotationHostnames] != "Pre,model" {
		t.Errorf("hostnames annotation %q", d.Spec.Template.Annotations[AnnotationHostnames])
	}
	probe := func(failures int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ping", Port: intstr.FromInt(8080), Scheme: "HTTP"}},
			PeriodSeconds: 2, TimeoutSeconds: 2, FailureThreshold: failures, SuccessThreshold: 1}
	}
	lim := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}
	want0 := corev1.Container{
		Name: "pre", Image: "mce-example/pre:latest", ImagePullPolicy: corev1.PullIfNotPresent,
		Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "SAGEMAKER_BIND_TO_PORT", Value: "8080"},
			{Name: "SAGEMAKER_SAFE_PORT_RANGE", Value: pod.Containers[0].Env[2].Value}},
		Ports:        []corev1.ContainerPort{{Name: "sm-8080", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		StartupProbe: probe(30), ReadinessProbe: probe(3), TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		Resources: corev1.ResourceRequirements{Limits: lim, Requests: lim},
	}
	if !equality.Semantic.DeepEqual(pod.Containers[0], want0) {
		t.Errorf("container 0:\n got %+v\nwant %+v", pod.Containers[0], want0)
	}
	if pod.Containers[0].Env[2].Name != "SAGEMAKER_SAFE_PORT_RANGE" {
		t.Errorf("env %v", pod.Containers[0].Env)
	}
	c1 := pod.Containers[1]
	if c1.Ports[0].ContainerPort != 8081 || c1.ReadinessProbe.HTTPGet.Port.IntValue() != 8081 || c1.StartupProbe.HTTPGet.Port.IntValue() != 8081 {
		t.Errorf("second container's ports %+v probe %+v, want 8081", c1.Ports, c1.ReadinessProbe.HTTPGet)
	}
	if q := c1.Resources.Limits[ResourceGPU]; q.Value() != 2 || len(c1.Resources.Limits) != 1 {
		t.Errorf("second container's limits %v, want nvidia.com/gpu 2 only", c1.Resources.Limits)
	}
	wantMount := []corev1.VolumeMount{{Name: "model-1", MountPath: "/opt/ml/model", ReadOnly: true}}
	if !equality.Semantic.DeepEqual(c1.VolumeMounts, wantMount) || len(pod.Containers[0].VolumeMounts) != 0 {
		t.Errorf("mounts %+v / %+v, want model data read-only at /opt/ml/model in the second only", pod.Containers[0].VolumeMounts, c1.VolumeMounts)
	}
	wantInit := []corev1.Container{{Name: "fetch-1", Image: "mce-example/mce:latest", ImagePullPolicy: corev1.PullIfNotPresent,
		Args:                     []string{"fetch", "--url", "s3://bucket/model.tar.gz", "--dest", "/mnt/model", "--s3-endpoint", "http://s3.local:9000"},
		VolumeMounts:             []corev1.VolumeMount{{Name: "model-1", MountPath: "/mnt/model"}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}}
	if !equality.Semantic.DeepEqual(pod.InitContainers, wantInit) {
		t.Errorf("init containers:\n got %+v\nwant %+v", pod.InitContainers, wantInit)
	}
	wantVols := []corev1.Volume{{Name: "model-1", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	if !equality.Semantic.DeepEqual(pod.Volumes, wantVols) {
		t.Errorf("volumes %+v", pod.Volumes)
	}
}

func TestFingerprint(t *testing.T) {
	o, plan := testOptions(), testPlan()
	a, _ := Deployment(o, plan, 1, plan.Variants[0], nil)
	scaled := plan
	scaled.Variants = []containers.VariantPlan{plan.Variants[0]}
	scaled.Variants[0].InstanceCount = 7
	b, _ := Deployment(o, scaled, 1, scaled.Variants[0], nil)
	if a.Annotations[AnnotationSpec] != b.Annotations[AnnotationSpec] {
		t.Error("the instance count changes the fingerprint; scaling would stop adoption")
	}
	other := scaled
	other.Variants = []containers.VariantPlan{scaled.Variants[0]}
	other.Variants[0].Containers = append([]containers.ContainerPlan(nil), plan.Variants[0].Containers...)
	other.Variants[0].Containers[1].Image = "mce-example/model:v2"
	c, _ := Deployment(o, other, 1, other.Variants[0], nil)
	if a.Annotations[AnnotationSpec] == c.Annotations[AnnotationSpec] {
		t.Error("a new image keeps the fingerprint")
	}
	h1, _ := PlanHash(o, plan, 1)
	h2, _ := PlanHash(o, other, 1)
	if h1 == h2 || h1 == "" {
		t.Errorf("plan hashes %q %q", h1, h2)
	}
}

func TestOwnerConfigMap(t *testing.T) {
	cm := OwnerConfigMap(testOptions(), testPlan(), 2, "abc")
	if cm.Name != Name(253, "mce", "default", "Sentiment-EP", "g2") || cm.Namespace != "ml" || cm.Annotations[AnnotationSpec] != "abc" {
		t.Errorf("owner %+v", cm.ObjectMeta)
	}
	want := map[string]string{LabelManaged: "true", LabelInstance: "default", LabelEndpoint: "Sentiment-EP", LabelGeneration: "2"}
	if !equality.Semantic.DeepEqual(cm.Labels, want) {
		t.Errorf("labels %v", cm.Labels)
	}
}

func TestName(t *testing.T) {
	long := strings.Repeat("Ab", 40)
	for _, tc := range []struct {
		parts []string
		max   int
	}{{[]string{"mce", "x"}, 46}, {[]string{"mce", long, "g1"}, 46}, {[]string{"a_b", "C"}, 63}, {[]string{"--"}, 63}} {
		n := Name(tc.max, tc.parts...)
		if len(n) > tc.max || !dnsLabel.MatchString(n) {
			t.Errorf("Name(%d, %q) = %q: not a DNS label within the limit", tc.max, tc.parts, n)
		}
	}
	if Name(46, "mce", "x") != "mce-x" {
		t.Errorf("a valid name changed: %q", Name(46, "mce", "x"))
	}
	if Name(46, "mce", long+"a") == Name(46, "mce", long+"b") {
		t.Error("shortened names collide")
	}
	if Name(63, "A") == Name(63, "a") {
		t.Error("names differing in case collide")
	}
}

func TestCheckRefuses(t *testing.T) {
	two := testPlan()
	two.Variants[0].Containers[0].Mode, two.Variants[0].Containers[1].Mode = "MultiModel", "MultiModel"
	two.Variants[0].Containers[0].ModelDataURL = "s3://b/p/"
	if err := Check(two); err == nil || !strings.Contains(err.Error(), "more than one container in MultiModel mode") {
		t.Errorf("two multi-model containers: %v", err)
	}
	noPrefix := testPlan()
	noPrefix.Variants[0].Containers[0].Mode = "MultiModel"
	if err := Check(noPrefix); err == nil || !strings.Contains(err.Error(), "MultiModel needs a ModelDataUrl prefix") {
		t.Errorf("multi-model without a prefix: %v", err)
	}
	iso := testPlan()
	iso.Variants[0].NetworkIsolation = true
	if err := Check(iso); !errors.Is(err, ErrNetworkIsolation) {
		t.Errorf("isolation: %v", err)
	}
	for _, g := range []string{"all", "device=0"} {
		p := testPlan()
		p.Variants[0].Containers[1].GPUs = g
		if err := Check(p); err == nil || !strings.Contains(err.Error(), "give Resources.Gpus a count") {
			t.Errorf("GPUs %q: %v", g, err)
		}
	}
	if err := Check(testPlan()); err != nil {
		t.Errorf("a plan the engine runs: %v", err)
	}
}

func TestModelVolumesAndFileURLs(t *testing.T) {
	o := testOptions()
	o.ModelVolumes = []ModelVolume{{Volume: corev1.Volume{Name: "models", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "models"}}}, MountPath: "/models"}}
	o.FetchArgs = []string{"--model-root", "/models"}
	plan := testPlan()
	plan.Variants[0].Containers[1].ModelDataURL = "file://m/model.tar.gz"
	plan.Variants[0].Containers[1].BaseDir = "/models"
	d, err := Deployment(o, plan, 1, plan.Variants[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	init := d.Spec.Template.Spec.InitContainers[0]
	if init.Args[2] != "file:///models/m/model.tar.gz" {
		t.Errorf("relative file:// URL passed as %q, want it resolved against the model's folder", init.Args[2])
	}
	if m := init.VolumeMounts[1]; m.Name != "models" || m.MountPath != "/models" || !m.ReadOnly {
		t.Errorf("model volume mount %+v", m)
	}
	if vols := d.Spec.Template.Spec.Volumes; len(vols) != 2 || vols[1].Name != "models" {
		t.Errorf("volumes %+v", vols)
	}
	_ = metav1.Now
}

// TestMultiModelManifest: a MultiModel container reads the agent's volume
// read-only at /opt/ml/models; the agent sidecar (mce's image) comes after
// the chain, owns the volume read-write, fetches under the prefix with
// fetch's settings and the disk capacity, and is Ready by its /ping.
func TestMultiModelManifest(t *testing.T) {
	o := testOptions()
	o.MultiModelDiskCapacity = 64 << 20
	o.ModelVolumes = []ModelVolume{{Volume: corev1.Volume{Name: "models", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: "/srv/models"}}}, MountPath: "/models"}}
	plan := testPlan()
	mm := &plan.Variants[0].Containers[1]
	mm.Mode, mm.ModelDataURL, mm.ModelCacheSetting, mm.Hostname = "MultiModel", "s3://bucket/mme", "Enabled", "mce-agent"
	owner := OwnerConfigMap(o, plan, 2, "h")
	d, err := Deployment(o, plan, 2, plan.Variants[0], owner)
	if err != nil {
		t.Fatal(err)
	}
	ps := d.Spec.Template.Spec
	if len(ps.InitContainers) != 0 {
		t.Errorf("init containers %v: a multi-model container's data comes through the agent", ps.InitContainers)
	}
	if len(ps.Containers) != 3 || ps.Containers[2].Name != AgentContainer {
		t.Fatalf("containers %v, want the two of the chain then %s", names(ps.Containers), AgentContainer)
	}
	model, ag := ps.Containers[1], ps.Containers[2]
	if model.Name == AgentContainer || !dnsLabel.MatchString(model.Name) {
		t.Errorf("a container with hostname mce-agent is named %q", model.Name)
	}
	env := map[string]string{}
	for _, e := range model.Env {
		env[e.Name] = e.Value
	}
	if env["SAGEMAKER_MULTI_MODEL"] != "true" || env["SAGEMAKER_BIND_TO_PORT"] != "8081" {
		t.Errorf("model container env %v", env)
	}
	if len(model.VolumeMounts) != 1 || model.VolumeMounts[0].MountPath != "/opt/ml/models" || !model.VolumeMounts[0].ReadOnly {
		t.Errorf("model container mounts %+v, want the models volume read-only at /opt/ml/models", model.VolumeMounts)
	}
	vol := model.VolumeMounts[0].Name
	if ag.Image != o.FetchImage || ag.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("agent image %s %s", ag.Image, ag.ImagePullPolicy)
	}
	wantArgs := []string{"agent", "--prefix", "s3://bucket/mme/", "--dir", "/opt/ml/models", "--listen", ":9400", "--log-format", "json",
		"--s3-endpoint", "http://s3.local:9000", "--disk-capacity", "67108864"}
	if strings.Join(ag.Args, " ") != strings.Join(wantArgs, " ") {
		t.Errorf("agent args %q\nwant %q", ag.Args, wantArgs)
	}
	if len(ag.VolumeMounts) != 2 || ag.VolumeMounts[0].Name != vol || ag.VolumeMounts[0].MountPath != "/opt/ml/models" || ag.VolumeMounts[0].ReadOnly ||
		ag.VolumeMounts[1].Name != "models" || !ag.VolumeMounts[1].ReadOnly {
		t.Errorf("agent mounts %+v, want its volume read-write and the model volume read-only", ag.VolumeMounts)
	}
	if p := ag.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/ping" || p.HTTPGet.Port != intstr.FromInt(9400) {
		t.Errorf("agent readiness probe %+v", p)
	}
	if len(ag.Ports) != 1 || ag.Ports[0].ContainerPort != 9400 {
		t.Errorf("agent ports %+v", ag.Ports)
	}
	var found bool
	for _, v := range ps.Volumes {
		if v.Name == vol {
			found = v.EmptyDir != nil && v.EmptyDir.SizeLimit == nil
		}
	}
	if !found || len(ps.Volumes) != 2 {
		t.Errorf("volumes %+v, want the agent's emptyDir (no sizeLimit: loaded models may pass the capacity) and the model volume", ps.Volumes)
	}
	wantLabels := Labels(o.Instance, plan.Name, 2, "AllTraffic")
	if !equality.Semantic.DeepEqual(d.Spec.Template.Labels, wantLabels) || !equality.Semantic.DeepEqual(d.Labels, wantLabels) {
		t.Errorf("labels %v", d.Spec.Template.Labels)
	}
	if len(d.OwnerReferences) != 1 {
		t.Errorf("owner references %+v", d.OwnerReferences)
	}

	// A relative file:// prefix resolves against the model's folder.
	mm.ModelDataURL, mm.BaseDir = "file://mme", "/models"
	d, err = Deployment(o, plan, 2, plan.Variants[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if args := d.Spec.Template.Spec.Containers[2].Args; args[2] != "file:///models/mme/" {
		t.Errorf("file:// prefix passed as %q", args[2])
	}
	// The pod of the plan round-trips its containers to the chain.
	p := &corev1.Pod{Spec: d.Spec.Template.Spec}
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Ready: true, RestartCount: 1})
	}
	s := snapshot(p, plan.Variants[0])
	if len(s.ready) != 2 || !s.ready[1] || s.agentRestarts != 1 || s.restarts[1] != 1 {
		t.Errorf("snapshot %+v", s)
	}
	if h := hostnameOf(p, plan.Variants[0], AgentContainer); !strings.Contains(h, "model cache sidecar") {
		t.Errorf("the agent is called %q in failure reasons", h)
	}
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// TestSubmitDirectoryFetched: an s3:// SAGEMAKER_SUBMIT_DIRECTORY is fetched
// by an init container of mce's image into a volume of its own, mounted
// read-only at /opt/ml/code, and the variable points there; its failure is
// a FailureReason naming the variable and the container.
func TestSubmitDirectoryFetched(t *testing.T) {
	plan := testPlan()
	plan.Variants[0].Containers[0].Environment = map[string]string{
		containers.SubmitDirEnv: "s3://bucket/src/sourcedir.tar.gz", "SAGEMAKER_PROGRAM": "inference.py"}
	d, err := Deployment(testOptions(), plan, 1, plan.Variants[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	c0 := pod.Containers[0]
	env := map[string]string{}
	for _, e := range c0.Env {
		env[e.Name] = e.Value
	}
	if env[containers.SubmitDirEnv] != containers.CodeDir || env["SAGEMAKER_PROGRAM"] != "inference.py" {
		t.Errorf("env %v: want %s=%s", c0.Env, containers.SubmitDirEnv, containers.CodeDir)
	}
	wantMount := []corev1.VolumeMount{{Name: "code-0", MountPath: containers.CodeDir, ReadOnly: true}}
	if !equality.Semantic.DeepEqual(c0.VolumeMounts, wantMount) {
		t.Errorf("mounts %+v, want %+v", c0.VolumeMounts, wantMount)
	}
	var fetch *corev1.Container
	for i := range pod.InitContainers {
		if pod.InitContainers[i].Name == "fetch-code-0" {
			fetch = &pod.InitContainers[i]
		}
	}
	wantArgs := []string{"fetch", "--url", "s3://bucket/src/sourcedir.tar.gz", "--dest", "/mnt/model", "--s3-endpoint", "http://s3.local:9000"}
	if fetch == nil || !slices.Equal(fetch.Args, wantArgs) || fetch.Image != "mce-example/mce:latest" ||
		len(fetch.VolumeMounts) != 1 || fetch.VolumeMounts[0].Name != "code-0" || fetch.VolumeMounts[0].ReadOnly {
		t.Errorf("init containers %+v: want fetch-code-0 running %v into code-0", pod.InitContainers, wantArgs)
	}
	hasVol := false
	for _, v := range pod.Volumes {
		hasVol = hasVol || (v.Name == "code-0" && v.EmptyDir != nil)
	}
	if !hasVol {
		t.Errorf("volumes %+v: no emptyDir code-0", pod.Volumes)
	}

	failed := &corev1.Pod{Spec: pod, Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{Name: "fetch-code-0",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1,
			Message: `model data "s3://bucket/src/sourcedir.tar.gz" not found`}}}}}}
	got := PodFailure(failed, plan.Variants[0])
	if !strings.Contains(got, `the inference code (SAGEMAKER_SUBMIT_DIRECTORY) of container "Pre" could not be fetched (exit code 1)`) ||
		!strings.Contains(got, "not found") {
		t.Errorf("PodFailure = %q", got)
	}
}

// A shadow variant's Deployment and pods carry LabelShadow, outside the
// selector; a production variant's do not (TestDeploymentManifest).
func TestShadowDeploymentLabels(t *testing.T) {
	plan := testPlan()
	prod := plan.Variants[0]
	shadow := prod
	shadow.Shadow = true
	d, err := Deployment(testOptions(), plan, 1, shadow, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Deployment(testOptions(), plan, 1, prod, nil)
	if err != nil {
		t.Fatal(err)
	}
	for what, labels := range map[string]map[string]string{"labels": d.Labels, "pod labels": d.Spec.Template.Labels} {
		if labels[LabelShadow] != "true" || labels[LabelVariant] != "AllTraffic" {
			t.Errorf("shadow %s = %v, want %s=true beside the variant's", what, labels, LabelShadow)
		}
	}
	if _, ok := d.Spec.Selector.MatchLabels[LabelShadow]; ok {
		t.Errorf("the selector %v holds %s", d.Spec.Selector.MatchLabels, LabelShadow)
	}
	if d.Annotations[AnnotationSpec] == p.Annotations[AnnotationSpec] {
		t.Error("a shadow and a production variant of the same containers share a fingerprint: one would be adopted as the other")
	}
}

// TestDownloadTimeoutReachesFetch: a variant's
// ModelDataDownloadTimeoutInSeconds bounds its model data's init container
// (`mce fetch --timeout`), and nothing else's.
func TestDownloadTimeoutReachesFetch(t *testing.T) {
	plan := testPlan()
	plan.Variants[0].DownloadTimeout = 10 * time.Minute
	plan.Variants[0].Containers[0].Environment["SAGEMAKER_SUBMIT_DIRECTORY"] = "s3://bucket/src/sourcedir.tar.gz"
	ps, err := podSpec(testOptions(), plan.Variants[0])
	if err != nil {
		t.Fatal(err)
	}
	var seen int
	for _, c := range ps.InitContainers {
		i := slices.Index(c.Args, "--timeout")
		switch {
		case c.Name == "fetch-1":
			seen++
			if i < 0 || i+1 >= len(c.Args) || c.Args[i+1] != "10m0s" {
				t.Errorf("%s args %v, want --timeout 10m0s", c.Name, c.Args)
			}
		case i >= 0:
			t.Errorf("%s args %v: only model data is bounded by the setting", c.Name, c.Args)
		}
	}
	if seen != 1 || len(ps.InitContainers) != 2 {
		t.Errorf("init containers %d (model data seen %d), want the model's and the code's", len(ps.InitContainers), seen)
	}
}

// Each AdditionalModelDataSources channel gets an init container that
// fetches it (with the download timeout) into an emptyDir of its own,
// mounted read-only at its channel's folder; a failed fetch names the
// channel.
func TestAdditionalModelDataFetched(t *testing.T) {
	plan := testPlan()
	plan.Variants[0].DownloadTimeout = 90 * time.Second
	plan.Variants[0].Containers[0].AdditionalModelData = []containers.ModelDataChannel{
		{Channel: "draft_model", URL: "s3://bucket/draft/"}, {Channel: "Extra.v1", URL: "s3://bucket/extra.tar.gz"}}
	d, err := Deployment(testOptions(), plan, 1, plan.Variants[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range pod.Containers[0].VolumeMounts {
		mounts[m.MountPath] = m
	}
	for k, ch := range []string{"draft_model", "Extra.v1"} {
		vol := fmt.Sprintf("extra-0-%d", k)
		if m, ok := mounts[containers.AdditionalModelDataDir+"/"+ch]; !ok || m.Name != vol || !m.ReadOnly {
			t.Errorf("channel %s: mount %+v (mounts %v)", ch, m, mounts)
		}
		var fetch *corev1.Container
		for i := range pod.InitContainers {
			if pod.InitContainers[i].Name == fmt.Sprintf("fetch-extra-0-%d", k) {
				fetch = &pod.InitContainers[i]
			}
		}
		url := plan.Variants[0].Containers[0].AdditionalModelData[k].URL
		if fetch == nil || !slices.Contains(fetch.Args, url) || !slices.Contains(fetch.Args, "1m30s") || fetch.VolumeMounts[0].Name != vol {
			t.Errorf("channel %s: init containers %+v", ch, pod.InitContainers)
		}
	}
	failed := &corev1.Pod{Spec: pod, Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{Name: "fetch-extra-0-1",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "no such object"}}}}}}
	if got := PodFailure(failed, plan.Variants[0]); !strings.Contains(got, `the additional model data (channel "Extra.v1") of container "Pre" could not be fetched (exit code 1)`) {
		t.Errorf("PodFailure = %q", got)
	}
}
