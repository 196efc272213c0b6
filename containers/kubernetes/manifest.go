package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/gpu"
	"github.com/mce-run/mce/containers/mme/agent"
)

// Labels on every object the engine creates. Adopt and Reconcile select on
// them, so they are the contract between one run of mce and the next.
const (
	LabelManaged    = "mce.run/managed"    // always "true"
	LabelInstance   = "mce.run/instance"   // the mce instance name
	LabelEndpoint   = "mce.run/endpoint"   // EndpointName
	LabelVariant    = "mce.run/variant"    // VariantName
	LabelGeneration = "mce.run/generation" // the endpoint's generation
	// LabelShadow is "true" on the Deployment and pods of a shadow variant
	// (ShadowProductionVariants), absent elsewhere; it is not part of the
	// selector.
	LabelShadow = "mce.run/shadow"
	// AnnotationSpec fingerprints the generated object (its replicas and
	// owner aside); Adopt takes over only objects whose fingerprint matches.
	AnnotationSpec = "mce.run/spec"
	// AnnotationHostnames lists a pod's ContainerHostnames in chain order,
	// comma-separated (container names are lower-cased DNS labels).
	AnnotationHostnames = "mce.run/hostnames"
	// ResourceGPU is the extended resource NVIDIA's device plugin offers.
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
	// resourceMIGPrefix begins the extended resources NVIDIA's device
	// plugin offers for MIG partitions under its "mixed" strategy, one per
	// profile: nvidia.com/mig-3g.40gb.
	resourceMIGPrefix = "nvidia.com/mig-"
)

// ResourcePartition is the extended resource of MIG profile, SageMaker's
// name ("mig-3g.40gb"): nvidia.com/mig-3g.40gb, as the device plugin's mixed
// strategy names it.
func ResourcePartition(profile string) corev1.ResourceName {
	return corev1.ResourceName(resourceMIGPrefix + containers.NVIDIAProfile(profile))
}

// ModelDir is where SageMaker mounts a container's model data.
const ModelDir = "/opt/ml/model"

// fetchDir is where the init container writes the model data.
const fetchDir = "/mnt/model"

// AgentContainer is the name of the model cache sidecar of a pod whose
// variant has a MultiModel container: `mce agent` from mce's own image,
// answering mce's multi-model manager on agent.Port (package
// containers/mme/agent). It comes after the model containers, which keep
// their chain order.
const AgentContainer = "mce-agent"

// Errors of plans this engine cannot run (yet); their messages are the
// endpoint's FailureReason.
var (
	ErrNetworkIsolation = errors.New("EnableNetworkIsolation on the kubernetes engine is not supported yet")
)

// ManifestOptions are the settings of generated objects that do not come
// from the plan.
type ManifestOptions struct {
	// Instance is the mce instance name, in every object's labels.
	Instance string
	// Namespace of every object.
	Namespace string
	// FetchImage is mce's own image; its `mce fetch` init container writes
	// ModelDataUrl into the pod.
	FetchImage string
	// FetchArgs are extra arguments of `mce fetch` (--s3-endpoint,
	// --model-root, limits), the same for every pod.
	FetchArgs []string
	// FetchEnvFrom gives the init container its environment, such as AWS
	// credentials from a Secret.
	FetchEnvFrom []corev1.EnvFromSource
	// ModelVolumes are mounted read-only into the init container (at their
	// MountPath), e.g. a PersistentVolumeClaim holding file:// model data.
	ModelVolumes []ModelVolume
	// ImagePullPolicy of the model containers; "" means IfNotPresent.
	ImagePullPolicy corev1.PullPolicy
	// StopGrace is the pods' terminationGracePeriodSeconds; 0 means 30 s.
	StopGrace time.Duration
	// ProbePeriod is how often /ping is probed; 0 means 2 s.
	ProbePeriod time.Duration
	// MultiModelDiskCapacity bounds the bytes of model files the agent of a
	// multi-model pod keeps on its volume (its --disk-capacity); 0 means
	// unlimited.
	MultiModelDiskCapacity int64
}

// ModelVolume is a volume the fetch init container reads file:// model data from.
type ModelVolume struct {
	Volume    corev1.Volume
	MountPath string
}

// Name is a DNS-1123 name from parts, lower-cased, at most max characters;
// a name that had to be shortened or changed ends in a hash of the parts so
// that different parts never share a name.
func Name(max int, parts ...string) string {
	raw := strings.Join(parts, "-")
	var b strings.Builder
	for _, r := range strings.ToLower(raw) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == strings.Join(parts, "-") && len(s) <= max {
		return s
	}
	sum := sha256.Sum256([]byte(raw))
	h := hex.EncodeToString(sum[:])[:8]
	if len(s) > max-9 {
		s = strings.TrimRight(s[:max-9], "-")
	}
	if s == "" {
		return h
	}
	return s + "-" + h
}

// LabelValue is v as a label value: itself when valid, otherwise a name
// made from it (Name's rules, 63 characters).
func LabelValue(v string) string {
	if len(v) <= 63 && labelValue.MatchString(v) {
		return v
	}
	return Name(63, v)
}

var (
	labelValue = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`)
	dnsLabel   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// ownerName is the name of the per-generation owner ConfigMap.
func ownerName(instance, endpoint string, gen int) string {
	return Name(253, "mce", instance, endpoint, "g"+strconv.Itoa(gen))
}

// deploymentName keeps pod names (name + 17 characters of hashes) within a
// DNS label.
func deploymentName(instance, endpoint string, gen int, variant string) string {
	return Name(46, "mce", instance, endpoint, "g"+strconv.Itoa(gen), variant)
}

// Labels selects the objects of one generation of an endpoint; variant may
// be empty.
func Labels(instance, endpoint string, gen int, variant string) map[string]string {
	l := map[string]string{
		LabelManaged:    "true",
		LabelInstance:   LabelValue(instance),
		LabelEndpoint:   LabelValue(endpoint),
		LabelGeneration: strconv.Itoa(gen),
	}
	if variant != "" {
		l[LabelVariant] = LabelValue(variant)
	}
	return l
}

// Check reports why the plan cannot run on this engine, or nil.
func Check(plan containers.EndpointPlan) error {
	for _, v := range plan.Variants {
		if v.NetworkIsolation {
			return fmt.Errorf("variant %q: %w", v.Name, ErrNetworkIsolation)
		}
		if len(v.Containers) == 0 || len(v.Containers) > 15 {
			return fmt.Errorf("variant %q has %d containers; an instance runs 1 to 15", v.Name, len(v.Containers))
		}
		mm := 0
		for _, c := range v.Containers {
			if c.Mode == "MultiModel" {
				if mm++; mm > 1 {
					return fmt.Errorf("variant %q has more than one container in MultiModel mode", v.Name)
				}
				if c.ModelDataURL == "" {
					return fmt.Errorf("variant %q container %q: MultiModel needs a ModelDataUrl prefix", v.Name, c.Hostname)
				}
			}
			if _, err := gpuCount(c.GPUs); err != nil {
				return fmt.Errorf("variant %q container %q: %w", v.Name, c.Hostname, err)
			}
		}
	}
	return nil
}

// gpuCount is the nvidia.com/gpu limit of a resolved GPU request. Kubernetes
// hands out counts: "all" and device IDs have no meaning on a cluster.
func gpuCount(s string) (int, error) {
	req, err := gpu.ParseRequest(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("GPUs: %w", err)
	case req.All:
		return 0, errors.New(`asks for every GPU ("all", as instance type local_gpu does); on the kubernetes engine give Resources.Gpus a count, or a GPU instance type such as ml.g5.xlarge`)
	case len(req.DeviceIDs) > 0:
		return 0, errors.New("asks for GPUs by device ID; on the kubernetes engine give Resources.Gpus a count")
	}
	return req.Count, nil
}

// OwnerConfigMap is the per-generation object every other object of the
// generation is owned by: deleting it deletes them all.
func OwnerConfigMap(o ManifestOptions, plan containers.EndpointPlan, gen int, specHash string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        ownerName(o.Instance, plan.Name, gen),
			Namespace:   o.Namespace,
			Labels:      Labels(o.Instance, plan.Name, gen, ""),
			Annotations: map[string]string{AnnotationSpec: specHash},
		},
		Data: map[string]string{"endpoint": plan.Name, "generation": strconv.Itoa(gen)},
	}
}

// ownerRef points at the owner ConfigMap; the garbage collector deletes the
// object with it.
func ownerRef(owner *corev1.ConfigMap) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		BlockOwnerDeletion: new(true),
	}}
}

// Deployment is a variant as a Deployment: a pod is an instance, replicas
// the instance count. owner may be nil (the fingerprint is computed
// without it).
func Deployment(o ManifestOptions, plan containers.EndpointPlan, gen int, v containers.VariantPlan, owner *corev1.ConfigMap) (*appsv1.Deployment, error) {
	if err := Check(containers.EndpointPlan{Variants: []containers.VariantPlan{v}}); err != nil {
		return nil, err
	}
	sel := Labels(o.Instance, plan.Name, gen, v.Name)
	pod, err := podSpec(o, v)
	if err != nil {
		return nil, err
	}
	var hostnames []string
	for _, c := range v.Containers {
		hostnames = append(hostnames, c.Hostname)
	}
	labels := sel
	if v.Shadow {
		labels = maps.Clone(sel)
		labels[LabelShadow] = "true"
	}
	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      deploymentName(o.Instance, plan.Name, gen, v.Name),
			Namespace: o.Namespace,
			Labels:    labels,
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(v.InstanceCount)),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: labels,
					Annotations: map[string]string{
						AnnotationHostnames:     strings.Join(hostnames, ","),
						"mce.run/endpoint-name": plan.Name, "mce.run/variant-name": v.Name,
					},
				},
				Spec: pod,
			},
		},
	}
	h, err := fingerprint(d)
	if err != nil {
		return nil, err
	}
	d.Annotations = map[string]string{AnnotationSpec: h}
	if owner != nil {
		d.OwnerReferences = ownerRef(owner)
	}
	return d, nil
}

// fingerprint hashes what Adopt compares: the Deployment without its
// replicas (UpdateEndpointWeightsAndCapacities changes them), owner and
// annotations.
func fingerprint(d *appsv1.Deployment) (string, error) {
	c := d.DeepCopy()
	c.Spec.Replicas = nil
	c.OwnerReferences = nil
	c.Annotations = nil
	// The node affinity of an inference-component copy depends on where the
	// variant's other copies run when it is launched, not on its definition.
	c.Spec.Template.Spec.Affinity = nil
	b, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

// PlanHash fingerprints a whole generation: its variants' Deployments.
func PlanHash(o ManifestOptions, plan containers.EndpointPlan, gen int) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", plan.Name, plan.Mode)
	for _, v := range plan.Variants {
		d, err := Deployment(o, plan, gen, v, nil)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%s\x00", v.Name, d.Annotations[AnnotationSpec])
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

func podSpec(o ManifestOptions, v containers.VariantPlan) (corev1.PodSpec, error) {
	grace := o.StopGrace
	if grace <= 0 {
		grace = 30 * time.Second
	}
	period := o.ProbePeriod
	if period <= 0 {
		period = 2 * time.Second
	}
	pull := o.ImagePullPolicy
	if pull == "" {
		pull = corev1.PullIfNotPresent
	}
	health := v.HealthCheckTimeout
	if health <= 0 {
		health = containers.DefaultHealthCheckTimeout
	}
	ps := corev1.PodSpec{
		// Model containers have no business with the cluster's API.
		AutomountServiceAccountToken:  new(false),
		EnableServiceLinks:            new(false),
		TerminationGracePeriodSeconds: new(int64(math.Ceil(grace.Seconds()))),
		RestartPolicy:                 corev1.RestartPolicyAlways,
	}
	names := map[string]bool{AgentContainer: true}
	var agents []corev1.Container
	for i, c := range v.Containers {
		name := strings.ToLower(c.Hostname)
		if len(name) > 63 || !dnsLabel.MatchString(name) || names[name] {
			name = Name(63, c.Hostname, strconv.Itoa(i))
		}
		names[name] = true
		port := containers.ContainerPort(i)
		env := containers.SageMakerEnv(c.Environment, i, c.Mode == "MultiModel")
		codeURL, remoteCode := containers.RemoteSubmitDir(c.Environment)
		if remoteCode {
			env = containers.WithCodeDir(env)
		}
		ctr := corev1.Container{
			Name:            name,
			Image:           c.Image,
			ImagePullPolicy: pull,
			Env:             envVars(env),
			Ports: []corev1.ContainerPort{{
				Name: "sm-" + strconv.Itoa(port), ContainerPort: int32(port), Protocol: corev1.ProtocolTCP,
			}},
			// The startup probe is SageMaker's startup window: a container
			// that does not answer /ping within it is restarted (and the
			// launch fails); afterwards readiness follows /ping.
			// A container that fails leaves its last log lines in its status,
			// which the FailureReason quotes.
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			StartupProbe:             pingProbe(port, period, int32(math.Ceil(float64(health)/float64(period)))),
			ReadinessProbe:           pingProbe(port, period, 3),
		}
		n, err := gpuCount(c.GPUs)
		if err != nil {
			return ps, fmt.Errorf("container %q: %w", c.Hostname, err)
		}
		lim := corev1.ResourceList{}
		if n > 0 {
			lim[ResourceGPU] = *resource.NewQuantity(int64(n), resource.DecimalSI)
		}
		if c.Partition != "" {
			lim[ResourcePartition(c.Partition)] = *resource.NewQuantity(1, resource.DecimalSI)
		}
		if c.Resources.Cpus > 0 {
			lim[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(math.Ceil(c.Resources.Cpus*1000)), resource.DecimalSI)
		}
		if c.Resources.MemoryMiB > 0 {
			lim[corev1.ResourceMemory] = *resource.NewQuantity(c.Resources.MemoryMiB<<20, resource.BinarySI)
		}
		if len(lim) > 0 {
			// Requests equal to limits: the scheduler places an instance only
			// where what it asks for is free, as SageMaker's instance types do.
			// An inference component's copy reserves its minimum memory
			// (MinMemoryRequiredInMb) and may use up to its maximum.
			ctr.Resources.Limits, ctr.Resources.Requests = lim, lim.DeepCopy()
			if m := c.MemoryRequestMiB; m > 0 && m < c.Resources.MemoryMiB {
				ctr.Resources.Requests[corev1.ResourceMemory] = *resource.NewQuantity(m<<20, resource.BinarySI)
			}
		}
		switch {
		case c.Mode == "MultiModel":
			// The agent's volume: it writes <id>/model folders, the container
			// reads them where the load call names them.
			vol := "models-" + strconv.Itoa(i)
			// No sizeLimit: files of loaded models may pass the capacity
			// until they are unloaded, and the kubelet evicts a pod whose
			// emptyDir passes its limit.
			ps.Volumes = append(ps.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: agent.ModelsDir, ReadOnly: true})
			agents = append(agents, agentContainer(o, c, vol, period))
		case c.ModelDataURL != "":
			vol := "model-" + strconv.Itoa(i)
			ps.Volumes = append(ps.Volumes, corev1.Volume{Name: vol,
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: ModelDir, ReadOnly: true})
			fc := fetchContainer(o, i, c, vol)
			if v.DownloadTimeout > 0 { // ModelDataDownloadTimeoutInSeconds bounds the model data only
				fc.Args = append(fc.Args, "--timeout", v.DownloadTimeout.String())
			}
			ps.InitContainers = append(ps.InitContainers, fc)
		}
		for k, ch := range c.AdditionalModelData {
			// Each AdditionalModelDataSources channel is fetched as model
			// data is, into a volume of its own at its channel's folder.
			vol := "extra-" + strconv.Itoa(i) + "-" + strconv.Itoa(k)
			ps.Volumes = append(ps.Volumes, corev1.Volume{Name: vol,
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: vol,
				MountPath: containers.AdditionalModelDataDir + "/" + ch.Channel, ReadOnly: true})
			fc := fetchContainer(o, i, containers.ContainerPlan{ModelDataURL: ch.URL, BaseDir: c.BaseDir}, vol)
			fc.Name = fetchExtraPrefix + strconv.Itoa(i) + "-" + strconv.Itoa(k)
			if v.DownloadTimeout > 0 {
				fc.Args = append(fc.Args, "--timeout", v.DownloadTimeout.String())
			}
			ps.InitContainers = append(ps.InitContainers, fc)
		}
		if remoteCode {
			// An s3:// SAGEMAKER_SUBMIT_DIRECTORY is fetched as model data
			// is, into a volume of its own at containers.CodeDir.
			vol := "code-" + strconv.Itoa(i)
			ps.Volumes = append(ps.Volumes, corev1.Volume{Name: vol,
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: containers.CodeDir, ReadOnly: true})
			fc := fetchContainer(o, i, containers.ContainerPlan{ModelDataURL: codeURL}, vol)
			fc.Name = fetchCodePrefix + strconv.Itoa(i)
			ps.InitContainers = append(ps.InitContainers, fc)
		}
		ps.Containers = append(ps.Containers, ctr)
	}
	ps.Containers = append(ps.Containers, agents...)   // after the chain: pods.go matches containers by position
	if len(ps.InitContainers) > 0 || len(agents) > 0 { // only the fetch init containers and the agent mount them
		for _, mv := range o.ModelVolumes {
			ps.Volumes = append(ps.Volumes, mv.Volume)
		}
	}
	return ps, nil
}

// fetchCodePrefix names the init container that fetches container i's
// s3:// SAGEMAKER_SUBMIT_DIRECTORY (fetch-code-<i>).
const fetchCodePrefix = "fetch-code-"

// fetchExtraPrefix names the init container that fetches channel k of
// container i's AdditionalModelDataSources (fetch-extra-<i>-<k>).
const fetchExtraPrefix = "fetch-extra-"

// fetchContainer writes container i's model data into volume vol with
// `mce fetch` (the same fetcher and safety limits as the Docker engine).
func fetchContainer(o ManifestOptions, i int, c containers.ContainerPlan, vol string) corev1.Container {
	url := c.ModelDataURL
	if p, ok := c.ModelDataPath(); ok {
		url = "file://" + p
	}
	args := append([]string{"fetch", "--url", url, "--dest", fetchDir}, o.FetchArgs...)
	mounts := []corev1.VolumeMount{{Name: vol, MountPath: fetchDir}}
	for _, mv := range o.ModelVolumes {
		mounts = append(mounts, corev1.VolumeMount{Name: mv.Volume.Name, MountPath: mv.MountPath, ReadOnly: true})
	}
	return corev1.Container{
		Name:            "fetch-" + strconv.Itoa(i),
		Image:           o.FetchImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            args,
		EnvFrom:         o.FetchEnvFrom,
		// mce fetch's error is the FailureReason's detail.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts:             mounts,
	}
}

// agentContainer is the model cache sidecar of MultiModel container c: it
// owns volume vol (read-write at agent.ModelsDir) and fetches
// <prefix><TargetModel> there when mce asks, with fetch's settings.
func agentContainer(o ManifestOptions, c containers.ContainerPlan, vol string, period time.Duration) corev1.Container {
	prefix := c.ModelDataURL
	if p, ok := c.ModelDataPath(); ok {
		prefix = "file://" + p
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	args := []string{"agent", "--prefix", prefix, "--dir", agent.ModelsDir, "--listen", ":" + strconv.Itoa(agent.Port), "--log-format", "json"}
	args = append(args, o.FetchArgs...)
	if o.MultiModelDiskCapacity > 0 {
		args = append(args, "--disk-capacity", strconv.FormatInt(o.MultiModelDiskCapacity, 10))
	}
	mounts := []corev1.VolumeMount{{Name: vol, MountPath: agent.ModelsDir}}
	for _, mv := range o.ModelVolumes {
		mounts = append(mounts, corev1.VolumeMount{Name: mv.Volume.Name, MountPath: mv.MountPath, ReadOnly: true})
	}
	probe := pingProbe(agent.Port, period, 3)
	return corev1.Container{
		Name:            AgentContainer,
		Image:           o.FetchImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            args,
		EnvFrom:         o.FetchEnvFrom,
		Ports: []corev1.ContainerPort{{
			Name: AgentContainer, ContainerPort: agent.Port, Protocol: corev1.ProtocolTCP,
		}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		ReadinessProbe:           probe,
		VolumeMounts:             mounts,
	}
}

func pingProbe(port int, period time.Duration, failures int32) *corev1.Probe {
	if failures < 1 {
		failures = 1
	}
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/ping", Port: intstr.FromInt(port), Scheme: corev1.URISchemeHTTP,
		}},
		PeriodSeconds:    int32(max(1, period/time.Second)),
		TimeoutSeconds:   2,
		FailureThreshold: failures,
		SuccessThreshold: 1,
	}
}

func envVars(kv []string) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(kv))
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		out = append(out, corev1.EnvVar{Name: k, Value: v})
	}
	return out
}
