package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/backend"
	kengine "github.com/mce-run/mce/containers/kubernetes"
	"github.com/mce-run/mce/host"
)

// kubeFlags select and configure the engine endpoints run on.
type kubeFlags struct {
	engine     string
	kubeconfig string
	namespace  string
	fetchImage string
}

func (k *kubeFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&k.engine, "engine", "docker", "where endpoints run: docker (the local Docker engine) or kubernetes (a variant is a Deployment, an instance a pod)")
	fl.StringVar(&k.kubeconfig, "kubeconfig", "", "kubernetes engine: kubeconfig file (default $KUBECONFIG or ~/.kube/config; in a pod, its service account)")
	fl.StringVar(&k.namespace, "namespace", "", "kubernetes engine: namespace of the endpoints' objects (default the kubeconfig's, or the pod's own)")
	fl.StringVar(&k.fetchImage, "fetch-image", "mce-example/mce:latest", "kubernetes engine: mce's own image, run as each pod's init container to fetch model data")
}

// engine is what serve needs of the engine endpoints run on.
type engine struct {
	backend         host.Backend
	instanceDir     string // state.db lives here
	onAddressChange func(func(baseURL string))
	close           func()
}

func openEngine(ctx context.Context, f serveFlags, fetcher *artifact.Fetcher, log zerolog.Logger) (*engine, error) {
	switch f.kube.engine {
	case "docker", "":
		return openDocker(ctx, f, fetcher, log)
	case "kubernetes":
		return openKubernetes(ctx, f, log)
	}
	return nil, &exitError{code: 2, msg: fmt.Sprintf("--engine %q: use docker or kubernetes", f.kube.engine)}
}

func openDocker(ctx context.Context, f serveFlags, fetcher *artifact.Fetcher, log zerolog.Logger) (*engine, error) {
	cli, err := containers.Connect(ctx)
	if err != nil {
		return nil, err
	}
	pull, err := containers.ParsePullPolicy(f.pull)
	if err != nil {
		cli.Close()
		return nil, err
	}
	rt, err := containers.New(ctx, containers.Options{
		Engine: cli, Instance: f.instance, StateDir: f.stateDir,
		Network: containers.NetworkMode(f.networkMode), PullPolicy: pull,
		Registry: containers.RegistryOptions{ECREndpoint: f.ecrEndpoint},
		Fetcher:  fetcher, Logger: log, StopGrace: f.stopGrace, PidsLimit: f.pidsLimit, Adopt: true,
		ArtifactDiskBudget: f.diskBudget,
	})
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &engine{
		backend: &backend.Docker{Runtime: rt}, instanceDir: rt.InstanceDir(),
		onAddressChange: rt.OnAddressChange,
		close:           func() { rt.Close(); cli.Close() },
	}, nil
}

// openKubernetes connects to the cluster of the kubeconfig, or of the pod
// mce runs in (client-go's loading rules: --kubeconfig, $KUBECONFIG,
// ~/.kube/config, then the in-cluster service account).
func openKubernetes(ctx context.Context, f serveFlags, log zerolog.Logger) (*engine, error) {
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
	var fetchArgs []string
	if f.s3Endpoint != "" {
		fetchArgs = append(fetchArgs, "--s3-endpoint", f.s3Endpoint)
	}
	if f.s3PathStyle {
		fetchArgs = append(fetchArgs, "--s3-path-style")
	}
	for _, r := range f.modelRoots {
		fetchArgs = append(fetchArgs, "--model-root", r)
	}
	fetchArgs = append(fetchArgs, "--max-artifact-bytes", fmt.Sprint(f.maxArtifactBytes), "--max-artifact-ratio", fmt.Sprint(f.maxArtifactRatio))
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	eng, err := kengine.New(wctx, kengine.Options{
		Client: client, Logger: log,
		Manifest: kengine.ManifestOptions{Instance: f.instance, Namespace: ns, FetchImage: f.kube.fetchImage,
			FetchArgs: fetchArgs, StopGrace: f.stopGrace,
			// A pod has its own disk: the budget bounds each multi-model pod's cache.
			MultiModelDiskCapacity: f.diskBudget},
	})
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(f.stateDir, "kubernetes", ns, f.instance)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		eng.Close()
		return nil, err
	}
	log.Info().Str("server", cfg.Host).Str("namespace", ns).Msg("kubernetes engine: endpoints run as Deployments")
	return &engine{backend: eng, instanceDir: dir, onAddressChange: func(func(string)) {}, close: eng.Close}, nil
}
