package containers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"golang.org/x/sync/errgroup"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/mme"
)

// Port numbers handed to containers. In SageMaker the containers of one
// instance share a host, so each gets its own port and its own safe range;
// mce keeps them distinct the same way (contracts doc §3.2).
const (
	basePort      = 8080
	baseSafePort  = 9000
	safeRangeSize = 100
)

// launchParallelism bounds concurrent create/start calls to the engine.
const launchParallelism = 8

// Deployment is one generation of an endpoint's running containers: every
// copy of every variant's container set, with their model artifacts. During an
// update two generations of one endpoint run side by side on the endpoint's
// network; the network goes with the last of them.
type Deployment struct {
	rt       *Runtime
	endpoint string
	gen      int
	spec     EndpointSpec
	netName  string
	workDir  string

	mu       sync.Mutex
	variants []*VariantDeployment
	models   map[modelKey]string     // model folder per variant container, shared by copies
	caches   map[modelKey]*mme.Cache // model cache per multi-model container definition
	reserved int64                   // bytes of models counted against the runtime's disk budget

	closeOnce sync.Once
	closeErr  error
}

// VariantDeployment is a snapshot of a variant's running copies, each an
// ordered container set (the chain order of the model's Containers).
type VariantDeployment struct {
	Name   string
	Copies [][]*Container
}

type deploymentKey struct {
	endpoint string
	gen      int
}

// Endpoint is the endpoint's name.
func (d *Deployment) Endpoint() string { return d.endpoint }

// Generation tells this deployment from others of the same endpoint.
func (d *Deployment) Generation() int { return d.gen }

// Network is the name of the endpoint's bridge network.
func (d *Deployment) Network() string { return d.netName }

// Variants returns a snapshot of the running variants in spec order.
func (d *Deployment) Variants() []*VariantDeployment {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*VariantDeployment, len(d.variants))
	for i, v := range d.variants {
		out[i] = &VariantDeployment{Name: v.Name, Copies: append([][]*Container(nil), v.Copies...)}
	}
	return out
}

// Copies returns a snapshot of a variant's copies; nil for an unknown variant.
func (d *Deployment) Copies(variant string) [][]*Container {
	for _, v := range d.Variants() {
		if v.Name == variant {
			return v.Copies
		}
	}
	return nil
}

// Containers returns every container of the deployment.
func (d *Deployment) Containers() []*Container {
	var out []*Container
	for _, v := range d.Variants() {
		for _, cp := range v.Copies {
			out = append(out, cp...)
		}
	}
	return out
}

// LaunchError says which container kept an endpoint from starting and why,
// with the container's last log lines.
type LaunchError struct {
	Endpoint, Variant, Container string
	Reason                       string
	LogTail                      []string
	Err                          error
}

func (e *LaunchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "container %q (variant %q) of endpoint %q %s", e.Container, e.Variant, e.Endpoint, e.Reason)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if len(e.LogTail) > 0 {
		b.WriteString("; last log lines:\n  ")
		b.WriteString(strings.Join(e.LogTail, "\n  "))
	}
	return b.String()
}

func (e *LaunchError) Unwrap() error { return e.Err }

// Deploy brings up every copy of every variant of the endpoint in parallel and
// returns once all of them answer GET /ping with 200. Everything is checked
// before anything is created (spec, images, GPUs); if any container fails to
// come up, everything created so far is removed and the error names the
// container, the cause and its last log lines.
func (rt *Runtime) Deploy(ctx context.Context, spec EndpointSpec) (*Deployment, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	key := deploymentKey{spec.Name, spec.Generation}
	if !rt.reserve(key) {
		return nil, fmt.Errorf("endpoint %q generation %d is already deployed", spec.Name, spec.Generation)
	}
	d, err := rt.deploy(ctx, spec)
	rt.settle(key, d, err)
	return d, err
}

// reserve claims a deployment key; settle records the outcome.
func (rt *Runtime) reserve(key deploymentKey) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if _, taken := rt.deployments[key]; taken {
		return false
	}
	rt.deployments[key] = nil
	return true
}

func (rt *Runtime) settle(key deploymentKey, d *Deployment, err error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if err != nil {
		delete(rt.deployments, key)
	} else {
		rt.deployments[key] = d
	}
}

func (rt *Runtime) newDeployment(spec EndpointSpec) *Deployment {
	return &Deployment{
		rt:       rt,
		endpoint: spec.Name,
		gen:      spec.Generation,
		spec:     spec,
		netName:  rt.resourceName(spec.Name),
		workDir:  filepath.Join(rt.artifactsDir(), spec.Name, "g"+strconv.Itoa(spec.Generation)),
		models:   map[modelKey]string{},
		caches:   map[modelKey]*mme.Cache{},
	}
}

// multiModelCache makes (once) the cache of a multi-model container
// definition: the folder mounted read-only at /opt/ml/models in each copy.
func (d *Deployment) multiModelCache(ctx context.Context, variant string, cs ContainerSpec) (*mme.Cache, error) {
	key := modelKey{variant, cs.Hostname}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.caches[key]; c != nil {
		return c, nil
	}
	f, err := d.rt.artifactFetcher(ctx)
	if err != nil {
		return nil, err
	}
	obs := d.rt.multiModelObserver(d.endpoint, variant, cs.Hostname)
	c, err := mme.NewCache(mme.CacheOptions{
		Dir:      filepath.Join(d.workDir, variant, cs.Hostname, "models"),
		Prefix:   cs.ModelDataURL,
		BaseDir:  cs.BaseDir,
		Fetcher:  f,
		Capacity: d.rt.opts.MultiModel.DiskCapacity,
		Budget:   d.rt.budget,
		Observer: obs,
		Logger:   d.rt.log.With().Str("endpoint", d.endpoint).Str("variant", variant).Str("container", cs.Hostname).Logger(),
	})
	if err != nil {
		return nil, err
	}
	d.caches[key] = c
	return c, nil
}

// attachModels gives a multi-model container its manager.
func (d *Deployment) attachModels(c *Container, cache *mme.Cache) error {
	o := d.rt.opts.MultiModel
	obs := d.rt.multiModelObserver(d.endpoint, c.variant, c.spec.Hostname)
	opts := mme.ManagerOptions{
		Cache: cache, BaseURL: c.BaseURL, LoadTimeout: o.LoadTimeout, IdleTTL: o.IdleTTL,
		CacheDisabled: c.spec.ModelCacheDisabled, GPUThreshold: o.GPUThreshold, Observer: obs,
		Logger:   c.log,
		Endpoint: d.endpoint, Variant: c.variant, Container: c.spec.Hostname,
	}
	if !c.spec.GPUs.IsZero() {
		if idx, inv := d.rt.gpuIndexes(c.spec.GPUs); len(idx) > 0 {
			opts.GPU, opts.GPUIndexes = inv, idx
		}
	}
	m, err := mme.NewManager(opts)
	if err != nil {
		return err
	}
	c.models = m
	return nil
}

func (rt *Runtime) deploy(ctx context.Context, spec EndpointSpec) (*Deployment, error) {
	if err := rt.checkImages(ctx, spec); err != nil {
		return nil, err
	}
	for _, v := range spec.Variants {
		for _, c := range v.Containers {
			if err := rt.checkGPUs(ctx, c.GPUs); err != nil {
				return nil, fmt.Errorf("container %q (variant %q): %w", c.Hostname, v.Name, err)
			}
		}
	}

	d := rt.newDeployment(spec)
	ok := false
	defer func() {
		if !ok {
			// Tear down with a fresh context: ctx may be what failed.
			cctx, cancel := context.WithTimeout(context.Background(), rt.opts.StopGrace+time.Minute)
			defer cancel()
			d.teardown(cctx, 0, true)
		}
	}()

	for _, isolated := range spec.networks() {
		name := rt.networkName(spec.Name, isolated)
		if err := rt.ensureNetwork(ctx, spec.Name, isolated); err != nil {
			return nil, err
		}
		if err := rt.joinNetwork(ctx, name); err != nil { // NetworkJoin only (join.go)
			return nil, err
		}
	}
	if err := d.prepareArtifacts(ctx, spec); err != nil {
		return nil, err
	}
	for _, v := range spec.Variants {
		d.variants = append(d.variants, &VariantDeployment{Name: v.Name})
	}
	for i, v := range spec.Variants {
		copies, err := d.launchCopies(ctx, v, 0, v.Copies)
		if err != nil {
			return nil, err
		}
		d.variants[i].Copies = copies
	}
	ok = true
	rt.log.Info().Str("endpoint", spec.Name).Int("generation", spec.Generation).
		Int("containers", len(d.Containers())).Str("network", d.netName).Msg("endpoint containers ready")
	return d, nil
}

// launchCopies starts copies [from, to) of a variant in parallel and waits
// until all of their containers pass /ping; on failure the containers it
// started are removed by the caller's teardown (they are tracked).
func (d *Deployment) launchCopies(ctx context.Context, v VariantSpec, from, to int) ([][]*Container, error) {
	health := v.HealthTimeout
	if health == 0 {
		health = DefaultHealthTimeout
	}
	copies := make([][]*Container, to-from)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(launchParallelism)
	var mu sync.Mutex
	var all []*Container
	for cp := from; cp < to; cp++ {
		copies[cp-from] = make([]*Container, len(v.Containers))
		for i, cs := range v.Containers {
			g.Go(func() error {
				c, err := d.startContainer(gctx, v, cp, i, cs, d.modelDir(v.Name, cs.Hostname), health)
				if c != nil {
					mu.Lock()
					copies[cp-from][i] = c
					all = append(all, c)
					mu.Unlock()
				}
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	hg, hctx := errgroup.WithContext(ctx)
	for _, c := range all {
		hg.Go(func() error { return c.waitHealthy(hctx, c.health) })
	}
	if err := hg.Wait(); err != nil {
		return nil, err
	}
	for _, c := range all {
		c.ready.Store(true)
		c.wg.Add(1)
		go c.supervise()
	}
	return copies, nil
}

func (d *Deployment) modelDir(variant, hostname string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.models[modelKey{variant, hostname}]
}

// Scale changes the number of copies of a variant: new copies are started and
// must pass /ping before Scale returns; surplus copies (the highest-numbered)
// are stopped and removed. Take surplus copies out of routing before scaling
// down.
func (d *Deployment) Scale(ctx context.Context, variant string, copies int) error {
	if copies < 1 {
		return fmt.Errorf("%w: variant %q needs at least one copy", ErrInvalidSpec, variant)
	}
	var vs *VariantSpec
	for i := range d.spec.Variants {
		if d.spec.Variants[i].Name == variant {
			vs = &d.spec.Variants[i]
		}
	}
	if vs == nil {
		return fmt.Errorf("endpoint %q has no variant %q", d.endpoint, variant)
	}
	current := d.Copies(variant)
	switch {
	case copies > len(current):
		added, err := d.launchCopies(ctx, *vs, len(current), copies)
		if err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), d.rt.opts.StopGrace+time.Minute)
			defer cancel()
			for _, c := range d.rt.containersOf(d.endpoint, d.gen) {
				if c.variant == variant && c.copy >= len(current) {
					c.remove(cctx, 0)
				}
			}
			return err
		}
		d.setCopies(variant, append(current, added...))
	case copies < len(current):
		d.setCopies(variant, current[:copies])
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		for _, cp := range current[copies:] {
			for _, c := range cp {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := c.remove(ctx, d.rt.opts.StopGrace); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	d.mu.Lock()
	vs.Copies = copies
	d.mu.Unlock()
	return nil
}

func (d *Deployment) setCopies(variant string, copies [][]*Container) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, v := range d.variants {
		if v.Name == variant {
			v.Copies = copies
		}
	}
}

// resourceName is the Docker name of the endpoint's network and the prefix of
// its containers' names.
func (rt *Runtime) resourceName(endpoint string) string {
	return "mce-" + rt.opts.Instance + "-" + endpoint
}

// isolatedSuffix names an endpoint's internal network, for the variants
// whose model has EnableNetworkIsolation. Endpoint names hold no underscore,
// so it cannot clash with another endpoint's network.
const isolatedSuffix = "_isolated"

// networkName is the Docker name of the endpoint's bridge network, or of its
// internal network (no route out) for isolated variants.
func (rt *Runtime) networkName(endpoint string, isolated bool) string {
	if isolated {
		return rt.resourceName(endpoint) + isolatedSuffix
	}
	return rt.resourceName(endpoint)
}

// networkFor is the network a variant's containers join.
func (d *Deployment) networkFor(v VariantSpec) string {
	return d.rt.networkName(d.endpoint, v.NetworkIsolation)
}

func (rt *Runtime) labels(endpoint string) map[string]string {
	return map[string]string{
		LabelManaged:  "true",
		LabelInstance: rt.opts.Instance,
		LabelEndpoint: endpoint,
	}
}

// ensureNetwork finds the endpoint's network or creates it. Generations of
// one endpoint share it. The isolated network is Internal: Docker gives it
// no gateway out of the machine and drops traffic forwarded between it and
// any other network, so its containers reach only each other and mce.
func (rt *Runtime) ensureNetwork(ctx context.Context, endpoint string, isolated bool) error {
	name := rt.networkName(endpoint, isolated)
	// Not cut short by the caller: an engine that was asked to create a
	// network creates it even if the client stops waiting, and an unseen
	// network would be left behind by teardown. Cancellation is checked after.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	f := client.Filters{}.Add("label", LabelInstance+"="+rt.opts.Instance).Add("label", LabelEndpoint+"="+endpoint)
	list, err := rt.engine.NetworkList(cctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return classify("list networks", err)
	}
	for _, n := range list.Items {
		if n.Name == name {
			return nil
		}
	}
	_, err = rt.engine.NetworkCreate(cctx, name, client.NetworkCreateOptions{Driver: "bridge", Internal: isolated, Labels: rt.labels(endpoint)})
	if err != nil && !cerrdefs.IsConflict(err) { // conflict: a concurrent generation made it
		return classify("create network "+name, err)
	}
	return ctx.Err()
}

// removeNetworkIfUnused removes the endpoint's network once no deployment of
// the endpoint but except is left.
func (rt *Runtime) removeNetworkIfUnused(ctx context.Context, endpoint string, except deploymentKey) error {
	rt.mu.Lock()
	for k := range rt.deployments {
		if k.endpoint == endpoint && k != except {
			rt.mu.Unlock()
			return nil
		}
	}
	rt.mu.Unlock()
	var errs []error
	for _, isolated := range []bool{false, true} {
		name := rt.networkName(endpoint, isolated)
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := rt.engine.NetworkRemove(cctx, name, client.NetworkRemoveOptions{})
		cancel()
		if !gone(err) {
			errs = append(errs, classify("remove network "+name, err))
		}
	}
	return errors.Join(errs...)
}

// containersOf returns the tracked containers of one deployment.
func (rt *Runtime) containersOf(endpoint string, gen int) []*Container {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var out []*Container
	for _, c := range rt.byID {
		if c.endpoint == endpoint && c.gen == gen {
			out = append(out, c)
		}
	}
	return out
}

// checkImages makes sure every image is present (pulling it only when the
// runtime is allowed to) and, for multi-container sets, carries SageMaker's
// bind-to-port label.
func (rt *Runtime) checkImages(ctx context.Context, spec EndpointSpec) error {
	type need struct{ multi bool }
	images := map[string]*need{}
	for _, v := range spec.Variants {
		for _, c := range v.Containers {
			n := images[c.Image]
			if n == nil {
				n = &need{}
				images[c.Image] = n
			}
			n.multi = n.multi || len(v.Containers) > 1
		}
	}
	for _, ref := range slices.Sorted(maps.Keys(images)) {
		labels, err := InspectImage(ctx, rt.engine, ref)
		if (errors.Is(err, ErrNotFound) && rt.opts.PullPolicy == PullIfMissing) || rt.opts.PullPolicy == PullAlways {
			if perr := rt.Pull(ctx, ref); perr != nil {
				return perr
			}
			labels, err = InspectImage(ctx, rt.engine, ref)
		}
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				return fmt.Errorf("image %q is not present on the Docker engine and the pull policy is never (start mce with --pull to pull missing images, or build it or docker pull it first): %w", ref, ErrNotFound)
			}
			return err
		}
		if images[ref].multi && labels[LabelBindToPort] != "true" {
			return fmt.Errorf("image %q does not carry the label %s=true that SageMaker requires of containers in a multi-container endpoint or pipeline", ref, LabelBindToPort)
		}
	}
	return nil
}

type modelKey struct{ variant, hostname string }

// prepareArtifacts fetches and extracts each container's model once per
// variant; the copies of a variant share the read-only directory.
func (d *Deployment) prepareArtifacts(ctx context.Context, spec EndpointSpec) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for _, v := range spec.Variants {
		for _, c := range v.Containers {
			if c.ModelDataURL == "" || c.MultiModel {
				continue // a multi-model container's URL is a prefix, loaded per model
			}
			g.Go(func() error {
				f, err := d.rt.artifactFetcher(gctx)
				if err != nil {
					return err
				}
				work := filepath.Join(d.workDir, v.Name, c.Hostname)
				if err := os.MkdirAll(work, 0o755); err != nil {
					var pe *fs.PathError
					if errors.As(err, &pe) { // the state folder is not the caller's business
						err = pe.Err
					}
					return fmt.Errorf("artifact folder: %w", err)
				}
				dir, err := f.Prepare(gctx, c.ModelDataURL, c.BaseDir, work)
				if err == nil {
					err = d.reserve(dir)
				}
				if err != nil {
					return &LaunchError{Endpoint: d.endpoint, Variant: v.Name, Container: c.Hostname,
						Reason: fmt.Sprintf("could not get its model data from %q", c.ModelDataURL), Err: err}
				}
				d.mu.Lock()
				d.models[modelKey{v.Name, c.Hostname}] = dir
				d.mu.Unlock()
				return nil
			})
		}
	}
	return g.Wait()
}

// reserve counts an extracted artifact against the runtime's disk budget
// (making room by deleting unused multi-model files), removing it when it
// does not fit. teardown gives the bytes back.
func (d *Deployment) reserve(dir string) error {
	size, err := artifact.DirSize(dir)
	if err == nil {
		err = d.rt.budget.Reserve(size)
	}
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	d.mu.Lock()
	d.reserved += size
	d.mu.Unlock()
	return nil
}

// environment is what the container sees: its definition's Environment, then
// the variables SageMaker sets, which win.
func environment(cs ContainerSpec, index int) []string {
	return SageMakerEnv(cs.Environment, index, cs.MultiModel)
}

// ContainerPort is the SAGEMAKER_BIND_TO_PORT of the index-th container of
// an instance: 8080, 8081, ...
func ContainerPort(index int) int { return basePort + index }

// SageMakerEnv is the environment of the index-th container of an instance:
// env, plus the variables SageMaker sets (which win): SAGEMAKER_BIND_TO_PORT,
// its own SAGEMAKER_SAFE_PORT_RANGE and, for a multi-model container,
// SAGEMAKER_MULTI_MODEL. Sorted, as the engine takes it.
func SageMakerEnv(env map[string]string, index int, multiModel bool) []string {
	all := map[string]string{}
	maps.Copy(all, env)
	all["SAGEMAKER_BIND_TO_PORT"] = strconv.Itoa(ContainerPort(index))
	lo := baseSafePort + index*safeRangeSize
	all["SAGEMAKER_SAFE_PORT_RANGE"] = fmt.Sprintf("%d-%d", lo, lo+safeRangeSize-1)
	if multiModel {
		all["SAGEMAKER_MULTI_MODEL"] = "true"
	}
	out := make([]string, 0, len(all))
	for _, k := range slices.Sorted(maps.Keys(all)) {
		out = append(out, k+"="+all[k])
	}
	return out
}

// createOptions translates one container of the plan into the engine's
// create call; a recreated container is made from the same options (same
// name, hostname, environment, mounts, network and alias). For a multi-model
// container it also returns the model cache mounted into it.
func (d *Deployment) createOptions(ctx context.Context, v VariantSpec, cp, index int, cs ContainerSpec, modelDir string) (client.ContainerCreateOptions, *mme.Cache, error) {
	rt := d.rt
	variant := v.Name
	port := basePort + index
	name := containerName(d.netName, d.gen, variant, cp, cs.Hostname)
	labels := rt.labels(d.endpoint)
	labels[LabelVariant] = variant
	labels[LabelCopy] = strconv.Itoa(cp)
	labels[LabelContainer] = cs.Hostname
	labels[LabelGeneration] = strconv.Itoa(d.gen)
	labels[LabelSpec] = v.fingerprint()

	cport, err := network.ParsePort(strconv.Itoa(port) + "/tcp")
	if err != nil {
		return client.ContainerCreateOptions{}, nil, err
	}
	netName := d.networkFor(v)
	cfg := &container.Config{
		Image:    cs.Image,
		Hostname: cs.Hostname,
		Env:      environment(cs, index),
		Labels:   labels,
		Cmd:      []string{"serve"}, // SageMaker runs `docker run IMAGE serve` (contracts doc §3.1)
	}
	host := &container.HostConfig{
		NetworkMode: container.NetworkMode(netName),
		// A process in the container cannot gain privileges it was not
		// started with (setuid binaries, file capabilities).
		SecurityOpt: []string{"no-new-privileges"},
		Resources: container.Resources{
			NanoCPUs:       int64(cs.CPUs * 1e9),
			Memory:         cs.MemoryBytes,
			DeviceRequests: cs.GPUs.DeviceRequests(),
			PidsLimit:      rt.pidsLimit(),
		},
	}
	var cache *mme.Cache
	if cs.MultiModel {
		var err error
		if cache, err = d.multiModelCache(ctx, variant, cs); err != nil {
			return client.ContainerCreateOptions{}, nil, &LaunchError{Endpoint: d.endpoint, Variant: variant, Container: cs.Hostname,
				Reason: "has no model cache", Err: err}
		}
		// Models are extracted under Dir/<id>/model and appear live in the
		// container at /opt/ml/models/<id>/model (contracts doc §4).
		host.Binds = []string{cache.Dir() + ":/opt/ml/models:ro"}
	} else if modelDir != "" {
		host.Binds = []string{modelDir + ":/opt/ml/model:ro"}
	}
	if rt.network == NetworkPublished {
		cfg.ExposedPorts = network.PortSet{cport: struct{}{}}
		host.PortBindings = network.PortMap{cport: {{HostIP: netip.MustParseAddr(loopback)}}}
	}
	netcfg := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		netName: {Aliases: []string{cs.Hostname}},
	}}
	return client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: host, NetworkingConfig: netcfg}, cache, nil
}

// startContainer creates and starts one container and begins following its
// logs. The returned container is tracked even when an error is returned, so
// teardown removes it.
func (d *Deployment) startContainer(ctx context.Context, v VariantSpec, cp, index int, cs ContainerSpec, modelDir string, health time.Duration) (*Container, error) {
	rt := d.rt
	variant := v.Name
	opts, cache, err := d.createOptions(ctx, v, cp, index, cs, modelDir)
	if err != nil {
		return nil, err
	}
	name := opts.Name

	// As for networks: a create the engine carries out must be seen, so it is
	// not cut short; the container is tracked before cancellation is honoured.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	res, err := rt.engine.ContainerCreate(cctx, opts)
	cancel()
	if err != nil {
		return nil, &LaunchError{Endpoint: d.endpoint, Variant: variant, Container: cs.Hostname,
			Reason: "could not be created", Err: classify("create container "+name, err)}
	}
	c := d.newContainer(res.ID, name, variant, cp, cs, basePort+index, health)
	c.create, c.network = opts, d.networkFor(v)
	if cache != nil {
		if err := d.attachModels(c, cache); err != nil {
			return c, &LaunchError{Endpoint: d.endpoint, Variant: variant, Container: cs.Hostname, Reason: "has no model manager", Err: err}
		}
	}

	if err := ctx.Err(); err != nil {
		return c, err
	}
	started := time.Now()
	cctx, cancel = context.WithTimeout(ctx, callTimeout)
	_, err = rt.engine.ContainerStart(cctx, c.ID(), client.ContainerStartOptions{})
	cancel()
	if err != nil {
		return c, &LaunchError{Endpoint: d.endpoint, Variant: variant, Container: cs.Hostname,
			Reason: "could not be started", Err: classify("start container "+name, err)}
	}
	c.wg.Add(1)
	go c.streamLogs(started.Add(-time.Second))
	if err := c.refreshAddress(ctx); err != nil {
		return c, &LaunchError{Endpoint: d.endpoint, Variant: variant, Container: cs.Hostname,
			Reason: "has no address", Err: err, LogTail: c.LogTail()}
	}
	return c, nil
}

const loopback = "127.0.0.1"

// containerName is the Docker name of one container of a deployment.
func containerName(network string, gen int, variant string, cp int, hostname string) string {
	return fmt.Sprintf("%s-g%d-%s-%d-%s", network, gen, variant, cp, hostname)
}

// newContainer makes and tracks the Container for a created Docker container.
func (d *Deployment) newContainer(id, name, variant string, cp int, cs ContainerSpec, port int, health time.Duration) *Container {
	c := &Container{
		rt: d.rt, name: name, endpoint: d.endpoint, gen: d.gen, variant: variant, copy: cp,
		spec: cs, port: port, health: health,
		log: d.rt.log.With().Str("endpoint", d.endpoint).Str("variant", variant).
			Str("container", cs.Hostname).Int("copy", cp).Logger(),
		tail: newLineRing(tailLines),
		died: make(chan int, 4),
	}
	c.id.Store(&id)
	c.lastExit.Store(-1)
	c.ctx, c.cancel = context.WithCancel(d.rt.ctx)
	d.rt.track(c)
	return c
}

// refreshAddress reads the container's address (it may change on restart).
func (c *Container) refreshAddress(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := c.rt.engine.ContainerInspect(cctx, c.ID(), client.ContainerInspectOptions{})
	if err != nil {
		return classify("inspect container "+c.name, err)
	}
	ns := res.Container.NetworkSettings
	if ns == nil {
		return errors.New("the engine reports no network settings")
	}
	var url string
	switch c.rt.network {
	case NetworkPublished:
		cport, _ := network.ParsePort(strconv.Itoa(c.port) + "/tcp")
		for _, b := range ns.Ports[cport] {
			if b.HostIP.String() == loopback && b.HostPort != "" {
				url = "http://" + loopback + ":" + b.HostPort
				break
			}
		}
		if url == "" {
			return fmt.Errorf("port %d is not published on %s", c.port, loopback)
		}
	default:
		ep := ns.Networks[c.network]
		if ep == nil || !ep.IPAddress.IsValid() {
			return fmt.Errorf("no address on network %s", c.network)
		}
		url = "http://" + ep.IPAddress.String() + ":" + strconv.Itoa(c.port)
	}
	c.url.Store(&url)
	return nil
}

// Close stops and removes every container of the deployment (SIGTERM, the
// grace period, then SIGKILL) and its extracted artifacts, and the endpoint's
// network when no other generation of the endpoint runs. It is safe to call
// more than once; later calls return the first call's result.
func (d *Deployment) Close(ctx context.Context) error {
	d.closeOnce.Do(func() {
		d.closeErr = d.teardown(ctx, d.rt.opts.StopGrace, false)
	})
	return d.closeErr
}

// teardown removes the deployment's containers and artifacts, forgets it, and
// removes the network if it was the endpoint's last deployment.
func (d *Deployment) teardown(ctx context.Context, grace time.Duration, failed bool) error {
	cs := d.rt.containersOf(d.endpoint, d.gen)
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.remove(ctx, grace); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	d.mu.Lock()
	for _, c := range d.caches {
		c.Close()
	}
	d.rt.budget.Release(d.reserved)
	d.reserved = 0
	d.mu.Unlock()
	if err := os.RemoveAll(d.workDir); err != nil {
		errs = append(errs, fmt.Errorf("remove artifacts: %w", err))
	}
	os.Remove(filepath.Dir(d.workDir)) // the endpoint's folder, once no generation is left in it
	self := deploymentKey{d.endpoint, d.gen}
	if !failed { // a failed Deploy's reservation is released by settle
		d.rt.mu.Lock()
		delete(d.rt.deployments, self)
		d.rt.mu.Unlock()
	}
	errs = append(errs, d.rt.removeNetworkIfUnused(ctx, d.endpoint, self))
	return errors.Join(errs...)
}

// remove stops the container with the grace period, removes it and ends its
// background work. "Already gone" is success.
func (c *Container) remove(ctx context.Context, grace time.Duration) error {
	c.lifeMu.Lock() // waits out a recreation under way; none starts after
	c.stopping.Store(true)
	id := c.ID()
	c.lifeMu.Unlock()
	c.ready.Store(false)
	secs := int(grace / time.Second)
	sctx, cancel := context.WithTimeout(ctx, grace+callTimeout)
	_, err := c.rt.engine.ContainerStop(sctx, id, client.ContainerStopOptions{Timeout: &secs})
	cancel()
	var errs []error
	if !gone(err) {
		errs = append(errs, classify("stop container "+c.name, err))
	}
	rctx, cancel := context.WithTimeout(ctx, callTimeout)
	_, err = c.rt.engine.ContainerRemove(rctx, id, client.ContainerRemoveOptions{Force: true})
	cancel()
	if !gone(err) {
		errs = append(errs, classify("remove container "+c.name, err))
	}
	c.cancel()
	c.wg.Wait()
	if c.models != nil {
		c.models.Close()
	}
	c.rt.untrack(c)
	return errors.Join(errs...)
}
