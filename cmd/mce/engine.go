package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/docker"
	kengine "github.com/mce-run/mce/containers/kubernetes"
	"github.com/mce-run/mce/host"
)

// kubeFlags select and configure the engine endpoints run on.
type kubeFlags struct {
	engine       string
	kubeconfig   string
	namespace    string
	fetchImage   string
	modelVolumes []string
	onExit       string
}

func (k *kubeFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&k.engine, "engine", "docker", "where endpoints run: docker (the local Docker engine) or kubernetes (a variant is a Deployment, an instance a pod)")
	fl.StringVar(&k.kubeconfig, "kubeconfig", "", "kubernetes engine: kubeconfig file (default $KUBECONFIG or ~/.kube/config; in a pod, its service account)")
	fl.StringVar(&k.namespace, "namespace", "", "kubernetes engine: namespace of the endpoints' objects (default the kubeconfig's, or the pod's own)")
	fl.StringVar(&k.fetchImage, "fetch-image", "mce-example/mce:latest", "kubernetes engine: mce's own image, run as each pod's init container to fetch model data")
	fl.StringArrayVar(&k.modelVolumes, "model-volume", nil, "kubernetes engine: a volume file:// model data is read from in the pod, NAME=hostPath:/node/folder[:/mount] or NAME=pvc:CLAIM[:/mount] (mounted read-only at /mount, default /models/NAME, in the init container that fetches it); repeatable")
	fl.StringVar(&k.onExit, "on-exit", "", "what SIGINT/SIGTERM does to the endpoints' containers: remove (the docker engine's default) or keep (the kubernetes engine's default: pods keep serving and the next mce adopts them)")
}

// engine is what serve needs of the engine endpoints run on.
type engine struct {
	backend         containers.Engine
	instanceDir     string // state.db lives here
	onAddressChange func(func(baseURL string))
	close           func()
	// lost reports (then closes) that another mce may own the instance's
	// objects now: serve must stop at once, without tearing them down. Nil
	// when the engine's claim cannot be lost while running (Docker's).
	lost <-chan error
	// modelData checks CreateModel's ModelDataUrl; nil: the fetcher's
	// model roots on this machine.
	modelData host.ModelDataChecker
	// keep, when set, is called before shutdown to leave what runs running
	// (--on-exit keep).
	keep func()
}

func openEngine(ctx context.Context, f serveFlags, fetcher *artifact.Fetcher, log zerolog.Logger) (*engine, error) {
	switch f.kube.onExit {
	case "", "remove", "keep":
	default:
		return nil, &exitError{code: 2, msg: fmt.Sprintf("--on-exit %q: use remove or keep", f.kube.onExit)}
	}
	switch f.kube.engine {
	case "docker", "":
		if f.kube.onExit == "keep" {
			return nil, &exitError{code: 2, msg: "--on-exit keep: the docker engine removes its containers when mce stops (a killed mce's containers are adopted on the next start)"}
		}
		if len(f.kube.modelVolumes) > 0 {
			return nil, &exitError{code: 2, msg: "--model-volume is for the kubernetes engine; the docker engine reads file:// model data from this machine's folders (--model-root)"}
		}
		return openDocker(ctx, f, fetcher, log)
	case "kubernetes":
		return openKubernetes(ctx, f, log)
	}
	return nil, &exitError{code: 2, msg: fmt.Sprintf("--engine %q: use docker or kubernetes", f.kube.engine)}
}

func openDocker(ctx context.Context, f serveFlags, fetcher *artifact.Fetcher, log zerolog.Logger) (*engine, error) {
	cli, err := docker.Connect(ctx)
	if err != nil {
		return nil, err
	}
	pull, err := docker.ParsePullPolicy(f.pull)
	if err != nil {
		cli.Close()
		return nil, err
	}
	rt, err := docker.New(ctx, docker.Options{
		Client: cli, Instance: f.instance, StateDir: f.stateDir,
		Network: docker.NetworkMode(f.networkMode), PullPolicy: pull,
		Registry: docker.RegistryOptions{ECREndpoint: f.ecrEndpoint},
		Fetcher:  fetcher, Logger: log, StopGrace: f.stopGrace, PidsLimit: f.pidsLimit, Adopt: true,
		ArtifactDiskBudget: f.diskBudget,
		MultiModel:         docker.MultiModelOptions{RestartOnLeak: f.mmeRestartOnLeak},
	})
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &engine{
		backend: &docker.Engine{Runtime: rt}, instanceDir: rt.InstanceDir(),
		onAddressChange: rt.OnAddressChange,
		close:           func() { rt.Close(); cli.Close() },
	}, nil
}

// openKubernetes connects to the cluster of the kubeconfig, or of the pod
// mce runs in (client-go's loading rules: --kubeconfig, $KUBECONFIG,
// ~/.kube/config, then the in-cluster service account).
func openKubernetes(ctx context.Context, f serveFlags, log zerolog.Logger) (*engine, error) {
	mo, mounts, err := kubeManifest(f, "")
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kube.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, &exitError{code: 2, msg: "kubernetes engine: no cluster to talk to: " + err.Error()}
	}
	ns := f.kube.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, &exitError{code: 2, msg: "kubernetes engine: " + err.Error()}
		}
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// client-go logs through klog; its lines join mce's log instead of
	// going to stderr in klog's own format.
	klog.SetLogger(funcr.New(func(prefix, args string) {
		log.Info().Str("component", "client-go").Msg(strings.TrimSpace(prefix + " " + args))
	}, funcr.Options{}))
	// Claim the instance before adopting or reconciling anything: a second
	// mce with the same --instance must not take the first one's objects.
	claim, err := kengine.ClaimInstance(ctx, client, ns, f.instance, log, kengine.ClaimOptions{})
	if err != nil {
		return nil, &exitError{code: 1, msg: err.Error()}
	}
	mo.Namespace = ns
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	eng, err := kengine.New(wctx, kengine.Options{
		Client: client, Logger: log, Manifest: mo,
	})
	if err != nil {
		claim.Release()
		return nil, err
	}
	dir := filepath.Join(f.stateDir, "kubernetes", ns, f.instance)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		eng.Close()
		claim.Release()
		return nil, err
	}
	log.Info().Str("server", cfg.Host).Str("namespace", ns).Msg("kubernetes engine: endpoints run as Deployments")
	e := &engine{backend: eng, instanceDir: dir, onAddressChange: func(func(string)) {},
		close: func() { eng.Close(); claim.Release() }, lost: claim.Lost(),
		modelData: podModelData{mounts: mounts}}
	// Pods are the cluster's: they outlive mce's own pod (rolling updates,
	// evictions) unless --on-exit remove says otherwise.
	if f.kube.onExit != "remove" {
		e.keep = eng.Detach
	}
	return e, nil
}

// kubeManifest is the kubernetes engine's settings of generated objects from
// serve's flags, and the folders file:// model data may name in the pod
// (the --model-volume mounts and --model-root folders).
func kubeManifest(f serveFlags, ns string) (kengine.ManifestOptions, []string, error) {
	volumes, err := parseModelVolumes(f.kube.modelVolumes)
	if err != nil {
		return kengine.ManifestOptions{}, nil, err
	}
	var fetchArgs []string
	if f.s3Endpoint != "" {
		fetchArgs = append(fetchArgs, "--s3-endpoint", f.s3Endpoint)
	}
	if f.s3PathStyle {
		fetchArgs = append(fetchArgs, "--s3-path-style")
	}
	mounts := slices.Clone(f.modelRoots)
	for _, v := range volumes {
		mounts = append(mounts, v.MountPath)
	}
	for _, r := range mounts {
		fetchArgs = append(fetchArgs, "--model-root", r)
	}
	fetchArgs = append(fetchArgs, "--max-artifact-bytes", fmt.Sprint(f.maxArtifactBytes), "--max-artifact-ratio", fmt.Sprint(f.maxArtifactRatio))
	return kengine.ManifestOptions{Instance: f.instance, Namespace: ns, FetchImage: f.kube.fetchImage,
		FetchArgs: fetchArgs, ModelVolumes: volumes, StopGrace: f.stopGrace,
		// A pod has its own disk: the budget bounds each multi-model pod's cache.
		MultiModelDiskCapacity: f.diskBudget}, mounts, nil
}
